"""Steindl et al.'s human-label comparison on published judges (`published_regressors`, `human_label_claims`): direct scores
against regressors fitted on human labels, vertical and horizontal, rounded and as floats, on a document-grouped split."""
import numpy as np, pandas as pd, pytest
from judgelab import data as D
from judgelab.data.judgments import load_judgments
from judgelab.stats import corr, split_indices
from judgelab.report.tables import published_regressors, human_label_claims, tied_share, finding_human_labels, HUMAN_LABEL_COLUMNS

@pytest.fixture(scope='module')
def summeval():
    ds = D.load('summeval')
    j = load_judgments('summeval', 'alttest')
    j = j[j.model.isin(['gpt-4o', 'mistral-v03'])]
    return ds, j, published_regressors(j, ds, regressors=('LR', 'DT'))

def test_direct_rows_are_the_judges_scores_on_the_test_half_of_the_documents(summeval):
    ds, j, hl = summeval
    assert list(hl.columns) == HUMAN_LABEL_COLUMNS and set(hl.setting) == {'direct', 'vertical', 'horizontal'}
    s = j[j.parse_ok & (j.model == 'gpt-4o')].pivot_table(index='item_id', columns='dimension', values='score')
    s = s.reindex([i for i in ds.items.item_id if i in s.index]).dropna()
    docs = ds.items.set_index('item_id').doc_id.reindex(s.index).values
    tr, te = split_indices(len(s), 0, docs)
    assert not set(docs[tr]) & set(docs[te])                      # no document on both sides
    r = hl[(hl.model == 'gpt-4o') & (hl.setting == 'direct') & (hl.target == 'coherence')].iloc[0]
    assert r.n_test == len(te) and r.n_train == len(tr)
    assert r.rho_unrounded == pytest.approx(corr(s.coherence.values[te], ds.human_mean().coherence.reindex(s.index).values[te]), abs=1e-12)
    assert not r.float_judge and r.rho == r.rho_unrounded     # integer scores: rounding changes nothing

def test_regressors_and_best(summeval):
    ds, j, hl = summeval
    reg = hl[hl.setting != 'direct']
    assert set(reg.regressor) == {'LR', 'DT'} and (reg[reg.setting == 'horizontal'].n_features == 4).all()
    assert (hl[hl.best].groupby(['model', 'setting', 'target']).size() == 1).all()
    # a one-feature linear fit is monotone: its float predictions rank the items as the judge does
    v = reg[(reg.setting == 'vertical') & (reg.regressor == 'LR')].set_index(['model', 'target']).rho_unrounded
    d = hl[hl.setting == 'direct'].set_index(['model', 'target']).rho_unrounded
    np.testing.assert_allclose(v.values, d.reindex(v.index).values, atol=1e-12)
    assert tied_share([1, 1, 2, 3]) == pytest.approx(2/12)

def test_claims_rest_on_judges(summeval):
    ds, j, hl = summeval
    c = human_label_claims(hl, n_boot=200)
    a = c[c.claim.str.contains('raises its alt-test AP')].iloc[0]
    assert a.judges == 2 and a.lo <= a['mean'] <= a.hi and a.agrees in ('yes', 'no', 'cannot decide')
    assert finding_human_labels(c)[2].startswith('A regressor fitted on human labels')
    # a float judge: rounding rows appear (UniEval's P(yes) scores on Topical-Chat)
    tc = published_regressors(load_judgments('topical_chat', 'unieval'), 'topical_chat', regressors=('LR',))
    assert tc.float_judge.all() and (tc[tc.setting == 'direct'].ties >= tc[tc.setting == 'direct'].ties_unrounded).all()
    assert human_label_claims(tc, n_boot=100).claim.str.contains("float judges' direct scores").any()

def test_claims_resample_models_not_judges():
    """One model's judges (its prompts, its datasets) are not independent: the CI resamples models. Four judges of one model give
    no CI; two models give the CI of a two-cluster bootstrap, whose resampled means are only the two models' means and the overall one."""
    from judgelab.report.tables import _mean_ci
    ix = lambda models: pd.MultiIndex.from_tuples([('d', f'p{i}', m) for i, m in enumerate(models)], names=['dataset', 'judge', 'model'])
    m, lo, hi, k = _mean_ci(pd.Series([0.1, 0.2, 0.3, 0.4], index=ix(['a']*4)), 200, 0)
    assert k == 1 and np.isnan(lo) and m == pytest.approx(0.25)
    m, lo, hi, k = _mean_ci(pd.Series([0.1, 0.1, 0.5, 0.5], index=ix(['a', 'a', 'b', 'b'])), 500, 0)
    assert k == 2 and (lo, hi) == (pytest.approx(0.1), pytest.approx(0.5))
