"""`--json` on `judgelab data list/info`, `judgments list`, `sweep --dry-run` and `audit`: stdout is one JSON document whose
keys are exactly those `judgelab.run.commands.JSON_SCHEMA` documents (nested lists and objects too), with no other text."""

import json
import pytest
from judgelab.run.commands import JSON_SCHEMA
from tests.conftest import run_cli
from tests.stats.test_audit import _judge as leaky_judge, sandbox, _cli, FAST

def conforms(doc, schema:dict, where:str='')->None:
    "Assert that `doc` has exactly the keys of `schema`, recursively into ('list', {...}) and ('object', {...}) entries."
    assert isinstance(doc, dict) and set(doc) == set(schema), (where, sorted(set(doc) ^ set(schema)))
    for k, v in schema.items():
        if isinstance(v, tuple) and doc[k] is not None:
            kind, sub = v
            for i, x in enumerate(doc[k] if kind == 'list' else [doc[k]]): conforms(x, sub, f'{where}.{k}[{i}]')

def _json(*args, env=None):
    r = run_cli(*args, '--json', env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)        # the whole of stdout: one document, nothing else

def test_the_listing_commands_print_their_documented_schema():
    d = _json('data', 'list')
    conforms(d, JSON_SCHEMA['data list'])
    assert [x['name'] for x in d['datasets']][:2] == ['summeval', 'topical_chat'] and 'coherence' in d['datasets'][0]['dimensions']
    info = _json('data', 'info', 'hanna')
    conforms(info, JSON_SCHEMA['data info'])
    assert [x['name'] for x in info['dimensions']][:2] == ['relevance', 'coherence'] and info['published'][0]['source'] == 'chhun2024'
    j = _json('judgments', 'list', '--all')
    conforms(j, JSON_SCHEMA['judgments list'])
    assert {'summeval', 'hanna', 'topical_chat'} <= {x['dataset'] for x in j['judgments']}
    s = _json('sweep', 'configs/embedded.yaml', '--dry-run', '--only', 'data_overview')
    conforms(s, JSON_SCHEMA['sweep --dry-run'])
    assert [r['run'] for r in s['runs']] == ['embedded/data_overview'] and sum(s['states'].values()) == 1

def test_json_without_dry_run_is_refused():
    r = run_cli('sweep', 'configs/embedded.yaml', '--json')
    assert r.returncode == 2 and '--json goes with --dry-run' in r.stderr, r.stderr

def test_audit_json_holds_the_verdicts_coverage_legend_and_next_steps(sandbox):
    tmp, env = sandbox
    df = leaky_judge(0.5)
    f = tmp/'leaky.csv'; df[df.item_id.isin(df.item_id.unique()[:800])].to_csv(f, index=False)      # half the items
    r = _cli(env, f, '--dataset', 'summeval', '--model', 'org/leaky-7b', '--json', *FAST)
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(r.stdout)
    conforms(d, JSON_SCHEMA['audit'])
    v = {x['target']: x for x in d['verdicts']}
    assert v['coherence']['status'] == 'dependence beyond human raters' and v['coherence']['other'] == 'fluency'
    assert d['coverage']['items'] == 800 and d['coverage']['items_dataset'] == 1600 and 'hold for these items' in d['coverage']['text']
    assert d['judge'] == 'leaky' and d['model'] == 'org/leaky-7b'
    assert '400 resamples' in d['legend'][1] and 'at least 0.030' in d['legend'][1]      # 12 pairs, 400 resamples: 12/401
    assert 'coherence <- fluency' in d['next'][0] and 'excess_heatmaps.png' in d['next'][0]

def test_every_option_of_every_subcommand_has_help_text():
    import argparse
    from judgelab.cli import parser
    missing = []
    def walk(p, where):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items(): walk(sp, f'{where} {name}')
            elif not isinstance(a, (argparse._HelpAction, argparse._VersionAction)) and not a.help:
                missing.append(f"{where} {'/'.join(a.option_strings) or a.dest}")
    walk(parser(), 'judgelab')
    assert not missing, missing
