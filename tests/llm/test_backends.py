"""The backends (llama.cpp in-process and as a server, the OpenAI-compatible HTTP client): generation, retries, options, the chat template options, the API key."""

import json, os, socket, subprocess, sys, time
from pathlib import Path
import pytest
from judgelab.llm import Request, Job, ScriptedBackend, BackendError, RequestError
from judgelab.llm.backends import LlamaCppBackend, OpenAIBackend, embedded_model_path
from judgelab.llm.models import get_backend
from judgelab.llm.cache import GenerationCache, CachedBackend, CacheMissError
import re, types
from judgelab.llm import backends as B
from tests.conftest import _backend, err, ok, scripted

# ==============================================================================================================
# The LLM layer against real parts: the embedded llama.cpp model in-process, llama.cpp's OpenAI-compatible
# server started on 127.0.0.1 by the test (killed mid-batch and restarted), and stub HTTP servers on loopback
# for the retry policy (500 twice then 200; 400 at once), started by the `http_stub` fixture.
# ==============================================================================================================

def msgs(text): return [{'role': 'user', 'content': text}]

@pytest.fixture(scope='module')
def embedded():
    return LlamaCppBackend(n_ctx=1024)

def test_embedded_model_generates_real_text_and_second_run_is_all_cache_hits(tmp_path, embedded):
    cache = GenerationCache(tmp_path/'c.sqlite')
    # the embedded model's replies through a scripted backend that records each sample it is asked for
    calls = ScriptedBackend(lambda r, s: next(embedded.run_jobs([Job(0, r, s)], False))[1], model=embedded.identity(), name='llamacpp',
                            check=embedded.check_request)
    b = CachedBackend(calls, cache, verbose=False)
    reqs = [Request(msgs(f'Write one short sentence about the number {i}.'), max_tokens=16) for i in range(3)]
    first = b.generate(reqs)
    assert calls.count == 3 and all(c.text.strip() for c in first) and all(not c.cached for c in first)
    assert all(c.choices[0].prompt_tokens > 5 and c.choices[0].completion_tokens > 0 for c in first)
    second = b.generate(reqs)
    assert calls.count == 3, 'the second run must not call the model'
    assert [c.text for c in second] == [c.text for c in first] and all(c.cached for c in second)
    assert embedded.identity().startswith('HuggingFaceTB/SmolLM2-135M-Instruct@gguf-sha256:')

def test_embedded_choice_constraint_logprobs_and_samples(embedded, tmp_path):
    b = CachedBackend(embedded, GenerationCache(tmp_path/'c.sqlite'), verbose=False)
    out = b.generate([Request(msgs('Is the sky blue? Answer yes or no.'), max_tokens=4, choice=['yes', 'no'],
                              logprobs=True, top_logprobs=3, temperature=1.0, n=3, seed=7)])[0]
    assert len(out.choices) == 3 and all(t in ('yes', 'no') for t in out.texts)
    assert out.logprobs and len(out.logprobs[0]['top']) >= 1
    with pytest.raises(RequestError, match='cannot enforce a regex'):
        b.generate([Request(msgs('x'), regex='[0-9]')])

def test_bad_input_fails_before_generation(tmp_path):
    with pytest.raises(ValueError, match="Unknown backend 'llama'"): get_backend('llama')
    with pytest.raises(BackendError, match='No GGUF model file'): get_backend('llamacpp', model_path=tmp_path/'none.gguf')
    with pytest.raises(TypeError, match='Unknown option'): get_backend('llamacpp', threads=2)
    b = get_backend('openai', cache=GenerationCache(tmp_path/'c.sqlite'), base_url='http://127.0.0.1:9/v1', model='m', max_retries=0)
    for bad in [dict(temperature=3), dict(top_p=1.5), dict(max_tokens=0), dict(n=0), dict(top_logprobs=2)]:
        with pytest.raises(RequestError): b.generate([Request(msgs('ok'))]*2 + [Request(msgs('x'), **bad)])
    assert b.last.get('generated', 0) == 0

def test_llama_threads_env_empty_means_unset_and_bad_values_are_clear_errors(monkeypatch):
    # an empty JUDGELAB_LLAMA_THREADS (e.g. `JUDGELAB_LLAMA_THREADS= make ...`) crashed with int('')
    from judgelab.llm.backends import LlamaCppBackend
    for v in ('', '  ', '0'):
        monkeypatch.setenv('JUDGELAB_LLAMA_THREADS', v); assert LlamaCppBackend().n_threads == (os.cpu_count() or 1)
    monkeypatch.setenv('JUDGELAB_LLAMA_THREADS', ' 3 '); assert LlamaCppBackend().n_threads == 3
    assert LlamaCppBackend(n_threads=2).n_threads == 2                         # an explicit argument wins
    for v in ('two', '-1', '1.5'):
        monkeypatch.setenv('JUDGELAB_LLAMA_THREADS', v)
        with pytest.raises(ValueError, match='JUDGELAB_LLAMA_THREADS must be a positive integer'): LlamaCppBackend()

# ---- a real llama.cpp server on 127.0.0.1 -------------------------------------------------------------

def free_port():
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def start_server(port, log=None):
    "llama.cpp's OpenAI-compatible server with the embedded model on 127.0.0.1:port (its log goes to a file, not a pipe)."
    import tempfile, urllib.request
    log = log or tempfile.NamedTemporaryFile(prefix='llamacpp-server-', suffix='.log', delete=False).name
    p = subprocess.Popen([sys.executable, '-m', 'llama_cpp.server', '--model', str(embedded_model_path()), '--host', '127.0.0.1',
                          '--port', str(port), '--n_ctx', '1024', '--n_threads', '2', '--model_alias', 'smollm2'],
                         stdout=subprocess.DEVNULL, stderr=open(log, 'w'))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for _ in range(600):
        try:
            opener.open(f'http://127.0.0.1:{port}/v1/models', timeout=1); return p
        except Exception:
            if p.poll() is not None: raise RuntimeError(Path(log).read_text()[-2000:])
            time.sleep(0.1)
    p.kill(); raise RuntimeError(f'llama.cpp server did not start; log: {log}')

@pytest.fixture
def server():
    port = free_port(); p = start_server(port)
    yield port, p
    if p.poll() is None: p.terminate(); p.wait(10)

def test_server_generation_logprobs_and_concurrency(server, tmp_path):
    port, _ = server
    b = get_backend('openai', cache=GenerationCache(tmp_path/'c.sqlite'), base_url=f'http://127.0.0.1:{port}/v1', model='smollm2',
                    model_id='smollm2-server', concurrency=4, constraint_style='llamacpp')
    b.verbose = False
    reqs = [Request(msgs(f'Name a colour ({i}).'), max_tokens=8) for i in range(6)]
    out = b.generate(reqs)
    assert all(o.text.strip() for o in out) and b.last['generated'] == 6
    lp = b.generate([Request(msgs('Say yes or no.'), max_tokens=3, logprobs=True, top_logprobs=2, choice=['yes', 'no'])])[0]
    assert lp.text in ('yes', 'no') and lp.logprobs and lp.logprobs[0]['top']

def test_server_killed_mid_batch_then_rerun_generates_only_the_rest(http_stub, tmp_path):
    port = free_port(); p = start_server(port)
    cache = GenerationCache(tmp_path/'c.sqlite')
    inner = OpenAIBackend(f'http://127.0.0.1:{port}/v1', 'smollm2', model_id='smollm2-server', concurrency=1, max_retries=1, backoff=0.05, timeout=20)
    reqs = [Request(msgs(f'Count to {i}.'), max_tokens=12) for i in range(10)]
    def kill_after_4(r, s):
        "The server's reply; the server is killed once it has answered the fourth."
        ch = next(inner.run_jobs([Job(0, r, s)], False))[1]
        if kill_after.count == 4: p.kill(); p.wait()
        return ch
    kill_after = ScriptedBackend(kill_after_4, model=inner.identity(), name='openai')
    with pytest.raises(BackendError, match=r'after (\d+) of 10 missing samples were generated and cached') as e:
        CachedBackend(kill_after, cache, verbose=False).generate(reqs)
    kept = len(cache); assert 4 <= kept < 10, kept
    p2 = start_server(port)
    try:
        rerun = CachedBackend(inner, cache, verbose=False); out = rerun.generate(reqs)
        assert rerun.last['hits'] == kept and rerun.last['generated'] == 10 - kept
        assert all(o.text.strip() for o in out)
    finally: p2.terminate(); p2.wait(10)

# ---- stub HTTP servers for the retry policy ----------------------------------------------------------

def stub(http_stub, codes):
    "A loopback chat-completions server answering the given status codes in turn (then 200 forever); `seen`: the request bodies."
    seen = []
    def chat(req):
        seen.append(req.json); code = codes[len(seen) - 1] if len(seen) <= len(codes) else 200
        if code == 200:
            return 200, {}, dict(choices=[dict(message=dict(role='assistant', content='Score: 4'), finish_reason='stop')],
                                 usage=dict(prompt_tokens=5, completion_tokens=3))
        return code, {}, dict(error=dict(message=f'stub says {code}'))
    return http_stub({'/v1/chat/completions': chat}), seen

def test_http_stub_answers_by_path_records_every_request_and_shuts_down(http_stub):
    import urllib.request, urllib.error
    from tests.conftest import StubServer
    srv = http_stub({'/v1/x': lambda req: (201, {'X-Seen': str(req.n)}, {'got': req.json})})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    r = opener.open(urllib.request.Request(f'{srv.url}/v1/x?q=1', data=b'{"a": 1}', method='POST'), timeout=10)
    assert (r.status, r.headers['X-Seen'], r.headers['Content-Type'], json.loads(r.read())) == (201, '0', 'application/json', {'got': {'a': 1}})
    with pytest.raises(urllib.error.HTTPError, match='404'): opener.open(f'{srv.url}/v1/other', timeout=10)
    assert [(q.method, q.path) for q in srv.seen] == [('POST', '/v1/x'), ('GET', '/v1/other')] and srv.url == f'http://127.0.0.1:{srv.port}'
    s2 = StubServer({'*': lambda req: (200, {}, 'any path')}); port = s2.port
    assert opener.open(f'{s2.url}/anything', timeout=10).read() == b'any path'
    s2.close()                                                       # what the fixture does at teardown
    with pytest.raises(urllib.error.URLError): opener.open(f'http://127.0.0.1:{port}/anything', timeout=5)

def test_retries_500_twice_then_succeeds(http_stub, tmp_path):
    srv, seen = stub(http_stub, [500, 503])
    b = get_backend('openai', cache=GenerationCache(tmp_path/'c.sqlite'), base_url=f'http://127.0.0.1:{srv.port}/v1', model='m', backoff=0.01)
    out = b.generate([Request(msgs('rate'))])
    assert out[0].text == 'Score: 4' and len(seen) == 3 and seen[0]['model'] == 'm' and seen[0]['seed'] == 0

def test_400_is_not_retried_and_is_recorded_with_the_servers_message(http_stub, tmp_path):
    srv, seen = stub(http_stub, [400])
    cache = GenerationCache(tmp_path/'c.sqlite')
    b = get_backend('openai', cache=cache, base_url=f'http://127.0.0.1:{srv.port}/v1', model='m', backoff=0.01)
    out = b.generate([Request(msgs('rate'))])
    assert len(seen) == 1 and out[0].text == '' and 'HTTP 400: stub says 400' in out[0].choices[0].error
    assert len(cache) == 0 and b.last['failed'] == 1                    # never cached: the next run asks again
    assert b.generate([Request(msgs('rate'))])[0].text == 'Score: 4' and len(seen) == 2

def test_api_key_is_sent_but_never_stored(http_stub, tmp_path, monkeypatch):
    monkeypatch.setenv('MY_KEY', 'sk-secret-123')
    srv, seen = stub(http_stub, [])
    cache = GenerationCache(tmp_path/'c.sqlite')
    b = get_backend('openai', cache=cache, base_url=f'http://127.0.0.1:{srv.port}/v1', model='m', api_key_env='MY_KEY')
    b.generate([Request(msgs('rate'))])
    cache.export(tmp_path/'e.jsonl')
    assert 'sk-secret-123' not in (tmp_path/'e.jsonl').read_text()
    assert 'sk-secret-123' not in (tmp_path/'c.sqlite').read_bytes().decode('latin-1')

def test_replay_mode_never_calls_a_model(http_stub, tmp_path):
    srv, seen = stub(http_stub, [])
    cache = GenerationCache(tmp_path/'c.sqlite'); url = f'http://127.0.0.1:{srv.port}/v1'
    get_backend('openai', cache=cache, base_url=url, model='m').generate([Request(msgs('a'))])
    n = len(seen)
    rp = get_backend('openai', cache=cache, mode='replay', base_url=url, model='m')
    assert rp.generate([Request(msgs('a'))])[0].cached and len(seen) == n
    with pytest.raises(CacheMissError, match="1 of 1 samples for model 'm'"): rp.generate([Request(msgs('b'))])
    assert len(seen) == n

# ---- strict OpenAI-compatible servers: no field beyond OpenAI's unless the server is known to take it -----------

OPENAI_FIELDS = {'model', 'messages', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'n', 'seed', 'stop', 'logprobs',
                 'top_logprobs', 'stream', 'stream_options', 'response_format', 'frequency_penalty', 'presence_penalty', 'logit_bias',
                 'user', 'tools', 'tool_choice', 'parallel_tool_calls'}     # OpenAI's chat-completions body, written out here on purpose

def compat_server(http_stub, owned_by='openai', strict=True, error='openai'):
    """A loopback chat-completions server: GET /v1/models lists one model `owned_by` (None: 404); POST /v1/chat/completions
    answers 'Yes' (with OpenAI-format logprobs when asked); `seen`: the chat request bodies. `strict`: any top-level field beyond OpenAI's is refused, as the
    OpenAI API does (400, OpenAI's error body) or as a pydantic server with extra='forbid' does (error='pydantic': 422)."""
    seen = []
    def models(req):
        if req.method != 'GET' or owned_by is None: return 404, {}, dict(error=dict(message='Not found', type='invalid_request_error'))
        return 200, {}, dict(object='list', data=[dict(id='m', object='model', created=0, owned_by=owned_by)])
    def chat(req):
        if req.method != 'POST': return 404, {}, dict(error=dict(message='Not found', type='invalid_request_error'))
        body = req.json; seen.append(body)
        extra = sorted(set(body) - OPENAI_FIELDS)
        if strict and extra and error == 'pydantic':
            return 422, {}, dict(detail=[dict(type='extra_forbidden', loc=['body', k], msg='Extra inputs are not permitted') for k in extra])
        if strict and extra:
            return 400, {}, dict(error=dict(message=f'Unrecognized request argument supplied: {extra[0]}', type='invalid_request_error',
                                            param=None, code=None))
        ch = dict(index=0, message=dict(role='assistant', content='Yes'), finish_reason='stop')
        if body.get('logprobs'):
            ch['logprobs'] = dict(content=[dict(token='Yes', logprob=-0.1, top_logprobs=[dict(token='Yes', logprob=-0.1), dict(token='No', logprob=-2.4)]
                                                [:body.get('top_logprobs') or 0])])
        return 200, {}, dict(id='c', object='chat.completion', model=body['model'], choices=[ch], usage=dict(prompt_tokens=5, completion_tokens=1))
    return http_stub({'/v1/models': models, '/v1/chat/completions': chat}), seen

def _compat(srv, tmp_path, **kw):
    b = get_backend('openai', cache=GenerationCache(tmp_path/'c.sqlite'), base_url=f'http://127.0.0.1:{srv.port}/v1', model='m', backoff=0.01, **kw)
    b.verbose = False; return b

PREFILLED = [{'role': 'user', 'content': 'Rate it.'}, {'role': 'assistant', 'content': 'Analysis: fine.\nRating:'}]

def test_default_backend_against_a_strict_server_sends_openai_fields_only(http_stub, tmp_path):
    srv, seen = compat_server(http_stub, 'openai')
    b = _compat(srv, tmp_path)
    out = b.generate([Request(msgs(f'Is {i} even? Answer Yes or No.'), max_tokens=4) for i in range(3)])
    assert [o.text for o in out] == ['Yes']*3 and b.last['generated'] == 3
    lp = b.generate([Request(msgs('Yes or no?'), max_tokens=2, logprobs=True, top_logprobs=2)])[0]
    assert lp.logprobs == [dict(token='Yes', logprob=-0.1, top=[['Yes', -0.1], ['No', -2.4]])]
    with pytest.warns(UserWarning, match='cannot enforce choice='):       # the checklist's yes/no checks: unconstrained, parsed by the caller
        ch = b.generate([Request(msgs('Yes or no?'), max_tokens=2, choice=['Yes', 'No'])])[0]
    assert ch.text == 'Yes' and b.inner.compat['server'] == 'strict' and b.inner.compat['unconstrained'] == 1
    n = len(seen)
    for bad, what in [(dict(messages=PREFILLED, continue_final=True), 'continuing a prefilled answer'),
                      (dict(messages=msgs('x'), chat_options={'enable_thinking': False}), 'chat-template options'),
                      (dict(messages=msgs('x'), regex='[0-9]'), 'a regex constraint')]:
        with pytest.raises(RequestError, match=what):                  # before any request of the batch is sent
            b.generate([Request(msgs('fine')), Request(**bad)])
    assert len(seen) == n and b.inner.compat['fallbacks'] == 0
    assert seen and all(set(body) <= OPENAI_FIELDS for body in seen), [sorted(set(x) - OPENAI_FIELDS) for x in seen]

@pytest.mark.parametrize('error', ['openai', 'pydantic'])
def test_an_undeclared_server_refusing_vllm_fields_is_asked_once_then_written_strict(http_stub, tmp_path, error):
    srv, seen = compat_server(http_stub, None, error=error)                      # no /v1/models: nothing says what it is
    b = _compat(srv, tmp_path)
    with pytest.warns(UserWarning) as w:
        out = b.generate([Request(msgs('Yes or no?'), max_tokens=2, choice=['Yes', 'No'])])
    said = [str(x.message) for x in w]                                 # each said once: the fallback and what it means for choice=
    assert len(said) == 2 and "refused request fields beyond OpenAI's" in said[0] and 'cannot enforce choice=' in said[1], said
    assert out[0].text == 'Yes' and not out[0].choices[0].error and b.last['generated'] == 1
    assert [('structured_outputs' in x) for x in seen] == [True, False]          # refused, then the same request without it
    c = b.inner.compat
    assert (c['server'], c['fallbacks'], c['unconstrained']) == ('strict', 1, 1) and 'structured_outputs' in c['rejected']
    more = b.generate([Request(msgs(f'Yes or no ({i})?'), max_tokens=2, choice=['Yes', 'No']) for i in range(3)])
    assert [o.text for o in more] == ['Yes']*3 and len(seen) == 5 and all(set(x) <= OPENAI_FIELDS for x in seen[1:])
    assert b.inner.compat['fallbacks'] == 1 and b.inner.compat['unconstrained'] == 4
    with pytest.raises(RequestError, match="takes OpenAI's request fields only"):   # now known: refused before sending
        b.generate([Request(PREFILLED, continue_final=True)])
    assert len(seen) == 5

def test_an_undeclared_server_refusing_a_prefilled_answer_records_it_and_never_drops_it(http_stub, tmp_path):
    srv, seen = compat_server(http_stub, 'acme')                                 # owned_by says nothing known
    b = _compat(srv, tmp_path)
    with pytest.warns(UserWarning, match="refused request fields"):
        out = b.generate([Request(PREFILLED, continue_final=True)])
    err = out[0].choices[0].error
    assert out[0].text == '' and 'HTTP 400' in err and 'continue_final_message' in err and 'needs a vLLM server' in err
    assert len(seen) == 1 and b.last['failed'] == 1 and b.inner.compat['refused'] == 1     # sent once, never without the prefill
    assert b.inner.compat['server'] == 'strict'

def test_explicit_vllm_style_and_a_declared_vllm_server_send_structured_outputs(http_stub, tmp_path):
    srv, seen = compat_server(http_stub, None)
    b = _compat(srv, tmp_path, constraint_style='vllm')           # explicit: never asked, never dropped
    out = b.generate([Request(msgs('Yes or no?'), max_tokens=2, choice=['Yes', 'No'])])
    assert seen[0]['structured_outputs'] == {'choice': ['Yes', 'No']} and len(seen) == 1
    assert 'HTTP 400' in out[0].choices[0].error and b.inner.compat['fallbacks'] == 0 and b.inner.compat['server'] is None
    srv, seen = compat_server(http_stub, 'vllm', strict=False)
    b = _compat(srv, tmp_path/'v')
    b.generate([Request(msgs('Yes or no?'), max_tokens=2, choice=['Yes', 'No']), Request(PREFILLED, continue_final=True),
                Request(msgs('x'), chat_options={'enable_thinking': False})])
    assert b.inner.compat['server'] == 'vllm' and b.inner.compat['how'] == '/models owned_by vllm'
    by = {json.dumps(x['messages']): x for x in seen}
    assert by[json.dumps(msgs('Yes or no?'))]['structured_outputs'] == {'choice': ['Yes', 'No']}
    assert by[json.dumps(PREFILLED)]['continue_final_message'] is True and by[json.dumps(PREFILLED)]['add_generation_prompt'] is False
    assert by[json.dumps(msgs('x'))]['chat_template_kwargs'] == {'enable_thinking': False}

# ==============================================================================================================
# The no-thinking ablation switches the model's own thinking off on vLLM and OpenAI-compatible servers, a prefilled
# answer reaches the server, and llama.cpp continues a prefilled answer after the evaluation prompt (no new turn).
# ==============================================================================================================

QWEN = 'Qwen/Qwen3-32B'

def test_enable_thinking_false_reaches_an_openai_compatible_server():
    b = B.OpenAIBackend('http://127.0.0.1:8000/v1', QWEN)
    body = b.body(Job(0, Request([{'role': 'user', 'content': 'x'}], chat_options={'enable_thinking': False}), 0))
    assert body['chat_template_kwargs'] == {'enable_thinking': False} and 'continue_final_message' not in body
    pre = b.body(Job(0, Request([{'role': 'user', 'content': 'x'}, {'role': 'assistant', 'content': 'Analysis: a\nRating:'}], continue_final=True), 0))
    assert pre['continue_final_message'] is True and pre['add_generation_prompt'] is False and pre['messages'][-1]['role'] == 'assistant'
    plain = b.body(Job(0, Request([{'role': 'user', 'content': 'x'}]), 0))
    assert not {'chat_template_kwargs', 'continue_final_message', 'add_generation_prompt'} & set(plain)

def test_enable_thinking_false_and_prefill_reach_vllm_chat(monkeypatch):
    calls = []
    class FakeLLM:
        def chat(self, messages, params, use_tqdm=True, **kw):
            calls.append((len(messages), kw))
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text='4', finish_reason='stop', token_ids=[1], logprobs=None)], prompt_token_ids=[1, 2])
                    for _ in messages]
    monkeypatch.setattr(B, 'to_sampling_params', lambda kw: kw)
    v = B.VLLMBackend(QWEN); v._llm = FakeLLM()
    reqs = [Request([{'role': 'user', 'content': 'a'}], chat_options={'enable_thinking': False}),
            Request([{'role': 'user', 'content': 'b'}]),
            Request([{'role': 'user', 'content': 'c'}, {'role': 'assistant', 'content': 'Analysis: c\nRating:'}], continue_final=True),
            Request([{'role': 'user', 'content': 'd'}], chat_options={'enable_thinking': False})]
    out = v.generate(reqs, progress=False)
    assert [c.text for c in out] == ['4'] * 4
    kws = sorted((n, json.dumps(kw, sort_keys=True)) for n, kw in calls)
    assert len(calls) == 3                                               # one LLM.chat call per distinct set of template options
    by = {json.dumps(kw, sort_keys=True): n for n, kw in calls}
    assert by[json.dumps(dict(add_generation_prompt=True, continue_final_message=False, chat_template_kwargs={'enable_thinking': False}), sort_keys=True)] == 2
    assert by[json.dumps(dict(add_generation_prompt=False, continue_final_message=True, chat_template_kwargs=None), sort_keys=True)] == 1

def test_prefilled_rescoring_on_the_embedded_model(tmp_path):
    # llama.cpp renders the model's chat template itself and continues the prefilled answer
    from judgelab.llm.models import get_backend
    b = get_backend(cache=tmp_path/'c.sqlite')
    m = [{'role': 'user', 'content': 'Rate the fluency of "The cat sat on the mat." from 1 to 5. Answer "Analysis: ..." then "Rating: N".'}]
    out = b.generate([Request(m + [{'role': 'assistant', 'content': 'Analysis: Fluent and grammatical.\nRating:'}], continue_final=True, max_tokens=4)], progress=False)
    assert out[0].choices[0].completion_tokens >= 1 and not out[0].text.lstrip().lower().startswith('analysis')
    fmt = b.inner._formatter(b.inner.llm())
    prompt, _, _ = b.inner._render(b.inner.llm(), Request(m + [{'role': 'assistant', 'content': 'Analysis: X\nRating:'}], continue_final=True))
    assert prompt == fmt(messages=m).prompt + 'Analysis: X\nRating:'       # the evaluation prompt, then the answer's start: no new turn

# ==============================================================================================================
# The OpenAI-compatible client against scripted loopback servers: Retry-After, which statuses are retried, malformed
# responses named with their URL, an echoed API key redacted, backend options checked before anything is built.
# Each test failed on the code before its fix.
# ==============================================================================================================

# --- the OpenAI-compatible client: patient with what is temporary, precise about what is not -------------------------
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

@pytest.mark.parametrize('body, what', [(b'<html>502 Bad Gateway</html>', 'not JSON'), (b'{"choices": []}', 'no choices'),
                                        (b'{"id": "x"}', 'no choices'), (b'[1, 2]', 'unexpected JSON')])
def test_a_malformed_response_names_the_url_and_the_request(http_stub, tmp_path, body, what):
    # before: a bare JSONDecodeError / IndexError / KeyError with no URL; then a BackendError that aborted the batch; now that row's failure
    srv, seen = scripted(http_stub, lambda n, b, h: (200, {}, body))
    url = f'http://127.0.0.1:{srv.port}/v1/chat/completions'
    c = _backend(srv, tmp_path).generate([Request([{'role': 'user', 'content': 'x'}])])[0].choices[0]
    assert c.text == '' and f'{url}: malformed response to request 0 ({what})' in c.error, c.error

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
    ('openai', dict(model='m', base_url='http://127.0.0.1:8000/v1', concurrency=0), 'concurrency 1-1024'),
])
def test_backend_options_are_checked_before_anything_is_built(name, options, message):
    from judgelab.llm.models import check_backend
    with pytest.raises(ValueError, match=message): check_backend(name, options, complete=True)
