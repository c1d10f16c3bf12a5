"""CorrGap properties of the CorrGap procedure (P1-P6, H1-H4), the bootstrap split engine against brute force, and degenerate inputs; hypothesis for the invariances."""

import numpy as np, pandas as pd, pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from judgelab.stats.corrgap import (corrgap, split_groups, synthetic_dependence, corrgap_matrix, split_counts, human_baseline, simulate_raters, sigma_for_alpha, _GapEngine)
from judgelab.stats import correlation, corr
from judgelab.stats.corrgap import dependence_weight

@st.composite
def triples(draw):
    n = draw(st.integers(12, 60))
    t = np.array(draw(st.lists(st.integers(1, 5), min_size=n, max_size=n)), float)
    o = np.array(draw(st.lists(st.integers(1, 5), min_size=n, max_size=n)), float)
    p = np.array(draw(st.lists(st.integers(1, 5), min_size=n, max_size=n)), float) + t
    return p, t, o

def _same(a, b):
    return (np.isnan(a) and np.isnan(b)) or abs(a - b) < 1e-9

def test_p1_p2_synthetic_dependence_is_detected_and_unbiased():
    W = [0, .25, .5, .75, 1]
    G = np.array([[corrgap(*synthetic_dependence(None, w, s)[['pred', 'gt_t', 'gt_o']].values.T, test=None).gap for w in W] for s in range(10)])
    U = np.array([corrgap(*synthetic_dependence(None, 0, s)[['pred', 'gt_t', 'gt_o']].values.T, control=False, test=None).gap for s in range(10)])
    assert (np.diff(G, axis=1) > 0).all()
    assert abs(G[:, 0].mean()) <= 0.02
    assert U.mean() > G[:, 0].mean() + 0.015          # the uncontrolled gap is biased upwards at w = 0

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(triples())
def test_p3_judge_equal_to_target_gives_zero(x):
    p, t, o = x
    r = corrgap(t, t, o, test=None)
    assert np.isnan(r.gap) or r.gap == 0.0

@settings(max_examples=60, deadline=None)
@given(triples(), st.sampled_from(['spearman', 'kendall']))
def test_p4_rank_methods_invariant_to_monotone_transforms(x, method):
    p, t, o = x
    a = corrgap(p, t, o, method=method, test=None).gap
    b = corrgap(np.exp(p/3) + 7, t, o, method=method, test=None).gap
    assert _same(a, b)

@settings(max_examples=60, deadline=None)
@given(triples())
def test_p5_controlled_groups_have_identical_target_histograms(x):
    p, t, o = x
    g = split_groups(t, o, ties='id')
    assert len(g['H']) == len(g['L'])
    assert sorted(t[g['H']]) == sorted(t[g['L']])
    assert not set(g['H']) & set(g['L'])
    f = split_groups(t, o)                                           # fractional: the same histograms in weight
    v = t.astype(int)
    assert np.allclose(np.bincount(v, f['wH']), np.bincount(v, f['wL']), atol=1e-9)
    assert (f['wH'] >= 0).all() and (f['wL'] >= 0).all() and (f['wH'] + f['wL'] <= 1 + 1e-12).all()

@settings(max_examples=40, deadline=None)
@given(triples(), st.randoms(use_true_random=False), st.sampled_from(['spearman', 'pearson']))
def test_p6_invariant_to_row_order_with_ids(x, rnd, method):
    p, t, o = x
    ids = np.array([f'item{i:03d}' for i in range(len(p))])
    perm = np.arange(len(p)); rnd.shuffle(perm)
    a = corrgap(p, t, o, ids=ids, method=method, test='permutation', n_perm=199, seed=3)
    b = corrgap(p[perm], t[perm], o[perm], ids=ids[perm], method=method, test='permutation', n_perm=199, seed=3)
    assert _same(a.gap, b.gap) and sorted(a.low_ids) == sorted(b.low_ids)
    if a.exact: assert _same(a.p, b.p)

def test_permutation_pvalue_is_calibrated_under_the_null():
    # w = 0: p-values should not pile up near 0 (one-sided test, 20 seeds)
    ps = [corrgap(*synthetic_dependence(None, 0, s, n=300)[['pred', 'gt_t', 'gt_o']].values.T, n_perm=499, seed=s).p for s in range(20)]
    assert np.mean(np.array(ps) < 0.05) <= 0.2
    strong = synthetic_dependence(None, 0.75, 0, n=300)
    assert corrgap(strong.pred, strong.gt_t, strong.gt_o, n_perm=499).p < 0.01

@pytest.mark.parametrize('method', ['spearman', 'pearson', 'kendall'])
def test_degenerate_inputs_give_nan_never_raise(method):
    t = np.array([1, 2, 3, 4, 5, 1, 2, 3, 4, 5], float); o = t[::-1].copy()
    for p in [np.ones(10), np.full(10, np.nan), np.r_[np.ones(5), np.full(5, np.nan)]]:
        r = corrgap(p, t, o, method=method)
        assert np.isnan(r.gap) and np.isnan(r.p)
    assert np.isnan(corrgap([1, 2], [1, 2], [2, 1], method=method).gap)
    assert np.isnan(corr([], [], method)) and np.isnan(correlation([1, 1, 1], [1, 2, 3], method).value)
    r = corrgap(t, np.full(10, 3.0), o, method=method)   # constant target
    assert np.isnan(r.gap)

def test_matrix_on_published_judge_has_bh_pvalues():
    from judgelab.data import load
    from judgelab.data.judgments import load_judgments
    ds = load('opinsummeval')
    cm = corrgap_matrix(load_judgments('opinsummeval', 'chatgpt_cot'), ds, n_perm=199, n_boot=50)
    assert cm.G.shape == (4, 3 + 1) or cm.G.shape[0] == 4
    assert len(cm.long) == 12 and cm.long.p_bh.notna().all() and (cm.long.p_bh >= cm.long.p - 1e-12).all()
    assert np.isfinite(cm.judge_mean)
    with pytest.raises(ValueError, match='exactly one judge'):
        corrgap_matrix(load_judgments('hanna', 'chhun2024'), load('hanna'))

def test_matrix_takes_a_dataset_name_and_reports_the_human_baseline():
    from judgelab.data.judgments import load_judgments
    cm = corrgap_matrix(load_judgments('opinsummeval', 'chatgpt_cot'), 'opinsummeval', n_perm=99, n_boot=50)
    need = ['gap', 'r_low', 'r_high', 'n_low', 'p', 'p_bh', 'gap_human', 'gap_judge_loo', 'excess', 'excess_lo', 'excess_hi',
            'p_excess', 'p_excess_bh']
    assert not set(need) - set(cm.long.columns)
    assert (cm.long.k_raters == 2).all()                          # OpinSummEval: K = 2 is flagged in every row
    assert np.allclose(cm.long.excess, cm.long.gap_judge_loo - cm.long.gap_human)
    s = cm.summary()
    assert s['excess_lo'] <= s['excess'] <= s['excess_hi'] and s['pairs'] == 12

def test_old_bins_spelling_is_a_clear_error():
    t = np.array([1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 2, 4], float)
    with pytest.raises(ValueError, match="bins='round'"): corrgap(t, t, t[::-1], bins=None)
    with pytest.raises(ValueError, match='bins must be'): corrgap(t, t, t[::-1], bins='rounded')

@st.composite
def weighted(draw):
    n = draw(st.integers(8, 40))
    t = np.array(draw(st.lists(st.integers(3, 15), min_size=n, max_size=n)), float)/3
    o = np.array(draw(st.lists(st.integers(3, 15), min_size=n, max_size=n)), float)/3
    p = np.array(draw(st.lists(st.integers(1, 5), min_size=n, max_size=n)), float)
    W = np.array(draw(st.lists(st.lists(st.integers(0, 3), min_size=n, max_size=n), min_size=1, max_size=4)))
    return p, t, o, W

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(weighted(), st.sampled_from([(True, 'exact'), (True, 'round'), (False, 'exact')]), st.sampled_from(['spearman', 'pearson']))
def test_split_counts_equals_expanding_each_resample(x, ctl, method):
    p, t, o, W = x
    ids = np.arange(len(p))[::-1]*3                                  # ties in D broken by these ids
    KL, KH = split_counts(W, t, o, ids, *ctl, ties='id')
    got = _GapEngine(p, t, method).count_gaps(KL, KH)
    for w, g in zip(W, got):
        ix = np.repeat(np.arange(len(p)), w)
        ref = corrgap(p[ix], t[ix], o[ix], ids=ids[ix]*100 + np.arange(len(ix)), method=method, control=ctl[0], bins=ctl[1], test=None, ties='id')
        assert _same(g, ref.gap)
    KL, KH = split_counts(W, t, o, ids, *ctl)                        # fractional: copies are items tied with their original
    got = _GapEngine(p, t, method).count_gaps(KL, KH)
    for w, g, kl, kh in zip(W, got, KL, KH):
        ix = np.repeat(np.arange(len(p)), w)
        ref = corrgap(p[ix], t[ix], o[ix], method=method, control=ctl[0], bins=ctl[1], test=None)
        sg = split_groups(t[ix], o[ix], control=ctl[0], bins=ctl[1])
        assert np.allclose(np.bincount(ix, sg['wL'], len(p)), kl, atol=1e-9) and np.allclose(np.bincount(ix, sg['wH'], len(p)), kh, atol=1e-9)
        assert (np.isnan(g) and np.isnan(ref.gap)) or abs(g - ref.gap) < 1e-9
        assert KL[len(got) and 0].shape == (len(p),)

def _sim_excess(alpha, n_sims, n=400, n_boot=100, **kw):
    s = sigma_for_alpha(alpha)
    out = []
    for seed in range(n_sims):
        sim = simulate_raters(n, sigma=s, per_doc=4, seed=seed, **kw)
        raw = corrgap(sim['pred'], sim['R_t'].mean(1), sim['R_o'].mean(1), test=None).gap
        hb = human_baseline(sim['pred'], sim['R_t'], sim['R_o'], docs=sim['docs'], n_boot=n_boot, seed=seed).iloc[0]
        out.append(dict(raw=raw, excess=hb.excess, p=hb.p_excess, human=hb.gap_human))
    return pd.DataFrame(out)

def test_h1_a_held_out_rater_as_judge_has_no_excess():
    s = sigma_for_alpha(0.45); ex = []
    for seed in range(30):
        sim = simulate_raters(400, K=4, sigma=s, per_doc=4, seed=seed)
        R_t, R_o = sim['R_t'], sim['R_o']
        ex.append(human_baseline(R_t[:, 3], R_t[:, :3], R_o[:, :3], docs=sim['docs'], n_boot=0).excess.iloc[0])
    assert abs(np.mean(ex)) <= 0.03, np.mean(ex)

def test_h2_raw_corrgap_grows_with_rater_noise_while_the_excess_stays_calibrated():
    # a judge of fixed quality (noise of a rater at alpha 0.7), no dependence: raw CorrGap > 0, growing as the raters' alpha falls
    js = sigma_for_alpha(0.7)
    raw = [_sim_excess(a, 30, judge_sigma=js, n_boot=0).raw.mean() for a in (0.2, 0.45, 0.7)]
    assert raw[0] > raw[1] > raw[2] > 0, raw
    # a judge whose noise equals a rater's: the excess is ~0 and its test near the nominal level (30 simulations)
    for a in (0.2, 0.45, 0.7):
        r = _sim_excess(a, 30)
        assert abs(r.excess.mean()) <= 0.03, (a, r.excess.mean())
        assert (r.p < 0.05).mean() <= 0.15, (a, (r.p < 0.05).mean())

def test_h3_excess_grows_with_dependence():
    ex = [_sim_excess(0.45, 10, w=w, n_boot=0).excess.mean() for w in (0.0, 0.3, 0.6)]
    assert ex[0] < ex[1] < ex[2], ex
    assert ex[2] > 0.1

@pytest.mark.parametrize('name', ['summeval', 'topical_chat', 'hanna', 'opinsummeval'])
def test_h4_permutation_test_is_calibrated_on_real_human_means(name):
    from judgelab.data import load
    ds = load(name); dims = [d for d in ds.spec.dim_names if d != 'overall']
    c = ds.human_mean(dims).corr('spearman')
    ps = {b: [] for b in ('exact', 'round')}
    for k, t in enumerate(dims):
        o = c[t].drop(t).idxmax()                                    # the hardest pair: the most correlated non-target
        for seed in range(1000*k, 1000*k + 8):                       # independent noise draws across pairs
            sim = synthetic_dependence(ds, 0, seed, dims=(t, o))
            for b in ps: ps[b].append(corrgap(sim.pred, sim.gt_t, sim.gt_o, ids=sim.item_id, bins=b, n_perm=199, seed=seed).p)
    share = {b: float(np.mean(np.array(v) < 0.05)) for b, v in ps.items()}
    assert share['exact'] <= 0.10, share

def test_matrix_of_a_judge_whose_replies_all_failed_has_nan_rows():
    # found when the embedded model parsed 0 of 2 replies: corrgap_audit dropped the judge and corrgap_matrix raised StopIteration
    from judgelab.data.judgments import load_judgments
    j = load_judgments('opinsummeval', 'chatgpt_cot')
    j = j[j.item_id.isin(j.item_id.unique()[:2])].assign(parse_ok=False, score=np.nan)
    cm = corrgap_matrix(j, 'opinsummeval', n_perm=9, n_boot=5)
    assert len(cm.long) == 12 and cm.long.gap.isna().all() and cm.long.excess.isna().all()

def test_strata_masks_pick_exactly_half_of_each_stratum_per_row():
    from judgelab.stats.corrgap import _strata_masks
    rng = np.random.default_rng(0); strata = rng.integers(0, 5, 40)
    members = [np.nonzero(strata == v)[0] for v in np.unique(strata)]; sizes = [len(m)//2 for m in members]
    M = _strata_masks(members, sizes, 500, np.random.default_rng(1), 40, False)
    for mem, s in zip(members, sizes): assert (M[:, mem].sum(1) == s).all()
    assert not (M[:, mem] == M[0, mem]).all()                    # rows differ (random subsets)

def _split_by_expanding(W, t, o, ids, control, bins):
    "Reference for `split_counts`: expand each resample into copies and count each item's copies in split_groups' L and H."
    KL, KH = np.zeros_like(W), np.zeros_like(W)
    for b, w in enumerate(W):
        ix = np.repeat(np.arange(len(t)), w)
        lab = bins[ix] if isinstance(bins, np.ndarray) else bins
        g = split_groups(t[ix], o[ix], ids[ix]*10**6 + np.arange(len(ix)), control, lab, ties='id')
        KL[b] = np.bincount(ix[g['L']], minlength=len(t)); KH[b] = np.bincount(ix[g['H']], minlength=len(t))
    return KL, KH

@pytest.mark.parametrize('seed', range(6))
def test_split_counts_copies_equal_expanded_split_with_ties_across_categories(seed):
    # few distinct means (2-3 values each): many (gt_t, gt_o) categories share D, so the cut run spans several
    # categories, merged by id in both directions (H: ascending id, L: the last copies); per-item stratum labels
    # with shuffled ids (labels follow their items: before the per-category split they were applied in id order)
    rng = np.random.default_rng(seed); n = 40
    t = rng.integers(1, 3 + seed % 2, n).astype(float); o = rng.integers(1, 4, n).astype(float)
    ids = rng.permutation(n)*3 + 5; labels = rng.integers(0, 3, n)
    W = rng.integers(0, 4, (12, n)); W[0] = 1
    for control, bins in [(True, 'exact'), (False, 'exact'), (True, 'round'), (True, labels)]:
        got = split_counts(W, t, o, ids, control, bins, ties='id')
        ref = _split_by_expanding(W, t, o, ids, control, bins)
        assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1]), (control, bins)

@pytest.mark.parametrize('xkind', ['continuous', 'continuous_with_ties', 'discrete'])
def test_spearman_engine_rank_compression_equals_uncompressed_and_scipy(xkind):
    # continuous predictions are read in x order (no per-item runs); pairs are counted when few: both equal per-mask ranking
    from judgelab.stats.corrgap import _SpearmanGaps
    rng = np.random.default_rng(3); n = 120
    y = rng.integers(2, 11, n)/2
    x = {'continuous': rng.normal(size=n), 'continuous_with_ties': np.round(rng.normal(size=n), 1),
         'discrete': rng.integers(1, 6, n).astype(float)}[xkind]
    M = rng.random((60, n)) < 0.5; M[0] = False; M[0, :2] = True                # row 0: a 2-item group (NaN)
    W = rng.integers(0, 3, (30, n)).astype(float)
    per_item, per_pair = _SpearmanGaps(x, y, max_pairs=0), _SpearmanGaps(x, y, max_pairs=10**9)
    assert not per_item.compress and per_pair.compress
    a, b = per_item(M), per_pair(M)
    ref = np.array([corr(x[m], y[m]) - corr(x[~m], y[~m]) for m in M])
    np.testing.assert_allclose(a, ref, atol=1e-12, rtol=0); np.testing.assert_allclose(b, ref, atol=1e-12, rtol=0)
    assert np.isnan(a[0]) and np.isnan(b[0])
    wa, wb = per_item._r(per_item.counts(W)), per_pair._r(per_pair.counts(W))
    wref = [corr(np.repeat(x, w.astype(int)), np.repeat(y, w.astype(int))) for w in W]  # copies are tied items
    np.testing.assert_allclose(wa, wref, atol=1e-12, rtol=0); np.testing.assert_allclose(wb, wref, atol=1e-12, rtol=0)

# ---- ties='fractional' (the default): invariance, weights, weighted correlations ----

def _summeval_pair(n=None, seed=0):
    from judgelab.data import load
    hm = load('summeval').human_mean(); rng = np.random.default_rng(seed)
    hm = hm if n is None else hm.iloc[:n]
    return hm.coherence.values + rng.normal(0, .5, len(hm)), hm.coherence.values, hm.fluency.values, hm.index.values

@pytest.mark.parametrize('method', ['spearman', 'pearson', 'kendall'])
def test_fractional_gap_is_invariant_to_row_order_and_ids(method):
    p, t, o, ids = _summeval_pair(600 if method == 'kendall' else None)
    rng = np.random.default_rng(1); perm = rng.permutation(len(p))
    a = corrgap(p, t, o, ids=ids, method=method, test=None)
    b = corrgap(p[perm], t[perm], o[perm], ids=ids[perm], method=method, test=None)
    c = corrgap(p, t, o, ids=rng.permutation(len(p))*7 + 3, method=method, test=None)     # renamed ids
    assert abs(a.gap - b.gap) <= 1e-12 and abs(a.gap - c.gap) <= 1e-12, (a.gap, b.gap, c.gap)
    assert abs(a.n_low - b.n_low) <= 1e-9
    d = corrgap(p, t, o, ids=rng.permutation(len(p)), method=method, test=None, ties='id')   # the id rule moves with the ids
    e = corrgap(p, t, o, ids=rng.permutation(len(p)), method=method, test=None, ties='id')
    assert d.gap != e.gap

def test_fractional_human_baseline_is_invariant_and_equals_corrgap():
    from judgelab.data import load
    ds = load('summeval'); from judgelab.stats.corrgap import rater_slots
    Rt, Ro = rater_slots(ds, 'coherence').values, rater_slots(ds, 'fluency').values
    p = ds.human_mean().coherence.values + np.random.default_rng(0).normal(0, .5, len(Rt)); docs = ds.items.doc_id.values
    ids = ds.items.item_id.values; perm = np.random.default_rng(2).permutation(len(p))
    a = human_baseline(p, Rt, Ro, ids=ids, docs=docs, n_boot=20, seed=0, keep_boot=True).iloc[0]
    b = human_baseline(p[perm], Rt[perm], Ro[perm], ids=ids[perm], docs=docs[perm], n_boot=0).iloc[0]
    assert np.allclose(a.h, b.h, atol=1e-12, rtol=0) and np.allclose(a.j, b.j, atol=1e-12, rtol=0)
    for k in range(3):                                               # row 0 of the bootstrap is corrgap itself
        rest = [x for x in range(3) if x != k]
        assert abs(a.j[k] - corrgap(p, Rt[:, rest].mean(1), Ro[:, rest].mean(1), test=None).gap) < 1e-12
        assert abs(a.h[k] - corrgap(Rt[:, k], Rt[:, rest].mean(1), Ro[:, rest].mean(1), test=None).gap) < 1e-12
    assert np.isfinite(a.boot).all()

def test_fractional_weights_are_the_share_of_random_tie_orders_at_the_cut():
    # without control the weights are exactly the share of the tie orders that put an item in each group
    import itertools
    rng = np.random.default_rng(0)
    while True:                                                      # 9 items (odd: the middle is dropped), a run straddling the cut
        t, o = rng.integers(1, 4, (2, 9)).astype(float)
        g = split_groups(t, o, control=False)
        Dr = np.round(g['D']*len(t)*2).astype(int); k = len(t)//2
        run = np.flatnonzero(Dr == np.sort(Dr)[::-1][k - 1])
        if 0 < g['wH'][run[0]] < 1 and len(run) <= 6: break
    mean = np.zeros((2, len(t))); orders = list(itertools.permutations(run))
    for perm in orders:
        ids = np.arange(len(t)); ids[run] = perm
        gi = split_groups(t, o, ids, control=False, ties='id'); mean += np.array([gi['wH'], gi['wL']])/len(orders)
    assert np.allclose(mean, [g['wH'], g['wL']], atol=1e-12)

def _wmid(x, w): return np.array([w[x < v].sum() + w[x == v].sum()/2 for v in x])

def _wpear(x, y, w):
    mx, my = (w*x).sum()/w.sum(), (w*y).sum()/w.sum()
    return (w*(x - mx)*(y - my)).sum()/np.sqrt((w*(x - mx)**2).sum()*(w*(y - my)**2).sum())

def _wtau(x, y, w):
    S = Tx = Ty = N = 0.0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            ww = w[i]*w[j]; N += ww; sx, sy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
            S += ww*sx*sy; Tx += ww*(sx == 0); Ty += ww*(sy == 0)
    return S/np.sqrt((N - Tx)*(N - Ty))

def test_weighted_correlations_match_their_definitions():
    rng = np.random.default_rng(4); n = 30
    x = rng.integers(1, 5, n).astype(float); y = rng.integers(1, 4, n)/2; w = rng.integers(0, 6, (5, n))/5
    for m, ref in [('pearson', lambda w: _wpear(x, y, w)), ('spearman', lambda w: _wpear(_wmid(x, w), _wmid(y, w), w)),
                   ('kendall', lambda w: _wtau(x, y, w))]:
        got = _GapEngine(x, y, m)._corr_counts(w)
        assert np.allclose(got, [ref(r) for r in w], atol=1e-12, rtol=0), m
        xc = x + rng.normal(0, .01, n)                                    # continuous x: the per-item Spearman path
        if m == 'spearman':
            assert np.allclose(_GapEngine(xc, y, m)._corr_counts(w), [_wpear(_wmid(xc, r), _wmid(y, r), r) for r in w], atol=1e-12, rtol=0)
    assert np.isnan(_GapEngine(x, y, 'pearson')._corr_counts(np.r_[np.full(2, 1.4), np.zeros(n - 2)][None])[0])   # weight < 3

def test_fractional_permutation_test_keeps_weights_and_is_calibrated():
    from judgelab.stats.corrgap import _fill_weights
    rng = np.random.default_rng(0); w = rng.integers(1, 6, 20)/5; members = [np.arange(8), np.arange(8, 20)]
    q = [w[m].sum()/2 for m in members]
    for KL in _fill_weights([(0, 8), (8, 20)], q, w, 50, rng, 20, chunk=20):
        assert (KL >= -1e-12).all() and (KL <= w + 1e-12).all()
        for m, qq in zip(members, q): assert np.allclose(KL[:, m].sum(1), qq)
    w2 = np.r_[np.full(10, .4), np.ones(6)]; m2 = [np.arange(10), np.arange(10, 16)]   # one weight per stratum: the partition path
    for KL in _fill_weights([(0, 10), (10, 16)], [1.8, 3.0], w2, 40, rng, 16):
        assert np.allclose(KL[:, :10].sum(1), 1.8) and np.allclose(KL[:, 10:].sum(1), 3) and set(np.unique(KL[:, 10:])) <= {0, 1}
        assert ((KL[:, :10] > 1e-12) & (KL[:, :10] < .4 - 1e-12)).sum(1).tolist() == [1]*40   # one item split per row
    ps = [corrgap(*synthetic_dependence(None, 0, s, n=300)[['pred', 'gt_t', 'gt_o']].values.T, n_perm=299, seed=s).p for s in range(20)]
    assert np.mean(np.array(ps) < 0.05) <= 0.2
    strong = synthetic_dependence(None, 0.75, 0, n=300)
    r = corrgap(strong.pred, strong.gt_t, strong.gt_o, n_perm=299)
    assert r.p < 0.01 and not r.exact

def test_ties_option_is_checked_everywhere():
    t = np.array([1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 2, 4], float)
    for f in (lambda: corrgap(t, t, t[::-1], ties='random'), lambda: split_groups(t, t[::-1], ties='first'),
              lambda: split_counts(np.ones((1, 12), int), t, t[::-1], ties='x'),
              lambda: human_baseline(t, np.c_[t, t, t], np.c_[t, t, t], ties='x')):
        with pytest.raises(ValueError, match="ties must be"): f()

def _null_cell(alpha, ratio, n_data, n_items=400, n_sim=30, w=0.0, halo=0.0, bias=0.0):
    from judgelab.stats.corrgap import matched_null, simulate_raters, sigma_for_alpha
    s = sigma_for_alpha(alpha); out = []
    for d in range(n_data):
        sim = simulate_raters(n_items, sigma=s, judge_sigma=ratio*s, w=w, halo=halo, bias=bias, seed=500 + d)
        out.append(matched_null({'j': sim['pred']}, sim['R_t'], sim['R_o'], n_sim=n_sim, seed=d).iloc[0])
    return pd.DataFrame(out)

def test_matched_null_removes_the_reliability_bias_of_the_excess():
    """At rater alpha 0.2 a judge with a tenth of a rater's noise and no dependence has a clearly positive plain excess;
    the null fitted to it expects that excess, so the corrected excess is near 0 and its test rejects rarely (CI-sized:
    30 datasets of 400 items; the main job's corrgap_noise run has the full table)."""
    r = _null_cell(0.2, 0.1, 30)
    assert r.excess.mean() > 0.05 and r.excess_null.mean() > 0.05 and (r.reliability_ratio > 1.5).all()
    assert abs((r.excess - r.excess_null).mean()) < 0.025, r[['excess', 'excess_null']].mean()
    assert (r.p_corrected < 0.05).mean() <= 0.15, r.p_corrected.values
    dep = _null_cell(0.45, 1.0, 8, w=0.5)                          # real dependence stays visible after the correction
    assert (dep.excess_corrected > 0).all() and (dep.p_corrected < 0.05).mean() >= 0.75, dep[['excess_corrected', 'p_corrected']]

def test_matched_null_is_invariant_to_row_order_and_ids():
    "The null's draws belong to items in a canonical order: shuffled rows and renamed ids give the identical numbers."
    from judgelab.stats.corrgap import matched_null, simulate_raters, sigma_for_alpha
    sim = simulate_raters(300, sigma=sigma_for_alpha(0.45), judge_sigma=0.5, per_doc=5, seed=2)
    P = {'a': sim['pred'], 'b': np.clip(sim['pred'] + (np.arange(300) % 3 == 0), 1, 5)}
    ids = np.array([f'item{i:04d}' for i in range(300)])
    r0 = matched_null(P, sim['R_t'], sim['R_o'], ids=ids, docs=sim['docs'], n_sim=8, seed=4)
    o = np.random.default_rng(0).permutation(300)
    r1 = matched_null({k: v[o] for k, v in P.items()}, sim['R_t'][o], sim['R_o'][o], ids=np.array([f'x{i}' for i in o[::-1]]),
                      docs=sim['docs'][o], n_sim=8, seed=4)
    cols = ['reliability_ratio', 'excess', 'excess_null', 'excess_corrected', 'p_corrected']
    assert np.allclose(r0[cols].to_numpy(float), r1[cols].to_numpy(float), rtol=0, atol=1e-12), (r0[cols], r1[cols])

def test_matched_null_p_is_the_predictive_t_of_its_simulations():
    from judgelab.stats.corrgap import matched_null, simulate_raters, sigma_for_alpha
    from scipy import stats
    sim = simulate_raters(300, sigma=sigma_for_alpha(0.45), seed=5)
    r = matched_null({'j': sim['pred']}, sim['R_t'], sim['R_o'], n_sim=12, seed=1, keep_sims=True).iloc[0]
    s = np.asarray(r.sims); s = s[np.isfinite(s)]; n = len(s)
    # the sd is the wider of the simulations' own and the refit bootstrap's (never narrower), with its degrees of freedom
    assert n == r.n_sim and abs(r.excess_null - s.mean()) < 1e-12 and r.excess_null_sd >= s.std(ddof=1) - 1e-12
    assert r.null_dof in (n - 1, n - 6)
    assert abs(r.p_corrected - stats.t.sf((r.excess - s.mean())/(r.excess_null_sd*np.sqrt(1 + 1/n)), r.null_dof)) < 1e-12
    assert r.p_corrected_mc == (1 + np.sum(s >= r.excess - 1e-12))/(n + 1)

def test_matched_null_says_when_raters_do_not_agree():
    from judgelab.stats.corrgap import matched_null
    rng = np.random.default_rng(0); R = rng.integers(1, 6, (200, 3)).astype(float); O = rng.integers(1, 6, (200, 3)).astype(float)
    r = matched_null({'j': R.mean(1) + rng.normal(0, 1, 200)}, R, O, n_sim=5).iloc[0]
    assert r.n_sim == 0 and r.null_note.startswith('not identified: mean correlation between rater slots')
    r = matched_null({'j': np.full(200, np.nan), 'k': np.ones(200)}, R, O, n_sim=5)
    assert (r.n_sim == 0).all()

def test_point_estimates_of_judges_with_different_items_equal_one_judge_at_a_time():
    """The batched point estimates (each judge's scored items a 0/1 weight row of one split per rater slot, all judges'
    correlations at once) equal the per-judge path (forced here by a callable `bins`, which the batch does not take)."""
    from judgelab.stats.corrgap import human_baseline, simulate_raters
    sim = simulate_raters(300, sigma=0.8, judge_sigma=0.5, seed=3); rng = np.random.default_rng(1); P = {}
    for j in range(5):
        v = (sim['pred'] + rng.integers(-1, 2, 300)*(j % 2)).astype(float); v[rng.choice(300, 10*j, replace=False)] = np.nan; P[f'j{j}'] = v
    R_t, R_o = sim['R_t'].copy(), sim['R_o']; R_t[rng.choice(300, 20), 1] = np.nan
    for method in ['spearman', 'pearson', 'kendall']:
        for ties in ['fractional', 'id']:
            a = human_baseline(P, R_t, R_o, n_boot=0, method=method, ties=ties)
            for i, (k, v) in enumerate(P.items()):
                b = human_baseline({k: v}, R_t, R_o, n_boot=0, method=method, ties=ties, bins=lambda g: np.round(g, 9)).iloc[0]
                assert np.allclose(a.h[i], b.h, atol=1e-12, rtol=0) and np.allclose(a.j[i], b.j, atol=1e-12, rtol=0), (method, ties, k)
                assert np.isfinite(b.j).all()

# --- dependence_weight: the errors-in-variables estimate of the judge's weight w on the non-target ---
def _dw_sims(N, n, **kw):
    "dependence_weight's rows for N seeded simulate_raters datasets."
    out = []
    for i in range(N):
        d = simulate_raters(n, seed=500 + i, **kw)
        out.append(dependence_weight(d['pred'], d['R_t'], d['R_o'], n_boot=100, seed=i).iloc[0])
    return pd.DataFrame(out)

@pytest.mark.parametrize('alpha', [0.2, 0.45, 0.7])
@pytest.mark.parametrize('hb', [0.0, 0.3])
def test_dependence_weight_false_positives(alpha, hb):
    "At w = 0 a share <= 0.08 of datasets rejects w = 0, with a tenth of a rater's noise in the judge (the hardest judge noise for the reliability bias) and with twice it, also with halo and bias."
    s = sigma_for_alpha(alpha)
    for f in (0.1, 2.0):
        r = _dw_sims(40, 600, sigma=s, judge_sigma=f*s, w=0.0, halo=hb, bias=hb)
        assert (r.n_boot >= 90).all() and (r.w_note == '').all()
        assert (r.p_w < 0.05).mean() <= 0.08 + 0.05, (alpha, hb, f, (r.p_w < 0.05).mean())   # 40 datasets: +0.05 for sampling
        assert abs(r.w.median()) < 0.1        # a ratio estimator: heavy tails where the raters barely agree, so the median

@pytest.mark.parametrize('w', [0.2, 0.4])
def test_dependence_weight_recovers_w(w):
    "At alpha 0.45 and a rater's noise in the judge the mean estimate is within 0.03 of w (its standard error over 40 datasets is about 0.01), and w = 0.4 is detected."
    r = _dw_sims(40, 800, sigma=sigma_for_alpha(0.45), w=w)
    assert abs(r.w.mean() - w) < 0.03, r.w.mean()
    assert ((r.w_lo <= w) & (w <= r.w_hi)).mean() >= 0.8
    if w == 0.4: assert (r.p_w < 0.05).mean() >= 0.9

def test_dependence_weight_not_identified():
    d = simulate_raters(600, sigma=50.0, seed=2)
    r = dependence_weight({'a': d['pred'], 'b': d['pred']}, d['R_t'], d['R_o'], n_boot=20)
    assert len(r) == 2 and r.w.isna().all() and r.w_note.str.startswith('not identified').all()

def test_dependence_weight_exact_linear():
    "No cutting, a huge n, unequal loadings, halo and offsets: w and rho to 1e-2; NaN judge scores are dropped pairwise."
    rng = np.random.default_rng(1); n = 200_000; rho = 0.4
    z = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], n)
    e = rng.normal(0, 1, (n, 2)); f = 0.5*e + np.sqrt(1 - 0.25)*rng.normal(0, 1, (n, 2))
    Rt, Ro = z[:, [0]] + e + [0, 2], z[:, [1]] + f
    J = 0.6*z[:, 0] + 0.4*z[:, 1] + rng.normal(0, 0.5, n); J[rng.random(n) < 0.2] = np.nan
    r = dependence_weight(J, Rt, Ro, n_boot=0).iloc[0]
    assert abs(r.w - 0.4) < 1e-2 and abs(r.latent_rho - rho) < 1e-2 and abs(r.beta_o/r.beta_t - 0.4/0.6) < 0.03

def test_dependence_weight_rho_near_one():
    d = simulate_raters(800, sigma=sigma_for_alpha(0.7), rho=0.99, seed=4)
    r = dependence_weight(d['pred'], d['R_t'], d['R_o'], n_boot=50).iloc[0]
    assert 'ill-conditioned' in r.w_note

def test_dependence_weight_several_judges():
    "Judges are estimated independently: a dict of judges gives the same rows as each judge alone."
    d = simulate_raters(600, sigma=sigma_for_alpha(0.45), w=0.3, seed=5)
    other = np.where(np.arange(600) % 7 == 0, np.nan, d['R_o'][:, 0])
    both = dependence_weight({'a': d['pred'], 'b': other}, d['R_t'], d['R_o'], n_boot=50, seed=3)
    for k, x in (('a', d['pred']), ('b', other)):
        one = dependence_weight({k: x}, d['R_t'], d['R_o'], n_boot=50, seed=3)
        pd.testing.assert_frame_equal(both[both.judge == k].reset_index(drop=True), one)
    assert both.w[1] > both.w[0] > 0.1

def test_audit_numbers_do_not_change_when_rows_are_shuffled_and_items_renamed():
    """Every number of `corrgap_audit` (raw CorrGap and its permutation p, the excess and its bootstrap CI, the null, the
    weight) and of the quality groups is the same on a copy of the dataset whose items are renamed and whose rows (items,
    human ratings, judgments) are shuffled: the random draws follow a canonical item order, not the rows or the ids."""
    from judgelab.data import load, Dataset
    from judgelab.data.judgments import load_judgments, list_judgments
    from judgelab.stats.corrgap import corrgap_audit
    from judgelab.stats.audits import quality_table
    ds = load('topical_chat'); src = list_judgments('topical_chat').index[0]
    J = load_judgments('topical_chat', src)
    dims = ['coherence', 'engagingness', 'groundedness']; J = J[J.dimension.isin(dims)]
    rng = np.random.default_rng(7)
    new = dict(zip(ds.items.item_id, [f'renamed_{i:05d}' for i in rng.permutation(len(ds.items))]))
    items2 = ds.items.assign(item_id=ds.items.item_id.map(new)).sample(frac=1, random_state=1).reset_index(drop=True)
    human2 = ds.human.assign(item_id=ds.human.item_id.map(new)).sample(frac=1, random_state=2).reset_index(drop=True)
    ds2 = Dataset(ds.spec, items2, human2, ds.extra, ds.hashes)
    J2 = J.assign(item_id=J.item_id.map(new)).sample(frac=1, random_state=3).reset_index(drop=True)
    kw = dict(targets=['coherence', 'engagingness'], others=dims, n_perm=99, n_boot=60, null=True, n_sim=6, seed=0)
    a, b = corrgap_audit(J, ds, **kw), corrgap_audit(J2, ds2, **kw)
    num = lambda L: L.select_dtypes('number').to_numpy(float)
    for k in a:
        assert np.allclose(num(a[k].long), num(b[k].long), rtol=0, atol=1e-12, equal_nan=True), (a[k].long, b[k].long)
        assert (a[k].long.loadings == 'shared').all()          # Topical-Chat's slots are filled by different annotators: one shared loading
    qa = quality_table(J, ds, a, n_perm=49, n_boot=40).drop(columns='boot'); qb = quality_table(J2, ds2, b, n_perm=49, n_boot=40).drop(columns='boot')
    assert np.allclose(num(qa), num(qb), rtol=0, atol=1e-12, equal_nan=True)

def test_a_judges_matched_null_does_not_depend_on_the_other_judges():
    """The null is fitted to each judge: its row is the same whether the judge is audited alone or beside others (the
    audit's old joint fit drew every judge from one random stream, so adding judges moved the others' numbers).
    Judge 'c' has missing scores, so some resamples hold fewer than 3 of them; 'd' breaks ties among equal ratings."""
    from judgelab.stats.corrgap import matched_null, simulate_raters, sigma_for_alpha
    sim = simulate_raters(240, sigma=sigma_for_alpha(0.45), judge_sigma=0.5, per_doc=4, seed=7)
    rng = np.random.default_rng(3)
    c = sim['pred'].astype(float).copy(); c[rng.random(240) < 0.95] = np.nan
    P = {'a': sim['pred'], 'b': np.clip(sim['pred'] + rng.integers(-1, 2, 240), 1, 5), 'c': c, 'd': rng.integers(1, 6, 240).astype(float)}
    cols = ['reliability_ratio', 'excess', 'excess_null', 'excess_null_sd', 'excess_corrected', 'p_corrected', 'n_sim']
    joint = matched_null(P, sim['R_t'], sim['R_o'], docs=sim['docs'], n_sim=10, seed=2).set_index('judge')
    for k, v in P.items():
        alone = matched_null({k: v}, sim['R_t'], sim['R_o'], docs=sim['docs'], n_sim=10, seed=2).set_index('judge')
        assert np.allclose(joint.loc[[k], cols].to_numpy(float), alone[cols].to_numpy(float), rtol=0, atol=1e-12, equal_nan=True), (k, joint.loc[k, cols], alone.iloc[0][cols])
    pair = matched_null({'d': P['d'], 'a': P['a']}, sim['R_t'], sim['R_o'], docs=sim['docs'], n_sim=10, seed=2).set_index('judge')
    assert np.allclose(pair.loc[['a', 'd'], cols].to_numpy(float), joint.loc[['a', 'd'], cols].to_numpy(float), rtol=0, atol=1e-12, equal_nan=True)

def test_low_ids_do_not_depend_on_the_rows_order_when_a_weight_sums_to_zero():
    "A weight that sums to 0 left 3e-16 in some row orders, and the item counted as a member of L: found by the property test above."
    import random
    p = np.array([2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,4,4,4,2,2,2,2,2,2,2,3,3,3,3,3,4,4,4,4,4,2,2,4,2,2,2,3,3,3,3,4,3,4,2,2,4,2,4,2.])
    t = np.array([1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,3,3,3,1,1,1,1,1,1,1,2,2,2,2,2,3,3,3,3,3,1,1,3,1,1,1,2,2,2,2,3,2,3,1,1,3,1,3,1.])
    o = np.array([1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,3,3,1,2,2,2,2,2,2,1,1,1,1,1,1,1,1,3,3,2,2,2,2,2,2,1,1,1,1,2,1,2,2,1,3,2,3,2.])
    ids = np.array([f'item{i:03d}' for i in range(len(p))])
    a = corrgap(p, t, o, ids=ids, test=None)
    for s in range(20):
        perm = np.arange(len(p)); random.Random(s).shuffle(perm)
        b = corrgap(p[perm], t[perm], o[perm], ids=ids[perm], test=None)
        assert sorted(a.low_ids) == sorted(b.low_ids) and sorted(a.high_ids) == sorted(b.high_ids), s
