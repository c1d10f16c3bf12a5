"""Hostile input to the generation cache (issue 28): a malformed import row, a row stripped of its checksum, an edited
export, a row that is not UTF-8. Each test failed on the code before its fix."""
import json, hashlib, subprocess, sys, warnings
import pytest
from judgelab.llm import ScriptedBackend, Choice, Request
from judgelab.cache import GenerationCache, CachedBackend, CacheImportError, request_key, row_checksum

def echo():
    "A scripted backend that answers with a hash of the prompt (`count`: the samples it was asked for)."
    return ScriptedBackend(lambda r: Choice(hashlib.sha256(r.messages[-1]['content'].encode()).hexdigest()[:12], 'stop', 1, 3),
                           model='echo@1', name='echo')

def _reqs(n): return [Request([{'role': 'user', 'content': f'text {i}'}]) for i in range(n)]

def _texts(cache, reqs):
    b = CachedBackend(echo(), cache, verbose=False)
    return b, [c.text for c in b.generate(reqs, progress=False)]

def _write(path, rows): path.write_text(''.join(json.dumps(r) + '\n' for r in rows)); return path

_SECOND_WRITER = """import sys
from judgelab.cache import GenerationCache, request_key
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
    from judgelab.cache import canonical_json
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
