"""`make lab` starts JupyterLab on 127.0.0.1 as root and as an ordinary user, opened on the README's "start here"
notebook (JupyterLab refuses to run as root without --allow-root: the Makefile passes it only for root)."""

import json, os, shutil, signal, socket, subprocess, time, urllib.request
from pathlib import Path
import pytest
from tests.conftest import ROOT

START_HERE = 'nbs/tutorials/start_here.ipynb'

def _port()->int:
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def _serve(prefix:list, env:dict, home:Path)->tuple:
    "Start `make lab` (optionally as another user), wait until the server answers; return (status, the start notebook's model, the landing URL, log)."
    port, token = _port(), 'judgelab-test'
    log = home/'lab.log'
    cmd = prefix + ['make', '--no-print-directory', '-C', str(ROOT), 'lab', f'LAB_PORT={port}',
                    f'LAB_ARGS=--IdentityProvider.token={token} --ServerApp.open_browser=False']
    with open(log, 'w') as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline, status = time.time() + 120, None
        while time.time() < deadline and p.poll() is None:
            try:
                status = json.load(urllib.request.urlopen(f'http://127.0.0.1:{port}/api/status?token={token}', timeout=5)); break
            except OSError: time.sleep(1)
        if not status: return None, None, None, log.read_text()
        nb = json.load(urllib.request.urlopen(f'http://127.0.0.1:{port}/api/contents/{START_HERE}?token={token}&content=0', timeout=10))
        landing = urllib.request.urlopen(f'http://127.0.0.1:{port}/?token={token}', timeout=10).geturl()   # where the browser lands
        return status, nb, landing, log.read_text()
    finally:
        if p.poll() is None: os.killpg(p.pid, signal.SIGTERM)
        try: p.wait(timeout=30)
        except subprocess.TimeoutExpired: os.killpg(p.pid, signal.SIGKILL)

def _env(home:Path)->dict:
    return {**os.environ, 'HOME': str(home), 'JUPYTER_RUNTIME_DIR': str(home/'runtime'), 'JUPYTER_CONFIG_DIR': str(home/'config'),
            'JUPYTERLAB_WORKSPACES_DIR': str(home/'workspaces')}

def test_start_here_notebook_exists_and_the_readme_points_to_it():
    assert (ROOT/START_HERE).exists()
    assert f']({START_HERE})' in (ROOT/'README.md').read_text()          # README.md, rendered from nbs/index.ipynb (links root-relative there)

def test_make_lab_as_the_current_user(tmp_path):
    "As root on CI machines and containers (JupyterLab exits without --allow-root), as the user elsewhere."
    status, nb, landing, log = _serve([], _env(tmp_path), tmp_path)
    assert status is not None, log[-3000:]
    assert nb['path'] == START_HERE                                       # the whole project is served, not one folder
    assert landing.split('?')[0].endswith('/lab/tree/' + START_HERE), landing
    assert ('--allow-root' in log) == (os.geteuid() == 0), log[-2000:]

def test_the_root_flag_is_given_only_to_root(tmp_path):
    "The Makefile's choice, with `id -u` answering as an ordinary user and as root (the server itself is tested above and below)."
    def dry(uid):
        fake = tmp_path/f'bin{uid}'; fake.mkdir(); (fake/'id').write_text(f'#!/bin/sh\necho {uid}\n'); (fake/'id').chmod(0o755)
        r = subprocess.run(['make', '--no-print-directory', '-n', '-C', str(ROOT), 'lab'], capture_output=True, text=True,
                           env={**os.environ, 'PATH': f"{fake}:{os.environ['PATH']}"})
        assert r.returncode == 0 and 'jupyter lab --ip 127.0.0.1' in r.stdout, r.stderr
        return r.stdout
    assert '--allow-root' not in dry(1000) and '--allow-root' in dry(0)

def test_make_lab_as_an_unprivileged_user(tmp_path):
    if os.geteuid() != 0 or not shutil.which('setpriv'): pytest.skip('becoming an ordinary user needs root and setpriv')
    jupyter = ROOT/'.venv'/'bin'/'jupyter'
    # through a shell, as make runs it (setpriv's own exec of the script can still pass where the user's cannot)
    if subprocess.run(['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', 'sh', '-c', f'{jupyter} --version'], capture_output=True).returncode != 0:
        pytest.skip(f"the venv's interpreter ({(ROOT/'.venv'/'bin'/'python').resolve()}) cannot be run by another user on this machine "
                    "(test_the_root_flag_is_given_only_to_root covers the choice)")
    home = tmp_path/'home'; home.mkdir(); os.chmod(tmp_path, 0o777); os.chmod(home, 0o777)
    for p in [tmp_path, *tmp_path.parents]:
        if p != Path('/'): os.chmod(p, os.stat(p).st_mode | 0o005)
    status, nb, landing, log = _serve(['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'], _env(home), home)
    assert status is not None, log[-3000:]
    assert nb['path'] == START_HERE and '--allow-root' not in log
