"""The release: `python -m build` makes an sdist and a wheel built from it; the wheel carries every file judgelab reads at
run time and works installed, outside any checkout; settings.ini, CITATION.cff, codemeta.json and CHANGELOG.md agree;
CITATION.cff is valid (cffconvert, in its own venv: `make tools`).

The installed-wheel test makes a fresh venv in a temporary folder and installs the wheel there with `--no-deps`. The
pinned third-party packages are made visible from the project venv's site-packages through a `.pth` file in the new
venv (a plain path line: the project's own editable judgelab is not imported from there), so the test needs no
10-minute compile of llama-cpp-python. The full install with dependency resolution from PyPI is the manual check of
RELEASING.md, step 6."""

import configparser, json, os, re, subprocess, sys, sysconfig, tarfile, zipfile
from pathlib import Path
import pytest, yaml
from tests.conftest import ROOT

def _cfg():
    c = configparser.ConfigParser(delimiters=['=']); c.read(ROOT/'settings.ini'); return c['DEFAULT']

CFG = _cfg()

VERSION, RESOURCES = CFG['version'], CFG['resources'].split()

NEVER = ('data/raw/', 'data/interim/', 'outputs/', 'papermill_runs/', '.snakemake/')  # fetched or made at run time

def _tracked(*folders)->set:
    out = subprocess.run(['git', 'ls-files', '--', *folders], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return set(out.split())

# ---- what is packaged, and where it is read (no build needed) ----

def test_manifest_grafts_the_resources_of_settings_ini():
    lines = [l.split() for l in (ROOT/'MANIFEST.in').read_text().splitlines() if l.strip() and not l.startswith('#')]
    assert [l[1] for l in lines if l[0] == 'graft'] == RESOURCES
    assert {'settings.ini', 'README.md', 'LICENSE', 'CITATION.cff', 'codemeta.json', 'CHANGELOG.md'} <= {w for l in lines if l[0] == 'include' for w in l[1:]}
    assert {p.rstrip('/') for p in NEVER} <= {l[1] for l in lines if l[0] == 'prune'}

def test_every_run_time_read_goes_through_paths_resource():
    "Registry, prompts, checklists, decompositions, templates and sweep files are read through `paths.resource` (else an installed judgelab misses them)."
    for py in sorted((ROOT/'judgelab').glob('*.py')):
        src = py.read_text()
        assert not re.search(r"paths\.data\s*/\s*'(datasets|prompts|checklists|decompositions)'", src), py.name
        assert not re.search(r"paths\.(root|nbs)\s*/\s*'(experiments|configs|nbs)'", src), py.name
        for rel in re.findall(r"paths\.resource\(f?['\"]([^'\"{]+)", src):
            assert any(rel == f or rel.startswith(f + '/') for f in RESOURCES), f"{py.name}: {rel} is not in settings.ini resources"

def test_version_comes_from_settings_ini(capsys):
    import judgelab
    from judgelab.cli import main
    assert judgelab.__version__ == VERSION
    with pytest.raises(SystemExit) as e: main(['--version'])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f'judgelab {VERSION}'

# ---- citation metadata ----

def test_codemeta_citation_and_settings_agree():
    cff = yaml.safe_load((ROOT/'CITATION.cff').read_text())
    cm = json.loads((ROOT/'codemeta.json').read_text())
    assert CFG['license'] == 'mit' and cff['license'] == 'MIT' and cm['license'] == 'https://spdx.org/licenses/MIT'
    assert cff['version'] == cm['version'] == VERSION == cff['preferred-citation']['version']
    assert cm['name'] == CFG['lib_name'] and cff['title'].startswith(CFG['lib_name'] + ':')
    assert cff['repository-code'] == cm['codeRepository'] == CFG['git_url'] == cff['preferred-citation']['repository-code']
    assert cm['description'] == CFG['description'] == cff['abstract']
    assert cm['softwareRequirements'] == CFG['requirements'].split()
    assert cm['programmingLanguage']['version'] == '>=' + CFG['min_python']
    names = lambda authors: [a.get('name') or f"{a['given-names']} {a['family-names']}" for a in authors]
    assert names(cff['authors']) == names(cm['author']) == names(cff['preferred-citation']['authors'])
    assert [a.get('email') for a in cff['authors']] == [a.get('email') for a in cm['author']]

def test_citation_references_are_complete():
    cff = yaml.safe_load((ROOT/'CITATION.cff').read_text())
    assert isinstance(cff['preferred-citation'], dict)  # one preferred citation
    for r in cff['references']:
        assert r['title'] and 'descriptive' not in r['title'] and isinstance(r.get('year'), int), r['title']
    titles = [r['title'] for r in cff['references']]
    assert len(titles) == len(set(titles))

def test_changelog_has_the_version_of_settings_ini():
    text = (ROOT/'CHANGELOG.md').read_text()
    assert re.search(rf'^## \[{re.escape(VERSION)}\]', text, re.M), f"CHANGELOG.md has no section for {VERSION}"
    assert '## [Unreleased]' in text

def _cffconvert()->Path:
    "cffconvert in its own venv (its jsonschema 3 pin clashes with Jupyter's); `make tools` creates it when it is missing."
    exe = ROOT/'.venv'/'tools'/'cffconvert'/'bin'/'cffconvert'
    if not exe.exists(): subprocess.run(['make', '-s', 'tools', f'PYTHON={sys.executable}'], cwd=ROOT, check=True, capture_output=True)
    return exe

def test_citation_cff_is_valid():
    r = subprocess.run([str(_cffconvert()), '--validate', '-i', str(ROOT/'CITATION.cff')], capture_output=True, text=True)
    assert r.returncode == 0 and 'are valid' in r.stdout, r.stdout + r.stderr

def test_cffconvert_rejects_an_invalid_file(tmp_path):
    "The validation can fail: a reference without a title is refused."
    cff = yaml.safe_load((ROOT/'CITATION.cff').read_text()); del cff['references'][0]['title']
    (tmp_path/'CITATION.cff').write_text(yaml.safe_dump(cff, allow_unicode=True))
    r = subprocess.run([str(_cffconvert()), '--validate', '-i', str(tmp_path/'CITATION.cff')], capture_output=True, text=True)
    assert r.returncode != 0

# ---- the build, the wheel, and the wheel installed ----

@pytest.fixture(scope='module')
def dist(tmp_path_factory):
    "sdist, then the wheel built from it (`python -m build`, the pinned setuptools fetched from PyPI for the isolated build)."
    out = tmp_path_factory.mktemp('dist')
    r = subprocess.run([sys.executable, '-m', 'build', '--outdir', str(out), str(ROOT)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert 'Building wheel from sdist' in r.stdout + r.stderr   # build's own progress lines
    return out

def test_build_makes_an_sdist_with_settings_and_run_time_files(dist):
    sdist = dist/f'judgelab-{VERSION}.tar.gz'
    names = {n.split('/', 1)[1] for n in tarfile.open(sdist).getnames() if '/' in n}
    assert {'settings.ini', 'setup.py', 'pyproject.toml', 'MANIFEST.in', 'README.md', 'CITATION.cff', 'codemeta.json'} <= names
    assert _tracked(*RESOURCES) <= names
    assert not [n for n in names if n.startswith(NEVER + ('tests/',))]

def test_wheel_carries_every_run_time_file_and_nothing_else(dist):
    whl = dist/f'judgelab-{VERSION}-py3-none-any.whl'
    names = set(zipfile.ZipFile(whl).namelist())
    shipped = {n.removeprefix('judgelab/resources/') for n in names if n.startswith('judgelab/resources/')}
    tracked = _tracked(*RESOURCES)
    assert tracked <= shipped, sorted(tracked - shipped)    # registry, prompts, checklists, decompositions, templates, sweep files
    assert all((ROOT/n).is_file() and n.startswith(tuple(f + '/' for f in RESOURCES)) for n in shipped)
    for must in ('data/datasets/summeval.yaml', 'data/prompts/analyze_rate.yaml', 'data/checklists/summeval/coherence.yaml',
                 'data/decompositions/generic_criteria.yaml', 'nbs/experiments/judge.ipynb', 'configs/embedded.yaml', 'configs/slurm/config.yaml'):
        assert must in shipped, must
    assert {f'judgelab/{p.name}' for p in (ROOT/'judgelab').glob('*.py')} | {'judgelab/site.css'} <= names
    assert {f'judgelab/datasets/{p.name}' for p in (ROOT/'judgelab'/'datasets').glob('*.py')} <= names    # one module per dataset
    assert not [n for n in names if any(x in n for x in NEVER)]

def _clean_env(venv:Path|None=None)->dict:
    "The environment of a user outside any checkout: no PYTHONPATH, no JUDGELAB_* variables, the venv's bin first on PATH."
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'VIRTUAL_ENV') and not k.startswith('JUDGELAB_')}
    if venv: env['PATH'] = f"{venv/'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env

def _venv_with_wheel(tmp_path, whl)->Path:
    "A fresh venv holding the wheel only (`--no-deps`); then the pinned dependencies are made visible from the project venv by a .pth path line."
    venv = tmp_path/'venv'
    subprocess.run([sys.executable, '-m', 'venv', str(venv)], check=True, env=_clean_env())   # its own pip: nothing is installed anywhere else
    py = venv/'bin'/'python'
    r = subprocess.run([str(py), '-m', 'pip', 'install', '-q', '--no-deps', '--no-index', str(whl)], capture_output=True, text=True, env=_clean_env(venv))
    assert r.returncode == 0 and (venv/'bin'/'judgelab').exists(), r.stdout[-2000:] + r.stderr[-3000:]
    site = Path(subprocess.run([str(py), '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'], capture_output=True, text=True, check=True).stdout.strip())
    deps = dict.fromkeys([sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']])
    (site/'_judgelab_test_deps.pth').write_text(''.join(f'{p}\n' for p in deps))
    return venv

INSTALLED_CHECK = r'''
import json, sys
from pathlib import Path
import judgelab
from judgelab import core as C, data as D
from judgelab.llm import prompts as P
from judgelab.methods import checklist as CL, decompose as DC
from judgelab.run import sweep as S
venv = Path(sys.argv[1]).resolve()
assert Path(judgelab.__file__).resolve().is_relative_to(venv), judgelab.__file__     # the installed wheel, not the checkout
assert not C.paths.checkout and C.paths.root == Path.cwd().resolve()                  # no checkout: the working directory is the root
assert C.RESOURCES == Path(judgelab.__file__).resolve().parent/'resources'
assert C.paths.raw == Path.cwd().resolve()/'data'/'raw' and C.paths.outputs == Path.cwd().resolve()/'outputs'
t = P.load_prompt('analyze_rate')
cl = CL.load_checklist('summeval', 'coherence', stage='seed')
assert cl.path.is_relative_to(C.RESOURCES) and cl.questions
sweep = S.load_sweep('configs/embedded.yaml')                                        # the installed sweep file and templates
assert all(r.template.is_relative_to(C.RESOURCES) for r in sweep.runs)
print(json.dumps(dict(
    datasets=list(D.DATASETS), loaders=[n for n in D.DATASETS if Path(D.dataset_module(n).__file__).resolve().is_relative_to(venv) and D.hook(n, 'load')], prompt=t.id, prompts=P.list_prompts(), checklist=C._rel(cl.path, C.paths.root),
    generic=len(DC.generic_criteria()), templates=sorted(p.name for p in C.paths.resource('nbs/experiments').glob('*.ipynb')),
    template=S._show(sweep.runs[0].template), runs=len(sweep.runs), version=judgelab.__version__)))
'''

def test_the_wheel_works_installed_outside_a_checkout(dist, tmp_path):
    venv = _venv_with_wheel(tmp_path, dist/f'judgelab-{VERSION}-py3-none-any.whl')
    work = tmp_path/'work'; work.mkdir()          # a working directory outside any checkout
    env = _clean_env(venv)
    def run(*cmd):
        r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
        return r.stdout
    assert run(str(venv/'bin'/'judgelab'), '--version').strip() == f'judgelab {VERSION}'
    info = run(str(venv/'bin'/'judgelab'), 'data', 'info', 'summeval')
    assert info.startswith('summeval: SummEval') and 'files (they go to data/raw/summeval/)' in info and 'missing' in info
    got = json.loads(run(str(venv/'bin'/'python'), '-c', INSTALLED_CHECK, str(venv)).splitlines()[-1])
    assert got['version'] == VERSION and got['datasets'] == ['summeval', 'topical_chat', 'hanna', 'opinsummeval', 'qags', 'seahorse']
    assert got['loaders'] == got['datasets']                                 # every dataset's module is in the wheel
    assert got['prompts'] == sorted(p.stem for p in (ROOT/'data'/'prompts').glob('*.yaml')) and got['prompt'].startswith('analyze_rate')
    assert got['checklist'] == 'data/checklists/summeval/coherence.yaml'   # provenance names the installed copy as the checkout's
    assert got['generic'] == 25
    assert got['templates'] == sorted(p.name for p in (ROOT/'nbs'/'experiments').glob('*.ipynb'))
    assert got['template'].startswith('nbs/experiments/') and got['runs'] > 10
    assert not list(work.iterdir())                                          # reading the run-time files writes nothing
    # a real sweep run from the installed sweep file and template (small parameters): Snakemake, papermill and the kernel
    # all outside the checkout; outputs, executed notebook and provenance go under the working directory
    out = run(str(venv/'bin'/'judgelab'), 'sweep', 'configs/embedded.yaml', '--only', 'corrgap_synthetic', '--no-progress', '--set', 'datasets=[simulated]',
              '--set', 'seeds=2', '--set', 'n_perm=19', '--set', 'w_grid=[0.0, 0.5]', '--set', 'controls=[exact]')
    assert '1 runs: 1 ran' in out, out
    # the --set values make a named variant beside the committed run, never the committed run's own folder
    variants = [p.name for p in (work/'outputs'/'embedded').iterdir()]
    assert len(variants) == 1 and variants[0].startswith('corrgap_synthetic__set-'), variants
    rid = variants[0]
    assert (work/'outputs'/'embedded'/rid/'tables'/'corrgap_synthetic.csv').is_file()
    row = json.loads((work/'outputs'/'embedded'/rid/'manifest.jsonl').read_text().splitlines()[0])
    assert row['notebook'] == 'nbs/experiments/corrgap_synthetic.ipynb' and row['run'] == f'papermill_runs/embedded/{rid}.ipynb'
    meta = json.loads((work/'papermill_runs'/'embedded'/f'{rid}.ipynb').read_text())['metadata']['judgelab']
    assert meta['status'] == 'ok' and meta['template'] == 'nbs/experiments/corrgap_synthetic.ipynb'
    assert not [p for p in (venv/'lib').rglob('outputs')]                   # nothing written into the installed package
