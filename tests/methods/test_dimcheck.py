"""DimCheck: on existing chains of thought, published judges, and over a server."""

import json, re
import numpy as np, pandas as pd, pytest
from judgelab import data as D
from judgelab.llm import ScriptedBackend
from judgelab.methods import run, method_plan
import time
import nbformat
from judgelab.data import load
from judgelab.llm import Choice
from judgelab.methods.judges import analyze_rate_requests, analysis_text
from judgelab.data.judgments import JUDGMENT_COLUMNS, load_judgments
from judgelab.methods.dimcheck import published_analysis
import hashlib
from tests.conftest import _backend, ok, scripted

# ==============================================================================================================
# DimCheck edits one of several published judges, chosen by `analyses_judge`.
# ==============================================================================================================

def test_dimcheck_edits_one_of_several_published_judges_chosen_by_analyses_judge():
    # llm_summeval holds nine judges: the GPT-4 reason-then-score reasons are picked by analyses_judge
    from judgelab.data.judgments import load_judgments
    from judgelab.methods.dimcheck import published_analysis
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

# ==============================================================================================================
# DimCheck on existing chains of thought: `analyses=` a judgments table with rationales, or a published source
# of the dataset. The editor receives the published analysis; an edited one is rescored with judgelab's Analyze-Rate request
# of the item and dimension with the edited analysis prefilled; an unedited one makes no call and keeps the published score;
# an (item, dimension) without a parsed published analysis is a counted 'skipped' row; a table that does not match the
# dataset fails before any model call. Every request goes through the generation cache.
# ==============================================================================================================

def _table(rows, judge='rts', model='gpt-4-0613'):
    "A judgments table of one published judge: rows (item_id, dimension, score, rationale, parse_ok[, sample])."
    return pd.DataFrame([dict(item_id=r[0], dimension=r[1], judge=judge, model=model, score=r[2] if r[4] else np.nan, rationale=r[3],
                              sample=r[5] if len(r) > 5 else 0, parse_ok=r[4], failure=None if r[4] else 'no score') for r in rows], columns=JUDGMENT_COLUMNS)

def _analysis_of(edit_body):
    return edit_body['messages'][-1]['content'].split('Analysis:\n', 1)[1].strip()

def test_published_analysis_takes_the_text_before_the_score_field():
    assert published_analysis('Analysis: It stays on topic.\nRating: 4') == 'It stays on topic.'
    assert published_analysis('The summary is faithful. Final score: 4.') == 'The summary is faithful.'
    assert published_analysis('**Reasoning:** brief and fluent.\n\n**Score:** 3/5') == 'brief and fluent.'
    assert published_analysis('Fluency score: 3. Overall Rating (1-5): 4') == 'Fluency score: 3.'      # the final/overall field wins
    assert published_analysis('A subscore: fine. Score = 2') == 'A subscore: fine.'                     # 'subscore' is no field
    assert published_analysis('<think>let me see</think>\nExplanation: it rambles.\nRating: 2') == 'it rambles.'
    assert published_analysis('Rating: 4\nIt is fine.') == '' and published_analysis(None) == ''
    for t in ['Analysis: It reads naturally.\nRating: 2', 'It follows on.\n\nRating: 3\n', 'analysis: ok\nrating = 5']:
        assert published_analysis(t) == analysis_text(t)

def test_closerlook_analyses_are_their_analysis_text():
    # Chiang & Lee's "... Rating: N" replies: the published analysis is exactly what DimCheck takes from its own replies
    cl = load_judgments('topical_chat', 'closerlook_analyze_rate')
    got = cl[cl.parse_ok & (cl['sample'] == 0)].rationale
    assert len(got) > 1000 and all(published_analysis(t) == analysis_text(t) for t in got)
    assert (got.map(published_analysis).str.len() > 0).mean() > 0.99

def test_dimcheck_edits_published_analyses_and_rescores_only_the_edited(http_stub, tmp_path):
    tc = load('topical_chat'); a, b, c = tc.items.item_id[:3]
    pub = _table([(a, 'coherence', 4, 'The reply follows the dialogue. It is very engaging and fun.\nFinal score: 4.', True),
                  (b, 'coherence', 3, 'Analysis: The reply follows on from the last turn.\nRating: 3', True),
                  (c, 'coherence', np.nan, 'I cannot rate this.', False)])
    def reply(n, body, h):
        if body.get('continue_final_message'): return ok(' 2')
        last = body['messages'][-1]['content']
        if 'Remove from the analysis' in last:      # the editor: drops the sentences about engagement
            return ok('Edited analysis: ' + ' '.join(x for x in re.split(r'(?<=\.)\s+', _analysis_of(body)) if 'engag' not in x.lower()))
        return ok('Analysis: generated.\nRating: 5')   # an Analyze-Rate generation: must not happen
    srv, seen = scripted(http_stub, reply)
    kw = dict(dims=['coherence'], items=[a, b, c], others=['engagingness'], analyses=pub, progress=False)
    with pytest.warns(UserWarning, match=r'1 of 3 \(item, dimension\) pairs skipped'):
        j = run('dimcheck', tc, backend=_backend(srv, tmp_path), **kw)
    bodies = [x for _, x, _ in seen]
    edits = [x for x in bodies if 'Remove from the analysis' in x['messages'][-1]['content']]
    resc = [x for x in bodies if x.get('continue_final_message')]
    assert len(bodies) == len(edits) + len(resc)                             # nothing generated the analyses
    # the published analyses, as they were (the backend sends requests concurrently: arrival order is not fixed)
    assert sorted(_analysis_of(x) for x in edits) == ['The reply follows on from the last turn.',
                                                      'The reply follows the dialogue. It is very engaging and fun.']
    (r,) = resc                                                              # only the edited analysis is rescored
    ar = analyze_rate_requests(tc, tc.items[tc.items.item_id == a], ['coherence'])[0]
    assert r['messages'] == ar.messages + [{'role': 'assistant', 'content': 'Analysis: The reply follows the dialogue.\nRating:'}]
    assert r['add_generation_prompt'] is False
    t = j.set_index('item_id')
    assert t.scoring.to_dict() == {a: 'rescored', b: 'kept', c: 'skipped'}
    assert (t.score[a], t.base_score[a]) == (2.0, 4.0) and (t.score[b], t.base_score[b]) == (3.0, 3.0)   # b: the published score
    assert t.prompt[a] == 'analyze_rate+rescore (published analysis from rts/gpt-4-0613, rts)'
    assert t.prompt[b] == 'published (rts/gpt-4-0613, rts)' and t.completion_tokens[b] == 0
    assert t.rationale[a] == 'The reply follows the dialogue.' and t.base_analysis[a] == 'The reply follows the dialogue. It is very engaging and fun.'
    assert (t.analysis_judge[[a, b]] == 'rts').all() and (t.analysis_model[[a, b]] == 'gpt-4-0613').all()
    assert np.isnan(t.score[c]) and not t.parse_ok[c] and t.failure[c] == 'skipped: published score not parsed (no score)'
    assert j.attrs['skipped'] == 1 and j.attrs['calls'] == dict(base=0, edit_rounds=1, rescore=1)
    n = len(seen)                                                            # every request went through the cache
    with pytest.warns(UserWarning):
        j2 = run('dimcheck', tc, backend=_backend(srv, tmp_path), **kw)
    assert len(seen) == n and j2.score.equals(j.score) and j2.cached[j2.scoring == 'rescored'].all()

def unchanged(r):
    "Every editor answer returns the analysis unchanged (an edit that changes nothing); a rescoring writes ' 1'."
    msg = r.messages[-1]['content']
    return Choice('Edited analysis: ' + msg.split('Analysis:\n', 1)[1] if 'Analysis:\n' in msg else ' 1', 'stop', 5, 50)

def counting(): return ScriptedBackend(unchanged, model='counting@1', name='counting')     # len(batches): its calls

def test_mismatched_analyses_fail_before_any_call():
    tc = load('topical_chat'); ids = list(tc.items.item_id[:2]); b = counting()
    good = _table([(i, 'coherence', 3, 'Fine.\nRating: 3', True) for i in ids])
    def fails(analyses, match, dims=('coherence',), **kw):
        with pytest.raises(ValueError, match=match):
            run('dimcheck', tc, backend=b, dims=list(dims), items=ids, others=['engagingness'], analyses=analyses, progress=False, **kw)
    fails(good.assign(item_id=['dialogue-x', 'dialogue-y']), r"name 2 item\(s\) that topical_chat does not have, e.g. \['dialogue-x'")
    fails(load_judgments('summeval', 'alttest').head(4), r"item\(s\) that topical_chat does not have")   # another dataset's judgments
    fails(good.assign(dimension='fluency'), r"dimension\(s\) \['fluency'\] that topical_chat does not have")
    fails(good, r"have no 'naturalness' analyses \(they cover coherence\)", dims=('coherence', 'naturalness'))
    fails(pd.concat([good, good.assign(model='gpt-4o')]), r"hold 2 judges \(rts/gpt-4-0613, rts/gpt-4o\)")
    fails(good.drop(columns='rationale'), r"lack the judgments column\(s\) \['rationale'\]")
    fails(good, r"have no sample 5 \(samples 0-0\)", analyses_sample=5)
    fails(pd.concat([good, good]), r"several rows for one item, dimension and sample 0")
    fails('closer_look', r"no published judgments 'closer_look' for topical_chat; sources of topical_chat with rationales: closerlook_analyze_rate, closerlook_rate_explain")
    fails('unieval', r"'unieval' of topical_chat have no rationales to edit")
    fails(good.assign(rationale=None), r"have no rationales to edit")
    assert len(b.batches) == 0

def test_skipped_pairs_are_counted_apart_and_a_given_table_is_named_in_the_manifest(tmp_outputs):
    from judgelab.core import paths
    from judgelab.methods.dimcheck import edit_rate
    tc = load('topical_chat'); ids = list(tc.items.item_id[:3])
    pub = _table([(ids[0], 'coherence', 3, 'It follows on.\nRating: 3', True), (ids[1], 'coherence', np.nan, 'Hard to say.', False),
                  (ids[0], 'naturalness', np.nan, 'Rating: none', False)])
    with pytest.warns(UserWarning, match=r'3 of 4 .* pairs skipped'):
        j = run('dimcheck', tc, backend=counting(), dims=['coherence', 'naturalness'], items=ids[:2], others=['engagingness'], analyses=pub, save=True, progress=False)
    assert j.attrs['skipped_reasons'] == {'published score not parsed (no score)': 2, 'no published judgment (sample 0)': 1}
    e = edit_rate(j).set_index('dimension')      # the skipped are not analyses the editor left unchanged
    assert e.loc['coherence', ['items', 'skipped', 'edit_rate']].tolist() == [1, 1, 0.0] and e.loc['naturalness', ['items', 'skipped', 'restarts']].tolist() == [0, 2, 0]
    row = [json.loads(l) for l in paths.manifest.read_text().splitlines()][-1]
    assert [p.split('/judgments/')[-1] for p in row['artifacts']] == ['topical_chat/dimcheck_rts__counting_1.parquet']   # filed apart from generated DimCheck
    assert row['parameters']['options']['analyses'] == 'table (given): 3 rows of rts/gpt-4-0613'

def test_a_published_source_by_name_and_sample(tmp_path):
    # the config form: options {analyses: closerlook_analyze_rate, analyses_sample: 1}; unedited analyses keep the published scores
    tc = load('topical_chat'); cl = load_judgments('topical_chat', 'closerlook_analyze_rate')
    s1 = cl[(cl['sample'] == 1) & (cl.dimension == 'coherence') & cl.parse_ok].set_index('item_id')
    ids = sorted(s1.index)[:2]; b = counting()
    j = run('dimcheck', tc, backend=b, dims=['coherence'], items=ids, others=['engagingness'], analyses='closerlook_analyze_rate', analyses_sample=1, progress=False)
    assert [r.messages[-1]['content'].split('Analysis:\n', 1)[1].strip() for r in b.requests] == [published_analysis(s1.rationale[i]) for i in ids]
    assert len(b.batches) == 1 and not any(r.continue_final for r in b.requests)          # one edit batch, no rescoring: nothing changed
    assert j.score.tolist() == s1.score[ids].tolist() and (j.scoring == 'kept').all() and (j.analysis_sample == 1).all()
    assert (j.analysis_source == 'topical_chat/closerlook_analyze_rate').all() and (j.analysis_model == 'gpt-3.5-turbo-0613').all()
    assert j.attrs['file_method'] == 'dimcheck_closerlook_analyze_rate_s1' and j.attrs['skipped'] == 0
    p = method_plan([{'method': 'dimcheck', 'options': {'analyses': 'closerlook_analyze_rate', 'analyses_sample': 1}}, 'dimcheck'], tc, dims=['coherence'])
    assert [x['label'] for x in p] == ['dimcheck_closerlook_analyze_rate_s1', 'dimcheck']
    with pytest.raises(ValueError, match="methods.0. .dimcheck.: analyses: no published judgments 'gpt4_rts' for topical_chat"):
        method_plan([{'method': 'dimcheck', 'options': {'analyses': 'gpt4_rts'}}], 'topical_chat')

def test_a_sweep_names_an_unknown_published_source_when_it_is_loaded(tmp_path, monkeypatch):
    from judgelab.run.sweep import load_sweep, ConfigError
    monkeypatch.setenv('JUDGELAB_TEMPLATE_DIRS', str(tmp_path))   # its template lives outside the repository: allowed explicitly
    tpl = nbformat.v4.new_notebook()
    tpl.cells = [nbformat.v4.new_code_cell("dataset: str = 'topical_chat'\nmethods: list = []", metadata=dict(tags=['parameters']))]
    tpl.metadata['kernelspec'] = dict(name='python3', display_name='Python 3', language='python')
    nbformat.write(tpl, tmp_path/'t.ipynb')
    cfg = (f"experiments:\n  judge:\n    template: {tmp_path/'t.ipynb'}\n    parameters:\n      methods: [{{method: dimcheck, options: {{analyses: SOURCE}}}}]\n"
           f"    grid: {{dataset: [topical_chat]}}\n")
    (tmp_path/'ok.yaml').write_text(cfg.replace('SOURCE', 'closerlook_analyze_rate')); load_sweep(tmp_path/'ok.yaml')
    (tmp_path/'bad.yaml').write_text(cfg.replace('SOURCE', 'closerlook'))
    with pytest.raises(ConfigError, match=r"bad.yaml:\d+: analyses: no published judgments 'closerlook' for topical_chat"): load_sweep(tmp_path/'bad.yaml')

def test_dimcheck_on_closerlook_analyses_on_the_embedded_model(tmp_path):
    # the whole pipeline on the embedded model: 2 Topical-Chat items x coherence, non-target engagingness, gpt-3.5 analyses
    from judgelab.llm.models import get_backend
    tc = load('topical_chat'); cl = load_judgments('topical_chat', 'closerlook_analyze_rate')
    c0 = cl[(cl['sample'] == 0) & (cl.dimension == 'coherence') & cl.parse_ok].set_index('item_id')
    ids = sorted(c0.index)[:2]
    kw = dict(dims=['coherence'], items=ids, others=['engagingness'], analyses='closerlook_analyze_rate', max_tokens=64, max_restarts=0,
              thinking=False, progress=False)
    t0 = time.monotonic()
    j = run('dimcheck', tc, backend=get_backend(cache=tmp_path/'c.sqlite'), **kw)
    print(f'embedded DimCheck on 2 published analyses: {time.monotonic() - t0:.1f} s, {j.scoring.tolist()}')
    assert len(j) == 2 and set(j.scoring) <= {'kept', 'rescored'} and j.attrs['calls']['base'] == 0 and j.attrs['calls']['edit_rounds'] == 1
    assert j.base_score.tolist() == c0.score[ids].tolist() and j.base_analysis.tolist() == [published_analysis(c0.rationale[i]) for i in ids]
    kept, resc = j[j.scoring == 'kept'], j[j.scoring == 'rescored']
    assert (kept.score == kept.base_score).all() and j.attrs['calls']['rescore'] == int(len(resc) > 0)
    assert resc.prompt.str.startswith('analyze_rate+rescore (published analysis from analyze_rate/gpt-3.5-turbo-0613').all()
    # every request went through the cache: replaying it calls no model and gives the same table
    j2 = run('dimcheck', tc, backend=get_backend(cache=tmp_path/'c.sqlite', mode='replay'), **kw)
    assert j2.score.equals(j.score) and j2.scoring.equals(j.scoring)

# ==============================================================================================================
# DimCheck over a server, faithful to the paper: the no-thinking ablation, the edits, and the rescoring that re-runs
# the unchanged evaluation prompt with the edited analysis as the start of the answer.
# ==============================================================================================================

def test_dimcheck_over_a_server_no_thinking_edits_and_a_prefilled_rescoring(http_stub, tmp_path):
    # the whole method against a loopback vLLM-style server: what each request carried
    def reply(n, body, h):
        last = body['messages'][-1]
        if body.get('continue_final_message'): return ok(' 1')
        if 'Remove from the analysis' in last['content']: return ok('Edited analysis: It reads naturally.')
        # each item's analysis its own (two equal edit requests would be one request: a batch generates a key once)
        return ok(f"Analysis: It reads naturally. It is engaging (item {hashlib.sha256(last['content'].encode()).hexdigest()[:8]}).\nRating: 2")
    srv, seen = scripted(http_stub, reply)
    tc = load('topical_chat')
    j = run('dimcheck', tc, backend=_backend(srv, tmp_path), dims=['naturalness'], n_items=2, others=['engagingness'], thinking=False, progress=False)
    bodies = [b for _, b, _ in seen]
    base = [b for b in bodies if not b.get('continue_final_message') and 'Remove from the analysis' not in b['messages'][-1]['content']]
    edits = [b for b in bodies if 'Remove from the analysis' in b['messages'][-1]['content']]
    resc = [b for b in bodies if b.get('continue_final_message')]
    assert len(base) == len(edits) == len(resc) == 2
    assert all(b['chat_template_kwargs'] == {'enable_thinking': False} for b in edits)
    assert all('chat_template_kwargs' not in b for b in base + resc)
    for r in resc:                                                   # the evaluation prompt, unchanged, then the prefilled answer
        b = next(x for x in base if x['messages'] == r['messages'][:-1])
        assert r['messages'][-1] == {'role': 'assistant', 'content': 'Analysis: It reads naturally.\nRating:'} and r['add_generation_prompt'] is False
    assert (j.score == 1).all() and (j.base_score == 2).all() and (j.scoring == 'rescored').all()
