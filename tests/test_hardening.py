"""Nothing lost, nothing poisoned (the hardening issue): the generation cache verifies what it serves, imports of
cache files and of judgments refuse what they cannot trust. Each test failed on the code before its fix."""
import json, os, re, shutil, subprocess, sys, warnings, hashlib
from pathlib import Path
import pytest
from judgelab.llm import ScriptedBackend, Choice, Request
from judgelab.cache import GenerationCache, CachedBackend, CacheCorruptError, CacheImportError, request_key
from conftest import ROOT, run_cli

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
    from judgelab.cache import row_checksum
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
    code = ("import sys; from judgelab.cache import GenerationCache, CachedBackend; from judgelab.llm import Request\n"
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
    from judgelab.cache import canonical_json
    req = canonical_json(dict(messages=r.messages, sampling=r.sampling(), seed=r.seed, sample=0))
    c.execute('INSERT INTO generations VALUES (?, ?, ?, ?, ?, ?)', (k, 'echo@1', req, Choice('old').to_json(), 'echo', 'then')); c.commit(); c.close()
    assert GenerationCache(p).get_many([k])[k].text == 'old'

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

# --- the OpenAI-compatible client: patient with what is temporary, precise about what is not -------------------------

from judgelab.models import get_backend
from judgelab.llm import BackendError

def scripted(http_stub, script):
    """A loopback chat-completions server (the `http_stub` fixture): `script(n, body, headers)` -> (status, headers, bytes)
    for the n-th request (0-based); the requests are recorded as (arrival time, body, headers)."""
    seen = []
    def chat(req):
        seen.append((req.t, req.json, dict(req.headers)))
        return script(len(seen) - 1, req.json, req.headers)
    return http_stub({'/v1/chat/completions': chat}), seen

def ok(text='Rating: 2'):
    return 200, {}, json.dumps(dict(choices=[dict(message=dict(role='assistant', content=text), finish_reason='stop')],
                                    usage=dict(prompt_tokens=5, completion_tokens=3))).encode()
def err(code, msg='no', **hdrs): return code, hdrs, json.dumps(dict(error=dict(message=msg))).encode()

def _backend(srv, tmp_path, **kw):
    return get_backend('openai', cache=GenerationCache(tmp_path/'c.sqlite'), base_url=f'http://127.0.0.1:{srv.port}/v1', model='m',
                       backoff=0.01, **kw)

def test_retry_after_is_honoured(http_stub, tmp_path):
    # before: Retry-After ignored (6 attempts spent in 8-15 s against a 429 asking for 4 s)
    srv, seen = scripted(http_stub, lambda n, b, h: err(429, 'slow down', **{'Retry-After': '1'}) if n < 2 else ok())
    out = _backend(srv, tmp_path).generate([Request([{'role': 'user', 'content': 'x'}])])
    gaps = [b[0] - a[0] for a, b in zip(seen, seen[1:])]
    assert out[0].text == 'Rating: 2' and len(seen) == 3 and min(gaps) >= 0.95, gaps

@pytest.mark.parametrize('code, tries', [(408, 3), (409, 3), (429, 3), (502, 3), (404, 1), (422, 1), (401, 1)])
def test_which_statuses_are_retried(http_stub, tmp_path, code, tries):
    srv, seen = scripted(http_stub, lambda n, b, h: err(code) if n < 2 else ok())
    c = _backend(srv, tmp_path, max_retries=4).generate([Request([{'role': 'user', 'content': 'x'}])])[0].choices[0]
    assert len(seen) == tries and (c.error is None) == (tries == 3)

def test_one_refused_request_is_a_row_failure_and_the_run_completes(http_stub, tmp_path, tmp_outputs):
    # before: one non-retryable 4xx failed the whole run, and the rerun failed again at the same item
    from judgelab.methods import run
    from judgelab.data import load
    ds = load('topical_chat'); bad = ds.items.item_id.iloc[1]
    bad_text = ds.items.set_index('item_id').loc[bad, 'output']
    srv, seen = scripted(http_stub, lambda n, b, h: err(400, 'context length exceeded') if bad_text in b['messages'][-1]['content'] else ok())
    b = _backend(srv, tmp_path)
    items = list(ds.items.item_id[:4])
    j = run('analyze_rate', ds, b, dims=['naturalness'], items=items, progress=False).set_index('item_id')
    assert len(j) == 4 and j.parse_ok.sum() == 3
    assert not j.loc[bad, 'parse_ok'] and 'HTTP 400: context length exceeded' in j.loc[bad, 'failure']
    assert 'request failed' in j.loc[bad, 'failure'] and b.stats['failed'] == 1
    n = len(seen); run('analyze_rate', ds, b, dims=['naturalness'], items=items, progress=False)
    assert len(seen) == n + 1                                         # the rerun asks only for the refused request

@pytest.mark.parametrize('body, what', [(b'<html>502 Bad Gateway</html>', 'not JSON'), (b'{"choices": []}', 'no choices'),
                                        (b'{"id": "x"}', 'no choices'), (b'[1, 2]', 'unexpected JSON')])
def test_a_malformed_response_names_the_url_and_the_request(http_stub, tmp_path, body, what):
    # before: a bare JSONDecodeError / IndexError / KeyError with no URL
    srv, seen = scripted(http_stub, lambda n, b, h: (200, {}, body))
    url = f'http://127.0.0.1:{srv.port}/v1/chat/completions'
    with pytest.raises(BackendError, match=re.escape(f'{url}: malformed response to request 0 ({what})')):
        _backend(srv, tmp_path).generate([Request([{'role': 'user', 'content': 'x'}])])

def test_a_server_that_echoes_the_api_key_cannot_leak_it(http_stub, tmp_path, monkeypatch):
    # before: the server's error text, key included, was copied into the failure, the log and the sweep summary
    monkeypatch.setenv('MY_KEY', 'sk-live-abcdef123456')
    srv, seen = scripted(http_stub, lambda n, b, h: err(403 if n == 0 else 500, f"bad key {h['Authorization']} (sk-live-abcdef123456)"))
    b = _backend(srv, tmp_path, api_key_env='MY_KEY', max_retries=1)
    c = b.generate([Request([{'role': 'user', 'content': 'x'}])])[0].choices[0]
    assert seen[0][2]['Authorization'] == 'Bearer sk-live-abcdef123456'                  # sent
    assert 'sk-live' not in c.error and '[REDACTED]' in c.error, c.error
    with pytest.raises(BackendError) as e: b.generate([Request([{'role': 'user', 'content': 'y'}])])
    assert 'sk-live' not in str(e.value) and '[REDACTED]' in str(e.value)

# --- the smaller items -----------------------------------------------------------------------------------------

@pytest.mark.parametrize('name, options, message', [
    ('llamacpp', dict(n_ctx=10), 'n_ctx must be an integer >= 256'),              # before: passed, failed when the model loaded
    ('openai', dict(model='m'), "backend 'openai' needs base_url"),                  # before: passed, failed 15 s into the run
    ('openai', dict(model='m', base_url='127.0.0.1:8000'), 'base_url must start with http'),
    ('openai', dict(model='m', base_url='http://127.0.0.1:8000/v1', concurrency=0), 'concurrency >= 1'),
])
def test_backend_options_are_checked_before_anything_is_built(name, options, message):
    from judgelab.models import check_backend
    with pytest.raises(ValueError, match=message): check_backend(name, options, complete=True)

def test_a_corrupted_mirror_file_is_named_in_the_error(tmp_path, monkeypatch):
    # before: the error named the deleted staging '.part' file instead of the mirror file
    from judgelab import data as D
    spec = D.get_spec('qags'); f = spec.files[0]
    mirror = tmp_path/'mirror'; (mirror/'qags'/'raw').mkdir(parents=True); bad = mirror/'qags'/'raw'/Path(f.path).name
    bad.write_text('not the file')
    monkeypatch.setenv('JUDGELAB_RAW', str(tmp_path/'raw'))
    with pytest.raises(D.ChecksumError) as e: D.fetch('qags', mirror=mirror, force=True)
    assert str(bad) in str(e.value) and '.part' not in str(e.value), str(e.value)

def test_data_info_says_where_the_files_of_a_missing_dataset_go():
    # before: `judgelab data info seahorse` listed URLs but not where the files must be put
    r = run_cli('data', 'info', 'seahorse', check=True)
    assert 'they go to data/raw/seahorse/' in r.stdout and 'seahorse_data/train.tsv  missing' in r.stdout
    assert 'to get them: Seahorse is not available' in r.stdout and 'seahorse_data.zip' in r.stdout
