"""Benchmark the embedded backend (SmolLM2-135M-Instruct, llama.cpp, CPU) on the requests the main job's judge
methods send, in one process: by default Analyze-Rate, direct prediction and G-Eval on the dataset, items,
dimensions and options of that dataset's judge run in `configs/embedded.yaml` (built by `judgelab.methods.run`
itself, one batch per method, in the order the method sends it). Every ratio is measured side by side in one
run; no absolute time is asserted.

1. Prefix grouping: each method's batch one request at a time from scratch (`reorder=False`: the KV cache is
   reset before every request) vs prefix-grouped (`reorder=True`, judgelab's default: requests sorted by their
   messages and run back to back, so llama.cpp evaluates only the part of a prompt that differs from the previous
   one). Analyze-Rate, direct prediction and G-Eval put the criterion before the text, so grouped requests share
   only the instructions and the criterion (the text under evaluation differs): expect a small gain here. The
   generation cache's warm rerun vs the cold run is printed beside it.
2. Through judgelab vs raw llama.cpp, prompt evaluation and generation separately. Each request through
   `LlamaCppBackend` (behind the generation cache, as `get_backend` runs it) is split into its prompt phase (from
   the request's start to the end of its first llama.cpp eval: chat template, tokenising, prefix match, prompt
   evaluation) and its generation phase (the rest: decode steps, sampling, grammar, detokenising, stop strings).
   Prompt tok/s = prompt tokens llama.cpp evaluated / prompt time; generated tok/s = generated tokens /
   generation time (not / total time, which is mostly prompt evaluation). "Raw llama.cpp" does every llama_decode
   of the request a second time (`llama_cpp.llama_decode` of the same batch at the same position: the prompt
   suffix in judgelab's n_batch chunks, then each generated token), back to back with judgelab's own, alternately
   before and after it, with nothing around it; the second decode leaves the same KV state and logits, and its
   time is taken out of judgelab's phases. Raw tok/s uses the same token counts, so the fraction is raw time /
   judgelab time for the same work (1.0 = no overhead; paired decode by decode, so a load that comes and goes
   hits both alike). Measured alone, then with a statistics process beside it (`--beside stats`, the default: a
   second Python process looping over judgelab.stats' cluster bootstrap of HANNA's correlation table, Kendall and
   Spearman at sample and system level, as the main job's statistics notebooks do beside a judge run at `-j 2`).
   The time outside the requests (validation, ordering, cache lookups and writes) is reported as "other".

Batching several sequences in one llama.cpp batch is not benchmarked here: llama-cpp-python does have a
multi-sequence API (`llama_batch` with several `seq_id`s through its low-level bindings), but as measured for
issue 16 it made generation 1.2-1.4x faster at 8 sequences and the whole job only 0.91-1.04x, and it changed greedy
outputs (4 of 8 identical), which is not worth it for cached, reproducible judgments; judgelab runs one sequence
at a time and reuses the KV cache across requests that share a prefix.

Run: `.venv/bin/python bench/bench_backends.py` (or `make bench`); smaller: `--items 1 --dims coherence`;
`--beside none` skips the statistics process; `--threads N` llama.cpp threads (default: judgelab's, i.e.
$JUDGELAB_LLAMA_THREADS or all cores); `--stats-threads N` BLAS/OpenMP threads of the statistics process (default:
inherited, i.e. the libraries' own defaults, as a sweep runs a notebook today).
"""
import argparse, os, sys, json, time, signal, tempfile, subprocess
from pathlib import Path
from time import perf_counter
import yaml
import llama_cpp
from judgelab.llm import ScriptedBackend
from judgelab.llm.backends import LlamaCppBackend
from judgelab.llm.cache import GenerationCache, CachedBackend
from judgelab.data import load
from judgelab.methods import run, method_plan

MAIN_JOB = Path(__file__).resolve().parents[1]/'configs'/'embedded.yaml'

# ----------------------------------------------------------------------------------------------------------------
# the requests the judge methods send

class _Stop(Exception): pass

def _stop(request): raise _Stop()

def recorder():
    "A scripted backend that stops a method at its first sample: its first batch (validated like any backend's) is in `batches[0]`."
    return ScriptedBackend(_stop, model='recorder', name='recorder')

def main_job_entries(dataset):
    "The judge run of `dataset` in configs/embedded.yaml: (method entries, dims, n_items); ([], None, 2) if it has none."
    cfg = yaml.safe_load(MAIN_JOB.read_text())['experiments']['judge']
    for case in cfg.get('grid', {}).get('cases', []):
        if case.get('dataset') == dataset:
            return case.get('methods', []), case.get('dims'), case.get('n_items', cfg.get('parameters', {}).get('n_items'))
    return [], None, cfg.get('parameters', {}).get('n_items', 2)

def method_batches(dataset, methods, n_items=None, dims=None, seed=0):
    """{label: requests} for each method: its first entry in the main job's judge run of `dataset` (options, dims,
    n_items), or the method with its defaults; the requests are those `judgelab.methods.run` builds, in its order."""
    entries, job_dims, job_items = main_job_entries(dataset)
    chosen = []
    for m in methods:
        e = next((e for e in entries if (e if isinstance(e, str) else e.get('method')) == m), {'method': m})
        chosen.append({'method': e} if isinstance(e, str) else dict(e))
    ds = load(dataset)
    plan = method_plan(chosen, ds.name, dims=dims or job_dims, n_items=n_items or job_items, seed=seed)
    out = {}
    for p in plan:
        rec = recorder()
        try: run(p['method'], ds, rec, dims=p['dims'], n_items=p['n_items'], seed=seed, progress=False, **p['options'])
        except _Stop: pass
        else: raise RuntimeError(f"{p['label']} sent no request")
        out[p['label']] = ([j.request for j in rec.batches[0] if j.sample == 0], p)       # the batch's requests, each once
    return ds, out

# ----------------------------------------------------------------------------------------------------------------
# per-request phases inside LlamaCppBackend, and the same llama.cpp work done raw beside it

class Phases:
    """Instruments one LlamaCppBackend: each request's prompt phase (from the request's start to the end of its first
    llama.cpp eval) and generation phase (the rest of the request), and, with `raw`, every llama_decode it makes done a
    second time, raw (`llama_cpp.llama_decode` on the same batch at the same position, nothing around it), back to back
    with it, alternately before and after it so that neither profits from the other's warm caches. The second decode
    leaves the same KV state and logits, so the request goes on unchanged; the raw decodes' time is taken out of the
    request's phases."""
    def __init__(self, backend:LlamaCppBackend):
        self.b, self.llm = backend, backend.llm()
        self._eval, self._call, self._decode = self.llm.eval, backend._call, self.llm._ctx.decode
        self.llm.eval, backend._call, self.llm._ctx.decode = self.eval, self.call, self.decode   # instance attributes
        self.cur, self.raw, self.records, self.k, self.acc = None, False, [], 0, 0.0
        self.llm.reset(); self._eval(self.llm.tokenize(b'warm-up ' * 64)); self.llm.reset()     # weights paged in before any timing
    def _raw(self, batch):
        t0 = perf_counter(); rc = llama_cpp.llama_decode(self.llm._ctx.ctx, batch.batch); dt = perf_counter() - t0
        if rc != 0: raise RuntimeError(f'llama_decode returned {rc}')
        return dt
    def decode(self, batch):
        if not self.raw or self.cur is None: return self._decode(batch)
        n_past = self.llm.n_tokens; self.k += 1          # Llama.eval advances n_tokens after each decoded batch
        if self.k % 2: self._decode(batch); self.llm._ctx.kv_cache_seq_rm(-1, n_past, -1); self.acc += self._raw(batch)
        else: self.acc += self._raw(batch); self.llm._ctx.kv_cache_seq_rm(-1, n_past, -1); self._decode(batch)
    def eval(self, tokens):
        toks = list(tokens); self.acc = 0.0; self._eval(toks)
        if self.cur is not None: self.cur.append((len(toks), self.acc, perf_counter()))
    def call(self, job):
        self.cur = ev = []; t0 = perf_counter()
        try: ch = self._call(job)
        finally: self.cur = None
        t1 = perf_counter(); p_end = ev[0][2] if ev else t1
        raw_p, raw_g = (ev[0][1] if ev else 0.0), sum(e[1] for e in ev[1:])
        self.records.append(dict(prompt_tokens=ch.prompt_tokens, evaluated=ev[0][0] if ev else 0, generated=ch.completion_tokens,
                                 decoded=sum(e[0] for e in ev[1:]), t_prompt=p_end - t0 - raw_p, t_gen=t1 - p_end - raw_g,
                                 raw_prompt=raw_p, raw_gen=raw_g))
        return ch
    def measure(self, backend, reqs, raw=False, reorder=True):
        "One timed generate() of `reqs` through `backend` (the instrumented one, bare or behind a cache): totals."
        self.b.reorder, self.raw, self.records = reorder, raw, []
        self.llm.reset()
        t0 = perf_counter(); out = backend.generate(reqs, progress=False); wall = perf_counter() - t0
        rs = self.records
        s = {k: sum(r[k] for r in rs) for k in ('prompt_tokens', 'evaluated', 'generated', 'decoded', 't_prompt', 't_gen', 'raw_prompt', 'raw_gen')}
        return dict(s, wall=wall, n=len(rs), other=wall - s['t_prompt'] - s['t_gen'] - s['raw_prompt'] - s['raw_gen'],
                    texts=[c.text for c in out])

def rate(tok, sec): return tok/sec if sec > 0 else float('nan')

# ----------------------------------------------------------------------------------------------------------------
# the statistics process beside it

def stats_worker(parent:int, max_seconds:float):
    "Loops over judgelab.stats' cluster bootstrap of HANNA's correlation table until SIGTERM (or its parent is gone)."
    import numpy as np
    from threadpoolctl import threadpool_info
    from judgelab.data.judgments import load_judgments, judgment_scores
    from judgelab.stats import bootstrap_ci
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    ds = load('hanna'); J = load_judgments('hanna', 'chhun2024')
    s = judgment_scores(J[(J.judge == 'eval_prompt_1') & (J.model == 'ChatGPT') & (J.dimension == 'coherence')])
    hm = ds.human_mean()['coherence'].rename('human').reset_index()
    m = ds.items[['item_id', 'doc_id', 'system']].merge(hm, on='item_id').merge(s[['item_id', 'score']], on='item_id')
    args = (m.score.values, m.human.values, m.doc_id.values, m.system.values)
    work = [(meth, lvl) for meth in ('kendall', 'spearman') for lvl in ('sample', 'system')]
    bootstrap_ci(*args, 'spearman', 'system', 50)          # warm
    blas = ', '.join(f"{d.get('internal_api')} {d.get('num_threads')} threads" for d in threadpool_info()) or 'none loaded'
    print(json.dumps(dict(ready=True, blas=blas)), flush=True)
    n, t0 = 0, time.time()
    while not stop and os.getppid() == parent and time.time() - t0 < max_seconds:
        meth, lvl = work[n % len(work)]; bootstrap_ci(*args, meth, lvl, 1000, seed=n); n += 1
    print(json.dumps(dict(done=n, seconds=time.time() - t0)), flush=True)

class Beside:
    "The statistics process, started and stopped around a block (never left running)."
    def __init__(self, threads=None, max_seconds=900):
        self.threads, self.max_seconds, self.p = threads, max_seconds, None
    def __enter__(self):
        env = dict(os.environ)
        if self.threads:
            for k in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS'): env[k] = str(self.threads)
        self.p = subprocess.Popen([sys.executable, __file__, '--stats-worker', str(os.getpid()), str(self.max_seconds)],
                                  stdout=subprocess.PIPE, text=True, env=env)
        line = self.p.stdout.readline()
        if not line: self.p.wait(); raise RuntimeError(f'the statistics process failed to start (exit {self.p.returncode})')
        self.info = json.loads(line); self.t0 = time.time(); return self
    def __exit__(self, *exc):
        self.p.send_signal(signal.SIGTERM)
        try: out, _ = self.p.communicate(timeout=120)
        except subprocess.TimeoutExpired: self.p.kill(); out, _ = self.p.communicate()
        done = [json.loads(l) for l in out.splitlines() if l.startswith('{')]
        self.done = done[-1] if done else dict(done=None, seconds=time.time() - self.t0)
        return False

# ----------------------------------------------------------------------------------------------------------------

def print_raw_table(title, per):
    print(title)
    print(f"  {'method':14s} {'prompt tok/s: judgelab':>22s} {'raw':>7s} {'fraction':>8s}   {'generated tok/s: judgelab':>25s} {'raw':>7s} "
          f"{'fraction':>8s}   {'other s':>7s}")
    for lab, s in per.items():
        print(f"  {lab:14s} {rate(s['evaluated'], s['t_prompt']):22.1f} {rate(s['evaluated'], s['raw_prompt']):7.1f} "
              f"{s['raw_prompt']/s['t_prompt']:8.2f}   {rate(s['generated'], s['t_gen']):25.1f} {rate(s['generated'], s['raw_gen']):7.1f} "
              f"{s['raw_gen']/s['t_gen']:8.2f}   {s['other']:7.2f}")

def main(dataset='summeval', methods=('analyze_rate', 'direct', 'geval'), items=None, dims=None, threads=None,
         beside='stats', stats_threads=None, repeats=1, seed=0):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))       # a killed benchmark still stops its statistics process
    ds, batches = method_batches(dataset, methods, items, dims, seed)
    b = LlamaCppBackend(n_threads=threads); ph = Phases(b)                       # loads the model before any timing
    p0 = next(iter(batches.values()))[1]
    print(f"{ds.name}: the requests of the main job's judge run (configs/embedded.yaml) for {', '.join(batches)}: "
          f"{p0['n_items'] or 'all'} items x {len(p0['dims'])} dimensions ({', '.join(p0['dims'])}); llama.cpp threads={b.n_threads}; "
          f"{os.cpu_count()} cores (load average {os.getloadavg()[0]:.2f} before the model ran); model {b.identity()}")
    for lab, (reqs, p) in batches.items():
        print(f"  {lab}: {len(reqs)} requests, options {json.dumps(p['options'])}, max_tokens {reqs[0].max_tokens}"
              + (', logprobs' if reqs[0].logprobs else ''))

    print("Prefix grouping, each method's batch, both behind a fresh generation cache (as get_backend runs them):")
    print(f"  {'method':14s} {'prompt tok':>10s} {'evaluated: scratch':>18s} {'grouped':>8s}  {'scratch s':>9s} {'grouped s':>9s} "
          f"{'speed-up':>8s}  {'identical':>9s}  {'warm rerun s':>12s}")
    alone, tot = {}, None
    with tempfile.TemporaryDirectory() as d:
        for lab, (reqs, _) in batches.items():
            sc = gr = None
            for r in range(repeats):                          # alternated; the fastest of each (another process may share the cores)
                s1 = ph.measure(CachedBackend(b, GenerationCache(Path(d)/f'{lab}-scratch{r}.sqlite'), verbose=False), reqs, reorder=False)
                cb = CachedBackend(b, GenerationCache(Path(d)/f'{lab}{r}.sqlite'), verbose=False)
                s2 = ph.measure(cb, reqs, raw=True)                               # cold: every request generated
                sc = s1 if sc is None or s1['wall'] < sc['wall'] else sc
                gr = s2 if gr is None or s2['wall'] - s2['raw_prompt'] - s2['raw_gen'] < gr['wall'] - gr['raw_prompt'] - gr['raw_gen'] else gr
            t0 = perf_counter(); warm = cb.generate(reqs, progress=False); tw = perf_counter() - t0
            assert all(c.cached for c in warm) and cb.last['generated'] == 0
            same = sum(a == b_ for a, b_ in zip(sc['texts'], gr['texts']))
            t_gr = gr['wall'] - gr['raw_prompt'] - gr['raw_gen']                   # the grouped run without its raw calls
            print(f"  {lab:14s} {sc['prompt_tokens']:10,d} {sc['evaluated']:18,d} {gr['evaluated']:8,d}  {sc['wall']:9.2f} {t_gr:9.2f} "
                  f"{sc['wall']/t_gr:7.2f}x  {same:4d}/{len(reqs):<4d}  {tw:12.4f}")
            alone[lab] = gr; g = dict(gr, scratch=sc['wall'], grouped=t_gr)
            tot = g if tot is None else {k: tot[k] + g[k] for k in g}
    print(f"  {'all':14s} {tot['prompt_tokens']:10,d} {'':18s} {tot['evaluated']:8,d}  {tot['scratch']:9.2f} {tot['grouped']:9.2f} "
          f"{tot['scratch']/tot['grouped']:7.2f}x")
    alone['all'] = tot
    print_raw_table('Through judgelab (grouped, behind the cache) vs raw llama.cpp (each decode call done again, back to back), '
                    'alone:', alone)
    res = dict(alone=alone)
    if beside == 'stats':
        with Beside(stats_threads) as w:
            per, tot2 = {}, None
            with tempfile.TemporaryDirectory() as d:
                for lab, (reqs, _) in batches.items():
                    cb = CachedBackend(b, GenerationCache(Path(d)/f'{lab}.sqlite'), verbose=False)
                    per[lab] = s = ph.measure(cb, reqs, raw=True)
                    tot2 = s if tot2 is None else {k: tot2[k] + s[k] for k in s}
            per['all'] = tot2
        print_raw_table(f"The same with a statistics process beside it (judgelab.stats bootstrap of HANNA's correlation table; "
                        f"BLAS: {w.info['blas']}; {w.done['done']} bootstrap CIs in {w.done['seconds']:.0f} s):", per)
        res['beside'] = per
    line = lambda s: f"prompt {s['raw_prompt']/s['t_prompt']:.2f}, generation {s['raw_gen']/s['t_gen']:.2f}"
    print(f"Fraction of raw llama.cpp speed through judgelab (target >= 0.9 with a statistics notebook beside it): alone "
          f"{line(alone['all'])}" + (f"; with the statistics process beside it {line(res['beside']['all'])}" if 'beside' in res else '')
          + f"; prefix grouping {tot['scratch']/tot['grouped']:.2f}x")
    return res

if __name__ == '__main__':
    if len(sys.argv) == 4 and sys.argv[1] == '--stats-worker':
        stats_worker(int(sys.argv[2]), float(sys.argv[3])); sys.exit(0)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--dataset', default='summeval')
    ap.add_argument('--methods', default='analyze_rate,direct,geval', help='comma-separated judge methods')
    ap.add_argument('--items', type=int, default=None, help="items (default: the main job's n_items)")
    ap.add_argument('--dims', default=None, help="comma-separated dimensions (default: the main job's)")
    ap.add_argument('--threads', type=int, default=None, help='llama.cpp threads')
    ap.add_argument('--beside', choices=['stats', 'none'], default='stats', help='a statistics process beside the second measurement')
    ap.add_argument('--stats-threads', type=int, default=None, help='BLAS/OpenMP threads of the statistics process')
    ap.add_argument('--repeats', type=int, default=1, help='alternated repeats of the grouping comparison (the fastest of each is shown)')
    a = ap.parse_args()
    main(a.dataset, a.methods.split(','), a.items, a.dims.split(',') if a.dims else None, a.threads, a.beside, a.stats_threads, a.repeats)
