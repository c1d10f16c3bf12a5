"""CheckEval: the papers' released checklists and conflicting answers."""

import pytest
from judgelab import data as D
from judgelab.llm import ScriptedBackend
from judgelab.methods import run
import re
import yaml
from judgelab.methods import method_plan
from judgelab.methods.checklist import load_checklist, default_stage

# ==============================================================================================================
# Conflicting checklist answers are recorded failures (a scripted backend, no LLM); failed on the code before the fix.
# ==============================================================================================================

def test_checkeval_row_records_conflicting_answers_as_a_failure_and_missing():
    tc = D.load('topical_chat'); item = tc.items.item_id.iloc[0]
    # every sub-dimension: Q1 answered Yes then No, the other questions Yes
    b = ScriptedBackend(lambda r, s: 'Q1: Yes\n' + '\n'.join(f'Q{i}: Yes' for i in range(2, 30)) + '\nQ1: No')
    j = run('checkeval', tc, b, dims=['groundedness'], items=[item], progress=False)
    row = j.iloc[0]
    from judgelab.methods.checklist import load_checklist
    cl = load_checklist('topical_chat', 'groundedness'); n_q = len(cl.questions); subs = list(cl.sub_dimensions)
    assert row.failure == 'conflicting answers: ' + ', '.join(f'{s} Q1' for s in subs)
    assert row.missing_answers == len(subs) and row.conflicting_answers == len(subs)
    assert row.scoring == f'{n_q - len(subs)} of {n_q} answered'
    assert row.parse_ok and row.score == 1.0      # the other answers still count (the checklist procedure: missing answers leave the denominator)

# ==============================================================================================================
# CheckEval's released checklists (SummEval, Topical-Chat), read from their registered file group at run time.
# ==============================================================================================================

def test_checkeval_asks_the_official_elaboration_questions_on_summeval_and_topical_chat():
    se = D.load('summeval'); item = se.items.item_id.iloc[0]
    b = ScriptedBackend(lambda r, s: '\n'.join(f'Q{i}: Yes' for i in range(1, 40)))
    j = run('checkeval', se, b, dims=['fluency'], items=[item], progress=False)
    raw = yaml.safe_load((D.raw_dir('summeval')/'methods/checkeval/prompt/summeval_questions/fluency_elaboration.yaml').read_text())
    assert len(b.requests) == len(raw['sub_aspect']) == 4                    # one request per released sub-aspect
    asked = ' '.join(m['content'] for r in b.requests for m in r.messages)
    for sub, text in raw['sub_aspect'].items():
        for q in re.findall(r'[^?]*\?', text): assert q.strip() in asked, q
    row = j.iloc[0]
    assert row.checklist.startswith('official_elaboration: data/raw/summeval/methods/checkeval/') and row.scoring == '28 of 28 answered'
    assert default_stage('hanna') == 'seed' and load_checklist('hanna', 'coherence').path.parts[-3:-1] == ('checklists', 'hanna')

def test_the_official_seed_checklist_is_the_ablation_and_has_its_own_file_name():
    tc = D.load('topical_chat')
    plan = method_plan([{'method': 'checkeval'}, {'method': 'checkeval', 'options': {'stage': 'official_seed'}}], tc, dims=['coherence'])
    assert [p['label'] for p in plan] == ['checkeval', 'checkeval_official_seed']
    assert len(load_checklist('topical_chat', 'coherence', 'official_seed').questions) == 4
    with pytest.raises(ValueError, match='CheckEval released no checklists for hanna'):
        method_plan([{'method': 'checkeval', 'options': {'stage': 'official_seed'}}], D.load('hanna'), dims=['coherence'])

def test_a_checklist_stage_the_run_builds_is_not_required_before_the_run(tmp_outputs):
    # before: method_plan looked for outputs/<run>/checklists/hanna/coherence.filtered.yaml and refused the entry that builds it
    ha = D.load('hanna')
    plan = method_plan([{'method': 'checkeval', 'options': {'stage': 'filtered', 'build': True, 'k_augment': 2}}], ha, dims=['coherence'])
    assert [p['label'] for p in plan] == ['checkeval_filtered']
    with pytest.raises(ValueError, match='No checklist for hanna/coherence'):
        method_plan([{'method': 'checkeval', 'options': {'stage': 'filtered'}}], ha, dims=['coherence'])

def test_likert_agreement_never_pools_judges_on_different_scales():
    "Topical-Chat coherence is rated 1-3; UniEval's score (0-3.95) once went into the same alpha as the 1-3 ratings ('likert (all)', 0.149)."
    import numpy as np, pandas as pd
    from judgelab.report.tables import checkeval_agreement
    from judgelab.data import load
    items = load('topical_chat').items.item_id[:60]
    rng = np.random.default_rng(0)
    truth = rng.integers(1, 4, len(items))
    def judge(name, scores): return pd.DataFrame(dict(item_id=items, dimension='coherence', judge=name, model='m', score=scores, parse_ok=True, family='likert'))
    J = {'topical_chat': pd.concat([judge('a', truth), judge('b', np.clip(truth + rng.integers(-1, 2, len(items)), 1, 3)),
                                    judge('prob', rng.uniform(0, 1, len(items)))], ignore_index=True)}
    r = checkeval_agreement(J, ['topical_chat']).set_index('judges').loc['likert (1-3 scale)']
    assert r.coders == 2 and 'prob/m (0.' in r.note and 'not on the 1-3 scale' in r.note
    alone = checkeval_agreement({'topical_chat': J['topical_chat'][J['topical_chat'].judge != 'prob']}, ['topical_chat']).set_index('judges').loc['likert (1-3 scale)']
    assert r.krippendorff_alpha == alone.krippendorff_alpha          # the judge on another scale changes nothing
