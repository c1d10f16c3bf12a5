"""The alt-test read two ways (issue: 'the papers' method claims'): pooled over dimensions, and per criterion then averaged as
Steindl et al. report it; and the advantage probability on values beside the same on percentile ranks."""

import numpy as np, pandas as pd
from judgelab.stats import alt_test, percentile_ranks
from judgelab.report.tables import alttest_forms, finding_alttest

def test_a_judge_can_fail_pooled_and_pass_per_criterion():
    rows = [dict(dataset='summeval', judge='j', model='m', dimension=d, epsilon=0.2, winning_rate=wr, advantage_probability=0.6, passed=wr >= 0.5,
                 tested=3, advantage_probability_rank=0.4) for d, wr in (('coherence', 2/3), ('fluency', 1/3), ('relevance', 2/3), ('consistency', 1/3))]
    rows.append(dict(rows[0], dimension='pooled', winning_rate=0.0, passed=False, advantage_probability=0.55, advantage_probability_rank=0.3))
    alt = pd.DataFrame(rows).assign(caveat='')
    f = alttest_forms(alt).iloc[0]
    assert not f.passed_pooled and abs(f.wr_per_criterion - 0.5) < 1e-12 and f.passed_per_criterion and f.criteria_passed == 2
    assert (f.ap_pooled, f.ap_rank_pooled) == (0.55, 0.3)
    title, _, txt = finding_alttest(alt)
    assert 'SummEval 0 of 1' in txt and "Per criterion then averaged (Steindl et al.'s form): SummEval 1 of 1" in txt

def test_ranks_take_away_what_sitting_at_the_raters_mean_earns():
    rng = np.random.default_rng(1)
    items = [f'i{k}' for k in range(300)]
    truth = rng.normal(size=300)
    hum = {a: {i: float(np.clip(np.round(3 + t + rng.normal(0, 0.8)), 1, 5)) for i, t in zip(items, truth)} for a in 'abc'}
    middle = {i: 3.0 for i in items}                         # the scale's middle for every text: no order at all
    ordered = {i: float(t) for i, t in zip(items, truth)}     # the right order on another scale
    v = {n: alt_test(x, hum, 'neg_rmse').advantage_probability for n, x in (('middle', middle), ('ordered', ordered))}
    r = {n: alt_test(*percentile_ranks(x, hum), 'neg_rmse').advantage_probability for n, x in (('middle', middle), ('ordered', ordered))}
    assert v['middle'] > v['ordered'] and r['ordered'] > r['middle'], (v, r)
