"""`judgelab judge`: judge your own model in one command. Against a strict OpenAI-compatible server on 127.0.0.1 (a request
with a field outside the chat-completions API is refused with a 400 that names it): the judgments land in a run folder of
their own, the audit prints its verdicts, the same command answers from the generation cache, a killed run refuses to
start over without --resume, and every bad argument is listed before a request is sent."""

import hashlib, json
from pathlib import Path
import pandas as pd
import pytest
from tests.conftest import run_cli, refused_run

ALLOWED = {'model', 'messages', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'n', 'seed', 'stop', 'logprobs',
           'top_logprobs', 'stream', 'response_format', 'frequency_penalty', 'presence_penalty', 'user'}

def strict_judge(req):
    "A strict server: unknown fields are a 400 naming them; otherwise 'Score: k' with k from the prompt's hash (scores that vary)."
    body = req.json
    if extra := sorted(set(body) - ALLOWED): return 400, {}, dict(error=dict(message=f"Unrecognized request argument supplied: {', '.join(extra)}"))
    k = int(hashlib.sha256(json.dumps(body['messages']).encode()).hexdigest(), 16) % 3 + 1
    return 200, {}, dict(choices=[dict(index=0, message=dict(role='assistant', content=f'The reply reads well enough.\nScore: {k}'), finish_reason='stop')],
                         usage=dict(prompt_tokens=50, completion_tokens=8))

def chats(srv)->int: return sum(r.path.endswith('/chat/completions') for r in srv.seen)

@pytest.fixture
def server(http_stub): return http_stub({'/v1/chat/completions': strict_judge})

@pytest.fixture
def sandbox(tmp_path):
    return {'JUDGELAB_OUTPUTS': str(tmp_path/'outputs'), 'JUDGELAB_RUNS': str(tmp_path/'runs'), 'OPENAI_API_KEY': 'sk-test-000000'}

def _judge(server, sandbox, *extra, n_items='24'):
    return run_cli('judge', '--dataset', 'topical_chat', '--method', 'direct', '--dims', 'coherence', 'engagingness', '--n-items', n_items,
                   '--backend', 'openai', '--base-url', f'{server.url}/v1', '--model', 'my-judge', '--quiet', *extra, env=sandbox)

def test_judge_your_model_then_read_the_audit_in_one_command(server, sandbox, tmp_path):
    r = _judge(server, sandbox, '--n-perm', '99', '--n-boot-excess', '50', '--n-boot', '50', '--n-perm-quality', '49', '--n-sim', '0')
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    assert '48 of 48 (item, dimension) pairs got a parsed score, status ok' in r.stdout, r.stdout
    assert 'coherence' in r.stdout and 'notebook: ' in r.stdout and 'tables:' in r.stdout          # the audit's verdicts and where it is
    runs = list((tmp_path/'outputs'/'judged').iterdir())
    assert len(runs) == 1 and runs[0].name.startswith('topical_chat__direct__my-judge__'), runs     # dataset, method, model, a hash of the rest
    j = pd.read_parquet(next(runs[0].rglob('*.parquet')))
    assert len(j) == 48 and j.parse_ok.all() and j.rationale.str.contains('Score:').all()          # every reply kept
    assert not (runs[0]/'running.json').exists()
    n = chats(server)                      # chat requests (each run also asks GET /models first)
    assert n == 48
    # the same command again: the same run folder, every reply from the generation cache (no request reaches the server)
    r2 = _judge(server, sandbox, '--no-audit')
    assert r2.returncode == 0 and chats(server) == n, r2.stderr
    assert [p.name for p in (tmp_path/'outputs'/'judged').iterdir()] == [runs[0].name]

def test_a_killed_run_is_continued_with_resume_only(server, sandbox, tmp_path):
    r = _judge(server, sandbox, '--no-audit', n_items='4')
    assert r.returncode == 0, r.stderr
    run = next((tmp_path/'outputs'/'judged').iterdir())
    (run/'running.json').write_text('{}')                                   # what a run killed mid-way leaves
    refused_run(_judge(server, sandbox, '--no-audit', n_items='4'), 'did not finish (killed?): pass --resume')
    seen = chats(server)
    r = _judge(server, sandbox, '--no-audit', '--resume', n_items='4')
    assert r.returncode == 0 and chats(server) == seen and not (run/'running.json').exists(), r.stderr

def test_every_bad_argument_is_listed_before_a_request_is_sent(server, sandbox, tmp_path):
    r = run_cli('judge', '--dataset', 'topical_chat', '--method', 'direkt', '--dims', 'coherense', '--n-items', '-1', '--backend', 'openai',
                '--option', 'max_tokens', env=sandbox)
    refused_run(r, '5 problem(s)', "unknown method 'direkt'", '--n-items must be a whole number >= 0', 'needs --base-url',
                "--option 'max_tokens': write KEY=VALUE")
    r = run_cli('judge', '--dataset', 'topical_chat', '--method', 'direct', '--dims', 'coherense', '--backend', 'openai', '--base-url',
                f'{server.url}/v1', '--model', 'm', env=sandbox)
    refused_run(r, "unknown dimension 'coherense'")
    r = run_cli('judge', '--dataset', 'topical_chat', '--method', 'direct', '--n-items', '-2', '--backend', 'openai', env=sandbox)
    refused_run(r, '2 problem(s)', '--n-items must be a whole number >= 0')        # said once, not again by the method plan
    r = run_cli('judge', '--dataset', 'topical_chat', '--method', 'direct', '--alpha', '5', '--n-sim', '-1', '--backend', 'openai', '--base-url',
                f'{server.url}/v1', '--model', 'm', env=sandbox)
    refused_run(r, '2 problem(s)', '--alpha must be between 0 and 1', '--n-sim must be a whole number 0-10,000')   # the audit's arguments, before the model runs
    assert server.seen == []
    assert server.seen == [] and not (tmp_path/'outputs'/'judged').exists()

def test_judge_json_is_one_document_with_the_audit_inside(server, sandbox):
    from judgelab.run.commands import JSON_SCHEMA
    from tests.run.test_cli_json import conforms
    r = _judge(server, sandbox, '--json', '--n-perm', '99', '--n-boot-excess', '50', '--n-boot', '50', '--n-perm-quality', '0', '--n-sim', '0', n_items='24')
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(r.stdout)
    conforms(d, JSON_SCHEMA['judge'])
    conforms(d['audit'], JSON_SCHEMA['audit'])
    assert d['scored'] == d['pairs'] == 48 and d['status'] == 'ok' and d['run'].startswith('judged/topical_chat__direct__my-judge__')
    assert {x['target'] for x in d['audit']['verdicts']} == {'coherence', 'engagingness'}

def test_every_reply_of_your_run_is_in_the_site(server, sandbox, tmp_path):
    "Judge, then `make site`: the run's page in the reply viewer holds every reply, its exact request (from the cache) and the human mean."
    import shutil
    from judgelab import site as S
    from tests.conftest import ROOT
    assert _judge(server, sandbox, '--no-audit', n_items='4').returncode == 0
    out = tmp_path/'outputs'
    shutil.copytree(ROOT/'outputs'/'embedded', out/'embedded')          # the main job's runs, as a checkout has them
    S.build_site(tmp_path/'_site', outputs=out, runs=ROOT/'papermill_runs', lib=False, jobs=1)
    run = next((out/'judged').iterdir())
    f = next(run.rglob('*.parquet')); j = pd.read_parquet(f)
    page = (tmp_path/'_site'/'replies'/'judged'/run.name/f'{S._slug(f.stem)}.html').read_text()
    assert page.count('<tr data-dim=') == len(j) == 8
    for reply in j.rationale: assert S.esc(reply) in page
    assert page.count('<div class="msg"><b>user</b>') == 8 and 'exact request is in the generation cache' not in page   # the prompts, from the cache
    assert run.name in (tmp_path/'_site'/'replies'/'index.html').read_text()
