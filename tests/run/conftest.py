"Helpers shared by the sweep tests: a papermill template writer and a copy of the project to run sweeps in."
import shutil
from pathlib import Path
import nbformat
from tests.conftest import ROOT

def template(path, params:str, body:str):
    "Write a papermill template: a `parameters` cell and a body cell."
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(params, metadata=dict(tags=['parameters'])), nbformat.v4.new_code_cell(body)]
    nb.metadata['kernelspec'] = dict(name='python3', display_name='Python 3', language='python')
    path.parent.mkdir(parents=True, exist_ok=True); nbformat.write(nb, path)

JUDGE = ("dataset: str = 'topical_chat'\nn_items: int = 1\nbackend: str = 'llamacpp'\nmodel: str = ''",
         "import pandas as pd\nfrom judgelab.llm import parse\nfrom judgelab.report import save_table\n"
         "save_table(pd.DataFrame(dict(n=[n_items])), 'n', 'nbs/experiments/t_judge.ipynb', dict(n_items=n_items))")
OTHER = ("x: int = 0", "from judgelab.core import paths\npaths.tables.mkdir(parents=True, exist_ok=True)\n(paths.tables/'x.txt').write_text(str(x))")
PAPER = ("runs: list = []",
         "import pandas as pd\nfrom judgelab.core import paths\nfrom judgelab.report import save_table\n"
         "n = sum(int(pd.read_csv(paths.outputs/r/'tables'/'n.csv').n.iloc[0]) for r in runs)\n"
         "save_table(pd.DataFrame(dict(total=[n], runs=[len(runs)])), 'total', 'nbs/experiments/t_paper.ipynb', dict(runs=runs))")
FAIL = ("x: int = 0", "raise RuntimeError('boom: this run fails on purpose')")

def make_repo(dest:Path)->Path:
    "A copy of the project: the package, settings, templates and data registry (raw data read from this checkout)."
    dest.mkdir(parents=True)
    shutil.copytree(ROOT/'judgelab', dest/'judgelab', ignore=shutil.ignore_patterns('__pycache__'))
    shutil.copy(ROOT/'settings.ini', dest/'settings.ini')
    shutil.copytree(ROOT/'nbs'/'experiments', dest/'nbs'/'experiments')
    shutil.copytree(ROOT/'data', dest/'data', ignore=shutil.ignore_patterns('raw', 'interim', '.fetch-tmp'))
    for name, (p, b) in dict(t_judge=JUDGE, t_other=OTHER, t_paper=PAPER, t_fail=FAIL).items():
        template(dest/'nbs'/'experiments'/f'{name}.ipynb', p, b)
    return dest
