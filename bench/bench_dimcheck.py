"""DimCheck batching on the embedded model: batch-synchronous (one backend batch per step for all items) vs
per item (one DimCheck run, hence one batch per step, for each item). Same items, same model, fresh caches
for both, one process. Prints wall time, backend calls and the per-item cost table (requests and generated
tokens of the edits vs the single judgment they edit).

Run: `.venv/bin/python bench/bench_dimcheck.py [--items 4]` (or `make bench`).
"""
import argparse, tempfile, time
from pathlib import Path
import pandas as pd
from judgelab import data as D
from judgelab.llm.backends import LlamaCppBackend
from judgelab.llm.cache import GenerationCache, CachedBackend
from judgelab.methods.judges import select_items
from judgelab.methods import run
from judgelab.methods.dimcheck import edit_rate

def counted(b):
    "`b` (a real backend behind its cache) with its generate() calls counted in `b.calls`: the method's backend calls."
    gen = b.generate; b.calls = 0
    def generate(requests, progress=True):
        b.calls += 1; return gen(requests, progress)
    b.generate = generate; return b

def main(items=4, max_tokens=160):
    ds = D.load('topical_chat'); ids = select_items(ds, n_items=items, seed=0).item_id.tolist()
    kw = dict(dims=['naturalness'], others=['engagingness', 'groundedness'], max_tokens=max_tokens, base_max_tokens=96, progress=False)
    llm = LlamaCppBackend(n_ctx=2048); llm.llm()
    with tempfile.TemporaryDirectory() as d:
        b = counted(CachedBackend(llm, GenerationCache(Path(d)/'a.sqlite'), verbose=False))
        t0 = time.perf_counter(); jb = run('dimcheck', ds, b, items=ids, **kw); tb = time.perf_counter() - t0; cb = b.calls
        b2 = counted(CachedBackend(llm, GenerationCache(Path(d)/'b.sqlite'), verbose=False))
        t0 = time.perf_counter(); jp = pd.concat([run('dimcheck', ds, b2, items=[i], **kw) for i in ids]); tp = time.perf_counter() - t0; cp = b2.calls
    print(f'DimCheck on {items} Topical-Chat items (target naturalness, 2 non-targets), embedded {llm.identity()}')
    print(f'  batch-synchronous : {tb:7.1f} s, {cb} backend calls')
    print(f'  per item          : {tp:7.1f} s, {cp} backend calls')
    print(f'  ratio per-item / batched wall time: {tp/tb:.2f}x; identical final scores: {int((jb.score.fillna(-1).values == jp.score.fillna(-1).values).sum())}/{len(jb)}')
    print(edit_rate(jb).to_string(index=False))

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--items', type=int, default=4); ap.add_argument('--max-tokens', type=int, default=160)
    a = ap.parse_args(); main(a.items, a.max_tokens)
