"""Statistics benchmarks: judgelab's vectorised code against reference implementations of the former code kept here,
measured side by side in one process on the same inputs (paired, alternating order); no absolute time is asserted.

Issue 16's headline sections (`make bench` runs these two):
- `table`: the WHOLE correlation table of HANNA's published judges as the CorrGap audit template computes it
  (`stats.correlation_table`, 500 cluster-bootstrap resamples) vs the former code (a per-resample
  scipy.stats.kendalltau loop at sample and system level, a per-document loop at summary level, pandas per statistic).
- `audit`: the CorrGap audit of HANNA (`corrgap.corrgap_audit` with the template's parameters: 2999 permutations,
  the human baseline with 1000 cluster-bootstrap resamples) vs the former implementation (argpartition permutation
  masks, the per-item sort split of the human baseline, the former Spearman engine); all outputs must be identical.
Issue 23's section (`make bench` runs it too):
- `null`: the full audit of HANNA's 20 published judges (`audits.audit` with the audit template's parameters) without
  and with the reliability-matched null (`n_sim` 100 per pair: what the null costs), and one pair's null with the
  former per-resample fit (moment matching on 5000 simulated items, 2 steps, for every resample) vs today's (the
  resample's correlations plus the full fit's attenuation offset, one closed-form fit).
- `null_pair`: one HANNA pair's null for every published judge (`n_sim` 100), the inner loop without and with the refit
  of each simulated dataset that gives the null's spread the fit's error and its correlation with the excess.
- `null_batch`: the simulated datasets of one HANNA pair's null (every published judge, `n_sim` 100) and of a
  calibration cell (8 judges, 400 items, 30 datasets): each dataset's excess by `human_baseline` one dataset at a time
  (before) vs all datasets at once (`_sim_excess`, today), the same datasets; the excesses must agree within 1e-12.
Issues 22 and 23's section (the cold main job in 20 min):
- `speed`: HANNA's alt-test table (every published judge, per dimension and pooled) with the vectorised comparisons vs the
  per-instance loop (the same inputs, paired and alternating; p-values and rho must be equal); with `--old DIR` (a
  `git archive` of a former judgelab/, e.g. `git archive 8a866ac judgelab | tar -x -C DIR`) also the full HANNA audit
  (`audits.audit` with the audit template's parameters, times `--scale`) run by the former and today's code in
  subprocesses one after the other, every table compared (equal, or within 1e-12).
Other sections: `corrgap` (the permutation engine vs a per-permutation scipy loop, and the SummEval audit),
`baseline` (the human baseline vs a per-resample loop), `masks` (HANNA's raw audit, today's masks vs the former),
`kendall` (one judge x dimension's Kendall bootstrap vs the scipy loop).
Run with `.venv/bin/python bench/bench_stats.py --only table audit` (`--only` takes one or more sections; default: all).
"""
import argparse, os, time, math
import numpy as np, pandas as pd
from scipy.stats import spearmanr, rankdata as ss_rankdata
from judgelab.data import load
from judgelab.data.judgments import load_judgments, judgment_scores
from judgelab.stats.corrgap import (corrgap, corrgap_audit, split_groups, _strata_masks, _GapEngine, rater_slots, bootstrap_weights,
                              human_baseline)
import judgelab.stats.corrgap as CG, judgelab.stats as ST
from judgelab.stats import bootstrap_ci, corr, _boot_vals, _tidy_means, _wpearson, _boot_sample, _check_method, Corr, LEVELS, METHODS

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
    "The human baseline of excess CorrGap (nbs/stats/06_corrgap.ipynb) on the full SummEval audit (six AltTest judges): vectorised vs a per-resample loop."
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
    import judgelab.stats.corrgap as C
    if exact: return C._strata_masks(strata_members, sizes, n_perm, rng, K, exact)
    masks = np.zeros((n_perm, K), bool); rows = np.arange(n_perm)[:, None]
    for mem, s in zip(strata_members, sizes):
        if s == 0: continue
        pick = np.argpartition(rng.random((n_perm, len(mem))), s - 1, axis=1)[:, :s]
        masks[rows, mem[pick]] = True
    return masks

def main_masks(n_perm=2999):
    "The raw CorrGap audit of HANNA's 20 published judges (permutation tests only) with today's masks vs the former ones."
    import judgelab.stats.corrgap as C
    ds = load('hanna'); J = load_judgments('hanna', 'chhun2024')
    new_masks = C._strata_masks
    # ties='id': whole-item masks (the fractional default re-splits tie runs by weights, a path the former masks never had)
    t0 = time.perf_counter(); a = C.corrgap_audit(J, ds, n_perm=n_perm, seed=0, baseline=False, ties='id'); t_new = time.perf_counter() - t0
    C._strata_masks = argpartition_masks
    try:
        t0 = time.perf_counter(); b = C.corrgap_audit(J, ds, n_perm=n_perm, seed=0, baseline=False, ties='id'); t_old = time.perf_counter() - t0
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


# ---------------------------------------------------------------------------------------------------------------------
# (a) the whole correlation table: the former code, kept here as the reference

def former_correlation(pred, human, method='spearman', level='sample', doc=None, system=None):
    "judgelab's former `stats.correlation`: pandas, one `corr` per document at summary level."
    df = pd.DataFrame(dict(p=np.asarray(pred, dtype=float), h=np.asarray(human, dtype=float)))
    if level == 'sample': return Corr(corr(df.p, df.h, method), int((df.p.notna() & df.h.notna()).sum()))
    if level == 'summary':
        df['g'] = np.asarray(doc); df = df.dropna(subset=['p', 'h'])
        rs = [corr(g.p, g.h, method) for _, g in df.groupby('g', sort=False)]
        used = [r for r in rs if np.isfinite(r)]
        return Corr(float(np.mean(used)) if used else np.nan, len(df), len(used), len(rs))
    df['s'] = np.asarray(system); df = df.dropna(subset=['p', 'h'])
    m = df.groupby('s', sort=False)[['p', 'h']].mean()
    return Corr(corr(_tidy_means(m.p), _tidy_means(m.h), method), len(m))

def former_bootstrap_ci(pred, human, doc, system=None, method='spearman', level='sample', n_boot=1000, ci=0.95, seed=0):
    """judgelab's former `stats.bootstrap_ci`: the same seeded document counts, then one scipy.stats.kendalltau per
    resample (sample level: on the expanded rows; system level: on the system means), one `corr` per document at summary
    level, the counts drawn anew for every statistic. System means are rounded as judgelab now does (the former code did
    not, so float noise broke ties among equal means; that fix is not what is timed here)."""
    df = pd.DataFrame(dict(p=np.asarray(pred, float), h=np.asarray(human, float), d=np.asarray(doc),
                           s=np.asarray(system) if system is not None else 0)).dropna(subset=['p', 'h'])
    docs, dix = np.unique(df.d.values, return_inverse=True)
    if len(df) < 3 or len(docs) < 2: return (np.nan, np.nan, 0)
    C = np.random.default_rng(seed).multinomial(len(docs), np.full(len(docs), 1/len(docs)), size=n_boot).astype(float)
    p, h = df.p.values, df.h.values
    if level == 'summary':
        r = np.array([corr(p[dix == k], h[dix == k], method) for k in range(len(docs))])
        ok = np.isfinite(r)
        with np.errstate(invalid='ignore', divide='ignore'): vals = (C[:, ok] @ r[ok])/C[:, ok].sum(1)
    elif level == 'sample':
        W = C[:, dix]
        vals = (np.array([corr(np.repeat(p, w.astype(int)), np.repeat(h, w.astype(int)), 'kendall') for w in W])
                if method == 'kendall' else _boot_sample(p, h, W, method))
    else:
        sys_, six = np.unique(df.s.values, return_inverse=True)
        P = np.zeros((len(docs), len(sys_))); H = np.zeros_like(P); N = np.zeros_like(P)
        np.add.at(P, (dix, six), p); np.add.at(H, (dix, six), h); np.add.at(N, (dix, six), 1)
        with np.errstate(invalid='ignore', divide='ignore'):
            mp, mh = _tidy_means((C @ P)/(C @ N)), _tidy_means((C @ H)/(C @ N))
        if method == 'kendall': vals = np.array([corr(a, b, 'kendall') for a, b in zip(mp, mh)])
        else:
            okc = np.isfinite(mp).all(0) & np.isfinite(mh).all(0); mp, mh = mp[:, okc], mh[:, okc]
            if method == 'spearman': mp, mh = ss_rankdata(mp, axis=1), ss_rankdata(mh, axis=1)
            vals = _wpearson(mp, mh, np.ones_like(mp))
    vals = vals[np.isfinite(vals)]
    if len(vals) < 2: return (np.nan, np.nan, len(vals))
    a = (1 - ci)/2
    return (float(np.quantile(vals, a)), float(np.quantile(vals, 1 - a)), len(vals))

def former_correlation_table(judgments, dataset, methods=METHODS, levels=LEVELS, n_boot=1000, ci=0.95, seed=0):
    "judgelab's former `stats.correlation_table` (the same rows), on the former statistics above."
    s = judgment_scores(judgments)
    hm = dataset.human_mean().reset_index().melt(id_vars='item_id', var_name='dimension', value_name='human')
    it = dataset.items[['item_id', 'doc_id', 'system']]
    rows = []
    for (judge, model, dim), g in s.groupby(['judge', 'model', 'dimension'], sort=False):
        m = it.merge(hm[hm.dimension == dim], on='item_id').merge(g[['item_id', 'score']], on='item_id', how='inner')
        missing = int(m.score.isna().sum())
        for method in methods:
            for lvl in levels:
                c = former_correlation(m.score, m.human, method, lvl, doc=m.doc_id, system=m.system)
                lo, hi, nv = former_bootstrap_ci(m.score, m.human, m.doc_id, m.system, method, lvl, n_boot, ci, seed)
                rows.append(dict(judge=judge, model=model, dimension=dim, method=method, level=lvl, value=c.value,
                                 ci_lo=lo, ci_hi=hi, n=c.n, docs_used=c.docs_used, items_without_score=missing))
    return pd.DataFrame(rows)

def _load_hanna_audit_inputs():
    "HANNA's published judges as the CorrGap audit template reads them (every source, 'overall' excluded)."
    from judgelab.data.judgments import list_judgments
    ds = load('hanna')
    J = pd.concat([load_judgments('hanna', s) for s in list_judgments('hanna').index], ignore_index=True)
    dims = [d for d in ds.spec.dim_names if d != 'overall']
    return ds, J[J.dimension.isin(dims)], dims

def _paired(fns, repeats):
    "Run each (name -> callable) `repeats` times, alternating which goes first; {name: [seconds]}, the last results."
    times, res = {k: [] for k in fns}, {}
    names = list(fns)
    for r in range(repeats):
        for k in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter(); res[k] = fns[k](); times[k].append(time.perf_counter() - t0)
    return times, res

def _load(): return open('/proc/loadavg').read().split()[0] if os.path.exists('/proc/loadavg') else 'n/a'

def main_table(n_boot=500, repeats=1):
    "(a) HANNA's whole correlation table (every published judge, 3 methods x 3 levels, n_boot resamples): now vs the former code."
    ds, J, dims = _load_hanna_audit_inputs()
    load0 = _load()
    times, res = _paired(dict(former=lambda: former_correlation_table(J, ds, n_boot=n_boot, seed=0),
                              now=lambda: ST.correlation_table(J, ds, n_boot=n_boot, seed=0)), repeats)
    a, b = res['former'], res['now']
    keys = ['judge', 'model', 'dimension', 'method', 'level', 'n', 'docs_used', 'items_without_score']
    assert a[keys].equals(b[keys]), 'the tables differ in their rows'
    err = {c: float(np.nanmax(np.abs(a[c].values - b[c].values))) for c in ('value', 'ci_lo', 'ci_hi')}
    assert all(np.array_equal(np.isnan(a[c].values), np.isnan(b[c].values)) for c in err) and max(err.values()) < 1e-12, err
    ratios = [f/n for f, n in zip(times['former'], times['now'])]
    print(f"(a) HANNA correlation table: {J[['judge', 'model']].drop_duplicates().shape[0]} judges x {len(dims)} dimensions x 3 methods x "
          f"3 levels = {len(b)} rows, {n_boot} cluster-bootstrap resamples (load average {load0} -> {_load()}, {os.cpu_count()} cores)")
    print(f"  former code (scipy loops, per-document loops) : {np.median(times['former']):8.1f} s  (median of {repeats})")
    print(f"  judgelab correlation_table                    : {np.median(times['now']):8.1f} s  (max |diff| value {err['value']:.1e}, "
          f"CI {max(err['ci_lo'], err['ci_hi']):.1e})")
    print(f"  speed-up (paired, median)                     : {np.median(ratios):8.1f}x  (target >= 5x; pairs: {', '.join(f'{r:.1f}' for r in ratios)})")
    return dict(former=times['former'], now=times['now'], ratios=ratios)

# ---------------------------------------------------------------------------------------------------------------------
# (b) the CorrGap audit: the former split of the human baseline and the former Spearman engine, kept as the reference

def _former_key_dtype(mx): return np.uint16 if mx < 2**16 else (np.uint32 if mx < 2**32 else np.uint64)

def former_split_counts(W, gt_t, gt_o, ids=None, control=True, bins='exact'):
    "judgelab's former `corrgap.split_counts`: per resample, an integer sort of the items and put/take along it."
    W = np.asarray(W); B, n = W.shape
    byid = np.argsort(CG._id_order(np.arange(n) if ids is None else ids), kind='stable')
    W = W[:, byid]; gt_t = np.asarray(gt_t, float)[byid]; gt_o = np.asarray(gt_o, float)[byid]
    Wf = W.astype(np.float64)
    D2 = np.abs(2*CG._wranks(gt_t, Wf) - 2*CG._wranks(gt_o, Wf)).astype(np.int64); dmax = int(D2.max()) + 1
    N = W.sum(1, keepdims=True); k = N//2
    o = np.argsort((dmax - 1 - D2).astype(_former_key_dtype(dmax)), axis=1, kind='stable')
    Wo = np.take_along_axis(W, o, 1); before = np.cumsum(Wo, 1) - Wo
    KH = np.empty_like(W); KL = np.empty_like(W)
    np.put_along_axis(KH, o, np.clip(k - before, 0, Wo), 1)
    np.put_along_axis(KL, o, np.clip(k - (N - before - Wo), 0, Wo), 1)
    if control:
        s = np.unique(CG._bins(gt_t, bins), return_inverse=True)[1].ravel(); S = int(s.max()) + 1
        G = CG._onehot(s, S)
        m = np.minimum(KH @ G, KL @ G).astype(W.dtype)[:, s]
        sizes = np.bincount(s, minlength=S); starts = np.repeat(np.r_[0, np.cumsum(sizes)[:-1]], sizes)
        for K, Dk in ((KH, dmax - 1 - D2), (KL, D2)):
            o = np.argsort((s*dmax + Dk).astype(_former_key_dtype(S*dmax)), axis=1, kind='stable')
            Ko = np.take_along_axis(K, o, 1); c = np.cumsum(Ko, 1) - Ko
            np.put_along_axis(K, o, np.clip(np.take_along_axis(m, o, 1) - (c - c[:, starts]), 0, Ko), 1)
    inv = np.empty(n, int); inv[byid] = np.arange(n)
    return KL[:, inv], KH[:, inv]

class FormerSpearmanGaps:
    "judgelab's former `corrgap._SpearmanGaps`: per-(x-run, y-run) counts, runs found by reduceat in every call."
    def __init__(self, x, y, max_pairs=256):
        ux, xr = np.unique(x, return_inverse=True); uy, yr = np.unique(y, return_inverse=True)
        xr, yr = xr.ravel(), yr.ravel(); self.Tx, self.Ty = len(ux), len(uy)
        up, pr = np.unique(xr*self.Ty + yr, return_inverse=True); pr = pr.ravel()
        self.compress = len(up) <= max_pairs
        if self.compress:
            self.E = np.zeros((len(x), len(up)), np.float32); self.E[np.arange(len(x)), pr] = 1
            self.pxr, self.pyr = up//self.Ty, up % self.Ty; self.tot = np.bincount(pr).astype(float)
        else: self.pxr, self.pyr, self.tot = xr, yr, np.ones(len(x))
        self.ox = np.argsort(self.pxr, kind='stable'); self.sx_ = np.r_[0, np.nonzero(np.diff(self.pxr[self.ox]))[0] + 1]
        self.oy = np.argsort(self.pyr, kind='stable'); self.sy_ = np.r_[0, np.nonzero(np.diff(self.pyr[self.oy]))[0] + 1]
        self.px_run = np.unique(self.pxr, return_inverse=True)[1]; self.py_run = np.unique(self.pyr, return_inverse=True)[1]
    def _r(self, C):
        cx = np.add.reduceat(C[:, self.ox], self.sx_, axis=1); cy = np.add.reduceat(C[:, self.oy], self.sy_, axis=1)
        ax = np.cumsum(cx, 1) - (cx - 1)/2; ay = np.cumsum(cy, 1) - (cy - 1)/2
        n = cx.sum(1)
        sx = (cx*ax).sum(1); sy = (cy*ay).sum(1); sxx = (cx*ax*ax).sum(1); syy = (cy*ay*ay).sum(1)
        sxy = np.einsum('bp,bp,bp->b', C, ax[:, self.px_run], ay[:, self.py_run])
        return CG._r_from_sums(n, sx, sy, sxx, syy, sxy)
    def counts(self, K):
        return (K.astype(np.float32) @ self.E).astype(np.float64) if self.compress else K.astype(np.float64)
    def __call__(self, M):
        C = self.counts(M)
        return self._r(C) - self._r(self.tot - C)

FORMER = dict(split_counts=former_split_counts, _strata_masks=argpartition_masks, _SpearmanGaps=FormerSpearmanGaps)

def _with_former(f):
    "Call f with judgelab.stats.corrgap's split, masks and Spearman engine replaced by the former ones."
    now = {k: getattr(CG, k) for k in FORMER}
    for k, v in FORMER.items(): setattr(CG, k, v)
    try: return f()
    finally:
        for k, v in now.items(): setattr(CG, k, v)

def main_audit(targets=('coherence',), n_perm=2999, n_boot=1000, repeats=1):
    "(b) HANNA's CorrGap audit with the template's parameters, now vs the former implementation (identical outputs required)."
    ds, J, dims = _load_hanna_audit_inputs()
    targets = dims if targets in (None, ['all'], ('all',)) else list(targets)
    run = lambda: CG.corrgap_audit(J, ds, targets=targets, others=dims, n_perm=n_perm, test='permutation', n_boot=n_boot, seed=0)
    load0 = _load()
    times, res = _paired(dict(former=lambda: _with_former(run), now=run), repeats)
    a, b = res['former'], res['now']
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].long.equals(b[k].long), f'{k}: the audit tables differ'
        assert np.array_equal(a[k].boot, b[k].boot, equal_nan=True), f'{k}: the bootstrap excess values differ'
    n_pairs = sum(len(m.long) for m in b.values())
    ratios = [f/n for f, n in zip(times['former'], times['now'])]
    print(f"(b) HANNA CorrGap audit: {len(b)} judges, targets {', '.join(targets)} vs the other {len(dims) - 1} dimensions = {n_pairs} pairs; "
          f"{n_perm} permutations, human baseline with {n_boot} cluster-bootstrap resamples (load average {load0} -> {_load()})")
    print(f"  former masks, baseline split and Spearman engine : {np.median(times['former']):8.1f} s  (median of {repeats})")
    print(f"  judgelab corrgap_audit                           : {np.median(times['now']):8.1f} s  (every p-value, excess, CI and "
          f"bootstrap value identical)")
    print(f"  speed-up (paired, median)                        : {np.median(ratios):8.2f}x  (target >= 1.5x; pairs: {', '.join(f'{r:.2f}' for r in ratios)})")
    return dict(former=times['former'], now=times['now'], ratios=ratios)

def _former_null_sims(m, P, R_t, R_o, W, rng, K):
    "The former inner loop of `matched_null`: every resample's model fitted by moment matching (5000 items, 2 steps)."
    n = len(R_t); out = []
    for b in range(len(W)):
        idx = np.repeat(np.arange(n), W[b])
        mb = CG.fit_null({k: v[idx] for k, v in P.items()}, R_t[idx], R_o[idx], n_match=5000, steps=2, seed=int(rng.integers(2**31)))
        mb.masks = m.masks; X = mb.observed(mb.gaussian(n, rng))[0]
        out.append(human_baseline({k: X[:, 2*K + j] for j, k in enumerate(P)}, X[:, :K], X[:, K:2*K], n_boot=0).excess.to_numpy())
    return np.array(out)

def _drawn_sims(m, P, R_t, R_o, W, rng, K):
    "The simulated datasets of a null, drawn as `matched_null` draws them (the model fitted to each resample, the data's missing cells)."
    n, out = len(R_t), []
    for b in range(len(W)):
        idx = np.repeat(np.arange(n), W[b])
        mb = CG.fit_null({k: v[idx] for k, v in P.items()}, R_t[idx], R_o[idx], offset=m.offset, shared=m.shared)
        mb.masks = m.masks
        out.append(mb.observed(mb.gaussian(n, rng))[0])
    return np.stack(out)

def _excess_one_by_one(Xs, names, K):
    "(datasets, judges): each simulated dataset's excess by `human_baseline`, one dataset at a time."
    return np.array([human_baseline({k: X[:, 2*K + j] for j, k in enumerate(names)}, X[:, :K], X[:, K:2*K], n_boot=0).excess.to_numpy() for X in Xs])

def _today_null_sims(m, P, R_t, R_o, W, rng, K):
    "Today's inner loop of `matched_null`: the resample's correlations plus the full fit's offset, one closed-form fit."
    return _excess_one_by_one(_drawn_sims(m, P, R_t, R_o, W, rng, K), list(P), K)

def main_null(n_sim=100, repeats=1, target='relevance', other='engagement', pair_sims=30):
    "Issue 23: the full HANNA audit without and with the reliability-matched null; one pair's null, former vs today's fit."
    from judgelab.stats.audits import audit
    ds, J, dims = _load_hanna_audit_inputs()
    load0 = _load()
    kw = dict(n_perm=2999, n_boot_excess=1000, n_boot=500, n_perm_quality=499, seed=0)
    times, res = _paired(dict(without=lambda: audit(J, ds, n_sim=0, **kw), with_null=lambda: audit(J, ds, n_sim=n_sim, **kw)), repeats)
    a, b = res['without'], res['with_null']
    same = ['gap', 'excess', 'excess_lo', 'excess_hi', 'p_excess']
    assert np.allclose(a.pairs[same].to_numpy(float), b.pairs[same].to_numpy(float), equal_nan=True), 'the null changed the other columns'
    nj, npairs = len(b.mats), len(b.pairs)
    print(f"(null) HANNA full audit (audits.audit, the template's parameters): {nj} judges, {npairs} judge x pair rows "
          f"(load average {load0} -> {_load()}, {os.cpu_count()} cores)")
    print(f"  without the null (n_sim 0)                    : {np.median(times['without']):8.1f} s")
    print(f"  with the null (n_sim {n_sim})                     : {np.median(times['with_null']):8.1f} s  "
          f"(x{np.median(times['with_null'])/np.median(times['without']):.2f}; corrected excess on {int(b.pairs.excess_corrected.notna().sum())} rows)")
    # one pair, the former fit per resample vs today's
    from judgelab.data.judgments import as_judgments
    s = judgment_scores(as_judgments(J, ds)); hm = ds.human_mean()
    wide = {k: g.pivot(index='item_id', columns='dimension', values='score').reindex(hm.index) for k, g in s.groupby(['judge', 'model'])}
    P = {k: w[target].values for k, w in wide.items() if target in w}
    R_t, R_o = rater_slots(ds, target).values, rater_slots(ds, other).values; K = R_t.shape[1]
    docs = ds.items.set_index('item_id').doc_id.reindex(hm.index).values
    m = CG.fit_null(P, R_t, R_o); W = bootstrap_weights(docs, pair_sims, 2)
    t2, r2 = _paired(dict(former=lambda: _former_null_sims(m, P, R_t, R_o, W, np.random.default_rng(1), K),
                          today=lambda: _today_null_sims(m, P, R_t, R_o, W, np.random.default_rng(1), K)), max(repeats, 2))
    d = np.nanmean(r2['former'], 0) - np.nanmean(r2['today'], 0)
    print(f"  one pair ({target} x {other}, {len(P)} judges, {pair_sims} simulated datasets): former per-resample moment matching "
          f"{np.median(t2['former']):.2f} s, today's offset fit {np.median(t2['today']):.2f} s, speed-up "
          f"{np.median(t2['former'])/np.median(t2['today']):.2f}x (paired, median of {max(repeats, 2)}); mean simulated excess differs by "
          f"{np.abs(d).mean():.3f} on average over judges (both are estimates; corrgap_calibration checks today's)")
    return dict(without=times['without'], with_null=times['with_null'], former=t2['former'], today=t2['today'])

def _refit_null_sims(m, P, R_t, R_o, W, rng, K):
    "Today's inner loop of `matched_null` (issue 23, the last cells): the offset fit per resample, then each simulated dataset refitted (its parameters for the spread)."
    n = len(R_t); out = []; names = list(P)
    for b in range(len(W)):
        idx = np.repeat(np.arange(n), W[b])
        mb = CG.fit_null({k: v[idx] for k, v in P.items()}, R_t[idx], R_o[idx], offset=m.offset)
        mb.masks = m.masks; X = mb.observed(mb.gaussian(n, rng))[0]
        Ps = {k: X[:, 2*K + j] for j, k in enumerate(names)}
        e = human_baseline(Ps, X[:, :K], X[:, K:2*K], n_boot=0).excess.to_numpy()
        mr = CG.fit_null(Ps, X[:, :K], X[:, K:2*K], offset=m.offset)
        out.append((e, CG._null_params(mb, names), CG._null_params(mr, names)))
    return out

def main_null_pair(n_sim=100, repeats=3, target='relevance', other='engagement'):
    """Issue 23 (the last miscalibrated cells): one HANNA pair's null with every published judge, the inner loop without
    the refit of each simulated dataset (before) vs with it (today), paired and alternating, the same resamples and draws."""
    ds, J, dims = _load_hanna_audit_inputs()
    from judgelab.data.judgments import as_judgments
    s = judgment_scores(as_judgments(J, ds)); hm = ds.human_mean()
    wide = {k: g.pivot(index='item_id', columns='dimension', values='score').reindex(hm.index) for k, g in s.groupby(['judge', 'model'])}
    P = {k: w[target].values for k, w in wide.items() if target in w}
    P = {k: v for k, v in P.items() if np.isfinite(v).sum() >= 6 and np.nanstd(v) > 0}
    R_t, R_o = rater_slots(ds, target).values, rater_slots(ds, other).values; K = R_t.shape[1]
    docs = ds.items.set_index('item_id').doc_id.reindex(hm.index).values
    m = CG.fit_null(P, R_t, R_o); W = bootstrap_weights(docs, n_sim, 2)
    load0 = _load()
    t, r = _paired(dict(before=lambda: _today_null_sims(m, P, R_t, R_o, W, np.random.default_rng(1), K),
                        today=lambda: _refit_null_sims(m, P, R_t, R_o, W, np.random.default_rng(1), K)), repeats)
    e_today = np.array([x[0] for x in r['today']])
    assert np.allclose(r['before'], e_today, equal_nan=True), 'the refit changed the simulated excesses'
    t_full = []
    for _ in range(max(1, repeats - 1)):
        t0 = time.perf_counter(); CG.matched_null(P, R_t, R_o, docs=docs, n_sim=n_sim, seed=0); t_full.append(time.perf_counter() - t0)
    b, a = np.median(t['before']), np.median(t['today'])
    print(f"(null_pair) HANNA {target} x {other}: {len(P)} judges, {n_sim} simulated datasets (load average {load0} -> {_load()})")
    print(f"  inner loop without the refit (before): {b:8.2f} s")
    print(f"  inner loop with the refit (today)    : {a:8.2f} s  (x{a/b:.2f}, paired median of {repeats}; the same simulated excesses)")
    print(f"  matched_null as a whole (today)      : {np.median(t_full):8.2f} s")
    return dict(before=t['before'], today=t['today'], full=t_full)

def _null_batch_case(name, P, R_t, R_o, docs, n_sim, repeats, exchangeable=False):
    "One case of `null_batch`: per-dataset `human_baseline` vs `_sim_excess` on the same simulated datasets."
    K, names = R_t.shape[1], list(P)
    m = CG.fit_null(P, R_t, R_o, shared=exchangeable)
    Xs = _drawn_sims(m, P, R_t, R_o, bootstrap_weights(docs, n_sim, 2), np.random.default_rng(1), K)
    t, r = _paired(dict(before=lambda: _excess_one_by_one(Xs, names, K).T, today=lambda: CG._sim_excess(Xs, K, 'spearman', 'exact')), repeats)
    d = np.nanmax(np.abs(r['before'] - r['today']))
    assert np.array_equal(np.isnan(r['before']), np.isnan(r['today'])) and d <= 1e-12, f'{name}: the excesses differ by {d}'
    b, a = np.median(t['before']), np.median(t['today'])
    print(f"  {name}: {len(P)} judges, {len(R_t)} items, {n_sim} datasets: one at a time {b:7.2f} s, at once {a:7.2f} s "
          f"(x{b/a:.1f} faster, paired median of {repeats}; largest difference {d:.1e})")
    return dict(before=t['before'], today=t['today'])

def main_null_batch(n_sim=100, repeats=3, target='relevance', other='engagement'):
    "Issue 23 (speed): the excess of every simulated dataset of a null, one dataset at a time vs all at once."
    ds, J, dims = _load_hanna_audit_inputs()
    from judgelab.data.judgments import as_judgments
    s = judgment_scores(as_judgments(J, ds)); hm = ds.human_mean()
    wide = {k: g.pivot(index='item_id', columns='dimension', values='score').reindex(hm.index) for k, g in s.groupby(['judge', 'model'])}
    P = {k: w[target].values for k, w in wide.items() if target in w}
    P = {k: v for k, v in P.items() if np.isfinite(v).sum() >= 6 and np.nanstd(v) > 0}
    docs = ds.items.set_index('item_id').doc_id.reindex(hm.index).values
    print(f"(null_batch) the simulated datasets' excess, one dataset at a time vs all at once (load average {_load()})")
    out = {'hanna': _null_batch_case(f'HANNA {target} x {other}', P, rater_slots(ds, target).values, rater_slots(ds, other).values, docs, n_sim, repeats, True)}
    s_ = CG.sigma_for_alpha(0.2)
    sims = {(jn, w): CG.simulate_raters(400, 3, s_, 0.5, w=w, judge_sigma=jn*s_, seed=0) for jn in (0.1, 0.5, 1.0, 2.0) for w in (0.0, 0.4)}
    P2, f = {f'noise {jn:g}x, w {w:g}': v['pred'] for (jn, w), v in sims.items()}, sims[(0.1, 0.0)]
    out['calibration'] = _null_batch_case('a calibration cell (alpha 0.2)', P2, f['R_t'], f['R_o'], f['docs'], 30, repeats, True)
    return out

def main_speed(pairs=1, old=None, scale=1.0):
    "Issues 22/23: the alt-test table fast vs the loop; with `old`, the full HANNA audit by the former and today's code."
    ds, J, dims = _load_hanna_audit_inputs()
    from judgelab.data.judgments import as_judgments
    from judgelab.stats.audits import alt_test_table
    J = as_judgments(J, ds); inputs = []
    for (judge, model), Jj in J.groupby(['judge', 'model'], sort=False):
        use = [d for d in dims if d in set(Jj.dimension.unique())]
        for kw in [dict(dimensions=d) for d in use] + [dict(dimensions=use, pooled=True)]:
            inputs.append(ST.alt_test_inputs(ds, Jj, **kw))
    eps = ds.spec.alt_test_epsilon; loop = ST._score_fn('neg_rmse')      # a callable score: alt_test's per-instance loop
    run = lambda sc: [ST.alt_test(l, h, sc, eps) for l, h in inputs]
    load0 = _load()
    t, r = _paired(dict(loop=lambda: run(loop), fast=lambda: run('neg_rmse')), max(pairs, 3))
    assert all(a.p_values == b.p_values and a.rho == b.rho and a.rejected == b.rejected for a, b in zip(r['loop'], r['fast'])), 'alt-test results differ'
    b, a = np.median(t['loop']), np.median(t['fast'])
    print(f"(speed) HANNA alt-test: {len(inputs)} judge x dimension tests (load average {load0} -> {_load()})")
    print(f"  per-instance loop      : {b:8.2f} s")
    print(f"  vectorised comparisons : {a:8.2f} s  (x{b/a:.1f} faster, paired median of {max(pairs, 3)}; the same p-values and rho)")
    t0 = time.perf_counter(); alt_test_table(J, ds, dims=dims); print(f"  alt_test_table (today, inputs included): {time.perf_counter() - t0:8.2f} s")
    if not old: return dict(loop=t['loop'], fast=t['fast'])
    import subprocess, sys, tempfile, pickle, json
    from pathlib import Path
    script = (
        "import sys, time, warnings, pickle, pandas as pd\n"
        "from judgelab import data as D\nfrom judgelab.data import judgments as JM\nfrom judgelab.stats.audits import audit\n"
        "ds = D.load('hanna'); J = pd.concat([JM.load_judgments('hanna', s) for s in JM.list_judgments('hanna').index], ignore_index=True)\n"
        "dims = [d for d in ds.spec.dim_names if d != 'overall']; J = J[J.dimension.isin(dims)]; sc = float(sys.argv[2])\n"
        "n = lambda x: max(int(x*sc), 19)\n"
        "t = time.perf_counter(); c = time.process_time()\n"
        "with warnings.catch_warnings():\n"
        "    warnings.simplefilter('ignore')\n"
        "    A = audit(J, ds, targets=[d for d in dims if d in set(J.dimension)], exclude_dims=['overall'], bins='exact', n_perm=n(2999), n_boot_excess=n(1000),\n"
        "              n_boot=n(500), n_perm_quality=n(499), n_boot_quality=n(200), n_sim=n(100), seed=0)\n"
        "w, c = time.perf_counter() - t, time.process_time() - c\n"
        "pickle.dump(({k: getattr(A, k) for k in ('correlations', 'pairs', 'targets', 'judges', 'quality', 'quality_direction', 'alt_test', 'agreement', 'verdicts', 'over_judges', 'quality_excess')}, w, c), open(sys.argv[1], 'wb'))\n")
    tmp = Path(tempfile.mkdtemp()); (tmp/'a.py').write_text(script); here = str(Path(__file__).resolve().parents[1])
    res = {}
    for name, path in (('former', str(Path(old).resolve())), ('today', here)):
        env = {**os.environ, 'PYTHONPATH': path}
        subprocess.run([sys.executable, str(tmp/'a.py'), str(tmp/f'{name}.pkl'), str(scale)], env=env, check=True, cwd=here)
        res[name] = pickle.load(open(tmp/f'{name}.pkl', 'rb'))
    worst = _compare_tables(res['former'][0], res['today'][0])
    (wo, co), (wt, ct) = res['former'][1:], res['today'][1:]
    print(f"(speed) full HANNA audit (template parameters x {scale:g}), former {old} vs today, one after the other:")
    print(f"  former: {wo:8.1f} s wall, {co:8.1f} s CPU")
    print(f"  today : {wt:8.1f} s wall, {ct:8.1f} s CPU  (CPU x{co/ct:.2f}); every table equal (largest numeric difference {worst:.1e})")
    return dict(former=(wo, co), today=(wt, ct), worst=worst)

def _compare_tables(a:dict, b:dict)->float:
    "Every table of two audits: the same shape, columns and non-numeric values, numbers within 1e-12; the largest difference."
    worst = 0.0
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, pd.Series): x, y = x.to_frame(), y.to_frame()
        assert list(x.columns) == list(y.columns) and x.shape == y.shape, k
        for c in x.columns:
            u, v = x[c], y[c]
            if pd.api.types.is_numeric_dtype(u) and not pd.api.types.is_bool_dtype(u):
                u, v = u.to_numpy(float), v.to_numpy(float)
                assert np.array_equal(np.isnan(u), np.isnan(v)), (k, c)
                d = float(np.nanmax(np.abs(u - v))) if np.isfinite(u).any() else 0.0
                assert d <= 1e-12, (k, c, d); worst = max(worst, d)
            else: assert u.astype(str).tolist() == v.astype(str).tolist(), (k, c)
    return worst

SECTIONS = ('table', 'audit', 'null', 'null_pair', 'null_batch', 'speed', 'corrgap', 'baseline', 'masks', 'kendall')

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--n-perm', type=int, default=9999, help='permutations of the corrgap and baseline sections')
    ap.add_argument('--repeats', type=int, default=3, help='repeats of the corrgap and kendall sections (best of)')
    ap.add_argument('--pairs', type=int, default=1, help='paired, alternating runs of the table and audit sections (median)')
    ap.add_argument('--n-boot', type=int, default=1000, help='resamples of the baseline and kendall sections')
    ap.add_argument('--targets', nargs='+', default=['coherence'], help="audit section: HANNA targets ('all': the whole audit)")
    ap.add_argument('--old', default=None, help='speed section: a folder holding a former judgelab/ (git archive) for the full-audit comparison')
    ap.add_argument('--scale', type=float, default=1.0, help="speed section: the audit template's resample counts times this")
    ap.add_argument('--only', nargs='+', choices=SECTIONS, default=None, help='run these sections only')
    a = ap.parse_args()
    on = lambda s: a.only is None or s in a.only
    if on('table'): main_table(500, a.pairs)
    if on('audit'): main_audit(a.targets, 2999, 1000, a.pairs)
    if on('null'): main_null(100, a.pairs)
    if on('null_pair'): main_null_pair(100, max(a.pairs, 3))
    if on('null_batch'): main_null_batch(100, max(a.pairs, 3))
    if on('speed'): main_speed(a.pairs, a.old, a.scale)
    if on('corrgap'): main(a.n_perm, repeats=a.repeats)
    if on('baseline'): main_baseline(a.n_boot, a.n_perm)
    if on('masks'): main_masks()
    if on('kendall'): main_kendall(a.n_boot, repeats=a.repeats)
