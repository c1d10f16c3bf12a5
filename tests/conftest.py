import os, re, sys, signal, subprocess, json, threading, time, http.server
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

@pytest.fixture
def tmp_outputs(tmp_path, monkeypatch):
    "Redirect outputs/ (tables, figures, manifest) to a temporary folder so tests never touch the committed ones."
    out = tmp_path/'outputs'; out.mkdir()
    monkeypatch.setenv('JUDGELAB_OUTPUTS', str(out))
    return out

def run_cli(*args, env=None, check=False):
    "Run the installed `judgelab` command as a user would."
    exe = BIN/'judgelab'
    r = subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})})
    if check: assert r.returncode == 0, r.stderr
    return r

def wait_while_running(p, ready, seconds:float, every:float=0.1, why='the command ended before the moment the test waits for'):
    "Wait until `ready()` holds while process `p` still runs; fail (with `why`, or its output if `why` is None) when it ends first or `seconds` pass."
    deadline = time.time() + seconds
    while not ready():
        assert p.poll() is None and time.time() < deadline, p.communicate() if why is None else why
        time.sleep(every)

# ---- loopback HTTP stub servers ----------------------------------------------------------------------------------

@dataclass
class StubRequest:
    "One request a stub server received."
    n: int                # its arrival index on that server (0-based)
    t: float              # time.monotonic() when it arrived
    method: str
    path: str             # without the query string
    headers: object       # the request's headers (case-insensitive lookup)
    body: bytes
    handler: http.server.BaseHTTPRequestHandler    # for a handler that writes its reply itself (slowly, malformed, ...)
    @property
    def json(self): return json.loads(self.body) if self.body else None

class StubServer:
    """An HTTP server on 127.0.0.1 at a free port, one handler function per path: `handler(req: StubRequest)` returns
    (status, headers, body), body bytes, str or a JSON-able object (Content-Type application/json unless given), or None
    when it wrote the reply itself through `req.handler`. The path '*' stands for every path without its own handler; a path
    without a handler: 404. `seen`: every request received, in arrival order."""
    def __init__(self, routes:dict):
        self.routes, self.seen, self._lock = dict(routes), [], threading.Lock()
        stub = self
        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a): pass
            def _do(self):
                n = int(self.headers.get('Content-Length') or 0)
                body = self.rfile.read(n) if n else b''
                with stub._lock:
                    req = StubRequest(len(stub.seen), time.monotonic(), self.command, self.path.split('?')[0], self.headers, body, self)
                    stub.seen.append(req)
                f = stub.routes.get(req.path, stub.routes.get('*'))
                out = f(req) if f else (404, {}, dict(error=dict(message=f'no stub handler for {req.path}')))
                if out is not None: stub.send(self, *out)
            do_GET = do_POST = do_PUT = do_DELETE = _do
        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
        self.port = self.server.server_address[1]; self.url = f'http://127.0.0.1:{self.port}'
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
    @staticmethod
    def send(h, status:int, headers:dict|None=None, body=b''):
        "Write a whole reply (with its Content-Length) through a request handler."
        if not isinstance(body, (bytes, str)): body = json.dumps(body)
        if isinstance(body, str): body = body.encode()
        h.send_response(status)
        for k, v in {'Content-Type': 'application/json', **(headers or {})}.items(): h.send_header(k, v)
        h.send_header('Content-Length', str(len(body))); h.end_headers(); h.wfile.write(body)
    def close(self): self.server.shutdown(); self.server.server_close()

@pytest.fixture
def http_stub():
    "Start loopback HTTP stub servers: `http_stub({path: handler, ...})` -> a started `StubServer`; all are shut down at teardown."
    servers = []
    def start(routes:dict)->StubServer:
        s = StubServer(routes); servers.append(s); return s
    yield start
    for s in servers: s.close()

# ---- an OpenAI-compatible chat server scripted request by request (a stub server) and the client pointed at it --------------

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
    from judgelab.llm.cache import GenerationCache          # imported here: loading the backends at conftest import slows the parsers'
    from judgelab.llm.models import get_backend             # timing tests (tests/llm/test_parse.py) run on their own
    return get_backend('openai', cache=GenerationCache(tmp_path/'c.sqlite'), base_url=f'http://127.0.0.1:{srv.port}/v1', model='m',
                       backoff=0.01, **kw)

# --- the CLI in this process, and what a refusal looks like --------------------------------------------------------

GUARD_S = 60   # a guard, not a measurement: the refusals take well under a second

@contextmanager
def guard(seconds=GUARD_S):
    "Fail (TimeoutError) instead of hanging when the code inside runs past `seconds`."
    def stop(*_): raise TimeoutError(f'still running after {seconds} s')
    old = signal.signal(signal.SIGALRM, stop); signal.alarm(seconds)
    try: yield
    finally: signal.alarm(0); signal.signal(signal.SIGALRM, old)

@pytest.fixture
def cli(capsys, tmp_path, monkeypatch):
    "`judgelab ARGS` in this process: (exit status, stdout, stderr); a sweep's working folders under tmp_path, never the checkout's."
    monkeypatch.setenv('JUDGELAB_OUTPUTS', str(tmp_path/'outputs')); monkeypatch.setenv('JUDGELAB_RUNS', str(tmp_path/'runs'))
    monkeypatch.delenv('JUDGELAB_TEMPLATE_DIRS', raising=False)
    def run(*args):
        capsys.readouterr()
        from judgelab.cli import main
        with guard(): rc = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return rc, out, err
    return run

def refused(res, *needles):
    "Exit 2 (the CLI's bad-input status), every needle in the message, no traceback."
    rc, out, err = res
    assert rc == 2, (rc, out[-2000:], err[-3000:])
    assert 'Traceback' not in err, err[-3000:]
    for n in needles: assert n in err, (n, err[-3000:])

def refused_run(r, *messages):
    "rc 2 (bad input), each message in stderr, no traceback; the problem count said equals the rows listed per problem."
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr[-3000:])
    assert 'Traceback' not in r.stderr, r.stderr[-3000:]
    for m in messages: assert m in r.stderr, (m, r.stderr)
    if m := re.search(r'(\d+) problem\(s\)', r.stderr):
        listed = [int(k) for k in re.findall(r'^- .*?: (\d+) row\(s\)', r.stderr, re.M)] or [len(re.findall(r'^  \S', r.stderr, re.M))]
        assert int(m.group(1)) == sum(listed), (m.group(1), listed, r.stderr)
