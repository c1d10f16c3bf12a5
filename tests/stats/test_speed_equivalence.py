"""The statistics' fast paths against straightforward reference paths kept here: the same numbers, bit for bit.

The alt-test scores every instance of every annotator against the other annotators; judgelab does that for all instances
at once (`stats._alt_wins`). The reference below is the per-instance loop written out; both must give the same W_f and
W_h, hence the same p-values, advantage probabilities and verdicts. `_SpearmanGaps` casts its pair matrix once; its
counts must equal the product with a freshly cast matrix."""

import math
import numpy as np, pandas as pd
import pytest
from scipy import stats as ss
from judgelab import stats as ST
from judgelab.stats import corrgap as CG

def ref_alt_test(llm, humans, scoring, epsilon, min_humans_per_instance=2, min_instances_per_human=30):
    "The alt-test's per-annotator p-values and rho, one instance at a time (the definition, no vectorisation)."
    S = {'accuracy': lambda x, R: float(np.mean([x == a for a in R])),
         'neg_rmse': lambda x, R: -math.sqrt(float(np.mean([(x - a)**2 for a in R])))}[scoring]
    kept = {i for h in humans.values() for i in h if i in llm and sum(i in g for g in humans.values()) >= min_humans_per_instance}
    pv, rho = {}, {}
    for j, hj in humans.items():
        inst = [i for i in hj if i in kept]
        if len(inst) < min_instances_per_human: continue
        wf, wh = [], []
        for i in inst:
            R = [h[i] for k, h in humans.items() if k != j and i in h]
            sf, sh = S(llm[i], R), S(hj[i], R); wf.append(sf >= sh); wh.append(sh >= sf)
        d = np.array(wh, float) - np.array(wf, float)
        pv[j] = (np.nan if len(d) < 2 else (0.0 if d.mean() < epsilon else (1.0 if d.mean() > epsilon else np.nan)) if np.std(d) == 0
                 else float(ss.ttest_1samp(d, epsilon, alternative='less').pvalue))
        rho[j] = float(np.mean(wf))
    return pv, rho

def _case(seed, k=4, n=120, ints=False):
    "k annotators with missing labels, an LLM label per instance, ties between the LLM and the annotators."
    rng = np.random.default_rng(seed)
    draw = (lambda: int(rng.integers(1, 6))) if ints else (lambda: float(np.round(rng.normal(3, 1), 1)))
    humans = {f'a{a}': {i: draw() for i in range(n) if rng.random() < 0.75} for a in range(k)}
    llm = {i: draw() for i in range(n - 3)}
    for i in range(0, n, 7):                                   # the LLM agrees exactly with some annotator
        for h in humans.values():
            if i in h and i in llm: llm[i] = h[i]; break
    return llm, humans

@pytest.mark.parametrize('scoring', ['neg_rmse', 'accuracy'])
@pytest.mark.parametrize('seed,k,ints', [(0, 3, False), (1, 4, True), (2, 7, False), (3, 2, True)])
def test_alt_test_fast_equals_reference(scoring, seed, k, ints):
    llm, humans = _case(seed, k, ints=ints)
    assert ST._alt_wins(llm, humans, set(llm), scoring) is not None      # the fast path is the one taken
    r = ST.alt_test(llm, humans, scoring, 0.1, min_instances_per_human=20)
    pv, rho = ref_alt_test(llm, humans, scoring, 0.1, min_instances_per_human=20)
    assert r.tested == list(pv) and r.p_values.keys() == pv.keys()
    for j in pv:                                               # bit for bit (NaN where the reference has NaN)
        assert (r.p_values[j] == pv[j]) or (np.isnan(r.p_values[j]) and np.isnan(pv[j])), (j, r.p_values[j], pv[j])
        assert r.rho[j] == rho[j]

def test_alt_test_falls_back_to_the_loop():
    "Labels that are not numbers, 9+ annotators, a callable score: the loop (same results as the reference where it applies)."
    llm = {i: 'ab'[i % 2] for i in range(40)}; humans = {h: {i: 'ab'[(i + o) % 2] for i in range(40)} for o, h in enumerate('xyz')}
    assert ST._alt_wins(llm, humans, set(llm), 'accuracy') is None
    r = ST.alt_test(llm, humans, 'accuracy', 0.2, min_instances_per_human=10)
    pv, rho = ref_alt_test(llm, humans, 'accuracy', 0.2, min_instances_per_human=10)
    assert r.rho == rho
    llm9, h9 = _case(5, 9)
    assert ST._alt_wins(llm9, h9, set(llm9), 'neg_rmse') is None
    r9 = ST.alt_test(llm9, h9, 'neg_rmse', 0.1, min_instances_per_human=20)
    assert r9.p_values == pytest.approx(ref_alt_test(llm9, h9, 'neg_rmse', 0.1, min_instances_per_human=20)[0], nan_ok=True)

def test_alt_test_hanna_judge_equals_reference():
    "A published HANNA judge, every dimension and pooled, as `alt_test_table` builds the inputs."
    from judgelab.data import load
    from judgelab.data.judgments import load_judgments, list_judgments
    ds = load('hanna'); J = load_judgments('hanna', list_judgments('hanna').index[0])
    jm = J[['judge', 'model']].drop_duplicates().iloc[0]; Jj = J[(J.judge == jm.judge) & (J.model == jm.model)]
    dims = [d for d in ds.spec.dim_names if d != 'overall' and d in set(Jj.dimension)]
    for kw in [dict(dimensions=d) for d in dims[:2]] + [dict(dimensions=dims, pooled=True)]:
        llm, humans = ST.alt_test_inputs(ds, Jj, **kw)
        r = ST.alt_test(llm, humans, 'neg_rmse', ds.spec.alt_test_epsilon)
        pv, rho = ref_alt_test(llm, humans, 'neg_rmse', ds.spec.alt_test_epsilon)
        assert r.p_values == pv and r.rho == rho

def test_alt_test_inputs_reads_what_the_rows_say():
    "The list-based reading of the columns gives the rows' values (one judge, one dimension)."
    from judgelab.data import load
    ds = load('hanna'); d = ds.spec.dim_names[0]; it = ds.items.item_id.iloc[:50].tolist()
    J = pd.DataFrame(dict(item_id=it, dimension=d, score=np.linspace(1, 5, 50)))
    llm, humans = ST.alt_test_inputs(ds, J, dimensions=d)
    assert llm == dict(zip(it, np.linspace(1, 5, 50).tolist()))
    h = ds.human[ds.human.dimension == d]
    assert sum(len(v) for v in humans.values()) == h[['item_id']].assign(a=h.annotator).drop_duplicates().shape[0]

def test_spearman_counts_equal_fresh_cast():
    rng = np.random.default_rng(0); x = rng.integers(1, 6, 300).astype(float); y = np.round(rng.normal(3, 1, 300)*3)/3
    sp = CG._SpearmanGaps(x, y); assert sp.compress
    Kf = rng.random((50, 300)); Kb = rng.random((50, 300)) < 0.5
    assert np.array_equal(sp.counts(Kf), Kf @ sp.E.astype(np.float64))
    assert np.array_equal(sp.counts(Kb), (Kb.astype(np.float32) @ sp.E).astype(np.float64))

def ref_fill_weights(strata_members, quotas, w, n_perm, rng, K, chunk=1000):
    "The permutation re-splits of weighted items with one partition per order statistic (the former code)."
    for s in range(0, n_perm, chunk):
        B = min(chunk, n_perm - s); KL = np.zeros((B, K))
        for mem, q in zip(strata_members, quotas):
            ws = w[mem]
            if np.ptp(ws) <= 1e-12:
                s_ = min(int(np.floor(q/ws[0] + 1e-9)), len(mem)); rest = q - s_*ws[0]; r = rng.random((B, len(mem)))
                sub = (r <= np.partition(r, s_ - 1, axis=1)[:, s_ - 1:s_])*ws[0] if s_ else np.zeros((B, len(mem)))
                if rest > 1e-9 and s_ < len(mem): sub += (r == np.partition(r, s_, axis=1)[:, s_:s_ + 1])*rest
            else:
                o = rng.permuted(np.broadcast_to(np.arange(len(mem)), (B, len(mem))), axis=1)
                wo = ws[o]; before = np.cumsum(wo, 1) - wo
                sub = np.empty((B, len(mem))); np.put_along_axis(sub, o, np.clip(q - before, 0, wo), 1)
            KL[:, mem] = sub
        yield KL

def test_fill_weights_equal_reference():
    "Whole, fractional and mixed strata, quotas on and between whole items, a stratum of one: the same draws, the same weights."
    rng0 = np.random.default_rng(3); K = 300
    members = np.array_split(rng0.permutation(K), 25)
    w = np.ones(K); w[members[3]] = 0.5; w[members[5]] = rng0.random(len(members[5]))
    quotas = [w[m].sum()/2 + (0.25 if i % 3 else 0) for i, m in enumerate(members)]
    quotas[0] = 0.0; quotas[1] = w[members[1]].sum()               # an empty and a full L
    order, ends = np.concatenate(members), np.cumsum([len(m) for m in members])    # today: each stratum's items in a block of columns
    a = np.concatenate(list(CG._fill_weights(list(zip(np.r_[0, ends[:-1]], ends)), quotas, w[order], 1500, np.random.default_rng(0), K, chunk=700)))
    b = np.concatenate(list(ref_fill_weights(members, quotas, w, 1500, np.random.default_rng(0), K, chunk=700)))
    assert np.array_equal(a, b[:, order])
