"""`judgelab sweep` on Snakemake, as a user runs it, in a copy of the project under a temporary folder (its own package
copy on PYTHONPATH, so editing its `parse.py` touches nothing here): run ids and per-run folders, staleness from
library code, parameters and needed runs, a fresh clone that knows its committed runs are current, a failed run
that does not stop the others, a run killed midway that resumes from the generation cache, the cluster path through
Snakemake's `cluster-generic` executor with a loopback submit script, bad files rejected with their line."""

import json, os, re, shutil, signal, sqlite3, subprocess, time
from pathlib import Path
import nbformat, pandas as pd, psutil, pytest
from hypothesis import given, settings, strategies as st
from judgelab.run.sweep import Run, assign_ids, check_nesting, ConfigError
from tests.conftest import BIN, ROOT, wait_while_running
from tests.run.conftest import JUDGE, make_repo, template

SWEEP = """name: s
experiments:
  judge:
    template: nbs/experiments/t_judge.ipynb
    grid: {n_items: [1, 2]}
  other:
    template: nbs/experiments/t_other.ipynb
  paper:
    template: nbs/experiments/t_paper.ipynb
    needs: [judge]
"""

@pytest.fixture
def repo(tmp_path, monkeypatch):
    for v in ('JUDGELAB_OUTPUTS', 'JUDGELAB_RUNS', 'JUDGELAB_RUN_ID', 'JUDGELAB_RUN', 'JUDGELAB_ROOT'): monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv('JUDGELAB_RAW', str(ROOT/'data'/'raw'))
    r = make_repo(tmp_path/'repo')
    monkeypatch.setenv('PYTHONPATH', str(r))
    return r

def sweep(repo, *args, timeout=900):
    return subprocess.run([str(BIN/'judgelab'), 'sweep', *map(str, args)], capture_output=True, text=True, cwd=repo, timeout=timeout,
                          env={**os.environ, 'PYTHONPATH': str(repo)})

def states(repo, cfg)->dict:
    r = sweep(repo, cfg, '--dry-run'); assert r.returncode == 0, r.stdout + r.stderr
    out = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) >= 3 and f[1].count('/') >= 1 and f[2] in ('done', 'new', 'stale', 'incomplete'): out[f[1]] = (f[2], ' '.join(f[3:]))
    return out

J1, J2 = 's/judge/topical_chat__SmolLM2-135M-Instruct__n_items-1', 's/judge/topical_chat__SmolLM2-135M-Instruct__n_items-2'

def test_run_ids_folders_and_staleness(repo, tmp_path, monkeypatch):
    cfg = repo/'s.yaml'; cfg.write_text(SWEEP)
    assert {k: v[0] for k, v in states(repo, cfg).items()} == {J1: 'new', J2: 'new', 's/other': 'new', 's/paper': 'new'}
    r = sweep(repo, cfg, '-j', '2', '--no-progress')
    assert r.returncode == 0, r.stdout + r.stderr
    assert '4 runs: 4 ran, 0 already done (skipped), 0 failed' in r.stdout, r.stdout
    # two runs that differ only in n_items: two folders, two notebooks, both in the manifests and the index
    for rid, n in ((J1, 1), (J2, 2)):
        assert pd.read_csv(repo/'outputs'/rid/'tables'/'n.csv').n.tolist() == [n]
        assert (repo/'papermill_runs'/f'{rid}.ipynb').exists()
        rows = [json.loads(l) for l in (repo/'outputs'/rid/'manifest.jsonl').read_text().splitlines()]
        assert rows[0]['run'] == f'papermill_runs/{rid}.ipynb' and rows[0]['artifacts'][0] == f'outputs/{rid}/tables/n.csv', rows
    index = (repo/'outputs'/'README.md').read_text()
    assert 'n_items-1/tables' in index and 'n_items-2/tables' in index
    # the paper run read the runs it needs, handed over as its `runs` parameter
    assert pd.read_csv(repo/'outputs'/'s'/'paper'/'tables'/'total.csv').to_dict('records') == [dict(total=3, runs=2)]
    meta = nbformat.read(repo/'papermill_runs'/f'{J1}.ipynb', as_version=4).metadata['judgelab']
    assert meta['status'] == 'ok' and meta['run_id'] == J1 and len(meta['code']) == 12 and meta['resources'] == {'llm': 1}
    # Snakemake's records name outputs relative to the project: nothing of this machine's paths
    md = list((repo/'.snakemake'/'metadata').rglob('*'))
    assert md and not any(str(repo) in f.read_text() for f in md if f.is_file())
    assert {v[0] for v in states(repo, cfg).values()} == {'done'}
    assert '4 runs: 0 ran, 4 already done (skipped)' in sweep(repo, cfg, '--no-progress').stdout
    summary = json.loads((repo/'papermill_runs'/'sweeps'/'s.json').read_text())      # a warm call keeps the record of the call that ran them
    assert summary['counts'] == {'ok': 4} and all(r['seconds'] > 0 for r in summary['runs']), summary   # before: 'done', 0 s

    # a fresh clone: Snakemake's records travel with the outputs, so a copy in which every file has a new time (the
    # library and templates newer than the outputs, as a checkout may leave them) still knows its runs are current
    clone = tmp_path/'clone'
    shutil.copytree(repo, clone, copy_function=shutil.copy, ignore=shutil.ignore_patterns('__pycache__', 'locks', 'incomplete'))
    later = time.time() + 60
    for p in list((clone/'judgelab').rglob('*.py')) + list((clone/'nbs').rglob('*.ipynb')): os.utime(p, (later, later))
    monkeypatch.setenv('PYTHONPATH', str(clone))
    assert {v[0] for v in states(clone, clone/'s.yaml').values()} == {'done'}
    monkeypatch.setenv('PYTHONPATH', str(repo))

    # editing the parser marks the runs whose template imports it (and the run that reads them) stale, nothing else
    with open(repo/'judgelab'/'llm'/'parse.py', 'a') as f: f.write('\n# an edit\n')
    st = states(repo, cfg)
    assert {k: v[0] for k, v in st.items()} == {J1: 'stale', J2: 'stale', 's/other': 'done', 's/paper': 'stale'}, st
    assert 'updated input' in st[J1][1], st
    # a changed parameter makes its run stale
    cfg.write_text(SWEEP.replace('template: nbs/experiments/t_other.ipynb', 'template: nbs/experiments/t_other.ipynb\n    parameters: {x: 1}'))
    st = states(repo, cfg)
    assert st['s/other'][0] == 'stale' and 'param' in st['s/other'][1], st
    r = sweep(repo, cfg, '--only', 'other', '--no-progress')
    assert r.returncode == 0 and '1 runs: 1 ran' in r.stdout, r.stdout + r.stderr
    assert (repo/'outputs'/'s'/'other'/'tables'/'x.txt').read_text() == '1'
    assert states(repo, cfg)[J1][0] == 'stale'                  # --only ran nothing else
    summary = json.loads((repo/'papermill_runs'/'sweeps'/'s.json').read_text())
    assert len(summary['runs']) == 4                            # a partial call updates its own rows, keeps the others

def test_failed_run_does_not_stop_the_others(repo):
    cfg = repo/'f.yaml'
    cfg.write_text(SWEEP.replace('name: s', 'name: f').replace('t_judge.ipynb', 't_fail.ipynb').replace('grid: {n_items: [1, 2]}', 'grid: {x: [1, 2]}'))
    r = sweep(repo, cfg, '-j', '2', '--no-progress')
    assert r.returncode == 1, r.stdout + r.stderr
    assert '4 runs: 1 ran, 0 already done (skipped), 2 failed, 1 not run (a needed run failed)' in r.stdout, r.stdout
    assert 'FAILED f/judge/x-1' in r.stdout and 'boom: this run fails on purpose' in r.stdout, r.stdout
    nb = repo/'papermill_runs'/'f'/'judge'/'x-1.failed.ipynb'
    assert 'boom' in nb.read_text() and f'notebook: papermill_runs/f/judge/x-1.failed.ipynb' in r.stdout   # kept, with its traceback
    assert not (repo/'papermill_runs'/'f'/'judge'/'x-1.ipynb').exists()   # Snakemake removed the failed outputs:
    st = states(repo, cfg)                                                    # a failed run is never taken for a finished one
    assert (st['f/judge/x-1'][0], st['f/judge/x-2'][0], st['f/other'][0], st['f/paper'][0]) == ('new', 'new', 'done', 'new'), st
    assert (repo/'outputs'/'f'/'other'/'tables'/'x.txt').exists()
    s = json.loads((repo/'papermill_runs'/'sweeps'/'f.json').read_text())
    assert s['counts'] == {'failed': 2, 'ok': 1, 'blocked': 1}, s

DEGRADED = ("x: int = 0", "from judgelab.core import record_health\n"
            "record_health('degraded' if x else 'ok', [f'direct: no parsed score on coherence (0 of {x} pairs scored; truncated at the token cap ({x}))'] if x else [])")

def test_a_degraded_run_is_not_ok_and_strict_fails(repo):
    """A run that finishes but records missing results is 'degraded' in the summary, the notebook and the sweep record,
    with its problems; --strict exits 3, also when the degraded run is current and skipped."""
    cfg = repo/'d.yaml'
    cfg.write_text("name: d\nexperiments:\n  judge:\n    template: nbs/experiments/t_degraded.ipynb\n    grid: {x: [0, 2]}\n")
    template(repo/'nbs'/'experiments'/'t_degraded.ipynb', *DEGRADED)
    r = sweep(repo, cfg, '--no-progress')
    assert r.returncode == 0, r.stdout + r.stderr                           # without --strict: reported, not an error
    assert '2 runs: 2 ran, 0 already done (skipped), 0 failed; 1 degraded' in r.stdout, r.stdout
    assert 'DEGRADED d/judge/x-2' in r.stdout and 'direct: no parsed score on coherence (0 of 2 pairs scored' in r.stdout, r.stdout
    assert 'DEGRADED d/judge/x-0' not in r.stdout
    meta = nbformat.read(repo/'papermill_runs'/'d'/'judge'/'x-2.ipynb', as_version=4).metadata['judgelab']
    assert meta['status'] == 'degraded' and meta['problems'][0].startswith('direct: no parsed score'), meta
    s = json.loads((repo/'papermill_runs'/'sweeps'/'d.json').read_text())
    assert s['counts'] == {'ok': 1, 'degraded': 1}, s
    assert {k: v[0] for k, v in states(repo, cfg).items()} == {'d/judge/x-0': 'done', 'd/judge/x-2': 'done'}   # finished: not rerun
    r = sweep(repo, cfg, '--no-progress', '--strict')                      # current, skipped, still degraded: --strict fails
    assert r.returncode == 3 and 'DEGRADED d/judge/x-2 (current, not rerun)' in r.stdout and '--strict: 1 of 2 runs are degraded' in r.stderr, r.stdout + r.stderr

KILL = ("dataset: str = 'topical_chat'\nbackend: str = 'llamacpp'",
        "import pandas as pd\nfrom judgelab.llm.models import get_backend\nfrom judgelab.methods import run\nfrom judgelab.report import save_table\n"
        "b = get_backend(backend)\n"
        "j = run('analyze_rate', dataset, b, dims=['coherence', 'engagingness', 'naturalness'], n_items=3, max_tokens=48, progress=False, save=True)\n"
        "save_table(pd.DataFrame([b.stats]), 'cache', 'nbs/experiments/t_kill.ipynb', {})")

def cache_rows(repo):
    db = repo/'outputs'/'cache'/'generations.sqlite'
    if not db.exists(): return 0
    with sqlite3.connect(db, timeout=60) as c:
        try: return c.execute('SELECT COUNT(*) FROM generations').fetchone()[0]
        except sqlite3.OperationalError as e:                       # the file exists before its table (the cache is opening it)
            if 'no such table' in str(e): return 0
            raise

def snapshot(repo)->dict:
    "Every file of the project's results, with its bytes: what a filtered sweep must leave alone (not the generation cache, not outputs/tmp/: scratch and lock files, never committed)."
    return {str(f.relative_to(repo)): f.read_bytes() for d in ('outputs', 'papermill_runs', '.snakemake/metadata')
            for f in sorted((repo/d).rglob('*')) if f.is_file() and 'cache' not in f.parts and f.relative_to(repo).parts[:2] != ('outputs', 'tmp')}

KILL_SWEEP = """name: k
experiments:
  judge:
    template: nbs/experiments/t_kill.ipynb
    grid: {dataset: [topical_chat, qags]}
  other:
    template: nbs/experiments/t_other.ipynb
    grid: {x: [1, 2]}
"""

def test_killed_filtered_run_resumes_from_the_cache_and_loses_nothing(repo):
    """A filtered sweep (--only, --match) killed midway: the run keeps its full id, the runs it filtered out (finished
    or not) are untouched, the lock gives a clear error, and the resumed call generates only the requests not yet cached."""
    template(repo/'nbs'/'experiments'/'t_kill.ipynb', *KILL)
    cfg = repo/'k.yaml'; cfg.write_text(KILL_SWEEP)
    assert sweep(repo, cfg, '--only', 'other', '--no-progress').returncode == 0      # finished results of other runs
    before = snapshot(repo); assert len(before) >= 4, before.keys()
    rid = 'k/judge/topical_chat__SmolLM2-135M-Instruct'
    assert states(repo, cfg)[rid][0] == 'new'
    filt = ('--only', 'judge', '--match', 'dataset=topical_chat', '--no-progress')
    p = subprocess.Popen([str(BIN/'judgelab'), 'sweep', str(cfg), *filt], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True, env={**os.environ, 'PYTHONPATH': str(repo)})
    wait_while_running(p, lambda: cache_rows(repo) >= 2, 600, 0.2, 'the run ended before it could be killed midway')
    procs = [psutil.Process(p.pid)] + psutil.Process(p.pid).children(recursive=True)   # judgelab, snakemake, papermill, kernel
    for q in procs:
        try: q.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess: pass
    psutil.wait_procs(procs, timeout=30)
    done_before = cache_rows(repo)
    assert 2 <= done_before < 9, done_before
    # the run and its call's own sweep record: a --match call never rewrites the configured sweep's record or the outputs index
    mine = ('outputs/' + rid + '/', 'papermill_runs/' + rid + '.', 'papermill_runs/sweeps/partial/')
    def changed_outside_the_run():      # Snakemake may add a record of the new run; it never rewrites or drops one it holds
        after = snapshot(repo)
        return sorted(f for f in set(before) | set(after) if before.get(f) != after.get(f) and not f.startswith(mine)
                      and not (f.startswith('.snakemake/metadata/') and f not in before))
    assert changed_outside_the_run() == []                         # the kill lost nothing of the runs it filtered out
    r = sweep(repo, cfg, *filt)                                    # a killed Snakemake leaves its lock: a clear error
    assert r.returncode == 2 and 'judgelab sweep' in r.stderr and '--unlock' in r.stderr, r.stdout + r.stderr
    assert sweep(repo, cfg, '--unlock').returncode == 0
    st = states(repo, cfg)
    assert (st[rid][0], st['k/judge/qags__SmolLM2-135M-Instruct'][0], st['k/other/x-1'][0]) == ('incomplete', 'new', 'done'), st
    r = sweep(repo, cfg, *filt)
    assert r.returncode == 0 and '1 runs: 1 ran' in r.stdout, r.stdout + r.stderr
    assert cache_rows(repo) == 9
    # counted by the backend in the rerun: it found the finished requests and generated only the rest
    c = pd.read_csv(repo/'outputs'/rid/'tables'/'cache.csv').iloc[0]
    assert (c.hits, c.generated) == (done_before, 9 - done_before), c.to_dict()
    assert changed_outside_the_run() == []
    after = snapshot(repo)
    assert all(after[f] == before[f] for f in before if '/other/' in f), 'a filtered-out run changed'
    assert not any('qags' in f for f in after), 'a run the filter left out was started'

def test_a_terminated_sweep_leaves_no_lock_and_the_next_call_just_runs(repo):
    """SIGTERM to `judgelab sweep` (a job scheduler's, or `kill`): before, it killed Snakemake outright, whose lock then made
    the next call fail with "--unlock"; now Snakemake stops its jobs and removes its lock, and the command exits 130."""
    template(repo/'nbs'/'experiments'/'t_kill.ipynb', *KILL)
    cfg = repo/'k.yaml'; cfg.write_text(KILL_SWEEP)
    p = subprocess.Popen([str(BIN/'judgelab'), 'sweep', str(cfg), '--only', 'judge', '--match', 'dataset=topical_chat', '--no-progress'], cwd=repo,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, 'PYTHONPATH': str(repo)})
    wait_while_running(p, lambda: cache_rows(repo) >= 2, 600, 0.2, None)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130 and 'Traceback' not in err and 'terminated' in err, (p.returncode, err[-3000:])
    locks = repo/'.snakemake'/'locks'
    assert not (locks.exists() and any(locks.iterdir())), list(locks.iterdir())
    r = sweep(repo, cfg, '--only', 'judge', '--match', 'dataset=topical_chat', '--no-progress')
    assert r.returncode == 0 and '1 runs: 1 ran' in r.stdout, r.stdout + r.stderr

SUBMIT = """#!/bin/bash
# a loopback "cluster": run the job script in the background on this machine and print a job id
jobscript="${@: -1}"
nohup bash "$jobscript" > "$jobscript.out" 2>&1 &
echo "$!"
"""

def test_cluster_generic_executor(repo, tmp_path):
    "The same sweep through Snakemake's cluster-generic executor: each run is a submitted job (here a local background process)."
    sub = tmp_path/'submit.sh'; sub.write_text(SUBMIT); sub.chmod(0o755)
    prof = tmp_path/'profile'; prof.mkdir()
    (prof/'config.yaml').write_text(f"cluster-generic-submit-cmd: {sub}\njobs: 2\nlatency-wait: 5\n")
    cfg = repo/'s.yaml'; cfg.write_text(SWEEP)
    r = sweep(repo, cfg, '--executor', 'cluster-generic', '--profile', prof, '-j', '2', '--no-progress')
    assert r.returncode == 0, r.stdout + r.stderr
    assert '4 runs: 4 ran' in r.stdout, r.stdout
    assert pd.read_csv(repo/'outputs'/'s'/'paper'/'tables'/'total.csv').total.tolist() == [3]
    assert {v[0] for v in states(repo, cfg).values()} == {'done'}

BAD = """name: bad
defaults: {backend: llamacpp}
experiments:
  judge:
    template: nbs/experiments/t_judge.ipynb
    parameters: {n_items: 2}
    grid:
      dataset: [topical_chat, qags]
  audit:
    template: nbs/experiments/corrgap_audit.ipynb
    grid: {dataset: [topical_chat]}
"""

@pytest.mark.parametrize('edit, message', [
    (lambda t: t.replace('qags]', 'qgas]'), "bad.yaml:8: unknown dataset 'qgas'"),
    (lambda t: t.replace('{n_items: 2}', '{n_item: 2}'), "bad.yaml:6: unknown parameter 'n_item' for template nbs/experiments/t_judge.ipynb"),
    (lambda t: t.replace('backend: llamacpp', 'backend: vlm'), "bad.yaml:2: unknown backend 'vlm'"),
    (lambda t: t.replace('nbs/experiments/corrgap_audit.ipynb', 'nbs/experiments/audit.ipynb'), "bad.yaml:10: template 'nbs/experiments/audit.ipynb' not found"),
    (lambda t: t.replace('[topical_chat, qags]', '[]'), "bad.yaml:8: grid values of 'dataset' must be a non-empty list"),
    (lambda t: t.replace('name: bad', 'name: ../bad'), "bad.yaml:1: sweep name '../bad'"),
    (lambda t: t.replace('{n_items: 2}', '{n_items: -3}'), "bad.yaml:6: n_items must be a whole number 0-1,000,000, not -3"),
    (lambda t: t.replace("{n_items: 2}", "{n_items: 18446744073709551616}"), "bad.yaml:6: n_items must be a whole number 0-1,000,000, not 1844674407"),
    (lambda t: t + "  judge:\n    template: nbs/experiments/t_judge.ipynb\n", "bad.yaml:12: key 'judge' given twice (first on line 4)"),
    (lambda t: t.replace('nbs/experiments/corrgap_audit.ipynb', 'settings.ini'), "bad.yaml:10: template 'settings.ini' cannot be read"),
    (lambda t: t.replace("    grid: {dataset: [topical_chat]}\n", "    grid: []\n"), "bad.yaml:11: experiment 'audit' expands to no run"),
    (lambda t: t.replace('backend: llamacpp', 'backend: openai, model: m'), "bad.yaml:2: backend 'openai' needs base_url"),   # before: failed 15 s into the run
    (lambda t: t.replace('backend: llamacpp', 'backend: vllm'), "bad.yaml:2: backend 'vllm' needs model"),
])
def test_bad_config_is_rejected_with_its_line(repo, edit, message):
    cfg = repo/'bad.yaml'; cfg.write_text(edit(BAD))
    r = sweep(repo, cfg)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not (repo/'papermill_runs').exists() and not (repo/'.snakemake').exists()

def test_match_that_selects_nothing_is_an_error(repo):
    cfg = repo/'s.yaml'; cfg.write_text(SWEEP)
    r = sweep(repo, cfg, '--match', 'n_items=7')
    assert r.returncode == 2 and "--match n_items=7 selects no run; the runs have n_items in ['1', '2']" in r.stderr, r.stdout + r.stderr

def test_runs_under_the_sweep_get_a_thread_budget(repo, monkeypatch):
    """With -j 2 every run's kernel sees max(1, cores // 2) threads for llama.cpp, OpenMP and BLAS (a user's own limit is kept).
    Each run's rule executes inside the sweep's one snakemake process: Snakemake's default spawned a new snakemake per
    run, which read the Snakefile and the sweep file again (about 5 s of every run of the main job)."""
    from judgelab.run.sweep import THREAD_VARS, thread_budget
    for v in THREAD_VARS: monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv('NUMEXPR_NUM_THREADS', '7')                       # set by the user: kept
    template(repo/'nbs'/'experiments'/'threads.ipynb', 'x: int = 0  # unused',
             "import os, json, numpy, threadpoolctl, psutil\n"
             "print(json.dumps(dict(env={v: os.environ.get(v) for v in " + repr(THREAD_VARS) + "},\n"
             "      pools=sorted({p['num_threads'] for p in threadpoolctl.threadpool_info()}),\n"
             "      snakemakes=sum('snakemake' in ' '.join(p.cmdline()) for p in psutil.Process().parents()))))")
    cfg = repo/'threads.yaml'
    cfg.write_text("name: threads\nexperiments:\n  a:\n    template: nbs/experiments/threads.ipynb\n    grid: {x: [1, 2]}\n")
    r = sweep(repo, cfg, '-j', '2', '--no-progress')
    assert r.returncode == 0, r.stdout + r.stderr
    want = str(thread_budget(2))
    outs = sorted((repo/'papermill_runs'/'threads'/'a').glob('*.ipynb')); assert len(outs) == 2, outs
    for out in outs:
        seen = json.loads(nbformat.read(out, as_version=4).cells[-1].outputs[0]['text'])
        assert seen['env'] == {**{v: want for v in THREAD_VARS}, 'NUMEXPR_NUM_THREADS': '7'}, seen
        assert seen['pools'] == [int(want)], seen                       # numpy's BLAS pool really is limited
        assert seen['snakemakes'] == 1, seen                            # the kernel runs under the sweep's snakemake, no second one

def test_runs_start_with_matplotlibs_font_cache_built(repo, tmp_path):
    """On a fresh machine matplotlib builds its font cache at its first import; a build that takes over 5 s (parallel runs
    on a busy machine: the fresh-clone CI's SLURM sweep) warns on stderr, into the executed notebook. The sweep builds the
    cache before any kernel starts, so the kernels find it."""
    mpl = tmp_path/'mpl'; mpl.mkdir()                                   # no font cache yet: a fresh machine
    template(repo/'nbs'/'experiments'/'fonts.ipynb', 'x: int = 0  # unused',
             "import os, json\nprint(json.dumps(sorted(os.listdir(os.environ['MPLCONFIGDIR']))))")
    cfg = repo/'fonts.yaml'
    cfg.write_text("name: fonts\nexperiments:\n  a:\n    template: nbs/experiments/fonts.ipynb\n")
    r = subprocess.run([str(BIN/'judgelab'), 'sweep', str(cfg), '--no-progress'], capture_output=True, text=True, cwd=repo, timeout=600,
                       env={**os.environ, 'PYTHONPATH': str(repo), 'MPLCONFIGDIR': str(mpl)})
    assert r.returncode == 0, r.stdout + r.stderr
    out = nbformat.read(next((repo/'papermill_runs'/'fonts').glob('*.ipynb')), as_version=4)
    seen = json.loads(out.cells[-1].outputs[0]['text'])
    assert any(f.startswith('fontlist') for f in seen), seen            # the kernel started with the cache already built

def test_shipped_configs_validate():
    from judgelab.run.sweep import load_sweep
    emb = load_sweep(ROOT/'configs'/'embedded.yaml')
    from judgelab.methods import METHODS
    methods = {(r.parameters['dataset'], e if isinstance(e, str) else e['method']) for r in emb.runs if r.experiment == 'judge' for e in r.parameters['methods']}
    datasets = ['summeval', 'topical_chat', 'hanna', 'opinsummeval', 'qags']
    assert methods == {(d, m) for d in datasets for m in METHODS}, 'every method on every dataset'
    paper = load_sweep(ROOT/'configs'/'paper.yaml')
    assert {r.parameters.get('backend') for r in paper.runs if r.experiment.startswith('judge')} <= {'vllm', 'openai'}

def test_committed_main_job_is_current():
    """On a fresh clone `make reproduce` skips every run of the main job: Snakemake's committed records agree with the
    committed notebooks and outputs, the library code, the templates and the dataset registry (a library change that a
    run imports makes this fail until the run is redone and committed)."""
    r = subprocess.run([str(BIN/'judgelab'), 'sweep', 'configs/embedded.yaml', '--dry-run'], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [l.split() for l in r.stdout.splitlines() if l.split()[1:2] and l.split()[1].startswith('embedded/')]
    assert lines and all(f[2] == 'done' for f in lines), r.stdout

def test_committed_main_job_scores_on_every_dimension_and_names_one_clean_commit():
    """The embedded pipeline check checks: every method variant of the committed judge runs parsed at least one score on
    every (dataset, dimension) it was asked for (DimCheck: at least one analysis edited and rescored), every run is
    healthy, and every artefact of the main job names one commit with a clean tree."""
    judged = sorted((ROOT/'outputs'/'embedded'/'judge').glob('*/tables/judged.csv'))
    assert len(judged) == 5, judged
    for f in judged:
        t = pd.read_csv(f)
        assert (t.status == 'ok').all() and (t.scored > 0).all(), (f.parts[-3], t[t.status != 'ok'][['label', 'status', 'no_score_on', 'top_failures']].to_dict('records'))
        assert (t.rescored.dropna() > 0).all(), f
        assert json.loads((f.parents[1]/'health.json').read_text()) == dict(status='ok', problems=[]), f
    rows = [json.loads(l) for m in sorted((ROOT/'outputs'/'embedded').rglob('manifest.jsonl')) for l in m.read_text().splitlines() if l.strip()]
    assert {r['commit'] for r in rows} and len({r['commit'] for r in rows}) == 1, {r['commit'] for r in rows}
    assert not [r['artifacts'] for r in rows if r['dirty'] or r.get('diff')]

def test_filtered_and_overridden_sweep_keeps_every_run_id_and_deletes_nothing(repo):
    """The README's 'own server' command shape (--only, --match, --set) once collapsed the run id to `s/judge`, the parent of the
    committed run folders, which Snakemake then emptied; later it rewrote the sweep record (28 runs to 10) and outputs/README.md."""
    template(repo/'nbs'/'experiments'/'t_judge.ipynb', JUDGE[0] + "\nbase_url: str = ''", JUDGE[1])
    cfg = repo/'s.yaml'; cfg.write_text(SWEEP)
    assert sweep(repo, cfg, '--only', 'judge', '--no-progress').returncode == 0
    before = {p: p.read_bytes() for p in (repo/'outputs'/'s'/'judge').rglob('*') if p.is_file()}
    kept = {p: p.read_bytes() for p in (repo/'papermill_runs'/'sweeps'/'s.json', repo/'outputs'/'README.md')}
    r = sweep(repo, cfg, '--only', 'judge', '--match', 'n_items=1', '--no-progress')   # a filter alone: the same id, current
    assert r.returncode == 0 and '1 runs: 0 ran, 1 already done' in r.stdout, r.stdout + r.stderr
    r = sweep(repo, cfg, '--only', 'judge', '--match', 'n_items=1', '--set', 'backend=openai', '--set', 'base_url=http://127.0.0.1:8011/v1',
              '--set', 'model=fake-judge', '--set', 'n_items=3', '--no-progress')
    assert r.returncode == 0 and '1 runs: 1 ran' in r.stdout, r.stdout + r.stderr
    variant = [d.name for d in (repo/'outputs'/'s'/'judge').iterdir() if '__set-' in d.name]
    assert len(variant) == 1 and variant[0].startswith('topical_chat__SmolLM2-135M-Instruct__n_items-1__set-backend-openai__'), variant
    assert {p: p.read_bytes() for p in before} == before and all(p.exists() for p in before)   # nothing of the committed runs touched
    assert {p: p.read_bytes() for p in kept} == kept       # the configured sweep's record and the outputs index, as they were
    own = list((repo/'papermill_runs'/'sweeps'/'partial').glob('s__*.json'))
    assert len(own) == 2 and any(variant[0] in r.read_text() for r in own), own   # each --match/--set call records its runs in its own file
    assert {v[0] for k, v in states(repo, cfg).items() if k.startswith('s/judge/')} == {'done'}

def test_a_run_folder_holding_other_runs_refuses(repo):
    cfg = repo/'s.yaml'; cfg.write_text(SWEEP)
    assert sweep(repo, cfg, '--only', 'judge', '--no-progress').returncode == 0
    one = repo/'one.yaml'; one.write_text("name: s\nexperiments:\n  judge:\n    template: nbs/experiments/t_judge.ipynb\n")
    r = sweep(repo, one, '--no-progress')                          # its single run is `s/judge`: the folder of the two above
    assert r.returncode != 0 and 'holds results of other runs' in (r.stdout + r.stderr), r.stdout + r.stderr
    assert (repo/'outputs'/J1/'manifest.jsonl').exists() and (repo/'outputs'/J2/'manifest.jsonl').exists()

# --- run ids: properties over generated grids (hypothesis) -----------------------------------------------------------
_ID_PART = st.text(alphabet='ax-_/.1', min_size=1, max_size=6)

@given(st.lists(_ID_PART, min_size=1, max_size=8))
@settings(max_examples=300, deadline=None)
def test_check_nesting_refuses_exactly_the_ids_that_hold_another(parts):
    ids = [f's/e/{p}' for p in parts]
    nested = any(b.startswith(a + '/') for a in ids for b in ids)
    try: check_nesting(ids); refused = False
    except ConfigError: refused = True
    assert refused == nested, ids

_VALUE = st.one_of(st.sampled_from(['a', 'b', 'a-b', 'x/y', 'summeval', '']), st.integers(-2, 3), st.booleans(),
                   st.lists(st.sampled_from(['a', 'b']), max_size=2), st.dictionaries(st.sampled_from(['k', 'm']), st.integers(0, 2), max_size=2),
                   st.text(min_size=25, max_size=40))

_PARAMS = st.dictionaries(st.sampled_from(['dataset', 'n_items', 'dims', 'options', 'seed', 'backend', 'model']), _VALUE, min_size=1, max_size=4)

@given(st.lists(_PARAMS, min_size=1, max_size=6, unique_by=lambda p: json.dumps(p, sort_keys=True)), st.data())
@settings(max_examples=300, deadline=None)
def test_run_ids_are_distinct_folders_that_never_hold_one_another_and_ignore_filtering(grid, data):
    """Whatever the grid: every run gets its own id, no run's folder holds another's, and an id depends on the
    whole grid only (the ids of a filtered sweep are the full sweep's ids of the runs it keeps)."""
    runs = assign_ids([Run('e', Path('t.ipynb'), dict(p)) for p in grid], 's')
    ids = [r.id for r in runs]
    assert len(set(ids)) == len(ids), ids
    check_nesting(ids)
    assert all(i.startswith('s/e') and '//' not in i and not i.endswith('/') for i in ids), ids
    keep = data.draw(st.lists(st.sampled_from(range(len(grid))), unique=True, min_size=1))
    again = assign_ids([Run('e', Path('t.ipynb'), dict(p)) for p in grid], 's')   # ids are assigned before any filter
    assert [again[k].id for k in keep] == [ids[k] for k in keep]

def test_a_sweep_says_each_run_as_it_starts_and_ends_with_an_eta_from_its_last_run(repo):
    cfg = repo/'s.yaml'; cfg.write_text(SWEEP)
    r = sweep(repo, cfg, '--only', 'other')
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert 'sweep s: 1 runs; Snakemake checks which are current' in out, out
    assert re.search(r'\[judgelab\] \d\d:\d\d:\d\d start s/other\n', out) and re.search(r'\[judgelab\] \d\d:\d\d:\d\d ok s/other in \d+ s', out), out
    r = sweep(repo, cfg, '--only', 'other', '--force')          # the second time: how long the last run of this id took, and when it should end
    assert re.search(r'start s/other \(its last run took \d+ s: done about \d\d:\d\d\)', r.stdout + r.stderr), r.stdout + r.stderr
