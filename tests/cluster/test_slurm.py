"""`judgelab sweep --executor slurm` against a real SLURM cluster: slurmctld, slurmd, slurmdbd (with MariaDB) and munge,
started on 127.0.0.1 by tests/cluster/slurm.sh (Debian's slurm-wlm, installed when missing) and stopped afterwards.

A small sweep (the data overview, an audit with few resamples, two embedded judge runs of 2 items) is submitted
through Snakemake's SLURM executor plugin: each run is a SLURM job that sacct lists as COMPLETED with its rule in the
comment and the resources its sweep file asked for; its tables, judgments and executed notebooks equal those of the
same sweep run on this machine (timings aside). Two judge jobs that send the same requests at once leave one cache row
per request. A run cancelled with scancel is reported as failed and reruns on the next call.
Two runs that ask for the node's one GPU never run at once, and a run's threads follow its --cpus-per-task.

Needs root or password-less sudo (slurmd, munged); without either the module is skipped, saying so. CI runs as root."""

import difflib, hashlib, json, os, re, shutil, sqlite3, subprocess, time
from pathlib import Path
import nbformat, pandas as pd, pytest
from tests.conftest import BIN, ROOT
from tests.run.conftest import make_repo, template

SCRIPT = ROOT/'tests'/'cluster'/'slurm.sh'

def _root_or_sudo()->bool:
    if os.geteuid() == 0: return True
    return bool(shutil.which('sudo')) and subprocess.run(['sudo', '-n', 'true'], capture_output=True).returncode == 0

pytestmark = pytest.mark.skipif(not _root_or_sudo(), reason="a SLURM cluster needs root or password-less sudo (slurmd, munged): "
                                                          "run the tests as root, or tests/cluster/slurm.sh run DIR pytest tests/cluster")

@pytest.fixture(scope='module')
def cluster(tmp_path_factory):
    "A running single-node cluster: its folder; SLURM_CONF is set for the module's commands. Every daemon is stopped after."
    d = tmp_path_factory.mktemp('slurm')
    r = subprocess.run([str(SCRIPT), 'start', str(d)], capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        subprocess.run([str(SCRIPT), 'stop', str(d)], capture_output=True, timeout=120)
        pytest.fail(f"the cluster did not start:\n{r.stderr[-3000:]}\n" + '\n'.join(f'{p.name}:\n{p.read_text()[-1500:]}' for p in sorted((d/'log').glob('*.log'))))
    old = os.environ.get('SLURM_CONF')
    os.environ['SLURM_CONF'] = str(d/'slurm.conf')
    pids = [int(l.split()[0]) for l in (d/'pids').read_text().splitlines()]
    yield d
    subprocess.run([str(SCRIPT), 'stop', str(d)], capture_output=True, timeout=300)
    if old is None: os.environ.pop('SLURM_CONF', None)
    else: os.environ['SLURM_CONF'] = old
    left = [p for p in pids if Path(f'/proc/{p}').exists() and Path(f'/proc/{p}/stat').read_text().split()[2] != 'Z']
    assert not left, f"daemons still running after stop: {left}"
    assert not Path('/etc/slurm/slurm.conf').is_symlink() or Path(os.readlink('/etc/slurm/slurm.conf')).parent != d

@pytest.fixture(scope='module')
def profile(tmp_path_factory, cluster)->Path:
    "A Snakemake profile for the test cluster: configs/slurm/config.yaml's settings, with its partition, account and short status intervals."
    p = tmp_path_factory.mktemp('profile')
    (p/'config.yaml').write_text("executor: slurm\njobs: 4\nlatency-wait: 5\nseconds-between-status-checks: 2\n"
                                 "slurm-init-seconds-before-status-checks: 1\nslurm-status-command: squeue\n"
                                 "default-resources:\n  slurm_partition: debug\n  slurm_account: judgelab\n  runtime: 30\n  mem_mb: 2000\n  cpus_per_task: 1\n")
    return p

def sweep(repo:Path, *args, timeout=900, wait=True):
    cmd = [str(BIN/'judgelab'), 'sweep', *map(str, args)]
    env = {**os.environ, 'PYTHONPATH': str(repo), 'JUDGELAB_RAW': str(ROOT/'data'/'raw')}
    for v in ('JUDGELAB_OUTPUTS', 'JUDGELAB_RUNS', 'JUDGELAB_RUN_ID', 'JUDGELAB_RUN', 'JUDGELAB_ROOT', 'JUDGELAB_LLAMA_THREADS', *[k for k in os.environ if k.endswith('_NUM_THREADS')]):
        env.pop(v, None)
    if not wait: return subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)

def sacct(*jobs)->pd.DataFrame:
    "sacct's records of jobs (one row per job, not per step)."
    f = ['JobID', 'JobName', 'State', 'Comment', 'ReqTRES', 'Timelimit', 'Start', 'End']
    r = subprocess.run(['sacct', '-X', '-P', '-n', '-o', ','.join(f), *(['-j', ','.join(map(str, jobs))] if jobs else ['-S', '2000-01-01'])],
                       capture_output=True, text=True, check=True)
    rows = [l.split('|') for l in r.stdout.splitlines() if l.strip()]
    df = pd.DataFrame(rows, columns=f)
    for c in ('Start', 'End'): df[c] = pd.to_datetime(df[c], errors='coerce')
    return df

FINAL = ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'OUT_OF_MEMORY', 'NODE_FAIL')

def new_jobs(before:set, n:int, timeout:float=120)->pd.DataFrame:
    """sacct's records of the jobs not in `before`, once there are `n` of them, each in a final state with its end time: slurmctld
    reports a job's end to slurmdbd a moment after squeue (which the sweep watches) shows it, so sacct may lag behind the sweep."""
    deadline = time.time() + timeout
    while True:
        jobs = sacct().query('JobID not in @before')
        if len(jobs) >= n and jobs.State.str.startswith(FINAL).all() and jobs.End.notna().all(): return jobs
        if time.time() > deadline: return jobs           # the caller's assertions say what is missing
        time.sleep(0.5)

SWEEP = """name: c
defaults: {seed: 0}
experiments:
  data_overview:
    template: nbs/experiments/data_overview.ipynb
    parameters: {datasets: [opinsummeval]}
  corrgap_audit:
    template: nbs/experiments/corrgap_audit.ipynb
    resources: {cpus: 1, mem: 3G, time: 20m}
    parameters: {dataset: opinsummeval, n_perm: 99, n_boot_excess: 50, n_perm_quality: 19, n_boot_quality: 20, n_boot: 50, n_sim: 20}
  judge:
    template: nbs/experiments/judge.ipynb
    priority: 2
    resources: {cpus: 1, mem: 2G, time: 15m}
    parameters: {dataset: topical_chat, n_items: 2, max_chars: 900, n_boot: 20, n_perm: 19,
                 methods: [{method: analyze_rate, options: {max_tokens: 48, complete_score: true}}]}
    grid: {dims: [[coherence], [engagingness]]}
"""
JUDGES = ['c/judge/topical_chat__SmolLM2-135M-Instruct__dims-coherence', 'c/judge/topical_chat__SmolLM2-135M-Instruct__dims-engagingness']
RUNS = ['c/data_overview', 'c/corrgap_audit', *JUDGES]
TIMING = re.compile(r'\d+(\.\d+)? s\b')

def cache_rows(repo:Path)->tuple:
    "(rows, distinct keys) of a copy's generation cache."
    with sqlite3.connect(repo/'outputs'/'cache'/'generations.sqlite') as c:
        return c.execute('SELECT COUNT(*), COUNT(DISTINCT key) FROM generations').fetchone()

def _outputs(repo:Path)->dict:
    "Every result file of the sweep, as what must match: tables without their timing columns, judgments without `seconds`, manifests without `created`."
    out = {}
    for f in sorted((repo/'outputs'/'c').rglob('*')):
        rel = str(f.relative_to(repo/'outputs'))
        if not f.is_file() or f.stem == 'cost': continue          # the cost table and figure: seconds, by design
        if f.suffix == '.parquet': out[rel] = pd.read_parquet(f).drop(columns=['seconds']).to_json()
        elif f.name == 'manifest.jsonl': out[rel] = [{k: v for k, v in json.loads(l).items() if k != 'created'} for l in f.read_text().splitlines()]
        else: out[rel] = f.read_bytes()
    return out

def _cells(nb:Path)->list:
    """A notebook's code cells and outputs, with times in seconds masked and consecutive stream outputs joined; the cost cell (its
    table, figure and text are timings) without its outputs."""
    cells = []
    for c in nbformat.read(nb, 4).cells:
        if c.cell_type != 'code': continue
        if 'cost_table(' in c.source:
            cells.append((c.source, 'timings'))
            continue
        outs = []
        for o in c.outputs:
            o = {k: v for k, v in o.items() if k != 'execution_count'}
            if outs and o.get('output_type') == 'stream' and outs[-1].get('output_type') == 'stream' and outs[-1]['name'] == o['name']:
                outs[-1] = {**outs[-1], 'text': outs[-1]['text'] + o['text']}   # one print, split in two stream outputs when the kernel flushed between
                continue                                                          # its text and its newline (a busy machine: the fresh-clone CI of 9a500c4)
            outs.append(o)
        for o in outs:
            if 'text' in o: o['text'] = TIMING.sub('<t> s', o['text'])
        cells.append((c.source, outs))
    return cells

def _short(o):
    "An output with its images as their length and hash (a differing image shows as a differing line)."
    if not isinstance(o, dict) or 'data' not in o: return o
    img = lambda v: f'<{len(v)} chars, sha256 {hashlib.sha256(str(v).encode()).hexdigest()[:12]}>'
    return {**o, 'data': {k: img(v) if k.startswith('image/') else v for k, v in o['data'].items()}}

def _cell_diff(rid:str, x:list, y:list)->str:
    "What differs between two notebooks' `_cells`: each differing cell's source and a unified diff of its outputs."
    if len(x) != len(y): return f'{rid}: {len(x)} code cells on the cluster, {len(y)} here'
    dump = lambda outs: json.dumps([_short(o) for o in outs] if isinstance(outs, list) else outs, indent=1, sort_keys=True).splitlines()
    out = [f'{rid}: cells differ (---: on the cluster, +++: here)']
    for (src, a), (_, b) in zip(x, y):
        if a != b: out += [f'cell: {src[:300]!r}', *list(difflib.unified_diff(dump(a), dump(b), lineterm='', n=1))[:60]]
    return '\n'.join(out)

def test_a_sweep_on_slurm_runs_each_run_as_a_job_and_equals_the_local_sweep(cluster, profile, tmp_path):
    repo = make_repo(tmp_path/'slurm')
    (repo/'c.yaml').write_text(SWEEP)
    before = set(sacct().JobID)
    r = sweep(repo, 'c.yaml', '--executor', 'slurm', '--profile', profile, '-j', '4')
    assert r.returncode == 0 and '4 runs: 4 ran, 0 already done (skipped), 0 failed' in r.stdout, r.stdout[-4000:] + r.stderr[-4000:]
    jobs = new_jobs(before, 4)
    rules = {i: re.sub(r'\W', '_', i.split('/', 1)[1]) for i in RUNS}       # a run's rule: its id without the sweep's name (`Run.rule`)
    # one SLURM job per run, COMPLETED, its rule (named after the run id) in the comment
    assert sorted(jobs.Comment) == sorted(f'rule_{rules[i]}' for i in RUNS), jobs
    assert set(jobs.State) == {'COMPLETED'}, jobs
    by = jobs.set_index('Comment')
    # the sweep file's resources became the jobs' requests; the profile's defaults filled the rest
    audit, overview = by.loc[f"rule_{rules['c/corrgap_audit']}"], by.loc[f"rule_{rules['c/data_overview']}"]
    assert ('cpu=1' in audit.ReqTRES and 'mem=3G' in audit.ReqTRES and audit.Timelimit == '00:20:00'), audit
    assert ('mem=2000M' in overview.ReqTRES and overview.Timelimit == '00:30:00'), overview
    j0 = by.loc[f'rule_{rules[JUDGES[0]]}']
    assert 'mem=2G' in j0.ReqTRES and j0.Timelimit == '00:15:00', j0
    # the generation cache, written by both judge jobs (4 requests each; which jobs run at once is SLURM's choice here,
    # the next test makes two run at once): every request kept
    assert cache_rows(repo) == (8, 8)
    assert [tuple(pd.read_csv(repo/'outputs'/j/'tables'/'cost.csv').iloc[0][['requests', 'generated']]) for j in JUDGES] == [(4, 4)]*2
    # the same sweep on this machine (its own, cold, cache): the same results, timings aside
    local = make_repo(tmp_path/'local')
    (local/'c.yaml').write_text(SWEEP)
    r = sweep(local, 'c.yaml', '-j', '2', '--no-progress')
    assert r.returncode == 0 and '4 runs: 4 ran' in r.stdout, r.stdout[-4000:] + r.stderr[-4000:]
    a, b = _outputs(repo), _outputs(local)
    assert sorted(a) == sorted(b) and len(a) > 40, sorted(set(a) ^ set(b))
    assert [f for f in a if a[f] != b[f]] == []
    for rid in RUNS:
        x, y = _cells(repo/'papermill_runs'/f'{rid}.ipynb'), _cells(local/'papermill_runs'/f'{rid}.ipynb')
        assert x == y, _cell_diff(rid, x, y)
    # both now current: nothing runs again, on the cluster or here
    r = sweep(repo, 'c.yaml', '--executor', 'slurm', '--profile', profile, '-j', '4')
    assert r.returncode == 0 and '4 runs: 0 ran, 4 already done (skipped)' in r.stdout, r.stdout[-3000:]

RACE = """name: r
experiments:
  judge:
    template: nbs/experiments/judge.ipynb
    resources: {cpus: 1, mem: 2G, time: 15m}
    parameters: {dataset: topical_chat, n_items: 2, max_chars: 900, dims: [naturalness], n_boot: 20, n_perm: 19, seed: 0,
                 methods: [{method: analyze_rate, options: {max_tokens: 48, complete_score: true}}]}
    grid: {epsilon: [0.0, 0.1]}
"""

def test_judge_jobs_asking_the_same_requests_at_once_share_the_cache(cluster, profile, tmp_path):
    """Two judge runs (they differ in a statistics parameter only) send the same 4 requests from two SLURM jobs at once:
    the cache keeps one row per request, each run gets all 4 replies, and both runs hold the same replies."""
    repo = make_repo(tmp_path/'repo')
    (repo/'r.yaml').write_text(RACE)
    before = set(sacct().JobID)
    r = sweep(repo, 'r.yaml', '--executor', 'slurm', '--profile', profile, '-j', '4')
    assert r.returncode == 0 and '2 runs: 2 ran' in r.stdout, r.stdout[-4000:] + r.stderr[-3000:]
    jobs = new_jobs(before, 2)
    assert len(jobs) == 2 and set(jobs.State) == {'COMPLETED'}, jobs
    j0, j1 = jobs.iloc[0], jobs.iloc[1]
    assert j0.Start < j1.End and j1.Start < j0.End, f"the two judge jobs did not run at once: {j0.Start}-{j0.End}, {j1.Start}-{j1.End}"
    runs = [f'r/judge/topical_chat__SmolLM2-135M-Instruct__epsilon-{e}' for e in ('0.0', '0.1')]
    costs = [pd.read_csv(repo/'outputs'/j/'tables'/'cost.csv').iloc[0] for j in runs]
    assert cache_rows(repo) == (4, 4) and all(c.requests == 4 and c.cache_hits + c.generated == 4 for c in costs), costs
    replies = [pd.read_parquet(next((repo/'outputs'/j/'judgments').rglob('*.parquet')))[['item_id', 'key', 'completion', 'score']] for j in runs]
    pd.testing.assert_frame_equal(replies[0], replies[1])
    # forced again: every request is answered by the cache
    r = sweep(repo, 'r.yaml', '--executor', 'slurm', '--profile', profile, '-j', '4', '--force')
    assert r.returncode == 0 and '2 runs: 2 ran' in r.stdout, r.stdout[-3000:]
    assert [pd.read_csv(repo/'outputs'/j/'tables'/'cost.csv').iloc[0].cache_hits for j in runs] == [4, 4] and cache_rows(repo) == (4, 4)

HOLD = ("x: int = 0",
        "import time\nfrom judgelab.core import paths\n"
        "(paths.root/'started').write_text('1')\n"
        "while (paths.root/'hold').exists(): time.sleep(0.2)\n"
        "paths.tables.mkdir(parents=True, exist_ok=True)\n(paths.tables/'x.txt').write_text(str(x))")

def test_a_run_cancelled_with_scancel_is_failed_and_reruns_on_the_next_call(cluster, profile, tmp_path):
    repo = make_repo(tmp_path/'repo')
    template(repo/'nbs'/'experiments'/'t_hold.ipynb', *HOLD)
    (repo/'h.yaml').write_text("name: h\nexperiments:\n  hold:\n    template: nbs/experiments/t_hold.ipynb\n"
                               "  other:\n    template: nbs/experiments/t_other.ipynb\n")
    (repo/'hold').write_text('1')
    before = set(sacct().JobID)
    p = sweep(repo, 'h.yaml', '--executor', 'slurm', '--profile', profile, '-j', '2', wait=False)
    try:
        deadline = time.time() + 300
        while not (repo/'started').exists():         # the run's kernel is executing it, inside its SLURM job
            assert p.poll() is None and time.time() < deadline, p.stdout.read() if p.poll() is not None else 'the run did not start in 300 s'
            time.sleep(0.5)
        q = subprocess.run(['squeue', '-h', '-o', '%i %k'], capture_output=True, text=True, check=True).stdout.split('\n')
        job = next(l.split()[0] for l in q if l.strip().endswith('rule_hold'))
        subprocess.run(['scancel', job], check=True)
        out, _ = p.communicate(timeout=300)
    finally:
        if p.poll() is None: p.kill()
    assert p.returncode != 0 and 'FAILED h/hold' in out and '1 ran' in out, out[-4000:]
    states = new_jobs(before, 2).set_index('JobID').State      # the cancelled job and `other`'s, once sacct has their ends
    assert states[job].startswith('CANCELLED'), states
    assert not (repo/'papermill_runs'/'h'/'hold.ipynb').exists()       # never taken for a finished run
    (repo/'hold').unlink()
    r = sweep(repo, 'h.yaml', '--executor', 'slurm', '--profile', profile, '-j', '2')
    assert r.returncode == 0 and '2 runs: 1 ran, 1 already done (skipped), 0 failed' in r.stdout, r.stdout[-4000:] + r.stderr[-3000:]
    assert (repo/'outputs'/'h'/'hold'/'tables'/'x.txt').read_text() == '0'

ENV = ("x: int = 0",
       "import os, time, json\nfrom judgelab.core import paths\nt0 = time.time(); time.sleep(3)\n"
       "paths.tables.mkdir(parents=True, exist_ok=True)\n"
       "(paths.tables/'env.json').write_text(json.dumps(dict(t0=t0, t1=time.time(), omp=os.environ.get('OMP_NUM_THREADS'), "
       "llama=os.environ.get('JUDGELAB_LLAMA_THREADS'), cpus=len(os.sched_getaffinity(0)))))")

def test_gpu_runs_never_share_the_gpu_and_threads_follow_the_cores(cluster, profile, tmp_path):
    repo = make_repo(tmp_path/'repo')
    template(repo/'nbs'/'experiments'/'t_env.ipynb', *ENV)
    (repo/'g.yaml').write_text("name: g\nexperiments:\n  gpu:\n    template: nbs/experiments/t_env.ipynb\n    resources: {gpus: 1, cpus: 1}\n"
                               "    grid: {x: [1, 2]}\n  wide:\n    template: nbs/experiments/t_env.ipynb\n")
    # `wide` asks for nothing: it gets the profile's default cores (2 here), and its kernel's threads follow them
    two = tmp_path/'profile'; two.mkdir()
    (two/'config.yaml').write_text((profile/'config.yaml').read_text().replace('cpus_per_task: 1', 'cpus_per_task: 2'))
    before = set(sacct().JobID)
    r = sweep(repo, 'g.yaml', '--executor', 'slurm', '--profile', two, '-j', '4')
    assert r.returncode == 0 and '3 runs: 3 ran' in r.stdout, r.stdout[-4000:] + r.stderr[-3000:]
    jobs = new_jobs(before, 3).set_index('Comment')
    assert all('gres/gpu=1' in jobs.loc[f'rule_gpu_x_{x}'].ReqTRES for x in (1, 2)) and 'cpu=2' in jobs.loc['rule_wide'].ReqTRES, jobs
    env = {n: json.loads((repo/'outputs'/'g'/n/'tables'/'env.json').read_text()) for n in ('gpu/x-1', 'gpu/x-2', 'wide')}
    a, b = env['gpu/x-1'], env['gpu/x-2']
    assert a['t1'] <= b['t0'] or b['t1'] <= a['t0'], f"the two runs that ask for the node's one GPU ran at once: {a}, {b}"
    # each run's kernel limits its threads to the cores SLURM gave its job (--cpus-per-task)
    assert [(e['omp'], e['llama'], e['cpus']) for e in env.values()] == [('1', '1', 1), ('1', '1', 1), ('2', '2', 2)], env
