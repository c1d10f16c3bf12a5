"""Hostile sweep files and commands: wrong types, recursive aliases, alias bombs, huge grids and templates outside the
repository; `--unlock` while a sweep runs. Each is a clear error (the CLI's exit 2, no traceback) before any expensive
work starts. The CLI runs in this process (`judgelab.cli.main`) except where a second process is the point (--unlock);
the alias bomb and the huge grid run under a guard alarm (before the fix they ran for minutes and took gigabytes)."""

import os, signal, subprocess, time
from contextlib import contextmanager
from pathlib import Path
import pytest
from judgelab.cli import main
from tests.conftest import BIN, ROOT, GUARD_S, guard, refused
from tests.run.conftest import make_repo, template

AUDIT = "nbs/experiments/corrgap_audit.ipynb"

# --- row 16: types and recursive aliases ------------------------------------------------------------------------------

def test_template_that_is_not_a_string_names_its_key(tmp_path, cli):
    cfg = tmp_path/'h.yaml'; cfg.write_text("name: h\nexperiments:\n  audit:\n    template: 5\n")
    refused(cli('sweep', cfg, '--dry-run'), 'h.yaml:4: experiments.audit.template must be a string', 'not a number (5)')   # before: TypeError

def test_needs_that_is_not_a_list_names_its_key(tmp_path, cli):
    cfg = tmp_path/'h.yaml'
    cfg.write_text(f"name: h\nexperiments:\n  first:\n    template: {AUDIT}\n  audit:\n    template: {AUDIT}\n    needs: 5\n")
    refused(cli('sweep', cfg, '--dry-run'), 'h.yaml:7: experiments.audit.needs must be a list of names of experiments', 'not a number (5)')

def test_recursive_alias_is_refused_with_its_line(tmp_path, cli):
    cfg = tmp_path/'h.yaml'
    cfg.write_text(f"name: h\ndefaults: &d\n  seed: *d\nexperiments:\n  audit:\n    template: {AUDIT}\n")
    refused(cli('sweep', cfg, '--dry-run'), 'h.yaml:2: a recursive alias')                                   # before: RecursionError

# --- row 17: bounded expansion ----------------------------------------------------------------------------------------

def test_billion_laughs_is_refused_before_it_is_built(tmp_path, cli):
    levels = ['  l0: &l0 [' + ', '.join(['lol'] * 10) + ']']
    levels += [f'  l{k}: &l{k} [' + ', '.join([f'*l{k - 1}'] * 10) + ']' for k in range(1, 9)]   # 9 levels: 10^9 values
    cfg = tmp_path/'h.yaml'
    cfg.write_text("name: h\ndefaults:\n" + '\n'.join(levels) + f"\nexperiments:\n  audit:\n    template: {AUDIT}\n")
    refused(cli('sweep', cfg, '--dry-run'), 'h.yaml:7: this value expands to more than 100,000 values', 'MAX_YAML_NODES')

def test_a_million_run_grid_is_refused_before_it_is_expanded(tmp_path, cli):
    vals = '[' + ', '.join(map(str, range(1000))) + ']'
    cfg = tmp_path/'h.yaml'
    cfg.write_text(f"name: h\nexperiments:\n  audit:\n    template: {AUDIT}\n    grid:\n      n_boot: {vals}\n      n_sim: {vals}\n")
    refused(cli('sweep', cfg, '--dry-run'), "h.yaml:5: experiment 'audit' expands to 1,000,000 runs (grid n_boot 1,000 x n_sim 1,000)",
            'at most 5,000 runs')

# --- row 18: templates from the repository only ----------------------------------------------------------------------

@pytest.mark.parametrize('spelling', ['relative', 'absolute'])
def test_template_outside_the_repository_is_refused(tmp_path, cli, monkeypatch, spelling):
    template(tmp_path/'evil.ipynb', "x: int = 0", "open('executed', 'w').write('ran')")
    tpl = os.path.relpath(tmp_path/'evil.ipynb', ROOT) if spelling == 'relative' else str(tmp_path/'evil.ipynb')   # '../../tmp/...'
    cfg = tmp_path/'h.yaml'; cfg.write_text(f"name: h\nexperiments:\n  evil:\n    template: {tpl}\n")
    refused(cli('sweep', cfg, '--dry-run'), f"h.yaml:4: template '{tpl}' is outside the repository", 'JUDGELAB_TEMPLATE_DIRS')   # before: accepted
    assert not (tmp_path/'runs').exists() and not (tmp_path/'outputs').exists()
    # the documented allow-list: the machine's environment names the folder (not the sweep file)
    monkeypatch.setenv('JUDGELAB_TEMPLATE_DIRS', str(tmp_path))
    from judgelab.run.sweep import load_sweep
    assert [r.template.resolve() for r in load_sweep(cfg).runs] == [(tmp_path/'evil.ipynb').resolve()]

# --- row 19: --unlock while a sweep runs -------------------------------------------------------------------------------

@pytest.fixture
def repo(tmp_path, monkeypatch):
    "A copy of the project (test_sweep.make_repo) with its own package on PYTHONPATH."
    for v in ('JUDGELAB_OUTPUTS', 'JUDGELAB_RUNS', 'JUDGELAB_RUN_ID', 'JUDGELAB_RUN', 'JUDGELAB_ROOT', 'JUDGELAB_TEMPLATE_DIRS'):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv('JUDGELAB_RAW', str(ROOT/'data'/'raw'))
    r = make_repo(tmp_path/'repo')
    monkeypatch.setenv('PYTHONPATH', str(r))
    return r

def sweep_cli(cfg:Path, *args, cwd):
    "`judgelab sweep CFG ...` in a process of its own, in the repository copy `cwd`."
    return subprocess.run([str(BIN/'judgelab'), 'sweep', str(cfg), *args], capture_output=True, text=True, cwd=cwd, timeout=600)

def refused_proc(r, *needles): refused((r.returncode, r.stdout, r.stderr), *needles)

def test_unlock_is_refused_while_the_sweep_holding_the_lock_runs(repo, tmp_path):
    release = tmp_path/'release'
    template(repo/'nbs'/'experiments'/'t_hold.ipynb', "release: str = ''",
             "import time, pathlib\npathlib.Path(release + '.started').write_text('x')\n"
             "while not pathlib.Path(release).exists(): time.sleep(0.1)")
    cfg = repo/'hold.yaml'
    cfg.write_text(f"name: hold\nexperiments:\n  hold:\n    template: nbs/experiments/t_hold.ipynb\n    parameters: {{release: {str(release)!r}}}\n")
    p = subprocess.Popen([str(BIN/'judgelab'), 'sweep', str(cfg), '--no-progress'], cwd=repo, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
    try:
        deadline = time.time() + 300
        while not Path(str(release) + '.started').exists():
            assert p.poll() is None and time.time() < deadline, 'the sweep ended before its run started: ' + (p.stdout.read() if p.poll() is not None else '')
            time.sleep(0.2)
        r = sweep_cli(cfg, '--unlock', cwd=repo)                      # before: exit 0, and Snakemake's lock was gone
        refused_proc(r, 'is held by a running sweep hold (hold.yaml)', f'PID {p.pid} on host', '--unlock only removes the lock a killed sweep left')
        assert any((repo/'.snakemake'/'locks').iterdir()), 'the running sweep lost its lock'
        r = sweep_cli(cfg, '--no-progress', cwd=repo)                 # a second call is refused too, naming the first
        refused_proc(r, f'PID {p.pid} on host')
    finally:
        release.write_text('go')
        try: out, _ = p.communicate(timeout=300)
        except subprocess.TimeoutExpired: p.kill(); raise
    assert p.returncode == 0 and '1 runs: 1 ran' in out, out[-3000:]
    assert not (repo/'.snakemake'/'judgelab'/'lock.json').exists()     # released at the end
    assert sweep_cli(cfg, '--unlock', cwd=repo).returncode == 0           # with no sweep running, unlocking works

# --- scheduling: priorities and parallel llama.cpp runs ----------------------------------------------------------------

def test_priority_reaches_the_snakemake_rule_and_a_bad_one_is_refused(tmp_path, cli):
    from judgelab.run.sweep import load_sweep, rule_spec, SNAKEFILE
    cfg = tmp_path/'p.yaml'
    cfg.write_text(f"name: p\nexperiments:\n  first:\n    template: {AUDIT}\n    priority: 3\n  later:\n    template: {AUDIT}\n")
    sw = load_sweep(cfg)
    assert [rule_spec(r, sw)['priority'] for r in sw.runs] == [3, 0]
    assert "priority: _spec['priority']" in SNAKEFILE
    cfg.write_text(f"name: p\nexperiments:\n  first:\n    template: {AUDIT}\n    priority: high\n")
    refused(cli('sweep', cfg, '--dry-run'), 'p.yaml:5: experiments.first.priority must be an integer')

def test_the_main_job_runs_two_llama_cpp_runs_at_once_and_its_long_runs_first():
    """On 2 cores with -j 2 every run has one thread, so two in-process models never share a core: the judge runs (the
    longest when the generation cache is cold) go two at a time, and start before the shorter analyses."""
    from judgelab.run.sweep import load_sweep, snakemake_command
    sw = load_sweep(ROOT/'configs'/'embedded.yaml')
    cmd = snakemake_command(sw, 2)
    assert cmd[cmd.index('--resources') + 1] == 'llm=2'
    prio = {r.experiment: r.priority for r in sw.runs}
    assert prio['judge'] > prio['agreement'] and prio['corrgap_calibration'] > prio['data_overview']
    # the longest runs without an LLM too: one that starts last (corrgap_noise did) leaves a core idle at the end
    assert min(prio[e] for e in ('corrgap_noise', 'corrgap_synthetic', 'paper_decomposition')) > max(prio[e] for e in ('agreement', 'replay', 'reliability'))
    # the judge runs and the audits gate the decomposition notebook (about 3 min of fits): they, and it, go before the
    # simulations that nothing but the findings wait for (the decomposition notebook started last and a core sat idle at the end)
    assert min(prio[e] for e in ('judge', 'corrgap_audit', 'paper_decomposition')) > max(prio[e] for e in ('corrgap_calibration', 'corrgap_noise', 'corrgap_synthetic'))

@pytest.mark.parametrize('flag', [['-j', '0'], ['--llm-jobs', '0']])
def test_a_run_count_below_one_is_refused_before_snakemake_starts(cli, flag):
    refused(cli('sweep', ROOT/'configs'/'embedded.yaml', *flag, '--dry-run'), 'must be a whole number 1-256, not 0')   # before (--llm-jobs): a ValueError traceback
