"""HANNA's score file against the authors' notebook (the `invalid_ratings` probe of chhun2024): the file keeps answers that were
not a rating in 1-5 as values below 1, which judgelab reads as failures; the notebook sets each invalid try to 3."""
import numpy as np, pandas as pd, pytest
from judgelab.data import raw_dir, item_slug
from judgelab.data.judgments import run_probes, load_judgments
from judgelab.datasets.hanna import invalid_ratings, notebook_means, replay_row, _rule_means, _hanna_table

def test_the_probe_runs_in_every_hanna_audit_and_reads_the_file():
    probes = run_probes('hanna')
    assert [p[0] for p in probes] == ['chhun2024']
    t, caption, text = probes[0][1:]
    r = t.set_index(['model', 'rule'])
    assert r.loc[('Beluga-13B', 'stored')].match_2dp == 66 and r.loc[('Beluga-13B', 'stored')].prompt_1_invalid == 0
    assert r.loc[('Mistral-7B', 'stored')].prompt_1_invalid > 200 and r.loc[('Mistral-7B', 'stored')].notebook_above > 50
    assert r.loc[('Mistral-7B', 'invalid_as_3')].mae < r.loc[('Mistral-7B', 'dropped')].mae < r.loc[('Mistral-7B', 'stored')].mae
    assert '3db802f' in caption and 'parse failure' in text

def test_failures_in_the_judgments_are_the_invalid_values():
    j = load_judgments('hanna', 'chhun2024')
    m = j[(j.model == 'Mistral-7B') & (j.judge == 'eval_prompt_1')]
    systems, df = _hanna_table(raw_dir('hanna'))
    rm = _rule_means(systems, df, 'Mistral-7B')
    assert int((~m.parse_ok).sum()) == int(rm.invalid.sum())
    # judgelab's reading is the 'dropped' one: the mean of the parsed scores per system
    rel = m[m.parse_ok & (m.dimension == 'relevance')]
    ours = rel.assign(system=rel.item_id.str.split('__').str[1]).groupby('system').score.mean().sort_index()
    theirs = rm[rm.dimension == 'relevance'].assign(system=lambda x: x.system.map(item_slug)).set_index('system').dropped
    np.testing.assert_allclose(ours.values, theirs.reindex(ours.index).values, rtol=0, atol=1e-12)
    assert len(notebook_means()) == 132

def test_the_replay_table_has_a_row_per_replayed_source_and_hannas_score_file():
    "findings_replay: the replay headlines, then HANNA's score file read against the authors' notebook (issue 25's 'row of the replay table')."
    from judgelab.report.tables import replay_table, REPLAY_COLUMNS
    t, _, _ = invalid_ratings(None, raw_dir('hanna'))
    j = load_judgments('hanna', 'chhun2024')
    cov = j.groupby(['judge', 'model']).parse_ok.agg(scores='sum', failures=lambda x: int((~x).sum())).reset_index()
    head = pd.DataFrame([dict(dataset='topical_chat', source='closerlook_geval', judges=1, replies=100, failures=3, failure_rate=0.03,
                              items_compared=40, items_differ=2, items_authors_default=0, max_abs_delta_corr=0.01, mean_abs_delta_corr=0.005,
                              best_judge='x', best_mean_corr=0.4)])
    r = replay_table([head], [replay_row(t, cov)])
    assert r.columns.tolist() == REPLAY_COLUMNS and r.source.tolist() == ['closerlook_geval', 'chhun2024']
    h = r.iloc[1]
    assert h.judges == 20 and h.values_read == len(j) and h.failures == int((~j.parse_ok).sum()) > 1000
    mi = t.set_index(['model', 'rule']).loc[('Mistral-7B', 'stored')]
    assert h.differ_from_authors.startswith(f'Mistral-7B, prompt 1: {int(mi.means - mi.match_2dp)} of 66')
    assert '66 of 66' in h.reproduced and np.isnan(h.max_abs_delta_corr)
    assert r.iloc[0].differ_from_authors == '2 of 40 item scores'
    assert replay_table([head]).source.tolist() == ['closerlook_geval']      # no HANNA audit among the runs: its row is left out
    with pytest.raises(AssertionError, match='needs exactly'): replay_table([head], [dict(dataset='hanna')])
