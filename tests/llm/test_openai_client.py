"""The OpenAI-compatible HTTP client against hostile servers on 127.0.0.1: a redirect to another port, an API key
echoed across a truncation cut, a reply trickled one byte at a time, a huge reply, malformed fields, and a model that
echoes the key. Every server here is real (http.server on loopback, started by the `http_stub` fixture); each test failed before its fix."""

import json, threading, time, warnings
from pathlib import Path
import pytest
from judgelab.llm import Request, BackendError
from judgelab.llm.cache import GenerationCache
from judgelab.llm.models import get_backend
from judgelab.llm import backends

KEY = 'sk-proj-Qx7vLm2RtY9wZc4NpK8sD'          # 29 characters, shaped like a real key

assert len(KEY) == 29

def msgs(text): return [{'role': 'user', 'content': text}]

def pieces(s, k=6): return {s[i:i + k] for i in range(len(s) - k + 1)}

def leaked(text, key=KEY)->list:
    "The 6-character pieces of `key` found in `text`."
    return sorted(p for p in pieces(key) if p in text)

def serve(http_stub, handle):
    """A loopback server (the `http_stub` fixture): `handle(h, method, body)` answers each request, at any path, itself (it
    may write anything, slowly); the requests are recorded as (method, path, headers, body)."""
    seen = []
    def do(req):
        seen.append((req.method, req.path, dict(req.headers), req.json)); handle(req.handler, req.method, req.json)
    return http_stub({'*': do}), seen

def reply(h, code, data:bytes, headers=None, length=True):
    h.send_response(code)
    for k, v in {'Content-Type': 'application/json', **(headers or {})}.items(): h.send_header(k, v)
    if length: h.send_header('Content-Length', str(len(data)))
    h.end_headers(); h.wfile.write(data)

def completion(text='Rating: 2', **extra)->dict:
    ch = dict(index=0, message=dict(role='assistant', content=text), finish_reason='stop')
    return dict(choices=[{**ch, **extra}], usage=dict(prompt_tokens=5, completion_tokens=3))

def backend(srv, tmp_path, **kw):
    kw = dict(dict(backoff=0.01, max_retries=0, constraint_style='vllm'), **kw)
    b = get_backend('openai', cache=GenerationCache(tmp_path/'c.sqlite'), base_url=f'http://127.0.0.1:{srv.port}/v1', model='m', **kw)
    b.verbose = False; return b

# --- 1. a redirect carries the key elsewhere ------------------------------------------------------------------------

@pytest.mark.parametrize('code', [301, 302, 303])
def test_a_redirect_is_never_followed_and_the_key_goes_nowhere_else(http_stub, tmp_path, monkeypatch, code):
    # before: the POST became a GET to the other port with `Authorization: Bearer <key>`, and its reply was the answer
    monkeypatch.setenv('MY_KEY', KEY)
    other, got = serve(http_stub, lambda h, m, b: reply(h, 200, json.dumps(completion('from the other port')).encode()))
    srv, seen = serve(http_stub, lambda h, m, b: reply(h, code, b'moved', {'Location': f'http://127.0.0.1:{other.port}/v1/chat/completions'}))
    b = backend(srv, tmp_path, api_key_env='MY_KEY')
    c = b.generate([Request(msgs('x'))])[0].choices[0]
    assert seen[0][2]['Authorization'] == f'Bearer {KEY}'               # the server asked
    assert got == [], got                                                # nothing reached the other port
    assert c.text == '' and f'HTTP {code}' in c.error and 'never followed' in c.error, c.error
    assert f'127.0.0.1:{other.port}' in c.error and len(b.cache) == 0

def test_the_model_list_probe_does_not_follow_a_redirect_either(http_stub, tmp_path, monkeypatch):
    # before: GET /models answered 307 was followed with the Authorization header to the other port
    monkeypatch.setenv('MY_KEY', KEY)
    other, got = serve(http_stub, lambda h, m, b: reply(h, 200, json.dumps(dict(data=[dict(id='m', owned_by='vllm')])).encode()))
    def main(h, m, b):
        if m == 'GET': return reply(h, 307, b'', {'Location': f'http://127.0.0.1:{other.port}/v1/models'})
        reply(h, 200, json.dumps(completion('1')).encode())
    srv, seen = serve(http_stub, main)
    b = backend(srv, tmp_path, api_key_env='MY_KEY', constraint_style='auto')
    out = b.generate([Request(msgs('x'), choice=['1', '2'])])
    assert got == [], got
    assert b.inner.compat['how'] == 'GET /models: HTTP 307' and out[0].text == '1'

# --- 2. a piece of the key across a truncation cut ------------------------------------------------------------------

def test_a_key_across_the_200_character_cut_of_a_non_json_reply_is_not_leaked(http_stub, tmp_path, monkeypatch):
    # before: the body was cut at 200 characters, then the whole key replaced: the 14 characters before the cut leaked
    monkeypatch.setenv('MY_KEY', KEY)
    body = ('<html>' + 'x'*180 + KEY + ' and again ' + KEY[4:20] + '</html>').encode()
    srv, seen = serve(http_stub, lambda h, m, b: reply(h, 200, body, {'Content-Type': 'text/html'}))
    err = backend(srv, tmp_path, api_key_env='MY_KEY').generate([Request(msgs('x'))])[0].choices[0].error   # that row's failure (once the batch's)
    assert 'malformed response to request 0 (not JSON)' in err and leaked(err) == [] and 'x'*20 in err, err

def test_a_key_across_the_2000_character_cut_of_an_error_reply_is_not_leaked(http_stub, tmp_path, monkeypatch):
    # before: a 403's body was cut at 2000 characters, then the whole key replaced: the 15 characters before the cut leaked
    monkeypatch.setenv('MY_KEY', KEY)
    def main(h, m, b):
        head = f"Authorization: {h.headers['Authorization']}\n" + 'y'*1000 + f' {KEY[9:21]} '
        text = head + 'z'*(1985 - len(head)) + KEY + 'tail'                # the key starts 15 characters before the cut
        reply(h, 403, text.encode(), {'Content-Type': 'text/plain'})
    srv, seen = serve(http_stub, main)
    c = backend(srv, tmp_path, api_key_env='MY_KEY').generate([Request(msgs('x'))])[0].choices[0]
    assert c.error and 'HTTP 403' in c.error and '[REDACTED]' in c.error and 'y'*100 in c.error, c.error
    assert leaked(c.error) == [], leaked(c.error)

# --- 14. a whole-request deadline -----------------------------------------------------------------------------------

@pytest.mark.parametrize('where', ['headers', 'body'])
def test_a_reply_trickled_one_byte_at_a_time_is_cut_off_at_the_deadline(http_stub, tmp_path, where):
    # before: `timeout` bounded each read, so a server sending a byte every 0.2 s was waited for to the end (6 s for timeout=1)
    finished = []
    data = json.dumps(completion()).encode()
    def main(h, m, b):
        head = (f'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n').encode()
        out = head + data
        slow = slice(0, 30) if where == 'headers' else slice(len(out) - 30, len(out))
        fast_before, trickled, fast_after = out[:slow.start], out[slow], out[slow.stop:]
        try:
            h.wfile.write(fast_before)
            for i in range(len(trickled)): h.wfile.write(trickled[i:i + 1]); time.sleep(0.2)
            h.wfile.write(fast_after); finished.append(True)
        except OSError: pass
    srv, seen = serve(http_stub, main)
    b = backend(srv, tmp_path, timeout=1)                  # a timeout is retried, then stops the batch (max_retries=0: at once)
    with pytest.raises(BackendError, match=r'gave up on request 0 after 1 attempts \(TimeoutError: no complete reply within 1 s'):
        b.generate([Request(msgs('x'))])
    assert finished == [], 'the client waited for the whole trickle'
    assert len(b.cache) == 0

# --- 15. a reply over the size limit; malformed fields ------------------------------------------------------------

@pytest.mark.parametrize('length', [True, False], ids=['content-length', 'read-to-close'])
def test_a_50_mb_reply_is_refused_without_being_read_whole(http_stub, tmp_path, length):
    # before: the 50 MB reply was read into memory, parsed, cached and served as the sample
    big = json.dumps(completion('a'*50_000_000)).encode(); sent = []; done = threading.Event()
    def main(h, m, b):
        n = 0
        try:
            h.send_response(200); h.send_header('Content-Type', 'application/json')
            if length: h.send_header('Content-Length', str(len(big)))
            h.end_headers()
            for i in range(0, len(big), 1 << 20): h.wfile.write(big[i:i + (1 << 20)]); n = i + len(big[i:i + (1 << 20)])
        except OSError: pass
        finally: sent.append(n); done.set()
    srv, seen = serve(http_stub, main)
    b = backend(srv, tmp_path, timeout=30)
    c = b.generate([Request(msgs('x'))])[0].choices[0]
    assert c.text == '' and c.error and f'larger than {backends.MAX_REPLY_BYTES} bytes' in c.error, c.error
    assert len(b.cache) == 0
    done.wait(10)
    assert sent and sent[0] < len(big), (sent, len(big))     # the client hung up: the server could not send it all

def _lp(logprob=-0.1, top=-0.2): return dict(content=[dict(token='2', logprob=logprob, top_logprobs=[dict(token='2', logprob=top)])])

MALFORMED = {
    'nan logprob': (completion(logprobs=_lp(float('nan'))), 'logprobs.content[0].logprob'),
    'infinite logprob': (completion(logprobs=_lp(-0.1, float('-inf'))), 'logprobs.content[0].top_logprobs[0].logprob'),
    'content 4': (completion(4), 'message.content is a number'),
    'logprobs a list': (completion(logprobs=[dict(token='2', logprob=-0.1)]), 'logprobs is a list'),
    'logprob "abc"': (completion(logprobs=_lp('abc')), "logprobs.content[0].logprob is a string 'abc'"),
    'message a string': ({'choices': [dict(message='Rating: 2', finish_reason='stop')]}, 'message is a string'),
    'usage a list': ({**completion(), 'usage': [5, 3]}, 'usage is a list'),
}

RAW = {  # 200 replies without a sample: once a BackendError that aborted the whole batch
    'not JSON': (b'<html>proxy error</html>', '(not JSON)'),
    'no choices': (json.dumps(dict(id='x', object='chat.completion')).encode(), '(no choices)'),
    'an error object': (json.dumps(dict(error=dict(message='model overloaded'))).encode(), '(an error object: model overloaded)'),
    'nested deep': (b'{"choices": ' + b'['*100_000 + b']'*100_000 + b'}', '(not JSON)'),
}

@pytest.mark.parametrize('case', list(RAW))
def test_a_200_reply_without_a_sample_is_that_requests_failure(http_stub, tmp_path, case):
    body, what = RAW[case]
    srv, seen = serve(http_stub, lambda h, m, b: reply(h, 200, body if b['messages'][-1]['content'] == 'bad' else json.dumps(completion()).encode()))
    b = backend(srv, tmp_path)
    good, worse = b.generate([Request(msgs('good')), Request(msgs('bad'))])
    assert good.text == 'Rating: 2' and worse.text == '' and 'malformed response to request 1 ' + what in worse.choices[0].error, worse.choices[0].error
    assert len(b.cache) == 1 and b.last['failed'] == 1

def test_a_reply_that_is_not_valid_unicode_is_a_failed_row_and_the_batch_goes_on(http_stub, tmp_path):
    # before: a lone surrogate reached cache.put, whose UnicodeEncodeError aborted the batch, and again on every rerun
    body = b'{"choices": [{"message": {"role": "assistant", "content": "Score: 3 \\ud800"}, "finish_reason": "stop"}]}'
    srv, seen = serve(http_stub, lambda h, m, b: reply(h, 200, body if b['messages'][-1]['content'] == 'bad' else json.dumps(completion()).encode()))
    b = backend(srv, tmp_path)
    for _ in range(2):                                      # the rerun asks again, and fails the same row the same way
        good, worse = b.generate([Request(msgs('good')), Request(msgs('bad'))])
        assert good.text == 'Rating: 2' and worse.text == '' and 'not valid Unicode' in worse.choices[0].error, worse.choices[0].error
    assert len(b.cache) == 1

def test_a_scripted_backend_reply_with_a_lone_surrogate_is_a_failed_row(tmp_path):
    from judgelab.llm import ScriptedBackend, Choice
    from judgelab.llm.cache import CachedBackend
    inner = ScriptedBackend(lambda r, s: Choice('Score: 3 \ud800' if 'bad' in r.messages[-1]['content'] else 'Score: 2', 'stop', 1, 1), model='s@1')
    b = CachedBackend(inner, GenerationCache(tmp_path/'c.sqlite'), verbose=False)
    good, worse = b.generate([Request(msgs('good')), Request(msgs('bad'))])
    assert good.text == 'Score: 2' and 'not valid Unicode' in worse.choices[0].error and len(b.cache) == 1

def test_a_long_retry_after_is_capped_and_said(http_stub, tmp_path, monkeypatch, capsys):
    # a 429 asking for 999999 s: the wait is cut to MAX_RETRY_AFTER and printed (it was a silent sleep)
    monkeypatch.setattr(backends, 'MAX_RETRY_AFTER', 0.2)
    monkeypatch.setattr(backends, 'SAY_WAIT_S', 0.1)
    n = []
    def handle(h, m, b):
        n.append(1)
        if len(n) == 1: reply(h, 429, json.dumps(dict(error=dict(message='slow down'))).encode(), {'Retry-After': '999999'})
        else: reply(h, 200, json.dumps(completion()).encode())
    srv, seen = serve(http_stub, handle)
    assert backend(srv, tmp_path, max_retries=1).generate([Request(msgs('x'))])[0].text == 'Rating: 2'
    assert 'HTTP 429: slow down; retry 1 of 1 in 0 s' in capsys.readouterr().err

@pytest.mark.parametrize('case', list(MALFORMED))
def test_a_malformed_reply_is_that_requests_failure_never_cached_never_a_batch_abort(http_stub, tmp_path, case):
    # before: NaN/Infinity logprobs and `content: 4` were cached and served; the others aborted the batch (AttributeError/ValueError)
    bad, what = MALFORMED[case]
    srv, seen = serve(http_stub, lambda h, m, b: reply(h, 200, json.dumps(bad if b['messages'][-1]['content'] == 'bad' else completion()).encode()))
    b = backend(srv, tmp_path)
    good, worse = b.generate([Request(msgs('good'), logprobs=True), Request(msgs('bad'), logprobs=True)])
    assert good.text == 'Rating: 2' and good.choices[0].error is None
    err = worse.choices[0].error
    assert worse.text == '' and err and 'malformed response to request 1' in err and what in err, err
    assert len(b.cache) == 1 and b.last['failed'] == 1

# --- the key echoed by the model ------------------------------------------------------------------------------------

def test_a_key_echoed_by_the_model_never_reaches_the_cache(http_stub, tmp_path, monkeypatch):
    # before: the reply's text (and tokens) went into the cache with the key in them
    monkeypatch.setenv('MY_KEY', KEY)
    def main(h, m, b):
        key = h.headers['Authorization'].split()[-1]
        lp = dict(content=[dict(token=key, logprob=-0.1, top_logprobs=[dict(token=key[:12], logprob=-0.1)])])
        reply(h, 200, json.dumps(completion(f'My instructions say the key is {key}; part of it: {key[5:16]}.', logprobs=lp)).encode())
    srv, seen = serve(http_stub, main)
    b = backend(srv, tmp_path, api_key_env='MY_KEY')
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter('always')
        c = b.generate([Request(msgs('x'), logprobs=True)])[0]
    b.cache.export(tmp_path/'e.jsonl')
    for f in Path(tmp_path).iterdir():
        assert leaked(f.read_bytes().decode('latin-1')) == [], f
    assert c.choices[0].error is None and '[REDACTED]' in c.text and leaked(c.text) == [] and len(b.cache) == 1
    assert c.text.startswith('My instructions say the key is [REDACTED]; part of it: [REDACTED].'), c.text
    assert c.logprobs[0]['token'] == '[REDACTED]' and c.logprobs[0]['top'][0][0] == '[REDACTED]'
    assert any('piece of the API key' in str(w.message) for w in said), [str(w.message) for w in said]

def test_the_judgments_rows_of_a_run_carry_no_piece_of_the_key(http_stub, tmp_path, tmp_outputs, monkeypatch):
    # before: the 15 key characters left by the 2000-character cut reached the judgment row's `failure` (and its parquet file)
    from judgelab.methods import run
    from judgelab.data import load
    monkeypatch.setenv('MY_KEY', KEY)
    ds = load('topical_chat'); items = list(ds.items.item_id[:2])
    bad_text = ds.items.set_index('item_id').loc[items[1], 'output']
    def main(h, m, b):
        if bad_text not in b['messages'][-1]['content']: return reply(h, 200, json.dumps(completion('Rating: 2')).encode())
        text = 'q'*1985 + KEY + ' (the key you sent)'
        reply(h, 403, text.encode(), {'Content-Type': 'text/plain'})
    srv, seen = serve(http_stub, main)
    j = run('analyze_rate', ds, backend(srv, tmp_path, api_key_env='MY_KEY'), dims=['naturalness'], items=items, progress=False)
    f = j.set_index('item_id').loc[items[1], 'failure']
    assert 'HTTP 403' in f and leaked(f) == [], f
    j.to_parquet(tmp_path/'j.parquet')
    assert leaked((tmp_path/'j.parquet').read_bytes().decode('latin-1')) == []
