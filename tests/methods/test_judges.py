"""Every judge method end to end on the embedded model (real generations) on one item of two datasets, the
parsers on recorded real judge outputs, and the judgments feeding the statistics."""

import pytest
from judgelab import data as D
from judgelab.data import judgments as JM
from judgelab.methods import run, METHODS
from judgelab.llm.parse import parse_score
from judgelab.stats import correlation_table
from judgelab.llm.models import get_backend
from judgelab.llm.cache import GenerationCache

OPTS = dict(analyze_rate=dict(max_tokens=64), geval={}, direct=dict(max_tokens=64), checkeval={}, reference={},
            dimcheck=dict(max_tokens=96, base_max_tokens=64, others=None), decomposition=dict(variant='icl', k=2, icl=2))

@pytest.fixture(scope='module', autouse=True)
def outputs(tmp_path_factory):
    "Everything the judges write (decompositions, judgments) goes to a temporary outputs folder."
    import os
    out = tmp_path_factory.mktemp('outputs'); old = os.environ.get('JUDGELAB_OUTPUTS'); os.environ['JUDGELAB_OUTPUTS'] = str(out)
    yield out
    if old is None: del os.environ['JUDGELAB_OUTPUTS']
    else: os.environ['JUDGELAB_OUTPUTS'] = old

@pytest.fixture(scope='module')
def backend(outputs):
    return get_backend(cache=GenerationCache(outputs/'cache.sqlite'))

def test_every_method_is_registered():
    assert set(OPTS) == set(METHODS)

@pytest.mark.parametrize('dataset,dim', [('topical_chat', 'naturalness'), ('hanna', 'relevance')])
@pytest.mark.parametrize('method', sorted(OPTS))
def test_method_end_to_end(method, dataset, dim, backend):
    ds = D.load(dataset)
    opts = dict(OPTS[method])
    if method == 'dimcheck': opts['others'] = [d for d in ds.spec.dim_names if d != dim][:2]
    j = run(method, ds, backend, dims=[dim], items=ds.items.item_id.iloc[[0]].tolist(), progress=False, **opts)
    assert len(j) >= 1 and set(j.dimension) == {dim} and set(j.item_id) <= set(ds.items.item_id)
    assert (j.parse_ok == j.score.notna()).all() and j.loc[~j.parse_ok, 'failure'].notna().all()
    lo, hi = ds.dim(dim).lo, ds.dim(dim).hi
    sub = j.loc[j.parse_ok, 'score']
    if method in ('checkeval', 'reference'): assert sub.between(0, 1).all()
    elif method == 'decomposition': assert sub.between(1, 5).all() and j.subcriterion.notna().all()
    else: assert sub.between(lo, hi).all()
    assert (j.prompt_tokens > 0).all()

def test_rerun_is_free(backend):
    ds = D.load('topical_chat')
    a = run('analyze_rate', ds, backend, dims=['coherence'], items=ds.items.item_id[:1].tolist(), max_tokens=64, progress=False)
    b = run('analyze_rate', ds, backend, dims=['coherence'], items=ds.items.item_id[:1].tolist(), max_tokens=64, progress=False)
    assert b.cached.all() and a.rationale.tolist() == b.rationale.tolist()

def test_score_completion_on_the_embedded_model(backend):
    """The 135M model rarely writes 'Rating: N' inside a short cap; with complete_score each reply without a score gets one
    constrained completion, so Analyze-Rate yields parsed scores, every completed row marked and its first failure kept."""
    ds = D.load('topical_chat'); items = ds.items.item_id[:2].tolist()
    j0 = run('analyze_rate', ds, backend, dims=['coherence'], items=items, max_tokens=24, progress=False)
    j = run('analyze_rate', ds, backend, dims=['coherence'], items=items, max_tokens=24, complete_score=True, progress=False)
    assert 'first_failure' not in j0 and j.parse_ok.sum() >= 1 and j.parse_ok.sum() >= j0.parse_ok.sum()
    done = j.first_failure.notna()
    assert done.sum() == (~j0.parse_ok & j0.failure.isin(['truncated at the token cap', 'no score found', 'empty output'])).sum()
    assert j[done].scoring.str.startswith('completed: ').all() and j[done].parse_ok.all() and j[done].score.between(1, 3).all()
    assert j[done].completion.str.fullmatch(r'Rating:[123]').all()
    assert (j.completion_tokens[done] > j0.completion_tokens[done]).all() and (j.rationale == j0.rationale).all()

def test_parser_on_recorded_real_outputs():
    # real ChatGPT replies (Closer-Look Analyze-Rate): our judge parser agrees with the data layer's strict parse
    j = JM.load_judgments('topical_chat', 'closerlook_analyze_rate')
    sample = j.sample(400, random_state=0)
    for r in sample.itertuples():
        d = D.DATASETS['topical_chat'].dim(r.dimension)
        p = parse_score(r.rationale, d.lo, d.hi)
        if r.parse_ok: assert p.ok and p.value == r.score, (r.rationale, p)
    # real ChatGPT replies (OpinSummEval CoT) mostly label the score with the dimension name ("Readability: 4"),
    # which the generic parser does not read as a score field; where it does find a score ("Rating: 2/5"), it
    # must be the same number the data layer's label-aware parser found, never another one
    cot = JM.load_judgments('opinsummeval', 'chatgpt_cot')
    got = [(parse_score(t, 1, 5), s) for t, s in zip(cot.rationale, cot.score)]
    found = [(p, s) for p, s in got if p.ok]
    assert len(found) >= 20 and all(p.value == s for p, s in found)
    assert all(p.failure == 'no score found' for p, s in got if not p.ok)

def test_judgments_feed_the_statistics(backend):
    ds = D.load('topical_chat')
    j = run('analyze_rate', ds, backend, dims=['groundedness'], n_items=3, max_tokens=32, progress=False)
    ct = correlation_table(j, ds, n_boot=10)
    assert set(ct.level) == {'sample', 'summary', 'system'} and (ct.n <= 3).all()

_SAME_RUN = """
import sys
from judgelab import data as D
from judgelab.methods import run
from judgelab.llm.models import get_backend
sys.path.insert(0, sys.argv[3]); from test_judges import OPTS
ds = D.load('topical_chat'); b = get_backend(cache=sys.argv[1], mode=sys.argv[2])
for m in sorted(OPTS):
    opts = dict(OPTS[m], **(dict(others=['coherence', 'naturalness']) if m == 'dimcheck' else {}))
    if m == 'decomposition': opts.update(variant='l1_agnostic', k_generic=2)   # the same question for every dimension
    run(m, ds, b, dims=['engagingness', 'coherence'], items=ds.items.item_id[:1].tolist(), progress=False, **opts)
print(b.stats)
"""

def test_a_rerun_in_another_process_is_answered_by_the_cache(tmp_path, outputs):
    """Every method's requests are the same in a new process (Python randomises set and str-hash order per process):
    a run with another PYTHONHASHSEED replays the first run's cache without a single miss. 'engagingness' has names that
    differ only in case ('Engaging', 'engaging'), which once made G-Eval's stop pattern differ between processes."""
    import os, subprocess, sys
    from pathlib import Path
    cache, here = tmp_path/'c.sqlite', str(Path(__file__).parent)
    def go(seed, mode):
        r = subprocess.run([sys.executable, '-c', _SAME_RUN, str(cache), mode, here], capture_output=True, text=True, timeout=900,
                           env={**os.environ, 'PYTHONHASHSEED': str(seed), 'JUDGELAB_OUTPUTS': str(outputs)})
        assert r.returncode == 0, r.stderr[-3000:]
        return r.stdout
    assert "'generated': 0" not in go(0, 'readwrite')
    for seed in (1, 2): assert "'misses': 0" in go(seed, 'replay')    # replay mode raises CacheMissError on any miss

def test_max_chars_restricts_the_sample_of_every_plan_entry_and_is_checked():
    """A run's max_chars (the main job's CPU check judges short items) reaches every entry, the items it judges and the
    coverage count; a bad value is one of the plan's problems, before any model runs."""
    from judgelab import data as D
    from judgelab.methods import method_plan, run
    from judgelab.methods.judges import item_chars, select_items
    from judgelab.llm import ScriptedBackend
    tc = D.load('topical_chat')
    plan = method_plan(['direct', {'method': 'geval', 'n_items': 3}], tc, dims=['coherence'], n_items=2, max_chars=800)
    assert [p['max_chars'] for p in plan] == [800, 800]
    b = ScriptedBackend(lambda r: 'Score: 2', model='s@1')
    j = run('direct', tc, b, dims=['coherence'], n_items=2, max_chars=800, progress=False)
    assert len(j) == 2 and (item_chars(tc.items.set_index('item_id').loc[j.item_id].reset_index()) <= 800).all()
    assert set(j.item_id) == set(select_items(tc, None, 2, 0, 800).item_id) != set(select_items(tc, None, 2, 0).item_id)
    with pytest.raises(ValueError, match='max_chars must be an int >= 0'): method_plan(['direct'], tc, max_chars='short')
    with pytest.raises(ValueError, match='no topical_chat item has texts of at most 3 characters'): method_plan(['direct'], tc, max_chars=3)
