"""Hostile input to `judgelab judgments import`: each case refused with a clear "bad input" exit (2) listing every
problem, or stored exactly as written; nothing half-written, nothing lost."""

import errno, hashlib, json, os, re, shutil, subprocess, time
from pathlib import Path
import pandas as pd
import pytest
from tests.conftest import BIN, ROOT, run_cli, refused_run as _refused

def _items(name='topical_chat', n=3):
    from judgelab.data import load
    return load(name).items.item_id[:n].tolist()

def _import(f, *extra, judge='mine', env=None):
    return run_cli('judgments', 'import', str(f), '--dataset', 'topical_chat', '--judge', judge, '--model', 'm', *extra, env=env)

def _stored(outputs): return outputs/'judgments'/'topical_chat'/'mine__m.parquet'

# --- 8: sample beyond int64 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize('big', [str(2**63), str(2**64), '1e19'])
def test_a_sample_beyond_64_bits_is_refused(tmp_path, tmp_outputs, big):
    # before: rc 0, stored as -9223372036854775808 (2**63, 1e19) and the two rows became duplicates
    i = _items()
    f = tmp_path/'s.csv'; f.write_text(f'item_id,dimension,score,sample\n{i[0]},naturalness,2,{big}\n{i[0]},naturalness,3,0\n')
    _refused(_import(f), 'sample does not fit a 64-bit integer (at most 9223372036854775807', '1 row(s) (file rows 2)')
    assert not _stored(tmp_outputs).exists()

def test_the_largest_int64_sample_is_kept_exactly(tmp_path, tmp_outputs):
    i = _items()
    f = tmp_path/'s.jsonl'; f.write_text(json.dumps(dict(item_id=i[0], dimension='naturalness', score=2, sample=2**63 - 1)) + '\n')
    assert _import(f).returncode == 0
    assert pd.read_parquet(_stored(tmp_outputs))['sample'].tolist() == [2**63 - 1]

# --- 9 and 10: one read of the file, one writer at a time -----------------------------------------------------------

def _next_reader(fifo, proc, timeout=60):
    "The write end of `fifo` once a reader has opened it (the reader then waits in its read until we write and close); None when `proc` ends first."
    t0 = time.time()
    while proc.poll() is None and time.time() - t0 < timeout:
        try: fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO: raise
            time.sleep(0.01); continue                # no reader yet
        os.set_blocking(fd, True); return fd
    return None

def _fds_on(proc, fifo)->bool:
    "Whether `proc` has `fifo` open (Linux /proc)."
    try: entries = list(Path(f'/proc/{proc.pid}/fd').iterdir())
    except OSError: return False
    for e in entries:
        try:
            if os.readlink(e) == fifo: return True
        except OSError: pass
    return False

def _serve(fd, fifo, proc, content:bytes):
    "Write `content` to the reader and close (its end of file); return once `proc` has closed the pipe, so the next reader is a new open."
    fifo = os.path.realpath(fifo)
    with os.fdopen(fd, 'wb') as w:
        w.write(content); w.flush()
        while proc.poll() is None and not _fds_on(proc, fifo): time.sleep(0.01)    # its open has returned: it reads until we close
    while proc.poll() is None and _fds_on(proc, fifo): time.sleep(0.01)

def _start_import(f, *extra):
    exe = BIN/'judgelab'
    return subprocess.Popen([str(exe), 'judgments', 'import', str(f), '--dataset', 'topical_chat', '--judge', 'mine', '--model', 'm', *extra],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

def _manifest_input(outputs, name):
    rows = [json.loads(l) for l in (outputs/'manifest.jsonl').read_text().splitlines()]
    return [h for r in rows for k, h in r['inputs'].items() if k.endswith(name)]

def test_the_manifest_hashes_the_bytes_that_were_stored_even_if_the_file_changes(tmp_path, tmp_outputs):
    # before: the file was read to parse it, then read again to hash it: 4 of 8 times the manifest named another file than
    # the one stored. Here a named pipe serves one content to the first open and another to any second open.
    i = _items()
    first = f'item_id,dimension,score\n{i[0]},naturalness,1\n'.encode(); second = f'item_id,dimension,score\n{i[0]},naturalness,3\n'.encode()
    plain = tmp_path/'s.csv'; plain.write_text(f'item_id,dimension,score\n{i[0]},naturalness,2\n')
    fifo = tmp_path/'pipe'/'s.csv'; fifo.parent.mkdir(); os.mkfifo(fifo)
    assert _import(plain).returncode == 0
    p = _start_import(fifo, '--replace')
    _serve(_next_reader(fifo, p), fifo, p, first)
    if (fd := _next_reader(fifo, p)) is not None: _serve(fd, fifo, p, second)     # a second read of the file (the code before the fix)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert pd.read_parquet(_stored(tmp_outputs)).score.tolist() == [1.0]
    assert _manifest_input(tmp_outputs, 'pipe/s.csv') == [hashlib.sha256(first).hexdigest()]

def test_a_second_import_under_the_same_names_is_refused_not_lost(tmp_path, tmp_outputs):
    # before: two imports of different files under one judge and model could both pass the "exists" check and both exit 0,
    # one file's judgments silently lost. Here import A is held between its check and its write (it reads its file a
    # second time, from a named pipe) while import B runs: exactly one must land, the other be refused.
    i = _items()
    a = f'item_id,dimension,score\n{i[0]},naturalness,1\n'.encode()
    b = tmp_path/'b.csv'; b.write_text(f'item_id,dimension,score\n{i[1]},naturalness,3\n')
    fifo = tmp_path/'a.csv'; os.mkfifo(fifo)
    pa = _start_import(fifo)
    _serve(_next_reader(fifo, pa), fifo, pa, a)
    held = _next_reader(fifo, pa)                # A is done (None), or waits in a second read of its file
    rb = _import(b)
    if held is not None: _serve(held, fifo, pa, a)
    _, ea = pa.communicate(timeout=120)
    codes = sorted([pa.returncode, rb.returncode])
    assert codes == [0, 2], (pa.returncode, ea, rb.returncode, rb.stderr)
    loser = ea if pa.returncode else rb.stderr
    assert 'exists' in loser and '--replace' in loser
    stored = pd.read_parquet(_stored(tmp_outputs))
    assert stored.item_id.tolist() == ([i[0]] if pa.returncode == 0 else [i[1]])

def test_concurrent_imports_of_different_files_land_once(tmp_path, tmp_outputs):
    # the same race without a pipe: two imports started together, twice; one lands, the other is refused
    i = _items()
    for k in range(2):
        shutil.rmtree(tmp_outputs); tmp_outputs.mkdir()
        fs = []
        for n, s in ((0, 1), (1, 3)):
            f = tmp_path/f'{k}_{n}.csv'; f.write_text(f'item_id,dimension,score\n{i[n]},naturalness,{s}\n'); fs.append(f)
        ps = [_start_import(f) for f in fs]
        res = [(p.wait(timeout=120), p.stderr.read()) for p in ps]
        assert sorted(rc for rc, _ in res) == [0, 2], res
        won = next(n for n, (rc, _) in enumerate(res) if rc == 0)
        assert pd.read_parquet(_stored(tmp_outputs)).item_id.tolist() == [i[won]]
        assert _manifest_input(tmp_outputs, fs[won].name) == [hashlib.sha256(fs[won].read_bytes()).hexdigest()]

# --- 11: encodings ------------------------------------------------------------------------------------------------

def test_a_cp1252_file_is_refused_naming_its_line(tmp_path, tmp_outputs):
    # before: stored as 'caf\ufffd' (read with errors='replace')
    i = _items()
    f = tmp_path/'s.csv'; f.write_bytes(f'item_id,dimension,score,rationale\n{i[0]},naturalness,2,fine\n{i[1]},naturalness,2,café\n'.encode('cp1252'))
    _refused(_import(f), '1 line(s) not UTF-8', 'line 3, byte', 'UTF-8')
    assert not _stored(tmp_outputs).exists()

def test_utf8_with_a_byte_order_mark_is_read(tmp_path, tmp_outputs):
    i = _items()
    f = tmp_path/'s.csv'; f.write_bytes(f'item_id,dimension,score,rationale\n{i[0]},naturalness,2,café\n'.encode('utf-8-sig'))
    assert _import(f).returncode == 0
    assert pd.read_parquet(_stored(tmp_outputs)).rationale.tolist() == ['café']

# --- 12: large fields ---------------------------------------------------------------------------------------------

def test_a_200k_character_rationale_is_imported_whole(tmp_path, tmp_outputs):
    # before: _csv.Error: field larger than field limit (131072), a traceback
    i = _items(); text = 'why ' * 50_000
    f = tmp_path/'s.csv'; f.write_text(f'item_id,dimension,score,rationale\n{i[0]},naturalness,2,{text}\n')
    r = _import(f)
    assert r.returncode == 0, r.stderr[-2000:]
    assert pd.read_parquet(_stored(tmp_outputs)).rationale.tolist() == [text]

def test_a_field_over_the_limit_is_refused_with_its_row(tmp_path, tmp_outputs):
    from judgelab.data.judgments import MAX_FIELD_CHARS
    i = _items()
    f = tmp_path/'s.csv'; f.write_text(f'item_id,dimension,score,rationale\n{i[0]},naturalness,2,ok\n{i[1]},naturalness,2,{"x"*(MAX_FIELD_CHARS + 1)}\n')
    _refused(_import(f), f"row 3: field 'rationale' has {MAX_FIELD_CHARS + 1:,} characters, more than the limit of {MAX_FIELD_CHARS:,}")

# --- 13: booleans, non-scalars, duplicate headers, control characters, score and failure --------------------------

def _jsonl(path, rows): path.write_text(''.join(json.dumps(r) + '\n' for r in rows)); return path

@pytest.mark.parametrize('case', ['bool_score', 'list_dimension', 'duplicate_header', 'nul', 'esc', 'score_and_failure'])
def test_hostile_values_are_refused_with_their_rows(tmp_path, tmp_outputs, case):
    # before, each was accepted: true as 1.0, ["coherence"] as coherence, the first `score` column, NUL/ESC stored,
    # the failure reason dropped
    i = _items()
    ok = dict(item_id=i[1], dimension='naturalness', score=2)
    if case == 'bool_score': f, msg = _jsonl(tmp_path/'s.jsonl', [ok, dict(item_id=i[0], dimension='coherence', score=True)]), 'score is true/false, not a number: 1 row(s) (file lines 2)'
    if case == 'list_dimension': f, msg = _jsonl(tmp_path/'s.jsonl', [dict(item_id=i[0], dimension=['coherence'], score=2), ok]), 'dimension is a list or an object, not one value: 1 row(s) (file lines 1)'
    if case == 'duplicate_header':
        f = tmp_path/'s.csv'; f.write_text(f'item_id,dimension,score,score\n{i[0]},coherence,2,3\n'); msg = "the header names 1 column(s) more than once: 'score'"
    if case in ('nul', 'esc'):
        c = '\x00' if case == 'nul' else '\x1b[2J'
        f = tmp_path/'s.csv'; f.write_text(f'item_id,dimension,score,rationale\n{i[1]},naturalness,2,fine\n{i[0]},coherence,2,bad{c}text\n')
        msg = 'rationale holds a control character (only tab and line breaks are allowed in free text): 1 row(s) (file rows 3)'
    if case == 'score_and_failure':
        f = tmp_path/'s.csv'; f.write_text(f'item_id,dimension,score,failure\n{i[1]},naturalness,,no number\n{i[0]},coherence,2,no number\n')
        msg = 'score and failure both given (a row is either a score or a failure with its reason): 1 row(s) (file rows 3)'
    r = _import(f)
    _refused(r, msg)
    assert '\x1b' not in r.stderr and '\x00' not in r.stderr and not _stored(tmp_outputs).exists()

def test_every_problem_is_listed_and_counted(tmp_path, tmp_outputs):
    i = _items()
    rows = [dict(item_id=i[0], dimension='coherence', score=True), dict(item_id='nope', dimension=['x'], score=2, sample=2**64),
            dict(item_id=i[1], dimension='naturalness', score=2, failure='no number', rationale='\x07')]
    r = _import(_jsonl(tmp_path/'s.jsonl', rows))
    _refused(r, '6 problem(s) in 3 row(s)')

def test_tabs_and_line_breaks_in_a_rationale_are_kept(tmp_path, tmp_outputs):
    i = _items()
    f = tmp_path/'s.csv'; f.write_bytes(f'item_id,dimension,score,rationale\r\n{i[0]},naturalness,2,"a\tb\r\nc"\r\n'.encode())
    assert _import(f).returncode == 0
    assert pd.read_parquet(_stored(tmp_outputs)).rationale.tolist() == ['a\tb\r\nc']
