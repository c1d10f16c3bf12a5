"""Hostile input to `judgelab audit` and `judgelab.audit`: bad files and arguments refused with a clear "bad input"
exit (2) listing every problem, an earlier audit never lost, one audit of a judge at a time."""

import re, shutil
from pathlib import Path
import pandas as pd
import pytest
from tests.conftest import ROOT, run_cli, refused_run as _refused

def _items(name='topical_chat', n=3):
    from judgelab.data import load
    return load(name).items.item_id[:n].tolist()

@pytest.fixture
def sandbox(tmp_path):
    return {'JUDGELAB_OUTPUTS': str(tmp_path/'outputs'), 'JUDGELAB_RUNS': str(tmp_path/'runs')}

def test_audit_reads_a_200k_character_rationale(tmp_path, sandbox):
    # before: the audit died on the same field-size traceback; now the file is read and its real problem listed
    i = _items('summeval'); text = 'why ' * 50_000
    f = tmp_path/'s.csv'; f.write_text(f'item_id,dimension,score,rationale\n{i[0]},coherence,2,{text}\nnope,coherence,2,x\n')
    r = run_cli('audit', str(f), '--dataset', 'summeval', '--quiet', env=sandbox)
    _refused(r, 'unknown item_id: 1 row(s) (file rows 3)', '1 problem(s)')
    assert not (tmp_path/'outputs').exists() and not (tmp_path/'runs').exists()

# --- 5: the audit checks its arguments before it touches an earlier audit --------------------------------------------

def _earlier_audit(tmp_path, sandbox, judge='good'):
    "An earlier audit of `good.csv` (its stored judgments, a table and its notebook), as `judgelab audit` leaves it."
    i = _items('summeval')
    f = tmp_path/f'{judge}.csv'; f.write_text('item_id,dimension,score\n' + ''.join(f'{x},coherence,{k % 5 + 1}\n' for k, x in enumerate(i)))
    rid = f'audits/summeval__{judge}__m'
    r = run_cli('judgments', 'import', str(f), '--dataset', 'summeval', '--judge', judge, '--model', 'm', env={**sandbox, 'JUDGELAB_RUN_ID': rid})
    assert r.returncode == 0, r.stderr
    run = Path(sandbox['JUDGELAB_OUTPUTS'])/rid
    (run/'tables').mkdir(); (run/'tables'/'audit_summeval_good__m_verdicts.csv').write_text('target,status\ncoherence,earlier\n')
    nb = Path(sandbox['JUDGELAB_RUNS'])/f'{rid}.ipynb'; nb.parent.mkdir(parents=True); nb.write_text('{"earlier": true}')
    before = {p.relative_to(run): p.read_bytes() for p in run.rglob('*') if p.is_file()}
    return f, run, nb, before

def _same(run, before): return {p.relative_to(run): p.read_bytes() for p in run.rglob('*') if p.is_file()} == before

def test_a_bad_alpha_is_refused_before_the_earlier_audit_is_touched(tmp_path, sandbox):
    # before: rc 1 after deleting the earlier audit's tables and figures (the notebook failed on alpha 5)
    f, run, nb, before = _earlier_audit(tmp_path, sandbox)
    r = run_cli('audit', str(f), '--dataset', 'summeval', '--model', 'm', '--alpha', '5', '--quiet', env=sandbox)
    _refused(r, '1 problem(s) with the arguments (nothing ran)', '--alpha must be between 0 and 1 (exclusive), e.g. 0.05, not 5.0')
    assert _same(run, before) and nb.read_text() == '{"earlier": true}'

def test_every_bad_argument_is_listed_at_once(tmp_path, sandbox):
    # before: only the first bad count was named (and alpha not at all)
    f, run, nb, before = _earlier_audit(tmp_path, sandbox)
    r = run_cli('audit', str(f), '--dataset', 'summeval', '--model', 'm', '--alpha', 'nan', '--n-boot', '-1', '--n-sim', '-1', '--quiet', env=sandbox)
    _refused(r, '3 problem(s) with the arguments (nothing ran)', '--alpha must be between 0 and 1', '--n-boot must be a whole number 0-100,000',
             '--n-sim must be a whole number 0-10,000')
    assert _same(run, before)

@pytest.fixture
def broken_root(tmp_path):
    "A checkout (JUDGELAB_ROOT) whose audit template fails in its first cell, after `judgelab audit` has validated and stored the scores."
    import nbformat
    root = tmp_path/'root'; (root/'nbs'/'experiments').mkdir(parents=True)
    shutil.copy(ROOT/'settings.ini', root/'settings.ini'); (root/'data').symlink_to(ROOT/'data')
    nb_t = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('dataset = None', metadata=dict(tags=['parameters'])),
                                           nbformat.v4.new_code_cell("raise RuntimeError('the template broke')")],
                                    metadata=dict(kernelspec=dict(name='python3', language='python', display_name='Python 3')))
    nbformat.write(nb_t, root/'nbs'/'experiments'/'corrgap_audit.ipynb')
    return root

def test_a_failing_audit_keeps_the_earlier_one(tmp_path, sandbox, broken_root):
    # before: the earlier audit's folder was deleted first, and the failed run left nothing of it
    env = {**sandbox, 'JUDGELAB_ROOT': str(broken_root)}
    f, run, nb, before = _earlier_audit(tmp_path, sandbox)
    r = run_cli('audit', str(f), '--dataset', 'summeval', '--model', 'm', '--quiet', env=env)
    assert r.returncode == 1 and 'the template broke' in r.stderr and 'the earlier audit' in r.stderr, r.stderr[-3000:]
    assert _same(run, before) and nb.read_text() == '{"earlier": true}'
    assert 'the template broke' in nb.with_name(nb.stem + '.failed.ipynb').read_text()
    assert not list((Path(sandbox['JUDGELAB_OUTPUTS'])/'tmp').glob('audits-kept/*'))

def test_a_second_audit_of_the_same_judge_is_refused_while_one_runs(tmp_path, sandbox, broken_root):
    # before: no lock; the second audit deleted the folder the first one was writing. Here the test holds the audit's lock.
    import fcntl
    f, run, nb, before = _earlier_audit(tmp_path, sandbox)
    lock = Path(sandbox['JUDGELAB_OUTPUTS'])/'tmp'/'locks'/'audits_summeval__good__m.audit.lock'; lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, 'a') as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        r = run_cli('audit', str(f), '--dataset', 'summeval', '--model', 'm', '--quiet', env={**sandbox, 'JUDGELAB_ROOT': str(broken_root)})
    _refused(r, "an audit of judge 'good' and model 'm' on summeval is running in another process: wait for it to finish")
    assert _same(run, before)

def test_the_audit_function_lists_every_bad_argument():
    # before: alpha 5 stopped at the first check, a float count or a misspelt target was not named
    from judgelab.stats.audits import audit
    plain = pd.DataFrame(dict(item_id=_items('summeval'), dimension='coherence', score=[1, 2, 3]))
    with pytest.raises(ValueError) as e: audit(plain, 'summeval', alpha=5, n_perm=1.5, targets=['coherense'], exclude_dims=['fluencyy'])
    msg = str(e.value)
    assert msg.startswith('audit: 4 problem(s) with the arguments'), msg
    for what in ['n_perm must be a whole number 0-100,000', 'alpha must be a number between 0 and 1', "targets: summeval has no dimension 'coherense'",
                 "exclude_dims: summeval has no dimension 'fluencyy'"]:
        assert what in msg, (what, msg)
