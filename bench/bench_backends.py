"""Benchmark the embedded backend (SmolLM2-135M-Instruct, llama.cpp, CPU), in one process on the same
requests: prefix-grouped ("batched") vs one request at a time from scratch, and a warm rerun from the
generation cache vs the cold run. Prints requests/s, generated tokens/s and the ratios.

Judge workloads share long prefixes: every dimension of an item repeats the same source text, and every
sample repeats the whole prompt. llama.cpp keeps the KV cache of the previous request and only evaluates
the part of the next prompt that differs, so running requests that share a prefix back to back is the
batching that pays on 2 CPU cores (llama-cpp-python has no multi-sequence batch API).

Run: `.venv/bin/python bench/bench_backends.py [--items 6] [--max-tokens 24]` (or `make bench`).
"""
import argparse, tempfile, time, random
from pathlib import Path
from judgelab.backends import LlamaCppBackend, Request
from judgelab.cache import GenerationCache, CachedBackend
from judgelab.data import load
from judgelab.prompts import render_item

def requests_for(n_items, max_tokens, seed=0):
    ds = load('summeval'); items = ds.items.sample(n_items, random_state=seed)
    reqs = [Request(render_item('direct_rating', ds, it, d), max_tokens=max_tokens, temperature=0.0)
            for _, it in items.iterrows() for d in ds.spec.dim_names]
    random.Random(seed).shuffle(reqs)        # as a sweep would produce them: interleaved, not grouped
    return reqs

def run(backend, reqs):
    t0 = time.perf_counter(); out = backend.generate(reqs, progress=False); dt = time.perf_counter() - t0
    toks = sum(c.completion_tokens for c in out)
    return dt, toks, out

def main(items=6, max_tokens=24, threads=None):
    reqs = requests_for(items, max_tokens)
    one = LlamaCppBackend(reorder=False, n_threads=threads); grouped = LlamaCppBackend(reorder=True, n_threads=threads)
    one.llm(); grouped.llm()                           # load both before timing
    print(f'{len(reqs)} requests ({items} SummEval items x 4 dimensions, shuffled), max_tokens={max_tokens}, '
          f'threads={grouped.n_threads}, model {grouped.identity()}')
    t1, k1, o1 = run(one, reqs)
    t2, k2, o2 = run(grouped, reqs)
    same = sum(a.text == b.text for a, b in zip(o1, o2))
    print(f'  one at a time (no KV reuse) : {t1:7.2f} s  {len(reqs)/t1:6.2f} req/s  {k1/t1:6.1f} gen tok/s')
    print(f'  prefix-grouped (KV reuse)   : {t2:7.2f} s  {len(reqs)/t2:6.2f} req/s  {k2/t2:6.1f} gen tok/s')
    print(f'  speed-up grouped vs one-at-a-time: {t1/t2:.2f}x  (identical greedy outputs: {same}/{len(reqs)})')
    with tempfile.TemporaryDirectory() as d:
        cb = CachedBackend(grouped, GenerationCache(Path(d)/'c.sqlite'), verbose=False)
        tc, _, _ = run(cb, reqs); tw, _, ow = run(cb, reqs)
        assert all(c.cached for c in ow)
        print(f'  cold run through the cache  : {tc:7.2f} s')
        print(f'  warm rerun from the cache   : {tw:7.4f} s  ({tc/tw:,.0f}x faster, {cb.last["generated"]} model calls)')

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--items', type=int, default=6); ap.add_argument('--max-tokens', type=int, default=24)
    ap.add_argument('--threads', type=int, default=None)
    a = ap.parse_args(); main(a.items, a.max_tokens, a.threads)
