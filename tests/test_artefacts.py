"""The papers' official artefacts in the methods: CheckEval's released checklists (SummEval, Topical-Chat), G-Eval's
released SummEval prompts, HypoEval's published hypotheses; each read from its registered file group at run time."""
import json, math, re
import numpy as np, pandas as pd, pytest, yaml
from judgelab import data as D
from judgelab.llm import ScriptedBackend
from judgelab.methods import run, method_plan
from judgelab.checklist import load_checklist, default_stage, OFFICIAL
from judgelab.decompose import hypoeval_hypotheses, hypoeval_aggregate, decomposition

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

def test_geval_on_summeval_sends_the_official_prompt_with_its_placeholders_filled():
    se = D.load('summeval'); it = se.items.iloc[3]
    b = ScriptedBackend(lambda r, s: 'Coherence: 4')
    run('geval', se, b, dims=['coherence'], items=[it.item_id], progress=False)
    official = (D.raw_dir('summeval')/'methods/geval/prompts/summeval/coh_detailed.txt').read_text()
    want = official.replace('{{Document}}', it.source).replace('{{Summary}}', it.output)
    assert b.requests[0].messages == [dict(role='user', content=want)] and b.requests[0].meta['prompt'] == 'geval (official)'
    b2 = ScriptedBackend(lambda r, s: 'Coherence: 4')
    run('geval', se, b2, dims=['coherence'], items=[it.item_id], progress=False, prompts='judgelab')
    assert b2.requests[0].messages != b.requests[0].messages and '{{' not in str(b2.requests[0].messages)
    with pytest.raises(ValueError, match='only SummEval'):
        run('geval', D.load('hanna'), b, dims=['coherence'], n_items=1, progress=False, prompts='official')
    with pytest.raises(ValueError, match='auto_steps needs'):
        run('geval', se, b, dims=['coherence'], items=[it.item_id], progress=False, auto_steps=True)

def test_hypoeval_scores_the_five_published_hypotheses_with_their_prompt(tmp_outputs):
    ha = D.load('hanna'); it = ha.items.iloc[0]
    hyps = hypoeval_hypotheses(ha, ['coherence'])['coherence']
    raw = json.loads((D.raw_dir('hanna')/'methods/hypoeval/selected_hypotheses/story_coherence.json').read_text())
    assert hyps == raw and len(hyps) == 5
    scores = iter([4, 3, 5, 2, 4])
    b = ScriptedBackend(lambda r, s: f'Step 1: ... Step 3: {{Final score: {next(scores)}}}')
    j = decomposition(ha, ha.items.iloc[[0]], ['coherence'], b, variant='hypoeval', progress=False)
    assert len(b.requests) == 5 and [r.meta['sub'] for r in b.requests] == list(raw)
    for r, h in zip(b.requests, raw):
        sys_, user = r.messages
        assert sys_['role'] == 'system' and h in user['content'] and it.output in user['content'] and it.source in user['content']
        assert '${' not in sys_['content'] + user['content']
    assert j.score.tolist() == [4, 3, 5, 2, 4] and set(j.subcriterion) == set(raw)
    agg = hypoeval_aggregate(j, {'coherence': raw}).set_index('judge').score
    assert agg['hypoeval_mean'] == round(np.mean([4, 3, 5, 2, 4]), 1)                 # their evaluator.py: mean, rounded to 1 decimal
    w = np.array(list(raw.values()))
    assert agg['hypoeval_weighted'] == pytest.approx(float((np.array([4, 3, 5, 2, 4])*w).sum()/w.sum()))
    j2 = j.copy(); j2.loc[1, ['score', 'parse_ok']] = [np.nan, False]
    a2 = hypoeval_aggregate(j2, {'coherence': raw})
    assert not a2.parse_ok.any() and (a2.failure == '1 of 5 hypothesis scores unparsed').all()     # never a default
    with pytest.raises(ValueError, match='summeval and hanna only'): hypoeval_hypotheses(D.load('topical_chat'), ['coherence'])

def test_dimcheck_edits_one_of_several_published_judges_chosen_by_analyses_judge():
    # llm_summeval holds nine judges: the GPT-4 reason-then-score reasons are picked by analyses_judge
    from judgelab.judgments import load_judgments
    from judgelab.dimcheck import published_analysis
    se = D.load('summeval'); ls = load_judgments('summeval', 'llm_summeval')
    g4 = ls[(ls.model == 'gpt-4-0314') & (ls.dimension == 'coherence') & ls.parse_ok].set_index('item_id')
    ids = sorted(g4.index)[:2]
    b = ScriptedBackend(lambda r, s: 'Edited analysis: ' + r.messages[-1]['content'].split('Analysis:\n', 1)[1] if 'Analysis:\n' in r.messages[-1]['content'] else ' 1')
    with pytest.raises(ValueError, match=r"hold 9 judges .*pass analyses_judge='judge/model'"):
        run('dimcheck', se, b, dims=['coherence'], items=ids, others=['fluency'], analyses='llm_summeval', progress=False)
    with pytest.raises(ValueError, match="analyses_judge 'gpt-5' matches none"):
        run('dimcheck', se, b, dims=['coherence'], items=ids, others=['fluency'], analyses='llm_summeval', analyses_judge='gpt-5', progress=False)
    assert not b.requests                                           # both refused before any call
    j = run('dimcheck', se, b, dims=['coherence'], items=ids, others=['fluency'], analyses='llm_summeval', analyses_judge='rts/gpt-4-0314', progress=False)
    assert [r.messages[-1]['content'].split('Analysis:\n', 1)[1].strip() for r in b.requests] == [published_analysis(g4.rationale[i]) for i in ids]
    assert (j.analysis_model == 'gpt-4-0314').all() and j.score.tolist() == g4.score[ids].tolist()    # unedited: the published scores stay
    assert j.attrs['file_method'] == 'dimcheck_llm_summeval_rts_gpt-4-0314'

def test_a_checklist_stage_the_run_builds_is_not_required_before_the_run(tmp_outputs):
    # before: method_plan looked for outputs/<run>/checklists/hanna/coherence.filtered.yaml and refused the entry that builds it
    ha = D.load('hanna')
    plan = method_plan([{'method': 'checkeval', 'options': {'stage': 'filtered', 'build': True, 'k_augment': 2}}], ha, dims=['coherence'])
    assert [p['label'] for p in plan] == ['checkeval_filtered']
    with pytest.raises(ValueError, match='No checklist for hanna/coherence'):
        method_plan([{'method': 'checkeval', 'options': {'stage': 'filtered'}}], ha, dims=['coherence'])
