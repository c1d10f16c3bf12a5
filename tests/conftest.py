import os, sys, subprocess
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

@pytest.fixture
def tmp_outputs(tmp_path, monkeypatch):
    "Redirect outputs/ (tables, figures, manifest) to a temporary folder so tests never touch the committed ones."
    out = tmp_path/'outputs'; out.mkdir()
    monkeypatch.setenv('JUDGELAB_OUTPUTS', str(out))
    return out

def run_cli(*args, env=None, check=False):
    "Run the installed `judgelab` command as a user would."
    exe = BIN/'judgelab'
    r = subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})})
    if check: assert r.returncode == 0, r.stderr
    return r
