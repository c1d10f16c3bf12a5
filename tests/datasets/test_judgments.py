"""`judgelab judgments import` refuses what it cannot trust: a judge name that is a path, an overwrite without
--replace, malformed rows and JSONL lines (named with their row); the model's slash stays out of the path.
Each test failed on the code before its fix."""

import json, re
from pathlib import Path
import pytest
from tests.conftest import run_cli

# --- `judgelab judgments import` trusts no name and loses nothing -----------------------------------------------

def _items(n=3):
    from judgelab.data import load
    return load('topical_chat').items.item_id[:n].tolist()

def _csv(path, rows, header='item_id,dimension,score'):
    path.write_text(header + '\n' + ''.join(r + '\n' for r in rows)); return path

@pytest.mark.parametrize('judge', ['../../evil', '/abs/x', 'a/b', 'two__parts', '.'])
def test_import_refuses_a_judge_name_that_is_a_path(tmp_path, tmp_outputs, judge):
    # before: '../../evil' wrote outputs/evil__m.parquet and '/abs/x' wrote anywhere
    f = _csv(tmp_path/'s.csv', [f'{i},naturalness,2' for i in _items()])
    r = run_cli('judgments', 'import', str(f), '--dataset', 'topical_chat', '--judge', judge, '--model', 'm')
    assert r.returncode == 2 and 'cannot name a file' in r.stderr, r.stdout + r.stderr
    assert not list(tmp_path.rglob('*.parquet')) and not Path('/abs').exists()

def test_import_keeps_the_model_slash_out_of_the_path_and_records_a_manifest_row(tmp_path, tmp_outputs):
    # before: a subfolder that the paper notebooks skipped, and no manifest row
    f = _csv(tmp_path/'s.csv', [f'{i},naturalness,2' for i in _items()])
    r = run_cli('judgments', 'import', str(f), '--dataset', 'topical_chat', '--judge', 'mine', '--model', 'meta-llama/Llama-3.3-70B')
    assert r.returncode == 0, r.stderr
    out = tmp_outputs/'judgments'/'topical_chat'/'mine__meta-llama_Llama-3.3-70B.parquet'
    import pandas as pd
    assert pd.read_parquet(out).model.unique().tolist() == ['meta-llama/Llama-3.3-70B']
    rows = [json.loads(l) for l in (tmp_outputs/'manifest.jsonl').read_text().splitlines()]
    assert len(rows) == 1 and rows[0]['notebook'] == 'judgelab judgments import' and rows[0]['artifacts'][0].endswith(out.name)
    assert any(k.endswith('s.csv') for k in rows[0]['inputs'])

def test_import_never_overwrites_without_replace(tmp_path, tmp_outputs):
    f = _csv(tmp_path/'s.csv', [f'{i},naturalness,2' for i in _items()])
    args = ['judgments', 'import', str(f), '--dataset', 'topical_chat', '--judge', 'mine', '--model', 'm']
    assert run_cli(*args).returncode == 0
    out = tmp_outputs/'judgments'/'topical_chat'/'mine__m.parquet'; before = out.read_bytes()
    _csv(f, [f'{i},naturalness,3' for i in _items()])
    r = run_cli(*args)
    assert r.returncode == 2 and 'exists' in r.stderr and '--replace' in r.stderr and out.read_bytes() == before
    assert run_cli(*args, '--replace').returncode == 0 and out.read_bytes() != before

@pytest.mark.parametrize('rows, header, message', [
    (['{0},naturalness,2,0.5', '{1},naturalness,2,1'], 'item_id,dimension,score,sample', r'sample is not a non-negative integer: 1 row\(s\) \(file rows 2\)'),
    (['{0},naturalness,2,', '{1},naturalness,2,0'], 'item_id,dimension,score,sample', r'sample is not a non-negative integer: 1 row\(s\) \(file rows 2\)'),
    (['{0},naturalness,2,-1'], 'item_id,dimension,score,sample', 'sample is not a non-negative integer'),
    (['{0},naturalness,2', '{1},naturalness,2,oops'], 'item_id,dimension,score', 'row 3: 4 fields, the header has 3'),
    ([], 'item_id,dimension,score', r'no judgments \(a header without rows\)'),
    ([], '', 'the file is empty'),
])
def test_import_reports_malformed_rows_with_their_row(tmp_path, tmp_outputs, rows, header, message):
    # before: 0.5 was cut to 0 (duplicate keys with conflicting scores); an empty cell or an extra field gave a raw
    # pandas traceback; a header-only file wrote an empty parquet and exited 0
    items = _items()
    f = tmp_path/'s.csv'; f.write_text((header + '\n' if header else '') + ''.join(r.format(*items) + '\n' for r in rows))
    r = run_cli('judgments', 'import', str(f), '--dataset', 'topical_chat', '--judge', 'mine', '--model', 'm')
    assert r.returncode == 2 and re.search(message, r.stderr), r.stdout + r.stderr
    assert 'Traceback' not in r.stderr and not list(tmp_outputs.rglob('*.parquet'))

def test_import_reports_a_jsonl_line_that_is_not_json(http_stub, tmp_path, tmp_outputs):
    i = _items(1)[0]
    f = tmp_path/'s.jsonl'; f.write_text(json.dumps(dict(item_id=i, dimension='naturalness', score=2)) + '\n{"item_id": \n')
    r = run_cli('judgments', 'import', str(f), '--dataset', 'topical_chat', '--judge', 'mine', '--model', 'm')
    assert r.returncode == 2 and 'line 2: not JSON' in r.stderr, r.stderr
