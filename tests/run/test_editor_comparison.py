"""The paper notebook's comparison of DimCheck's editors (large editor, trained small editor, one-step, no-thinking):
agreement with the large editor on which analyses to change, and the editor's minutes from the steps' recorded seconds."""
import json
import numpy as np, pandas as pd
from judgelab.report.tables import editor_comparison, editor_comparison_text

def _rows(judge, changed, seconds):
    return [dict(item_id=f'i{k}', dimension='coherence', judge=judge, model='big-judge', changed=c, edit_completion_tokens=10,
                 steps=json.dumps([dict(other=['fluency'], changed=c, seconds=seconds)])) for k, c in enumerate(changed)]

def test_editor_comparison_reads_agreement_and_minutes():
    big = [True, True, False, False, True, False]
    small = [True, False, False, False, True, True]                   # agrees on 4 of 6
    J = {'summeval': pd.DataFrame(_rows('dimcheck', big, 60.0) + _rows('dimcheck_editor_llama-8b', small, 10.0) + _rows('dimcheck_onestep', big, 30.0)
                                  + _rows('analyze_rate', big, 0.0))}
    comp = pd.DataFrame([dict(dataset='summeval', source='run', judge=j, model='big-judge', spearman=s, corrgap=g, excess=np.nan)
                         for j, s, g in (('dimcheck', 0.5, 0.10), ('dimcheck_editor_llama-8b', 0.45, 0.12), ('dimcheck_onestep', 0.4, 0.2))])
    t = editor_comparison(['summeval'], J, comp).set_index('variant')
    assert set(t.index) == {'large editor', 'trained small editor', 'one step'}                # analyze_rate is not an editor variant
    assert np.isclose(t.loc['trained small editor', 'agreement_with_large'], 4/6) and np.isnan(t.loc['large editor', 'agreement_with_large'])
    assert np.isclose(t.loc['large editor', 'editor_minutes'], 6.0) and np.isclose(t.loc['trained small editor', 'editor_minutes'], 1.0)
    text = editor_comparison_text(t.reset_index())
    assert 'agreeing with the large editor on which to change in 67%' in text and '1.0 vs 6.0 minutes' in text
    assert 'needs a GPU' in editor_comparison_text(t.drop('trained small editor').reset_index())

def test_the_comparison_names_the_variant_its_file_was_written_under():
    "The variant is read from the name DimCheck files its judgments under, one definition of the editor's tag for both."
    from judgelab.methods.dimcheck import dimcheck_file_method, editor_options
    from judgelab.report.tables import _editor_variant
    spec = dict(backend='transformers', model='models/base', adapter='outputs/editor', name='small-8b')
    assert editor_options(spec) == dict(model='models/base', adapter='outputs/editor')
    want = [({}, 'large editor'), (dict(one_step=True), 'one step'), (dict(thinking=False), 'no thinking'),
            (dict(editor=spec), 'trained small editor'), (dict(editor=spec, thinking=False), 'trained small editor'),
            (dict(editor=spec, one_step=True), None), (dict(order='random'), None)]
    for opts, variant in want:
        assert _editor_variant(dimcheck_file_method(opts)) == variant, (opts, dimcheck_file_method(opts))
