"""Benchmark: judgelab's vectorised CorrGap permutation test vs a per-permutation scipy loop, and the full
SummEval audit. Run with `.venv/bin/python bench/bench_stats.py` (or `make bench`). Prints ratios measured
side by side in one process on the same inputs; no absolute-time claims are asserted anywhere.
"""
import argparse, time, math
import numpy as np
from scipy.stats import spearmanr
from judgelab.data import load, load_judgments, judgment_scores
from judgelab.corrgap import corrgap, corrgap_matrix, split_groups, _strata_masks, _GapEngine

def naive_permutation(pred, gt_t, masks):
    "The straightforward way: one scipy.stats.spearmanr per group per permutation, in a Python loop."
    out = np.empty(len(masks))
    for b, L in enumerate(masks):
        out[b] = spearmanr(pred[L], gt_t[L]).statistic - spearmanr(pred[~L], gt_t[~L]).statistic
    return out

def main(n_perm=9999, judge='gpt-4o', target='coherence', other='consistency', repeats=3):
    ds = load('summeval'); J = load_judgments('summeval', 'alttest')
    s = judgment_scores(J[J.model == judge]).pivot(index='item_id', columns='dimension', values='score')
    hm = ds.human_mean(); pred = s[target].reindex(hm.index).values; t, o = hm[target].values, hm[other].values
    ids = hm.index.values

    # the permutation masks corrgap draws (same seed), so both ways evaluate the same re-splits
    g = split_groups(t, o, ids); kept = np.r_[g['L'], g['H']]; strata = g['bins'][kept]
    members = [np.nonzero(strata == v)[0] for v in np.unique(strata)]
    masks = _strata_masks(members, [len(m)//2 for m in members], n_perm, np.random.default_rng(0), len(kept), False)
    pk, tk = pred[kept], t[kept]

    t0 = time.perf_counter(); ref = naive_permutation(pk, tk, masks); t_naive = time.perf_counter() - t0
    fast_times = []
    for _ in range(repeats):
        t0 = time.perf_counter(); fast = _GapEngine(pk, tk, 'spearman').gaps(masks); fast_times.append(time.perf_counter() - t0)
    err = float(np.nanmax(np.abs(fast - ref)))
    assert err < 1e-9, f'vectorised and loop gaps differ by {err}'
    full = []
    for _ in range(repeats):
        t0 = time.perf_counter(); r = corrgap(pred, t, o, ids=ids, n_perm=n_perm, seed=0); full.append(time.perf_counter() - t0)
    gap_obs = r.gap
    p_loop = (1 + np.sum(ref >= gap_obs - 1e-12))/(n_perm + 1)
    assert math.isclose(p_loop, r.p), (p_loop, r.p)
    print(f'SummEval {judge}: target {target} vs {other}, {len(kept)} kept items, {n_perm} permutations')
    print(f'  per-permutation scipy loop : {t_naive:8.3f} s')
    print(f'  judgelab vectorised engine : {min(fast_times):8.3f} s  (best of {repeats}; same masks, max |diff| {err:.1e})')
    print(f'  judgelab corrgap() total   : {min(full):8.3f} s  (split, control, mask drawing and test; p = {r.p:.6f} = loop p)')
    print(f'  speed-up engine vs loop    : {t_naive/min(fast_times):8.1f}x')
    print(f'  speed-up corrgap() vs loop : {t_naive/min(full):8.1f}x')

    t0 = time.perf_counter(); n_pairs = 0
    for model in J.model.unique():
        m = corrgap_matrix(J[J.model == model], ds, n_perm=n_perm, seed=0); n_pairs += len(m.long)
    t_audit = time.perf_counter() - t0
    print(f'Full SummEval CorrGap audit: {J.model.nunique()} judges, {n_pairs} (target, non-target) pairs, '
          f'{n_perm} permutations each: {t_audit:.1f} s ({t_audit/n_pairs:.2f} s per pair)')
    return dict(naive=t_naive, fast=min(fast_times), corrgap=min(full), audit=t_audit, pairs=n_pairs)

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--n-perm', type=int, default=9999); ap.add_argument('--repeats', type=int, default=3)
    a = ap.parse_args()
    main(a.n_perm, repeats=a.repeats)
