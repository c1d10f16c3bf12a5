"""Text length as a non-target dimension (`attribute_audit`): the same CorrGap and human baseline as a rated non-target,
with the length in place of the non-target's ratings, on published judges."""
import numpy as np, pandas as pd, pytest
from judgelab import data as D
from judgelab.data.judgments import load_judgments, judgment_scores
from judgelab.stats.corrgap import (attribute_audit, text_length, corrgap, human_baseline, rater_slots, canonical_items, ATTRIBUTE_COLUMNS)

@pytest.fixture(scope='module')
def hanna():
    ds = D.load('hanna')
    j = load_judgments('hanna', 'chhun2024')
    return ds, j[j.model.isin(['ChatGPT', 'Mistral-7B']) & (j.judge == 'eval_prompt_1') & j.dimension.isin(['surprise', 'coherence'])]

def test_length_counts_words():
    ds = D.load('topical_chat')
    L = text_length(ds)
    assert L.index.equals(pd.Index(ds.items.item_id)) and L.name == 'length'
    assert L.iloc[0] == len(ds.items.output.iloc[0].split()) and (L > 0).all()

def test_attribute_audit_is_corrgap_with_length_as_the_non_target(hanna):
    ds, j = hanna
    la = attribute_audit(j, ds, n_perm=99, n_boot=50)
    assert list(la.columns) == ATTRIBUTE_COLUMNS and len(la) == 4 and set(la.other) == {'length'}
    L = text_length(ds)
    hm = ds.human_mean()
    s = judgment_scores(j)
    r = la[(la.model == 'ChatGPT') & (la.target == 'surprise')].iloc[0]
    p = s[(s.model == 'ChatGPT') & (s.dimension == 'surprise')].set_index('item_id').score.reindex(hm.index)
    assert r.gap == pytest.approx(corrgap(p.values, hm['surprise'].values, L.reindex(hm.index).values, test=None).gap, abs=1e-12)
    idx = canonical_items(ds)
    R_t = rater_slots(ds, 'surprise').reindex(idx).values
    hb = human_baseline(p.reindex(idx).values, R_t, np.where(np.isfinite(R_t), L.reindex(idx).values[:, None], np.nan), n_boot=0).iloc[0]
    assert (r.gap_human, r.gap_judge_loo, r.excess) == pytest.approx((hb.gap_human, hb.gap_judge_loo, hb.excess), abs=1e-12)
    assert r.k_raters == 3 and r.excess_lo <= r.excess <= r.excess_hi
    # the rows' order does not matter
    lb = attribute_audit(j.sample(frac=1, random_state=3), ds, n_perm=99, n_boot=50)
    pd.testing.assert_frame_equal(la.sort_values(['model', 'target']).reset_index(drop=True), lb.sort_values(['model', 'target']).reset_index(drop=True))

def test_bad_attributes_are_refused_before_any_work(hanna):
    ds, j = hanna
    with pytest.raises(ValueError, match="Did you mean 'length'"): attribute_audit(j, ds, attribute='lenght')
    with pytest.raises(ValueError, match='indexed by item_id'): attribute_audit(j, ds, attribute=pd.Series([1.0, 2.0], name='x'))
    with pytest.raises(ValueError, match='no column'): text_length(ds, column='summary')
