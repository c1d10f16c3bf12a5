"""Replayed published judges: the authors' own staged scripts,
run on their own files, give the numbers judgelab's `authors_scores` / `authors_correlations` give (to 4 decimals);
judgelab's parsers on the reply formats; the file groups of the registry; the crowd ratings."""

import ast, importlib.util, json, re
import numpy as np, pandas as pd, pytest
from scipy import stats
from judgelab import data as D
from judgelab.data import judgments as JM
from judgelab.datasets import topical_chat as TC

RAW = D.raw_dir('summeval')

def _module(path):
    "Load one of the authors' scripts as a module (it only defines functions)."
    spec = importlib.util.spec_from_file_location(path.stem + '_authors', path); m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m); return m

def _functions(path, **ns):
    "The top-level functions (and imports) of a script whose module body runs an experiment: its code unchanged, without the run."
    tree = ast.parse(path.read_text())
    body = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.Import, ast.ImportFrom)) and not
            (isinstance(n, (ast.Import, ast.ImportFrom)) and any(a.name == 'prettytable' or getattr(n, 'module', '') == 'prettytable' for a in n.names))]
    g = dict(ns); exec(compile(ast.Module(body, []), str(path), 'exec'), g); return g

# --- LLM_summeval (Shen et al. 2023): utils.py's parsers + extract_model_scores.py's loop + calc_data_corr.py's correlations

def test_llm_summeval_reproduces_the_authors_scripts():
    D.group_files('summeval', 'llm_summeval')
    code = RAW/'judgments/llm_summeval/repo_code'
    u = _module(code/'utils.py')
    extract = dict(rts=u.extract_score_rts, mcq=u.extract_score_mcq, stareval=u.extract_score_stareval, altrts=u.extract_score_rts, altmcq=u.extract_score_mcq)
    src = (code/'calc_data_corr.py').read_text()
    m_ids = ast.literal_eval(re.search(r'M_ID_LIST = (\[.*?\])', src).group(1))
    ds = D.load('summeval'); hm = ds.human_mean()
    ours = JM.authors_correlations('summeval', 'llm_summeval').set_index(['judge', 'model', 'dimension', 'statistic']).value
    a = JM.authors_scores('summeval', 'llm_summeval').set_index(['judge', 'model', 'item_id', 'dimension']).score
    base = RAW/'judgments/llm_summeval/eval_model_generations'; checked = 0
    for model_dir in sorted(base.iterdir()):
        for method in ('rts', 'mcq', 'stareval', 'altrts', 'altmcq'):
            for dim in ('coherence', 'consistency', 'fluency', 'relevance'):
                full = {}                                       # extract_model_scores.py: full_data[id][M][key] = score, later lines overwrite
                for M in m_ids:
                    f = base/model_dir.name/f'eval_{M}_generations'/f'{dim}_{method}.txt'
                    if not f.exists(): continue
                    for line in [json.loads(l) for l in f.read_text().splitlines()]:
                        try: full[(line['id'], M)] = extract[method](line['resp'])
                        except (KeyError, AssertionError, ValueError): full[(line['id'], M)] = np.nan     # their script stops here
                if not full: continue
                keys = [f'{d}__{M}' for (d, M) in full]
                pred = np.array(list(full.values()), float)
                assert np.allclose(pred, a.loc[(method, model_dir.name)].reindex(pd.MultiIndex.from_arrays([keys, [dim]*len(keys)])).values, equal_nan=True)
                ok = np.isfinite(pred); targ = hm[dim].reindex(keys).values   # calc_data_corr.py: against the expert mean, pooled
                for name, fn in (('spearman', stats.spearmanr), ('pearson', stats.pearsonr), ('kendall', stats.kendalltau)):
                    theirs = fn(targ[ok], pred[ok])[0]
                    assert round(theirs, 4) == round(ours[(method, model_dir.name, dim, f'{name} (pooled over items)')], 4), (model_dir.name, method, dim, name)
                checked += 1
    assert checked == 9*4

def test_llm_summeval_judges_and_failures():
    j = JM.load_judgments('summeval', 'llm_summeval')
    assert j.groupby(['judge', 'model']).ngroups == 9 and j.item_id.nunique() == 1200 and len(j) == 9*4*1200
    assert j.loc[~j.parse_ok, 'score'].isna().all() and j.loc[~j.parse_ok, 'failure'].notna().all()
    assert j.rationale.notna().all()                              # the reply is kept as the rationale
    d = JM.rule_differences(j, JM.authors_scores('summeval', 'llm_summeval'))
    assert set(d.kind) <= {'same', 'both read a score, different values', 'judgelab: failure; authors: a default value',
                           'judgelab: failure; authors: a score read from the text', 'judgelab: a score; authors: their code fails', 'both fail'}
    assert (d.groupby(['judge', 'model', 'dimension'])['items'].sum() == 1200).all()

# --- Closer-Look G-Eval runs (Chiang & Lee 2023): all_eval.py's meta() on their files

def test_closerlook_geval_reproduces_all_eval():
    D.group_files('topical_chat', 'closerlook_geval')
    d = D.raw_dir('topical_chat')/'judgments/closerlook_geval'
    g = _functions(d/'repo_code/all_eval.py', round=lambda x, n=None: x)      # their code, their rounding switched off
    ours = JM.authors_correlations('topical_chat', 'closerlook_geval').set_index(['dimension', 'statistic']).value
    for code, dim in (('coh', 'coherence'), ('eng', 'engagingness'), ('gro', 'groundedness'), ('nat', 'naturalness')):
        A = g['meta'](str(d/f'gpt3.5_{code}_geval.json'), dim, 'A'); B = g['meta'](str(d/f'gpt3.5_{code}_geval.json'), dim, 'B')
        assert round(A['pearson'], 4) == round(ours[(dim, 'pearson (pooled, their mode A)')], 4), dim
        assert round(B['kendalltau'], 4) == round(ours[(dim, 'kendall (per conversation, their mode B)')], 4), dim
        assert round(B['pearson'], 4) == round(ours[(dim, 'pearson (per conversation, their mode B)')], 4), dim

@pytest.mark.parametrize('mode', ['geval_no_auto_cot', 'llm_eval_no_cot', 'analyze_rate_auto_cot', 'rate_explain_auto_cot'])
def test_closerlook_more_reproduces_all_eval(mode):
    "Chiang & Lee's four other modes: all_eval.py's meta() (staged with closerlook_geval) on their files equals the authors' procedure."
    D.group_files('topical_chat', 'closerlook_geval'); D.group_files('topical_chat', 'closerlook_more')
    code_dir = D.raw_dir('topical_chat')/'judgments/closerlook_geval/repo_code'
    d = D.raw_dir('topical_chat')/'judgments/closerlook_more'
    g = _functions(code_dir/'all_eval.py', round=lambda x, n=None: x)      # their code, their rounding switched off
    ours = JM.authors_correlations('topical_chat', f'closerlook_{mode}').set_index(['dimension', 'statistic']).value
    assert len(ours) == 4*6
    for code, dim in (('coh', 'coherence'), ('eng', 'engagingness'), ('gro', 'groundedness'), ('nat', 'naturalness')):
        with np.errstate(all='ignore'):
            A = g['meta'](str(d/f'gpt3.5_{code}_{mode}.json'), dim, 'A'); B = g['meta'](str(d/f'gpt3.5_{code}_{mode}.json'), dim, 'B')
        assert round(A['pearson'], 4) == round(ours[(dim, 'pearson (pooled, their mode A)')], 4), (mode, dim)
        assert round(B['kendalltau'], 4) == round(ours[(dim, 'kendall (per conversation, their mode B)')], 4), (mode, dim)
        assert round(B['pearson'], 4) == round(ours[(dim, 'pearson (per conversation, their mode B)')], 4), (mode, dim)

def test_closerlook_geval_reads_list_numbers_as_list_numbers():
    j = JM.load_judgments('topical_chat', 'closerlook_geval')
    assert j.groupby(['item_id', 'dimension']).size().max() == 20
    one = j[j.rationale.str.match(r'\s*1\. Engagingness: [23]\s*$')]
    assert len(one) > 5 and (one.score == one.rationale.str.extract(r': (\d)')[0].astype(float)).all()    # the 2 or 3, never the 1
    # G-Eval's own rule ('^ ?([\d\.]+)', 0 when unmatched) reads these as 1 (the list number) and "Engagingness: 2" as 0
    geval = TC._geval_parse
    assert geval('1. Engagingness: 2') == 1.0 and geval('- Engagingness: 2') == 0.0 and geval('2') == 2.0

# --- BatchEval: calulate_usr.py's get_score and its cross-round ('Cross subset SC') correlation

def test_batcheval_reproduces_calulate_usr():
    D.group_files('topical_chat', 'batcheval')
    d = D.raw_dir('topical_chat')/'judgments/batcheval'
    g = _functions(d/'repo_files/Provided_Result/calulate_usr.py')
    rows = [json.loads(l) for l in (d/'batcheval_gpt4_topical_chat_responses.jsonl').read_text().splitlines()]
    uni = json.loads((D.raw_dir('topical_chat')/'unieval_topical_chat.json').read_text())
    ours = JM.authors_correlations('topical_chat', 'batcheval').set_index(['dimension', 'statistic']).value
    for dim in ('coherence', 'engagingness', 'naturalness', 'overall', 'understandability'):
        rounds = {}
        for r in rows:
            if r['dimension'] != dim: continue
            sc = g['get_score'](r['response'], 10)[0]
            for i, x in zip(r['staged_index'], sc): rounds.setdefault(r['round'], {})[i] = x
        scores_all_set = [[rounds[k][i] for i in range(360)] for k in sorted(rounds)]
        human = [uni[i]['scores'][dim] for i in range(360)]
        cross = []                                     # calulate_usr.py, lines for the 'Cross subset SC'
        for i in range(len(scores_all_set[0])):
            cur_point, cur_num = 1e-5, 1e-5
            for j in range(len(scores_all_set)):
                if scores_all_set[j][i] != -1: cur_point += scores_all_set[j][i]; cur_num += 1
            cross.append(cur_point/cur_num)
        assert round(stats.pearsonr(human, cross)[0], 4) == round(ours[(dim, 'pearson (cross-round mean)')], 4), dim
        assert round(stats.spearmanr(human, cross)[0], 4) == round(ours[(dim, 'spearman (cross-round mean)')], 4), dim
        per = np.mean([stats.pearsonr(human, s)[0] for s in scores_all_set])
        assert round(per, 4) == round(ours[(dim, 'pearson (per round, mean of 5)')], 4), dim

def test_batcheval_maps_scores_to_items_and_uses_the_prompts_scale():
    j = JM.load_judgments('topical_chat', 'batcheval')
    assert set(j.dimension) == {'coherence', 'engagingness', 'naturalness', 'overall', 'understandability'}
    assert (j.groupby(['item_id', 'dimension']).size() == 5).all() and j.item_id.nunique() == 360
    u = j[j.dimension == 'understandability']
    assert u.score.max() > 1 and u.score.max() <= 2          # its prompt asks for [0, 2]; the dataset's scale is 0-1
    assert j.rationale.str.len().median() < 1000              # each item keeps its own analysis, not the whole batch reply

# --- judgelab's parsers on the reply formats

@pytest.mark.parametrize('text,want', [
    ('The summary is coherent. Final score: 4.', 4.0), ('..., resulting in a score of 2.', 2.0),
    ('therefore I would score it a 5 out of 5 in terms of fluency.', 5.0), ('I give it a 4.', 4.0),
    ('It loses some coherence. 4', 4.0), ('a score of four.', 4.0),
    ('what keeps it from being a perfect 5 out of 5 is the abrupt end', None),       # a fraction alone is not a score
    ('Score: 2. On reflection, a score of 4.', 2.0),                               # a score field wins over prose
    ('I scored it 7 out of 10.', None), ('', None)])
def test_parse_rts(text, want):
    p = JM.parse_rts(text)
    assert (p.value == want) if want is not None else not p.ok, (text, p)

def test_parse_choice_stars_geval_sample_and_batch():
    assert JM.parse_choice('B').value == 2 and JM.parse_choice(' (E) ').value == 5 and JM.parse_choice('Answer: C').value == 3
    assert not JM.parse_choice('BE').ok and not JM.parse_choice('The answer depends').ok and not JM.parse_choice('F').ok
    assert JM.parse_stars('Four stars. The summary ...').value == 4 and JM.parse_stars('2 stars').value == 2
    assert not JM.parse_stars('3 stars, maybe 4 stars').ok and not JM.parse_stars('six stars').ok
    for t, v in [('2', 2), ('2.5', 2.5), ('- Engagingness: 2', 2), ('1. Engagingness: 3', 3), ('1. 2', 2), ('Response: 1', 1),
                 ('Engagingness:\n2', 2), ('**Coherence**: 3', 3), ('2.', 2)]:
        assert JM.parse_geval_sample(t, 1, 3).value == v, t
    for t in ['1. Natural', '2. somewhat interesting', 'no idea', '', '7']:
        assert not JM.parse_geval_sample(t, 1, 3).ok, t
    b = JM.parse_batch('analysis ... Float Scores: [Sample1:3, Sample2:1.5, Sample3:x]', 3)
    assert [p.value for p in b] == [3.0, 1.5, None] and 'Sample3' in b[2].failure
    assert all(not p.ok for p in JM.parse_batch('no scores here', 4))
    assert all('missing' in p.failure for p in JM.parse_batch('Float Scores: [Sample1:2]', 2)[1:])
    assert all(not p.ok for p in JM.parse_batch('Float Scores: [Sample1:2, Sample1:3]', 2))

# --- the registry's file groups, provenance, crowd ratings

def test_file_groups_in_the_registry(tmp_path):
    se = D.DATASETS['summeval']
    assert [g.name for g in se.file_groups] == ['llm_summeval', 'crowd', 'checkeval', 'geval', 'hypoeval', 'llm_summeval_pairwise']
    assert len(se.files_of('llm_summeval')) == 437 and len(se.files_of('crowd')) == 12 and len(se.files_of(None)) == 3
    f = se.files_of('llm_summeval')[-1]
    assert f.path == 'judgments/llm_summeval/repo_code/utils.py' and f.url.endswith('bd7dde15817a88940c17574973ff03e750356daa/utils.py')
    good = (D.paths.data/'datasets'/'summeval.yaml').read_text(); p = tmp_path/'summeval.yaml'
    for broken, msg in [(good.replace('  prefix: llm_summeval\n', ''), "file_groups[2] lacks the required key(s) ['prefix']"),
                        (re.sub(r'\n    [0-9a-f]{64}  eval_model', '\n    nothex  eval_model', good, count=1), "sha256 line 1 must be 'sha256  path"),
                        (good.replace('- name: crowd', '- name: llm_summeval'), "file group(s) ['llm_summeval'] given twice")]:
        p.write_text(broken)
        with pytest.raises(D.RegistryError) as e: D.load_registry(tmp_path)
        assert msg in str(e.value), (msg, str(e.value))

def test_group_files_are_verified_and_recorded_as_one_input(tmp_path, monkeypatch):
    inp = JM.judgments_inputs('summeval')
    keys = [k for k in inp if 'judgments/llm_summeval/' in k]
    assert len(keys) == 1 and '437 files' in keys[0] and re.fullmatch(r'[0-9a-f]{64}', inp[keys[0]])
    f = D.raw_dir('summeval')/D.DATASETS['summeval'].files_of('llm_summeval')[0].path
    orig = f.read_bytes()
    try:
        f.write_bytes(orig + b'\n')
        with pytest.raises(D.ChecksumError, match='Checksum mismatch'): JM.load_judgments('summeval', 'llm_summeval')
    finally: f.write_bytes(orig)

def test_authors_rules_are_refused_where_there_are_none():
    with pytest.raises(ValueError, match='no authors'): JM.authors_scores('summeval', 'alttest')
    with pytest.raises(ValueError, match="unknown rule 'x'"): JM.authors_scores('topical_chat', 'closerlook_geval', 'x')

def test_crowd_ratings_are_a_second_human_baseline():
    c = D.load_crowd('summeval'); se = D.load('summeval')
    assert len(c.items) == 1200 and c.annotators == ['t0', 't1', 't2', 't3', 't4'] and c.spec.alt_test_epsilon == 0.1
    assert len(c.human) == 1200*4*5 and set(c.items.item_id) <= set(se.items.item_id)
    with pytest.raises(KeyError, match='no crowd ratings'): D.load_crowd('hanna')
