"""Benchmark llama.cpp's kept states (`LlamaCppBackend(state_cache_mb=...)`) on the main job's score completions.

A judge method with `complete_score=True` sends its replies in one batch, then one more request for each reply that
wrote no score: the same messages, the reply so far and the score field, which the model continues. Those
continuations share all of their prompt with a reply generated earlier, but by then the model has evaluated the
other replies of the batch, so without a kept state it reads the whole prompt again. With the state cache on
(judgelab's default), llama-cpp-python keeps the model's state after each reply (an LRU in RAM) and the
continuation reloads the longest matching one, evaluating only its new tokens.

Measured side by side in one process, alternating which runs first, each from an empty generation cache: the
method's whole run (replies + completions) with `state_cache_mb=0` and with the default; printed: seconds, prompt
tokens evaluated on the token-by-token path (the completions), the ratio, and whether both gave the same scores.
No absolute time is asserted.

Run: `.venv/bin/python bench/bench_state_cache.py` (defaults: SummEval, Analyze-Rate as the main job runs it,
4 items x 2 dimensions); `--method direct`, `--items N`, `--dims a,b`, `--repeats R`.
"""
import argparse, tempfile, time
from pathlib import Path
import numpy as np
from judgelab.llm.models import get_backend
from judgelab.data import load
from judgelab.methods import run

def one(state_cache_mb, method, ds, dims, items, options):
    with tempfile.TemporaryDirectory() as d:
        b = get_backend('llamacpp', cache=Path(d)/'g.sqlite', state_cache_mb=state_cache_mb)
        t0 = time.perf_counter()
        j = run(method, ds, b, dims=dims, n_items=items, progress=False, **options)
        dt = time.perf_counter() - t0
        return dt, b.inner.prompt_tokens_evaluated, j

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--dataset', default='summeval'); ap.add_argument('--method', default='analyze_rate')
    ap.add_argument('--items', type=int, default=4); ap.add_argument('--dims', default='coherence,fluency')
    ap.add_argument('--repeats', type=int, default=1)
    a = ap.parse_args()
    ds = load(a.dataset); dims = a.dims.split(',')
    options = dict(max_tokens=96, complete_score=True)      # as configs/embedded.yaml runs Analyze-Rate and direct prediction
    res = {0: [], 1024: []}
    for r in range(a.repeats):
        for mb in ((0, 1024) if r % 2 == 0 else (1024, 0)):
            res[mb].append(one(mb, a.method, ds, dims, a.items, options))
    (t0, e0, j0), (t1, e1, j1) = res[0][0], res[1024][0]
    completed = int(j1.scoring.astype(str).str.startswith('completed').sum())
    same = np.allclose(j0.score.to_numpy(float), j1.score.to_numpy(float), equal_nan=True)
    print(f"{a.method} on {a.dataset}: {len(j1)} judgments, {completed} finished by a score completion")
    for mb in (0, 1024):
        ts = [x[0] for x in res[mb]]
        print(f"  state_cache_mb={mb:<5} {np.median(ts):7.1f} s (median of {len(ts)}), completion prompt tokens evaluated {res[mb][0][1]}")
    print(f"  time ratio off/on {np.median([x[0] for x in res[0]]) / np.median([x[0] for x in res[1024]]):.2f}x; "
          f"completion prompt tokens off/on {e0 / max(e1, 1):.1f}x; same scores: {same}")

if __name__ == '__main__': main()
