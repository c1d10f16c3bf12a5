"""The published judges added in revision 3: Chiang & Lee's four other Topical-Chat modes (closerlook_more) and Shen et
al.'s head-to-head SummEval judge (llm_summeval_pairwise). The count of distinct published judges was 44 before them."""

import numpy as np, pandas as pd
import pytest
from judgelab.data import load, raw_dir
from judgelab.data.judgments import JUDGMENT_SOURCES, JUDGMENT_COLUMNS, list_judgments, load_judgments, judgment_scores

CL_MORE = ['geval_no_auto_cot', 'llm_eval_no_cot', 'analyze_rate_auto_cot', 'rate_explain_auto_cot']

def _judges():
    "Distinct (dataset, source, model, prompt) published judges: the (model, judge) pairs of every source's judgments."
    out = set()
    for ds in JUDGMENT_SOURCES:
        for src in list_judgments(ds).index:
            j = load_judgments(ds, src)
            out |= {(ds, src, m, p) for p, m in j[['judge', 'model']].drop_duplicates().itertuples(index=False)}
    return out

def test_the_published_judges_number_at_least_49():
    js = _judges()
    assert len(js) >= 49, len(js)
    assert len({k[1:] for k in js}) >= 49
    new = {('topical_chat', f'closerlook_{m}', 'gpt-3.5-turbo-0613', m) for m in CL_MORE}
    new.add(('summeval', 'llm_summeval_pairwise', 'gpt-3.5-turbo-0301', 'h2h'))
    assert new <= js, new - js

@pytest.mark.parametrize('mode', CL_MORE)
def test_closerlook_more_readers_return_well_formed_judgments(mode):
    tc = load('topical_chat')
    src = f'closerlook_{mode}'
    assert src in list_judgments('topical_chat').index and JUDGMENT_SOURCES['topical_chat'][src].replay is not None
    j = load_judgments('topical_chat', src)
    assert j.columns.tolist() == JUDGMENT_COLUMNS
    assert set(j.dimension) == {'coherence', 'engagingness', 'groundedness', 'naturalness'}
    assert set(j.item_id) <= set(tc.items.item_id)
    assert (j.groupby(['item_id', 'dimension']).size() == 20).all()
    assert j.groupby('dimension').item_id.nunique().between(353, 359).all()
    ok, bad = j[j.parse_ok], j[~j.parse_ok]
    lo, hi = ok.dimension.map(lambda d: tc.dim(d).lo), ok.dimension.map(lambda d: tc.dim(d).hi)
    assert ok.score.between(lo, hi).all() and ok.failure.isna().all()
    assert bad.score.isna().all() and bad.failure.notna().all() and bad.rationale.notna().all()
    assert (~j.parse_ok).mean() < 0.02       # 15 to 426 failed samples of about 28,400

def test_llm_summeval_pairwise_reader_and_outcomes():
    from judgelab.datasets.summeval import pairwise_outcomes
    se = load('summeval')
    j = load_judgments('summeval', 'llm_summeval_pairwise')
    assert j.columns.tolist() == JUDGMENT_COLUMNS and len(j) == 2*8800
    assert set(j.judge) == {'h2h'} and set(j.model) == {'gpt-3.5-turbo-0301'}
    assert set(j.dimension) == {'coherence', 'consistency', 'fluency', 'relevance'}
    assert j.item_id.nunique() == 1200 and set(j.item_id) <= set(se.items.item_id)
    assert j.parse_ok.all() and set(j.score) == {0.0, 0.5, 1.0}
    s = judgment_scores(j)
    assert len(s) == 4800 and set(s.n) == {2, 4} and s.score.between(0, 1).all()
    o = pairwise_outcomes(se, raw_dir('summeval'))
    assert len(o) == 8800 and set(o.order) == {'original', 'swapped'} and o.pair.nunique() == 11
    assert o.winner.notna().all() and (o.choice == 'C').sum() == 307
    # the swapped order shows the pair's second system first, and its 'A' names that system
    sw = o[o.order == 'swapped']
    assert (sw.first == sw.pair.str.split('-').str[1]).all()
    assert ((sw.choice == 'A') == (sw.winner == sw.first)).all()
    # an item's score is its win rate over its comparisons, both orders counted
    r = o[(o.doc_id == o.doc_id.iloc[0]) & (o.dimension == 'coherence') & ((o['first'] == 'M23') | (o.second == 'M23'))]
    assert len(r) == 4
    rate = np.mean([1. if w == 'M23' else .5 if w == 'tie' else 0. for w in r.winner])
    assert s.set_index(['item_id', 'dimension']).score[(f'{o.doc_id.iloc[0]}__M23', 'coherence')] == pytest.approx(rate)

def test_h2h_choice_follows_the_authors_rule():
    from judgelab.datasets.summeval import _h2h_choice
    assert _h2h_choice('B') == 'B' and _h2h_choice('A: Summary #1 is more coherent.') == 'A'
    assert _h2h_choice('C: Both Summary #1 and Summary #2 are equally fluent.') == 'C'
    assert _h2h_choice('I cannot decide.') is None      # their code counts this as a tie; judgelab as a failure

def test_pairwise_scores_win_rate_is_the_readers_score_and_bradley_terry_is_the_penalised_mle():
    from scipy.optimize import minimize
    from scipy.special import expit
    from judgelab.datasets.summeval import pairwise_outcomes, pairwise_scores
    se = load('summeval')
    o = pairwise_outcomes(se, raw_dir('summeval'))
    w = pairwise_scores(o).set_index(['item_id', 'dimension'])
    s = judgment_scores(load_judgments('summeval', 'llm_summeval_pairwise')).set_index(['item_id', 'dimension'])
    assert len(w) == 4800 and np.allclose(w.score, s.score.reindex(w.index)) and (w.n == s.n.reindex(w.index)).all()
    # Bradley-Terry on one document: 3 systems, A beats B twice, B and C tie, C beats A once; the penalised likelihood by hand
    toy = pd.DataFrame(dict(doc_id='d', dimension='coherence', first=['A', 'B', 'B', 'C'], second=['B', 'A', 'C', 'A'], winner=['A', 'A', 'tie', 'C']))
    b = pairwise_scores(toy, 'bradley_terry', alpha=0.5).set_index('item_id').score
    pairs = [(0, 1, 1.0), (0, 1, 1.0), (1, 2, 0.5), (2, 1, 0.5), (2, 0, 1.0)]        # (winner, loser, weight): a tie half each way
    nll = lambda th: -sum(wt*np.log(expit(th[i] - th[j])) for i, j, wt in pairs) + 0.25*(th**2).sum()
    th = minimize(nll, np.zeros(3), method='BFGS', options=dict(gtol=1e-10)).x
    np.testing.assert_allclose(b[['d__A', 'd__B', 'd__C']].values, th - th.mean(), atol=1e-4)
    assert abs(b.sum()) < 1e-9
    with pytest.raises(ValueError, match='method'): pairwise_scores(toy, 'elo')
    with pytest.raises(ValueError, match='alpha'): pairwise_scores(toy, 'bradley_terry', alpha=0)

def test_the_position_probe_reports_both_aggregations_against_the_humans():
    from judgelab.datasets.summeval import pairwise_outcomes, pairwise_scores, position_bias
    from scipy import stats
    se = load('summeval')
    t, cap, txt = position_bias(se, raw_dir('summeval'), n_boot=20)
    r = t.set_index('dimension')
    for m in ('win_rate', 'bradley_terry'):
        assert r.loc['all', f'spearman_{m}'] == pytest.approx(r[f'spearman_{m}'].iloc[1:].mean())
    # coherence's win-rate Spearman by hand: per document over its 12 summaries, averaged over documents where both vary
    s = pairwise_scores(pairwise_outcomes(se, raw_dir('summeval')))
    s = s[s.dimension == 'coherence'].assign(doc=lambda x: x.item_id.str.split('__').str[0])
    hm = se.human_mean()['coherence']
    rho = [stats.spearmanr(g.score, hm[g.item_id])[0] for _, g in s.groupby('doc') if g.score.nunique() > 1 and hm[g.item_id].nunique() > 1]
    assert r.loc['coherence', 'spearman_win_rate'] == pytest.approx(np.mean(rho))
    assert 'Bradley-Terry' in txt and 'Bradley-Terry' in cap
