"""`judgelab sweep` on a tiny sweep of the embedded model: dry run, a parallel run, a run killed midway and resumed
from the generation cache, a failing run that does not stop the others, a bad file rejected with its line, and the
paper notebooks executed on the judgments the tiny sweep made. Everything is written under a temporary folder."""
import json, os, signal, sqlite3, subprocess, sys, time
from pathlib import Path
import nbformat, pandas as pd, psutil, pytest
from conftest import ROOT, BIN

TINY = """name: tiny
defaults: {backend: llamacpp, seed: 0}
experiments:
  judge:
    template: nbs/experiments/judge.ipynb
    parameters: {n_items: 2, n_boot: 20, n_perm: 19, methods: [{method: analyze_rate, options: {max_tokens: 32}}, {method: geval, options: {max_tokens: 32}}]}
    grid:
      cases:
        - {dataset: topical_chat, dims: [coherence, engagingness]}
        - {dataset: qags, dims: [consistency]}
  audit:
    template: nbs/experiments/corrgap_audit.ipynb
    parameters: {sources: [closerlook_analyze_rate], n_perm: 49, n_boot_excess: 20, n_perm_quality: 9, n_boot: 10}
    grid: {dataset: [topical_chat]}
  paper_corrgap:
    template: nbs/experiments/paper_corrgap.ipynb
    parameters: {datasets: [topical_chat, qags], published: false, n_perm: 19, n_boot_excess: 20, n_perm_quality: 9}
    needs: [judge]
    inputs: ['outputs/judgments/**/*.parquet']
  paper_checkeval:
    template: nbs/experiments/paper_checkeval.ipynb
    parameters: {datasets: [topical_chat, qags], published: false, n_boot: 10}
    needs: [judge]
    inputs: ['outputs/judgments/**/*.parquet']
  paper_decomposition:
    template: nbs/experiments/paper_decomposition.ipynb
    parameters: {datasets: [topical_chat, qags]}
    needs: [judge]
    inputs: ['outputs/judgments/**/*.parquet']
"""

@pytest.fixture
def sweep_env(tmp_path, monkeypatch):
    "Runs, outputs (tables, judgments, generation cache) under tmp_path; one llama.cpp thread per run."
    env = dict(JUDGELAB_RUNS=str(tmp_path/'runs'), JUDGELAB_OUTPUTS=str(tmp_path/'outputs'), JUDGELAB_LLAMA_THREADS='2')
    for k, v in env.items(): monkeypatch.setenv(k, v)
    return tmp_path

def sweep(*args, timeout=1200):
    return subprocess.run([str(BIN/'judgelab'), 'sweep', *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout)

def cache_rows(tmp):
    db = tmp/'outputs'/'cache'/'generations.sqlite'
    if not db.exists(): return 0
    try:
        with sqlite3.connect(db, timeout=60) as c: return c.execute('SELECT COUNT(*) FROM generations').fetchone()[0]
    except sqlite3.OperationalError: return 0          # the file exists, its table not yet (the run is creating the cache)

def meta(nb): return nbformat.read(nb, as_version=4).metadata.get('judgelab', {})

def test_tiny_sweep_dry_run_parallel_skip_and_paper_notebooks(sweep_env):
    cfg = sweep_env/'tiny.yaml'; cfg.write_text(TINY)
    d = sweep(str(cfg), '--dry-run')
    assert d.returncode == 0, d.stderr
    assert 'topical_chat__SmolLM2-135M-Instruct' in d.stdout and 'qags__SmolLM2-135M-Instruct' in d.stdout   # one run per (dataset, model)
    assert 'new 6' in d.stdout and not (sweep_env/'runs').exists()
    r = sweep(str(cfg), '-j', '2', '--no-progress')
    assert r.returncode == 0, r.stdout + r.stderr
    assert '6 runs: 6 ran, 0 already done' in r.stdout
    runs = sweep_env/'runs'
    nbs = {p.relative_to(runs).with_suffix('').as_posix(): meta(p) for p in runs.glob('*/*.ipynb')}
    assert len(nbs) == 6 and all(m['status'] == 'ok' for m in nbs.values())
    # runs on the one in-process model never overlapped; the audit (no model) ran beside them
    gen = sorted((m['started'], m['finished']) for k, m in nbs.items() if m['resource'] == 'llamacpp:embedded')
    assert len(gen) == 2 and all(a[1] <= b[0] for a, b in zip(gen, gen[1:]))
    audit = nbs['audit/topical_chat']
    assert any(s < audit['finished'] and audit['started'] < f for s, f in gen), 'the audit should run beside a judge run with -j 2'
    # the paper notebooks ran after the judges, on their judgments
    assert min(m['started'] for k, m in nbs.items() if k.startswith('paper')) >= max(f for _, f in gen)
    out = sweep_env/'outputs'
    t = pd.read_csv(out/'tables'/'paper_corrgap.csv')
    assert set(t.judge) == {'analyze_rate', 'geval'} and set(t.dataset) == {'topical_chat'}
    assert set(pd.read_csv(out/'tables'/'paper_checkeval_main.csv').dataset) == {'topical_chat', 'qags'}
    assert (out/'tables'/'paper_decomposition_table1.csv').exists()
    idx = (out/'README.md').read_text()
    assert 'paper_corrgap_pairs' in idx and 'runs/paper_corrgap/all.ipynb' in idx
    rows = [json.loads(l) for l in (out/'manifest.jsonl').read_text().splitlines()]
    assert all(r.get('run') for r in rows) and any(r['run'].endswith('paper_corrgap/all.ipynb') for r in rows)
    # a second sweep skips everything, and generates nothing
    n = cache_rows(sweep_env)
    r2 = sweep(str(cfg), '-j', '2', '--no-progress')
    assert r2.returncode == 0 and '6 runs: 0 ran, 6 already done (skipped), 0 failed; 0 new generations cached' in r2.stdout, r2.stdout
    assert cache_rows(sweep_env) == n

KILL = """name: kill
experiments:
  judge:
    template: nbs/experiments/judge.ipynb
    parameters: {dataset: topical_chat, methods: [{method: analyze_rate, options: {max_tokens: 48}}], n_items: 3,
                 dims: [coherence, engagingness, naturalness], n_boot: 10, n_perm: 9}
"""

def test_killed_run_resumes_from_the_cache(sweep_env):
    cfg = sweep_env/'kill.yaml'; cfg.write_text(KILL)
    p = subprocess.Popen([str(BIN/'judgelab'), 'sweep', str(cfg), '--no-progress'], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    deadline = time.time() + 600
    while cache_rows(sweep_env) < 2:
        assert p.poll() is None and time.time() < deadline, 'the run ended before it could be killed midway'
        time.sleep(0.2)
    procs = [psutil.Process(p.pid)] + psutil.Process(p.pid).children(recursive=True)   # sweep, papermill, kernel
    for q in procs:
        try: q.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess: pass
    psutil.wait_procs(procs, timeout=30)
    done_before = cache_rows(sweep_env)
    assert 2 <= done_before < 9, done_before
    d = sweep(str(cfg), '--dry-run')
    assert 'incomplete' in d.stdout or 'failed' in d.stdout, d.stdout
    r = sweep(str(cfg), '--no-progress')
    assert r.returncode == 0, r.stdout + r.stderr
    assert cache_rows(sweep_env) == 9
    # counted from the cache: the rerun found the finished requests and generated only the rest
    rows = [json.loads(l) for l in (sweep_env/'outputs'/'manifest.jsonl').read_text().splitlines()]
    cost = next(r for r in rows if any(a.endswith('/cost.csv') for a in r['artifacts']))
    assert cost['cache']['hits'] == done_before and cost['cache']['generated'] == 9 - done_before, cost['cache']
    assert f'{9 - done_before} new generations cached' in r.stdout

FAIL = """name: fail
experiments:
  judge:
    template: nbs/experiments/judge.ipynb
    # nothing listens on port 9: the request fails inside the run (no retries), after validation passed
    parameters: {dataset: topical_chat, n_items: 1, dims: [coherence], methods: [analyze_rate], backend: openai,
                 base_url: 'http://127.0.0.1:9/v1', model: none, backend_options: {max_retries: 0, timeout: 5}}
  synth:
    template: nbs/experiments/corrgap_synthetic.ipynb
    parameters: {datasets: [simulated], seeds: 1, w_grid: [0.0], n_perm: 9, controls: [round]}
  paper:
    template: nbs/experiments/paper_decomposition.ipynb
    parameters: {datasets: [topical_chat]}
    needs: [judge]
"""

def test_failed_run_does_not_stop_the_others(sweep_env):
    cfg = sweep_env/'fail.yaml'; cfg.write_text(FAIL)
    r = sweep(str(cfg), '--no-progress')
    assert r.returncode == 1, r.stdout + r.stderr
    assert '3 runs: 1 ran, 0 already done (skipped), 1 failed, 1 not run (a needed experiment failed)' in r.stdout, r.stdout
    nb = sweep_env/'runs'/'judge'/'topical_chat__none.ipynb'
    assert f'FAILED judge/{nb.stem}' in r.stdout and f'notebook: {nb}' in r.stdout and 'BackendError' in r.stdout, r.stdout
    assert 'Traceback' in nb.read_text() or 'Error' in nb.read_text()
    assert meta(sweep_env/'runs'/'synth'/'all.ipynb')['status'] == 'ok'
    s = json.loads((sweep_env/'runs'/'sweeps'/'fail.json').read_text())
    assert s['counts'] == {'ok': 1, 'failed': 1, 'blocked': 1}

@pytest.mark.parametrize('edit, message', [
    (lambda t: t.replace('qags, dims', 'qgas, dims'), "tiny.yaml:10: unknown dataset 'qgas'"),
    pytest.param(lambda t: t.replace('{method: geval', '{method: g_eval'), "tiny.yaml:6: unknown method 'g_eval'",
                 marks=pytest.mark.xfail(reason="the sweep does not check `methods` entries yet (judgelab.methods.method_plan does; the judge template fails fast on them)")),
    (lambda t: t.replace('{n_items: 2,', '{n_item: 2,'), "tiny.yaml:6: unknown parameter 'n_item' for template nbs/experiments/judge.ipynb"),
    (lambda t: t.replace('backend: llamacpp', 'backend: vlm'), "tiny.yaml:2: unknown backend 'vlm'"),
    (lambda t: t.replace('nbs/experiments/corrgap_audit.ipynb', 'nbs/experiments/audit.ipynb'), "tiny.yaml:12: template 'nbs/experiments/audit.ipynb' not found"),
])
def test_bad_config_is_rejected_with_its_line(sweep_env, edit, message):
    cfg = sweep_env/'tiny.yaml'; cfg.write_text(edit(TINY))
    r = sweep(str(cfg))
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not (sweep_env/'runs').exists()

def test_shipped_configs_validate():
    from judgelab.sweep import load_sweep
    emb = load_sweep(ROOT/'configs'/'embedded.yaml')
    from judgelab.methods import METHODS
    methods = {(r.parameters['dataset'], e if isinstance(e, str) else e['method']) for r in emb.runs if r.experiment == 'judge' for e in r.parameters['methods']}
    datasets = ['summeval', 'topical_chat', 'hanna', 'opinsummeval', 'qags']
    assert methods == {(d, m) for d in datasets for m in METHODS}, 'every method on every dataset'
    paper = load_sweep(ROOT/'configs'/'paper.yaml')
    assert {r.parameters.get('backend') for r in paper.runs if r.experiment.startswith('judge')} <= {'vllm', 'openai'}

def test_runs_under_the_sweep_get_a_thread_budget(sweep_env, monkeypatch):
    "With -j 2 every run's kernel sees max(1, cores // 2) threads for llama.cpp, OpenMP and BLAS (a user's own limit is kept)."
    from judgelab.sweep import THREAD_VARS, thread_budget
    for v in THREAD_VARS: monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv('NUMEXPR_NUM_THREADS', '7')                       # set by the user: kept
    tpl = sweep_env/'threads.ipynb'
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('x: int = 0  # unused', metadata=dict(tags=['parameters'])),
                nbformat.v4.new_code_cell("import os, json, numpy, threadpoolctl\n"
                                          "print(json.dumps(dict(env={v: os.environ.get(v) for v in " + repr(THREAD_VARS) + "},\n"
                                          "      pools=sorted({p['num_threads'] for p in threadpoolctl.threadpool_info()}))))")]
    nb.metadata['kernelspec'] = dict(name='python3', display_name='Python 3', language='python')
    nbformat.write(nb, tpl)
    cfg = sweep_env/'threads.yaml'
    cfg.write_text(f"name: threads\nexperiments:\n  a:\n    template: {tpl}\n    grid: {{x: [1, 2]}}\n")
    r = sweep(str(cfg), '-j', '2', '--no-progress')
    assert r.returncode == 0, r.stdout + r.stderr
    want = str(thread_budget(2))
    outs = sorted((sweep_env/'runs'/'a').glob('*.ipynb')); assert len(outs) == 2, outs
    for out in outs:
        seen = json.loads(nbformat.read(out, as_version=4).cells[-1].outputs[0]['text'])
        assert seen['env'] == {**{v: want for v in THREAD_VARS}, 'NUMEXPR_NUM_THREADS': '7'}, seen
        assert seen['pools'] == [int(want)], seen                       # numpy's BLAS pool really is limited
