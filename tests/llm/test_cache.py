"""The generation cache: what it serves is verified, imports and exports refuse what they cannot trust, old caches still serve, template options in the key."""

import hashlib, json
import pytest
from judgelab.llm import Request, Choice
import os, shutil, subprocess, sys, warnings
from pathlib import Path
from judgelab.llm import ScriptedBackend
from judgelab.llm.cache import GenerationCache, CachedBackend, CacheCorruptError, CacheImportError, request_key
from judgelab.llm.cache import row_checksum
from tests.conftest import run_cli

# ==============================================================================================================
# Chat-template options are part of the cache key only when set.
# ==============================================================================================================

def test_template_options_are_part_of_the_cache_key_only_when_set():
    from judgelab.llm.cache import request_key
    r = Request([{'role': 'user', 'content': 'x'}])
    assert 'chat_options' not in r.sampling() and 'continue_final' not in r.sampling()          # every earlier key is unchanged
    assert request_key('m', r) != request_key('m', Request([{'role': 'user', 'content': 'x'}], chat_options={'enable_thinking': False}))

# ==============================================================================================================
# The generation cache verifies what it serves, and imports of cache files refuse what they cannot trust.
# Each test failed on the code before its fix.
# ==============================================================================================================

def echo():
    "A scripted backend that answers with a hash of the prompt (`count`: the samples it was asked for)."
    return ScriptedBackend(lambda r: Choice(hashlib.sha256(r.messages[-1]['content'].encode()).hexdigest()[:12], 'stop', 1, 3),
                           model='echo@1', name='echo')

def _reqs(n): return [Request([{'role': 'user', 'content': f'text {i}'}]) for i in range(n)]

# --- the cache serves only what verifies ------------------------------------------------------------------------

def test_flipped_bytes_in_cached_texts_are_never_served(tmp_path):
    # before: 50 of 2000 altered texts were served as hits (SQLite's integrity check says ok)
    cache = GenerationCache(tmp_path/'c.sqlite'); reqs = _reqs(2000)
    truth = [c.text for c in CachedBackend(echo(), cache, verbose=False).generate(reqs, progress=False)]
    c = cache.conn()
    c.execute("UPDATE generations SET choice = replace(choice, '\"text\": \"', '\"text\": \"~') WHERE rowid % 40 = 0")   # 50 rows
    assert len(cache.verify()) == 50
    b = CachedBackend(echo(), cache, verbose=False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always'); got = [c.text for c in b.generate(reqs, progress=False)]
    assert got == truth and b.last['hits'] == 1950 and b.inner.count == 50
    assert '50 stored row(s) failed verification' in str(w[0].message) and 'checksum mismatch' in str(w[0].message)
    assert cache.verify() == {}                          # the altered rows were replaced by the regenerated samples

def test_a_row_whose_request_was_edited_is_a_miss(tmp_path):
    cache = GenerationCache(tmp_path/'c.sqlite'); reqs = _reqs(3)
    CachedBackend(echo(), cache, verbose=False).generate(reqs, progress=False)
    # rewrite a row's request and its checksum consistently: only the key recomputation can catch it
    from judgelab.llm.cache import row_checksum
    k, m, r, ch = cache.conn().execute('SELECT key, model, request, choice FROM generations LIMIT 1').fetchone()
    r2 = r.replace('text', 'txet')
    cache.conn().execute('UPDATE generations SET request = ?, checksum = ? WHERE key = ?', (r2, row_checksum(k, m, r2, ch), k))
    assert cache.verify() == {k: 'the stored request does not give this key'}
    with pytest.warns(UserWarning, match='does not give this key'): assert k not in cache.get_many([k])

def test_import_recomputes_keys_and_refuses_mismatches(tmp_path):
    # before: rows whose key did not match their request were imported and the poisoned text served
    src = GenerationCache(tmp_path/'a.sqlite'); reqs = _reqs(5)
    CachedBackend(echo(), src, verbose=False).generate(reqs, progress=False)
    src.export(tmp_path/'x.jsonl')
    rows = [json.loads(l) for l in (tmp_path/'x.jsonl').read_text().splitlines()]
    victim = request_key('echo@1', Request([{'role': 'user', 'content': 'text 0'}]))
    poisoned = dict(rows[1], key=victim, choice=json.dumps(dict(json.loads(rows[1]['choice']), text='5 (poisoned)')))
    (tmp_path/'p.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows[2:] + [poisoned, {'key': 'x'}]))
    dst = GenerationCache(tmp_path/'b.sqlite')
    with pytest.raises(CacheImportError, match=r'2 row\(s\) refused, nothing imported(.|\n)*line 4: key .* does not match its request(.|\n)*line 5: malformed row'):
        dst.import_(tmp_path/'p.jsonl')
    assert len(dst) == 0
    assert dst.import_(tmp_path/'x.jsonl') == 5 and dst.verify() == {}

@pytest.mark.parametrize('content', [b'', b'garbage' * 500, b'SQLite format 3\x00' + b'\x00' * 90])
def test_a_corrupt_cache_file_is_one_clear_error(tmp_path, content, monkeypatch):
    # before: a raw sqlite3.DatabaseError naming no file
    p = tmp_path/'cache'/'generations.sqlite'; p.parent.mkdir(); p.write_bytes(content)
    if content == b'':                                   # an empty file is a valid, empty database for SQLite
        assert len(GenerationCache(p)) == 0; return
    with pytest.raises(CacheCorruptError, match=f"{p} cannot be read .*mv {p} {p}.corrupt"): GenerationCache(p)
    # commands that generate nothing do not open the cache
    monkeypatch.setenv('JUDGELAB_OUTPUTS', str(tmp_path))
    r = run_cli('sweep', 'configs/embedded.yaml', '--dry-run')
    assert r.returncode == 0 and 'states:' in r.stdout, r.stderr

def test_a_truncated_cache_is_one_clear_error(tmp_path):
    cache = GenerationCache(tmp_path/'c.sqlite'); CachedBackend(echo(), cache, verbose=False).generate(_reqs(500), progress=False)
    cache.close(); data = (tmp_path/'c.sqlite').read_bytes()
    (tmp_path/'t.sqlite').write_bytes(data[:len(data)//3])
    with pytest.raises(CacheCorruptError, match='t.sqlite cannot be read'):
        t = GenerationCache(tmp_path/'t.sqlite'); t.get_many([request_key('echo@1', r) for r in _reqs(500)]); t.verify()

def test_replay_from_a_read_only_cache_as_an_unprivileged_user(tmp_path):
    # before: sqlite could not open a read-only cache, even for replay (WAL mode needs to write beside the file)
    if not shutil.which('setpriv') or os.geteuid() != 0: pytest.skip('needs root and setpriv to become an unprivileged user')
    d = tmp_path/'ro'; d.mkdir(); cache = GenerationCache(d/'c.sqlite'); reqs = _reqs(4)
    truth = [c.text for c in CachedBackend(echo(), cache, verbose=False).generate(reqs, progress=False)]; cache.close()
    for p in [tmp_path, *tmp_path.parents]:
        if p != Path('/'): os.chmod(p, os.stat(p).st_mode | 0o005)        # let the unprivileged user reach the folder
    (d/'c.sqlite').chmod(0o444); d.chmod(0o555)
    code = ("import sys; from judgelab.llm.cache import GenerationCache, CachedBackend; from judgelab.llm import Request\n"
            f"c = GenerationCache({str(d/'c.sqlite')!r}); assert c.read_only\n"
            "b = CachedBackend(None, c, mode='replay', model='echo@1', verbose=False)\n"
            "print([x.text for x in b.generate([Request([{'role': 'user', 'content': f'text {i}'}]) for i in range(4)], progress=False)])")
    r = subprocess.run(['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', sys.executable, '-c', code],
                       capture_output=True, text=True, cwd='/', env={**os.environ, 'HOME': '/tmp'})
    d.chmod(0o755)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == repr(truth)

def test_a_cache_made_before_checksums_still_serves(tmp_path):
    import sqlite3
    p = tmp_path/'old.sqlite'; c = sqlite3.connect(p)
    c.execute('CREATE TABLE generations (key TEXT PRIMARY KEY, model TEXT NOT NULL, request TEXT NOT NULL, choice TEXT NOT NULL, backend TEXT, created TEXT NOT NULL)')
    r = Request([{'role': 'user', 'content': 'text 0'}]); k = request_key('echo@1', r)
    from judgelab.llm.cache import canonical_json
    req = canonical_json(dict(messages=r.messages, sampling=r.sampling(), seed=r.seed, sample=0))
    c.execute('INSERT INTO generations VALUES (?, ?, ?, ?, ?, ?)', (k, 'echo@1', req, Choice('old').to_json(), 'echo', 'then')); c.commit(); c.close()
    assert GenerationCache(p).get_many([k])[k].text == 'old'

# ==============================================================================================================
# Hostile input to the generation cache: a malformed import row, a row stripped of its checksum, an edited
# export, a row that is not UTF-8. Each test failed on the code before its fix.
# ==============================================================================================================

def _texts(cache, reqs):
    b = CachedBackend(echo(), cache, verbose=False)
    return b, [c.text for c in b.generate(reqs, progress=False)]

def _write(path, rows): path.write_text(''.join(json.dumps(r) + '\n' for r in rows)); return path

_SECOND_WRITER = """import sys
from judgelab.llm.cache import GenerationCache, request_key
from judgelab.llm import Choice, Request
c = GenerationCache(sys.argv[1]); c.conn().execute('PRAGMA busy_timeout=2000')
assert c.get_many([sys.argv[2]])[sys.argv[2]].text == 'later'      # the first process's put was committed
r = Request([{'role': 'user', 'content': 'other process'}]); c.put(request_key('echo@1', r), 'echo@1', r, Choice('other')); c.close()
"""

# --- row 4: a malformed import row ------------------------------------------------------------------------------

@pytest.mark.parametrize('bad', [dict(backend={'name': 'echo'}), dict(created=None), dict(created='\ud800')])
def test_a_failed_import_rolls_back_and_names_the_file_not_the_cache(tmp_path, bad):
    # before: CacheCorruptError ("move it aside") about a healthy cache, or a raw UnicodeEncodeError (a null `created` was
    # silently dropped by INSERT OR IGNORE); the transaction stayed open, so later puts were never committed and another
    # process got "database is locked"
    src = GenerationCache(tmp_path/'src.sqlite'); _texts(src, _reqs(3)); src.export(tmp_path/'x.jsonl')
    rows = [json.loads(l) for l in (tmp_path/'x.jsonl').read_text().splitlines()]
    _write(tmp_path/'x.jsonl', rows[:2] + [{**rows[2], **bad}])
    p = tmp_path/'c.sqlite'; cache = GenerationCache(p)
    with pytest.raises(Exception) as e: cache.import_(tmp_path/'x.jsonl')
    assert not cache.conn().in_transaction and len(cache) == 0          # rolled back: nothing of the file is stored
    r = Request([{'role': 'user', 'content': 'later'}]); k = request_key('echo@1', r)
    assert cache.put(k, 'echo@1', r, Choice('later')) is None
    w = subprocess.run([sys.executable, '-c', _SECOND_WRITER, str(p), k], capture_output=True, text=True, timeout=30)
    assert w.returncode == 0, w.stderr
    cache.close(); assert len(GenerationCache(p)) == 2                  # both writes are in the file
    assert e.type is CacheImportError, f'{e.type.__name__}: {e.value}'
    msg = str(e.value)
    assert 'x.jsonl' in msg and 'line 3' in msg and 'nothing imported' in msg and 'Move it aside' not in msg, msg

# --- row 6: a row without its checksum, an edited export ---------------------------------------------------------

def test_a_row_stripped_of_its_checksum_is_a_miss_and_an_edited_export_is_refused(tmp_path):
    # before: a row edited with checksum=NULL was served and verify() reported nothing; exports carried no checksum, so
    # an edited export was imported (with a fresh checksum over the edited sample) and served
    cache = GenerationCache(tmp_path/'c.sqlite'); reqs = _reqs(3); _, truth = _texts(cache, reqs)
    cache.export(tmp_path/'x.jsonl')
    k = request_key('echo@1', reqs[1])
    cache.conn().execute("UPDATE generations SET choice = replace(choice, ?, 'forged'), checksum = NULL WHERE key = ?", (truth[1], k))
    v = cache.verify(); assert list(v) == [k] and v[k].startswith('no checksum'), v
    with pytest.warns(UserWarning, match='no checksum'): b, got = _texts(GenerationCache(tmp_path/'c.sqlite'), reqs)
    assert got == truth and (b.last['hits'], b.inner.count) == (2, 1)
    assert cache.verify() == {}                                         # replaced by the regenerated, checksummed sample
    # the export carries each row's checksum; an edited row is refused by line and key, its checksum kept or removed
    rows = [json.loads(l) for l in (tmp_path/'x.jsonl').read_text().splitlines()]
    assert [r['checksum'] for r in rows] == [row_checksum(r['key'], r['model'], r['request'], r['choice']) for r in rows]
    i = [r['key'] for r in rows].index(k)
    for drop in (False, True):
        edited = dict(rows[i], choice=rows[i]['choice'].replace(truth[1], 'forged'))
        if drop: del edited['checksum']
        _write(tmp_path/'e.jsonl', rows[:i] + [edited] + rows[i + 1:])
        dst = GenerationCache(tmp_path/f'd{drop}.sqlite')
        with pytest.raises(CacheImportError, match=f"1 row\\(s\\) refused, nothing imported(.|\n)*line {i + 1}: key {k[:16]}: "
                                                   + ('no checksum' if drop else 'checksum mismatch')):
            dst.import_(tmp_path/'e.jsonl')
        assert len(dst) == 0
    assert dst.import_(tmp_path/'x.jsonl') == 3 and dst.verify() == {}  # the unedited export imports whole
    assert _texts(dst, reqs)[1] == truth

# --- row 7: a row that is not UTF-8 text, or of the wrong type ----------------------------------------------------

@pytest.mark.parametrize('col,value', [('choice', "CAST(X'7B2274657874223A2022FF227D' AS TEXT)"),   # invalid UTF-8
                                       ('request', "CAST(X'FE' || CAST(request AS BLOB) AS TEXT)"),
                                       ('choice', "X'7B7D'"), ('model', "zeroblob(4)")])            # BLOBs, not text
def test_an_unreadable_row_is_a_miss_regenerated_and_listed(tmp_path, col, value):
    # before: sqlite3.OperationalError ("Could not decode to UTF-8") on every run that needed the row and from verify()
    cache = GenerationCache(tmp_path/'c.sqlite'); reqs = _reqs(3); _, truth = _texts(cache, reqs)
    k = request_key('echo@1', reqs[2])
    cache.conn().execute(f"UPDATE generations SET {col} = {value} WHERE key = ?", (k,))
    v = cache.verify(); assert list(v) == [k] and v[k].startswith(f'unreadable stored row ({col}'), v
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always'); b, got = _texts(GenerationCache(tmp_path/'c.sqlite'), reqs)
    assert got == truth and (b.last['hits'], b.inner.count) == (2, 1)
    assert 'unreadable stored row' in str(w[0].message)
    assert cache.verify() == {} and cache.get_many([k])[k].text == truth[2]     # regenerated and overwritten
    assert cache.export(tmp_path/'x.jsonl') == 3

# --- the migration of a cache made before checksums, by two openers at once -----------------------------------------

def _old_cache(p, n):
    import sqlite3
    from judgelab.llm.cache import canonical_json
    c = sqlite3.connect(p)
    c.execute('CREATE TABLE generations (key TEXT PRIMARY KEY, model TEXT NOT NULL, request TEXT NOT NULL, choice TEXT NOT NULL, backend TEXT, created TEXT NOT NULL)')
    c.execute('CREATE INDEX generations_model ON generations(model)')
    for r in _reqs(n):
        req = canonical_json(dict(messages=r.messages, sampling=r.sampling(), seed=r.seed, sample=0))
        c.execute('INSERT INTO generations VALUES (?, ?, ?, ?, ?, ?)', (request_key('echo@1', r), 'echo@1', req, Choice('old').to_json(), 'echo', 'then'))
    c.commit(); c.close()

def test_two_openers_of_an_old_cache_both_write_after_one_migrated_it(tmp_path):
    # before: the second opener failed with "duplicate column name: checksum" (both added the column); with the first
    # version of the migration, every put of the opener that read the table before the other added the column failed
    # with "table generations has 6 columns but 7 values were supplied"
    import sqlite3, threading, time
    p = tmp_path/'old.sqlite'; _old_cache(p, 50)
    gate = sqlite3.connect(p, isolation_level=None); gate.execute('PRAGMA journal_mode=WAL'); gate.execute('BEGIN IMMEDIATE')
    out, reqs = {}, _reqs(50)
    def opener(w):      # reads the table as it is, then waits for the write lock to migrate (as another process would)
        try:
            c = GenerationCache(p); r = Request([{'role': 'user', 'content': f'opener {w}'}])
            c.put(request_key('echo@1', r), 'echo@1', r, Choice(f'{w}')); out[w] = len(c.get_many([request_key('echo@1', q) for q in reqs]))
        except Exception as e: out[w] = f'{type(e).__name__}: {e}'
    ts = [threading.Thread(target=opener, args=(w,)) for w in range(2)]
    for t in ts: t.start()
    time.sleep(0.5); gate.execute('ROLLBACK'); gate.close()             # both have read the old table by now
    for t in ts: t.join(30)
    assert out == {0: 50, 1: 50}, out
    c = GenerationCache(p); assert len(c) == 52 and c.verify() == {}
    assert c.conn().execute('SELECT COUNT(*) FROM generations WHERE checksum IS NULL').fetchone()[0] == 0
