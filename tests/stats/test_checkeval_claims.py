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
