"""HANNA's score file against the authors' notebook (the `invalid_ratings` probe of chhun2024): the file keeps answers that were
not a rating in 1-5 as values below 1, which judgelab reads as failures; the notebook sets each invalid try to 3."""
import numpy as np, pandas as pd, pytest
from judgelab.data import raw_dir, item_slug
from judgelab.data.judgments import run_probes, load_judgments
from judgelab.datasets.hanna import invalid_ratings, notebook_means, _rule_means, _hanna_table

def test_the_probe_runs_in_every_hanna_audit_and_reads_the_file():
    probes = run_probes('hanna')
    assert [p[0] for p in probes] == ['chhun2024']
    t, caption, text = probes[0][1:]
    r = t.set_index(['model', 'rule'])
    assert r.loc[('Beluga-13B', 'stored')].match_2dp == 66 and r.loc[('Beluga-13B', 'stored')].prompt_1_invalid == 0
    assert r.loc[('Mistral-7B', 'stored')].prompt_1_invalid > 200 and r.loc[('Mistral-7B', 'stored')].notebook_above > 50
    assert r.loc[('Mistral-7B', 'invalid_as_3')].mae < r.loc[('Mistral-7B', 'dropped')].mae < r.loc[('Mistral-7B', 'stored')].mae
    assert '3db802f' in caption and 'parse failure' in text

def test_failures_in_the_judgments_are_the_invalid_values():
    j = load_judgments('hanna', 'chhun2024')
    m = j[(j.model == 'Mistral-7B') & (j.judge == 'eval_prompt_1')]
    systems, df = _hanna_table(raw_dir('hanna'))
    rm = _rule_means(systems, df, 'Mistral-7B')
    assert int((~m.parse_ok).sum()) == int(rm.invalid.sum())
    # judgelab's reading is the 'dropped' one: the mean of the parsed scores per system
    rel = m[m.parse_ok & (m.dimension == 'relevance')]
    ours = rel.assign(system=rel.item_id.str.split('__').str[1]).groupby('system').score.mean().sort_index()
    theirs = rm[rm.dimension == 'relevance'].assign(system=lambda x: x.system.map(item_slug)).set_index('system').dropped
    np.testing.assert_allclose(ours.values, theirs.reindex(ours.index).values, rtol=0, atol=1e-12)
    assert len(notebook_means()) == 132
