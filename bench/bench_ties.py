"""The fractional split (ties='fractional', the default) against the id rule (ties='id'), measured side by side in one
process on the same inputs; no absolute time is asserted.

- `speed`: the permutation test of one SummEval pair (coherence vs fluency, a judge = human mean + noise, 1600 items) and
  the human baseline with its cluster bootstrap, under both rules, alternating; prints each time and the ratio.
- `orders`: the fractional gap of every SummEval pair against the mean of the id-rule gap over random id orders
  (`--orders`, default 200), for a synthetic judge (human mean + noise) and a published one (Shen et al.'s RTS, GPT-4).
Run with `.venv/bin/python bench/bench_ties.py --only speed orders`.
"""
import argparse, time
import numpy as np
from judgelab.data import load
from judgelab.data.judgments import load_judgments, judgment_scores
from judgelab.stats.corrgap import corrgap, human_baseline, rater_slots

def speed(n_perm=9999, n_boot=1000, reps=3):
    ds = load('summeval'); hm = ds.human_mean(); rng = np.random.default_rng(0)
    p = hm.coherence.values + rng.normal(0, .5, len(hm)); t, o = hm.coherence.values, hm.fluency.values
    Rt, Ro = rater_slots(ds, 'coherence').values, rater_slots(ds, 'fluency').values; docs = ds.items.doc_id.values
    jobs = {f'permutation test, {m}, {n_perm} re-splits': (lambda ties, m=m: corrgap(p, t, o, method=m, n_perm=n_perm, ties=ties))
            for m in ('spearman', 'pearson')}
    jobs[f'human baseline, spearman, {n_boot} resamples'] = lambda ties: human_baseline(p, Rt, Ro, docs=docs, n_boot=n_boot, ties=ties)
    for name, f in jobs.items():
        tm = {'id': [], 'fractional': []}
        for r in range(reps):
            for ties in (('id', 'fractional') if r % 2 == 0 else ('fractional', 'id')):
                t0 = time.perf_counter(); f(ties); tm[ties].append(time.perf_counter() - t0)
        a, b = np.median(tm['id']), np.median(tm['fractional'])
        print(f'{name}: id {a:.3f}s, fractional {b:.3f}s, ratio fractional/id {b/a:.2f}', flush=True)

def orders(R=200):
    ds = load('summeval'); hm = ds.human_mean(); rng = np.random.default_rng(0); dims = list(hm.columns)
    judges = {'human mean + noise (sd 0.5)': {d: hm[d].values + rng.normal(0, .5, len(hm)) for d in dims}}
    s = judgment_scores(load_judgments('summeval', 'llm_summeval'))
    s = s[(s.judge == 'rts') & (s.model == 'gpt-4-0314')].pivot(index='item_id', columns='dimension', values='score').reindex(hm.index)
    judges['RTS, gpt-4-0314 (Shen et al.)'] = {d: s[d].values for d in dims}
    for jn, pred in judges.items():
        diffs, sds = [], []
        for t in dims:
            for o in dims:
                if o == t: continue
                ok = np.isfinite(pred[t]); n = int(ok.sum())
                args = (pred[t][ok], hm[t].values[ok], hm[o].values[ok])
                fr = corrgap(*args, test=None).gap
                g = np.array([corrgap(*args, ids=rng.permutation(n), test=None, ties='id').gap for _ in range(R)])
                diffs.append(fr - g.mean()); sds.append(g.std())
                print(f'  {t:12s} {o:12s} fractional {fr:+.5f}  mean of {R} id orders {g.mean():+.5f}  diff {fr - g.mean():+.5f}  sd over orders {g.std():.4f}', flush=True)
        d = np.array(diffs)
        print(f'{jn}: per-pair difference mean {d.mean():+.5f}, mean |.| {np.abs(d).mean():.5f}, max |.| {np.abs(d).max():.5f}; '
              f'sd of the id-rule gap over orders {np.mean(sds):.4f} (so a mean of {R} has a Monte Carlo se of {np.mean(sds)/np.sqrt(R):.4f})', flush=True)

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('--only', nargs='+', default=['speed', 'orders']); ap.add_argument('--orders', type=int, default=200)
    ap.add_argument('--n-perm', type=int, default=9999); ap.add_argument('--n-boot', type=int, default=1000)
    a = ap.parse_args()
    if 'speed' in a.only: speed(a.n_perm, a.n_boot)
    if 'orders' in a.only: orders(a.orders)
