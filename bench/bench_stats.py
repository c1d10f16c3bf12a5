"""Benchmark: judgelab's vectorised CorrGap permutation test vs a per-permutation scipy loop, and the full
SummEval audit; the human baseline's vectorised cluster bootstrap (excess CorrGap) vs a per-resample loop, and the
full SummEval audit with the baseline beside the raw one; judgelab's vectorised Kendall tau-b cluster bootstrap vs a
per-resample scipy loop on HANNA.
Run with `.venv/bin/python bench/bench_stats.py` (or `make bench`; `--only corrgap|baseline|masks|kendall` for one section).
Prints ratios measured side by side in one process on the same inputs; no absolute-time claims are asserted anywhere.
"""
import argparse, time, math
import numpy as np, pandas as pd
from scipy.stats import spearmanr
from judgelab.data import load
from judgelab.judgments import load_judgments, judgment_scores
from judgelab.corrgap import (corrgap, corrgap_audit, split_groups, _strata_masks, _GapEngine, rater_slots, bootstrap_weights,
                              human_baseline)
from judgelab.stats import bootstrap_ci, corr, _boot_vals, _tidy_means

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

    t0 = time.perf_counter()
    n_pairs = sum(len(m.long) for m in corrgap_audit(J, ds, n_perm=n_perm, seed=0, baseline=False).values())
    t_audit = time.perf_counter() - t0
    print(f'Full SummEval CorrGap audit: {J.model.nunique()} judges, {n_pairs} (target, non-target) pairs, '
          f'{n_perm} permutations each: {t_audit:.1f} s ({t_audit/n_pairs:.2f} s per pair)')
    return dict(naive=t_naive, fast=min(fast_times), corrgap=min(full), audit=t_audit, pairs=n_pairs)

def loop_excess(pred, R_t, R_o, ids, W):
    "The straightforward human baseline: per resample, expand the copies and call corrgap once per rater (human) and once more per rater (judge)."
    n, K = R_t.shape; out = []
    for w in W:
        ix = np.repeat(np.arange(n), w); cid = np.arange(len(ix))      # copies ordered by item, then copy (ids are positions here)
        h, j = [], []
        for a in range(K):
            rest = np.delete(np.arange(K), a); rt, ro = R_t[ix][:, rest].mean(1), R_o[ix][:, rest].mean(1)
            h.append(corrgap(R_t[ix, a], rt, ro, ids=cid, test=None).gap); j.append(corrgap(pred[ix], rt, ro, ids=cid, test=None).gap)
        out.append(np.mean(j) - np.mean(h))
    return np.array(out)

def main_baseline(n_boot=1000, n_perm=9999, loop_resamples=40, judge='gpt-4o', target='coherence', other='consistency'):
    "The human baseline of SPEC §2 on the full SummEval audit (six AltTest judges): vectorised vs a per-resample loop."
    ds = load('summeval'); J = load_judgments('summeval', 'alttest')
    hm = ds.human_mean(); docs = ds.items.set_index('item_id').doc_id.reindex(hm.index).values
    s = judgment_scores(J[J.model == judge]).pivot(index='item_id', columns='dimension', values='score')
    pred = s[target].reindex(hm.index).values
    R_t, R_o = rater_slots(ds, target).values, rater_slots(ds, other).values
    W = bootstrap_weights(docs, n_boot, seed=0)
    t0 = time.perf_counter(); ref = loop_excess(pred, R_t, R_o, np.arange(len(pred)), W[:loop_resamples]); t_loop = (time.perf_counter() - t0)/loop_resamples
    t0 = time.perf_counter(); hb = human_baseline(pred, R_t, R_o, docs=docs, W=W, keep_boot=True).iloc[0]; t_vec = time.perf_counter() - t0
    err = float(np.nanmax(np.abs(hb.boot[:loop_resamples] - ref)))
    assert err < 1e-9, f'vectorised and loop excess differ by {err}'
    print(f'SummEval {judge}: excess CorrGap {target} vs {other}, 3 rater slots, {n_boot} cluster-bootstrap resamples')
    print(f'  per-resample loop (expand + 6 corrgap calls) : {t_loop*n_boot:8.2f} s  (measured on {loop_resamples} resamples, x {n_boot})')
    print(f'  judgelab human_baseline (vectorised)         : {t_vec:8.2f} s  (max |diff| {err:.1e} on the looped resamples)')
    print(f'  speed-up                                     : {t_loop*n_boot/t_vec:8.1f}x')
    t0 = time.perf_counter(); raw = corrgap_audit(J, ds, n_perm=n_perm, seed=0, baseline=False); t_raw = time.perf_counter() - t0
    t0 = time.perf_counter(); base = corrgap_audit(J, ds, test=None, n_boot=n_boot, seed=0); t_base = time.perf_counter() - t0
    n_pairs = sum(len(m.long) for m in base.values())
    print(f'Full SummEval audit, {len(base)} judges x {n_pairs//len(base)} pairs: raw CorrGap with {n_perm} permutations {t_raw:6.1f} s; '
          f'human baseline + excess with {n_boot} resamples {t_base:6.1f} s (a per-resample loop: ~{t_loop*n_boot*n_pairs/60:.0f} min)')
    return dict(loop=t_loop*n_boot, vec=t_vec, raw=t_raw, baseline=t_base)

def argpartition_masks(strata_members, sizes, n_perm, rng, K, exact):
    "judgelab's former permutation masks (the reference): argpartition of random draws, then a scatter."
    import judgelab.corrgap as C
    if exact: return C._strata_masks(strata_members, sizes, n_perm, rng, K, exact)
    masks = np.zeros((n_perm, K), bool); rows = np.arange(n_perm)[:, None]
    for mem, s in zip(strata_members, sizes):
        if s == 0: continue
        pick = np.argpartition(rng.random((n_perm, len(mem))), s - 1, axis=1)[:, :s]
        masks[rows, mem[pick]] = True
    return masks

def main_masks(n_perm=2999):
    "The raw CorrGap audit of HANNA's 20 published judges (permutation tests only) with today's masks vs the former ones."
    import judgelab.corrgap as C
    ds = load('hanna'); J = load_judgments('hanna', 'chhun2024')
    new_masks = C._strata_masks
    t0 = time.perf_counter(); a = C.corrgap_audit(J, ds, n_perm=n_perm, seed=0, baseline=False); t_new = time.perf_counter() - t0
    C._strata_masks = argpartition_masks
    try:
        t0 = time.perf_counter(); b = C.corrgap_audit(J, ds, n_perm=n_perm, seed=0, baseline=False); t_old = time.perf_counter() - t0
    finally: C._strata_masks = new_masks
    pa = np.concatenate([m.long.p.values for m in a.values()]); pb = np.concatenate([m.long.p.values for m in b.values()])
    same = np.array_equal(pa, pb, equal_nan=True)
    print(f'HANNA raw CorrGap audit, {len(a)} judges, {len(pa)} pairs, {n_perm} permutations: former masks {t_old:6.1f} s, '
          f'today {t_new:6.1f} s ({t_old/t_new:.2f}x; p-values identical: {same})')
    return dict(old=t_old, new=t_new)

def loop_kendall_boot(pred, human, doc, system, level, n_boot=1000, seed=0):
    """judgelab's former Kendall bootstrap (the reference): the same seeded document counts, then one
    scipy.stats.kendalltau per resample in a Python loop, on the resample's expanded rows (sample level) or its
    system means (system level). The system means are rounded as judgelab now does (the former code did not,
    so float noise broke ties among equal means; that fix is not what is timed here)."""
    df = pd.DataFrame(dict(p=np.asarray(pred, float), h=np.asarray(human, float), d=np.asarray(doc),
                           s=np.asarray(system))).dropna(subset=['p', 'h'])
    docs, dix = np.unique(df.d.values, return_inverse=True)
    C = np.random.default_rng(seed).multinomial(len(docs), np.full(len(docs), 1/len(docs)), size=n_boot).astype(float)
    p, h = df.p.values, df.h.values
    if level == 'sample':
        return np.array([corr(np.repeat(p, w.astype(int)), np.repeat(h, w.astype(int)), 'kendall') for w in C[:, dix]])
    sys_, six = np.unique(df.s.values, return_inverse=True)
    P = np.zeros((len(docs), len(sys_))); H = np.zeros_like(P); N = np.zeros_like(P)
    np.add.at(P, (dix, six), p); np.add.at(H, (dix, six), h); np.add.at(N, (dix, six), 1)
    with np.errstate(invalid='ignore', divide='ignore'):
        mp, mh = _tidy_means((C @ P)/(C @ N)), _tidy_means((C @ H)/(C @ N))
    return np.array([corr(a, b, 'kendall') for a, b in zip(mp, mh)])

def main_kendall(n_boot=1000, judge='eval_prompt_1', model='ChatGPT', dim='coherence', repeats=3):
    "Kendall bootstrap CIs on HANNA's correlation table (one published judge, one dimension), vectorised vs loop."
    ds = load('hanna'); J = load_judgments('hanna', 'chhun2024')
    s = judgment_scores(J[(J.judge == judge) & (J.model == model) & (J.dimension == dim)])
    hm = ds.human_mean()[dim].rename('human').reset_index()      # the rows `correlation_table` correlates
    m = ds.items[['item_id', 'doc_id', 'system']].merge(hm, on='item_id').merge(s[['item_id', 'score']], on='item_id')
    print(f'HANNA {model} {judge}, {dim}: {len(m)} rows, {m.doc_id.nunique()} documents, {m.system.nunique()} systems, '
          f'{m.groupby(["score", "human"]).ngroups} distinct (judge, human) pairs; Kendall tau-b, {n_boot} resamples')
    out = {}
    for level in ('sample', 'system'):
        args = (m.score, m.human, m.doc_id, m.system)
        t0 = time.perf_counter(); ref = loop_kendall_boot(*args, level, n_boot); t_loop = time.perf_counter() - t0
        fast = []
        for _ in range(repeats):
            t0 = time.perf_counter(); lo, hi, nv = bootstrap_ci(*args, 'kendall', level, n_boot); fast.append(time.perf_counter() - t0)
        err = float(np.nanmax(np.abs(_boot_vals(*args, 'kendall', level, n_boot) - ref)))
        assert err < 1e-12, f'vectorised and loop resamples differ by {err}'
        r = ref[np.isfinite(ref)]; ci_ref = np.quantile(r, [.025, .975])
        assert np.allclose((lo, hi), ci_ref, atol=1e-12, rtol=0) and nv == len(r), ((lo, hi, nv), ci_ref)
        print(f'  {level:6s} per-resample scipy loop : {t_loop:8.3f} s')
        print(f'  {level:6s} judgelab bootstrap_ci   : {min(fast):8.3f} s  (best of {repeats}; max |diff| {err:.1e}, '
              f'CI [{lo:.4f}, {hi:.4f}] = loop CI)')
        print(f'  {level:6s} speed-up                : {t_loop/min(fast):8.1f}x')
        out[level] = dict(loop=t_loop, fast=min(fast))
    return out

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--n-perm', type=int, default=9999); ap.add_argument('--repeats', type=int, default=3)
    ap.add_argument('--n-boot', type=int, default=1000)
    ap.add_argument('--only', choices=['corrgap', 'baseline', 'masks', 'kendall'], default=None, help='run one section')
    a = ap.parse_args()
    if a.only in (None, 'corrgap'): main(a.n_perm, repeats=a.repeats)
    if a.only in (None, 'baseline'): main_baseline(a.n_boot, a.n_perm)
    if a.only in (None, 'masks'): main_masks()
    if a.only in (None, 'kendall'): main_kendall(a.n_boot, repeats=a.repeats)
