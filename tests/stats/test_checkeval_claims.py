"""CheckEval's claims about Likert judges on the published judges (paper_checkeval): agreement across the models of one
prompt, the binarised Likert baseline, and the quality split on a non-degenerate cut."""
import numpy as np, pandas as pd, pytest
from judgelab import data as D
from judgelab.report import collect_judgments
from judgelab.report.tables import likert_agreement, quality_split_correlations, binarised_kappa, checkeval_claims
from judgelab.stats import krippendorff_alpha

@pytest.fixture(scope='module')
def summeval():
    ds = D.load('summeval')
    j, _ = collect_judgments(ds, published=True, runs=[])
    return ds, j[j.judge == 'alttest']

def test_agreement_across_the_models_of_one_prompt(summeval):
    ds, j = summeval
    la = likert_agreement({'summeval': j}, {'summeval': ds}, ['summeval'], n_boot=20, seed=0)
    a = la[la.group == 'all models'].set_index('dimension')
    assert set(a.index) == {'coherence', 'consistency', 'fluency', 'relevance'} and (a.models == 6).all() and (a['items'] == 1600).all()
    # alpha is the models x items alpha computed directly, inside its bootstrap CI
    w = j[(j.dimension == 'coherence') & j.parse_ok].pivot_table(index='model', columns='item_id', values='score', aggfunc='mean')
    assert a.loc['coherence', 'alpha'] == pytest.approx(krippendorff_alpha(w.values, 'interval'))
    assert (a.alpha_lo <= a.alpha).all() and (a.alpha <= a.alpha_hi).all()
    assert a.loc['coherence', 'kappa_mid_no'] == pytest.approx(binarised_kappa(w, 1, 5, 0))
    # the four API models and the two open models of unstated size form the size groups
    assert set(la.group) == {'all models', 'API (size undisclosed)', 'open, size not stated'}
    c = checkeval_claims(la)
    assert len(c) == 4 and c.agrees.iloc[0] in ('yes', 'partly', 'no')

def test_quality_split_has_variation_in_both_groups(summeval):
    """SummEval's consistency has its median human mean at the ceiling (5.0): split there, the high group was 1,306 items all
    rated 5.0 and its Spearman NaN for every judge. The cut now moves to where both groups vary."""
    ds, j = summeval
    q = quality_split_correlations({'summeval': j}, {'summeval': ds}, ['summeval'])
    c = q[q.dimension == 'consistency']
    assert c.threshold.iloc[0] < 5.0 and c['rule'].iloc[0].startswith('moved')
    assert c.spearman.notna().all(), c
    hm = ds.human_mean()['consistency']
    assert hm[hm >= c.threshold.iloc[0]].nunique() >= 2

def test_agreement_inside_low_and_high_quality_texts(summeval):
    "likert_quality_agreement: alpha of the models x items table inside each quality group, on the non-degenerate cut, with the CI of low minus high."
    from judgelab.report.tables import likert_quality_agreement
    from judgelab.stats.corrgap import quality_threshold_rule
    ds, j = summeval
    lq = likert_quality_agreement({'summeval': j}, {'summeval': ds}, ['summeval'], n_boot=30, seed=0)
    r = lq.set_index('dimension')
    assert set(r.index) == {'coherence', 'consistency', 'fluency', 'relevance'} and (r.models == 6).all() and ((r.n_low + r.n_high) == 1600).all()
    thr, rule = quality_threshold_rule(ds, 'consistency')
    assert r.loc['consistency', 'threshold'] == thr < 5.0 and rule.startswith('moved')
    hm = ds.human_mean()['coherence']
    w = j[(j.dimension == 'coherence') & j.parse_ok].pivot_table(index='model', columns='item_id', values='score', aggfunc='mean')
    low = w.loc[:, (hm.reindex(w.columns) < r.loc['coherence', 'threshold']).values]
    assert r.loc['coherence', 'alpha_low'] == pytest.approx(krippendorff_alpha(low.values, 'interval'))
    assert r.loc['coherence', 'n_low'] == low.shape[1]
    assert np.allclose(r['diff'], r.alpha_low - r.alpha_high) and (r.diff_lo <= r['diff']).all() and (r['diff'] <= r.diff_hi).all()
    la = likert_agreement({'summeval': j}, {'summeval': ds}, ['summeval'], n_boot=0)
    c = checkeval_claims(la, lq)
    assert len(c) == 5 and 'low- minus high-quality texts, per dataset' in c.iloc[4]['judgelab (published judges)'] and 'summeval: median' in c.iloc[4]['judgelab (published judges)']
    assert len(checkeval_claims(la)) == 4

def test_agreement_by_quality_sees_a_gap_it_was_given():
    "Two models that agree exactly on low-quality texts and independently on high-quality ones: alpha low minus high is near 1, its CI above 0."
    from judgelab.report.tables import likert_quality_agreement
    ds = D.load('summeval')
    hm = ds.human_mean()['coherence']
    from judgelab.stats.corrgap import quality_threshold_rule
    thr = quality_threshold_rule(ds, 'coherence')[0]
    rng = np.random.default_rng(1)
    rows = []
    for iid, h in hm.items():
        a = float(rng.integers(1, 6)); b = a if h < thr else float(rng.integers(1, 6))
        rows += [dict(item_id=iid, dimension='coherence', judge='p', model=m, score=s, parse_ok=True, source='published') for m, s in (('m1', a), ('m2', b))]
    lq = likert_quality_agreement({'summeval': pd.DataFrame(rows)}, {'summeval': ds}, ['summeval'], n_boot=50, seed=0)
    r = lq.iloc[0]
    assert r.alpha_low == pytest.approx(1.0) and abs(r.alpha_high) < 0.15 and r.diff_lo > 0.7
