"""A judge method run against a scripted loopback server: one refused request is a row failure, the run completes,
and the rerun asks only for the refused request."""

from tests.conftest import _backend, err, ok, scripted

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
