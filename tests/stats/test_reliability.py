"""judgelab.stats.reliability against pingouin, statsmodels and hand-computed cases; the project's CIs and FDR corrections cross-checked; the reliability template on a small case."""

import json, shutil, warnings
from pathlib import Path
import numpy as np, pandas as pd, pytest
import pingouin as pg
import papermill as pm
import statsmodels.formula.api as smf
from statsmodels.stats.multitest import multipletests
from judgelab import data as D
from judgelab.data import judgments as JM
from judgelab.stats import corr, bootstrap_ci, fdr_adjust, fdr_reject
from judgelab.stats.corrgap import rater_slots, simulate_raters
from judgelab.stats.reliability import (icc, human_reliability, judge_as_rater, partial_spearman, partial_excess, partial_audit,
                                  compare_excess, partial_null, mixed_excess)
from tests.conftest import ROOT

AUDIT = ROOT/'outputs'/'embedded'/'corrgap_audit'

def _icc_by_hand(X):
    "Shrout & Fleiss's ICCs from the two-way ANOVA mean squares of a complete (n, k) table."
    X = np.asarray(X, float); n, k = X.shape; g = X.mean()
    ssr = k*((X.mean(1) - g)**2).sum(); ssc = n*((X.mean(0) - g)**2).sum(); sst = ((X - g)**2).sum()
    msr, msc = ssr/(n - 1), ssc/(k - 1); mse = (sst - ssr - ssc)/((n - 1)*(k - 1)); msw = (sst - ssr)/(n*(k - 1))
    return dict(icc1_1=(msr - msw)/(msr + (k - 1)*msw), icc2_1=(msr - mse)/(msr + (k - 1)*mse + k*(msc - mse)/n),
                icc3_1=(msr - mse)/(msr + (k - 1)*mse), icc2_k=(msr - mse)/(msr + (msc - mse)/n), icc3_k=(msr - mse)/msr)

def test_icc_equals_the_anova_formulas_on_shrout_fleiss_and_summeval():
    sf = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]
    X = rater_slots('summeval', 'coherence').to_numpy(float)
    for data in (sf, X):
        got, want = icc(data), _icc_by_hand(data)
        for c, v in want.items(): assert got[c] == pytest.approx(v, abs=1e-9), c
        for c in want: assert got[f'{c}_lo'] <= got[c] + 0.005 and got[c] <= got[f'{c}_hi'] + 0.005   # pingouin rounds its CIs to 2 decimals

def test_icc_drops_and_counts_incomplete_units_and_ignores_their_order():
    rng = np.random.default_rng(0); X = rng.integers(1, 6, (50, 3)).astype(float) + rng.normal(0, 1, (50, 1)).round()
    Y = X.copy(); Y[[3, 7, 9], [0, 2, 1]] = np.nan
    r = icc(Y)
    assert (r['units'], r['dropped'], r['k']) == (47, 3, 3)
    assert r['icc2_1'] == pytest.approx(_icc_by_hand(np.delete(X, [3, 7, 9], 0))['icc2_1'], abs=1e-12)
    assert icc(Y[rng.permutation(50)])['icc2_1'] == pytest.approx(r['icc2_1'], abs=1e-12)
    with pytest.raises(ValueError, match='at least 2 raters'): icc(np.ones((5, 1)))

def test_correlations_and_their_cis_agree_with_pingouin_corr():
    "The project's correlation equals pingouin.corr's r; its cluster-bootstrap CI (each item its own document) is close to pingouin's Fisher-z CI on bivariate normal data."
    rng = np.random.default_rng(3); n = 400
    x = rng.normal(size=n); y = 0.5*x + rng.normal(0, 0.87, n)
    for method in ('pearson', 'spearman'):
        p = pg.corr(x, y, method=method)
        assert corr(x, y, method) == pytest.approx(p.r.iloc[0], abs=1e-10)
        lo, hi, nv = bootstrap_ci(x, y, np.arange(n), method=method, n_boot=2000, seed=0)
        plo, phi = p.CI95.iloc[0]
        assert nv == 2000 and abs(lo - plo) < 0.03 and abs(hi - phi) < 0.03, (method, lo, hi, plo, phi)

def test_fdr_corrections_equal_statsmodels_multipletests():
    rng = np.random.default_rng(5)
    for p in (rng.uniform(0, 1, 40)**3, np.r_[rng.uniform(0, 0.01, 5), rng.uniform(0, 1, 20), [0.02, 0.02, 0.02]], np.array([0.5])):
        for ours, theirs in (('bh', 'fdr_bh'), ('by', 'fdr_by')):
            rej, adj, _, _ = multipletests(p, alpha=0.05, method=theirs)
            assert np.allclose(fdr_adjust(p, ours), adj, atol=1e-12), ours
            assert (fdr_reject(p, 0.05, ours) == rej).all(), ours

def test_partial_spearman_fast_path_equals_pingouin_with_ties_and_on_a_resample():
    rng = np.random.default_rng(1); n = 300
    z = rng.integers(1, 6, n).astype(float); x = np.round(z + rng.normal(0, 1, n)); y = np.round(0.5*z + rng.normal(0, 1, n), 1)
    df = pd.DataFrame(dict(x=x, y=y, z=z))
    assert partial_spearman(x, y, z) == pytest.approx(pg.partial_corr(df, 'x', 'y', 'z', method='spearman').r.iloc[0], abs=1e-10)
    W = rng.multinomial(n, np.full(n, 1/n), size=3)
    fast = partial_spearman(x, y, z, W)
    for b in range(3):
        rows = np.repeat(np.arange(n), W[b])
        assert fast[b] == pytest.approx(pg.partial_corr(df.iloc[rows], 'x', 'y', 'z', method='spearman').r.iloc[0], abs=1e-10)

def test_partial_excess_point_estimates_are_pingouins_slot_by_slot():
    "pc_judge: pingouin on all raters' means; pc_judge_loo and pc_human: the mean over slots of pingouin against the other raters' means."
    sim = simulate_raters(n_items=250, K=3, w=0.3, seed=4); Rt, Ro, v = sim['R_t'], sim['R_o'], sim['pred'].copy()
    v[:5] = np.nan                                                                    # unscored items are left out
    r = partial_excess(v, Rt, Ro, n_boot=0).iloc[0]
    ok = np.isfinite(v)
    pc = lambda a, b, c: pg.partial_corr(pd.DataFrame(dict(a=a[ok], b=b[ok], c=c[ok])), 'a', 'b', 'c', method='spearman').r.iloc[0]
    assert r.n == 245 and r.pc_judge == pytest.approx(pc(v, Ro.mean(1), Rt.mean(1)), abs=1e-10)
    js, hs = [], []
    for a in range(3):
        rt, ro = np.delete(Rt, a, 1).mean(1), np.delete(Ro, a, 1).mean(1)
        js.append(pc(v, ro, rt)); hs.append(pc(Rt[:, a], ro, rt))
    assert r.pc_judge_loo == pytest.approx(np.mean(js), abs=1e-10) and r.pc_human == pytest.approx(np.mean(hs), abs=1e-10)
    assert r.excess_pc == pytest.approx(np.mean(js) - np.mean(hs), abs=1e-10) and r.n_boot == 0

def test_partial_audit_does_not_depend_on_row_order_or_item_ids():
    ds = D.load('opinsummeval'); J = JM.load_judgments('opinsummeval', 'chatgpt_cot')
    a = partial_audit(J, ds, n_boot=30)
    rename = {i: f'x{k:05d}' for k, i in enumerate(np.random.default_rng(0).permutation(ds.items.item_id))}
    ds2 = D.Dataset(ds.spec, ds.items.assign(item_id=ds.items.item_id.map(rename)).sample(frac=1, random_state=2),
                    ds.human.assign(item_id=ds.human.item_id.map(rename)).sample(frac=1, random_state=3), ds.extra, ds.hashes)
    b = partial_audit(J.assign(item_id=J.item_id.map(rename)).sample(frac=1, random_state=4), ds2, n_boot=30)
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 12 and a.n_boot.eq(30).all() and a.excess_pc.notna().all()

def test_partial_excess_is_calibrated_when_the_judge_is_as_reliable_as_a_rater_and_not_otherwise():
    "The no-dependence simulation: the excess centres on 0 for a judge as noisy as a rater, above 0 for a more reliable one, below for a less reliable one."
    null = partial_null(judge_noise=(0.4, 1.0, 2.5), n_sims=8, n_items=250, n_boot=40, seed=1)
    m = null.mean_excess_pc.values
    assert m[0] > 0.02 and abs(m[1]) < 0.03 and m[2] < -0.02, null
    assert null.reliability_ratio.is_monotonic_decreasing and null.false_positive_rate.iloc[0] >= null.false_positive_rate.iloc[2]

def test_compare_excess_on_the_committed_opinsummeval_audit():
    pairs = pd.read_csv(AUDIT/'opinsummeval'/'tables'/'audit_opinsummeval_corrgap_pairs.csv')
    pa = partial_audit(pd.concat([JM.load_judgments('opinsummeval', s) for s in JM.list_judgments('opinsummeval').index]), 'opinsummeval', n_boot=30)
    m, s = compare_excess(pa, pairs)
    assert s['pairs'] == len(pairs) == 36 and s['judges'] == 3
    assert s['flagged_both'] + s['flagged_corrgap_only'] + s['flagged_partial_only'] + s['flagged_neither'] == 36
    assert s['flagged_both'] + s['flagged_corrgap_only'] == int((pairs.p_excess_bh < 0.05).sum())
    assert s['spearman_pairs'] == pytest.approx(corr(m.excess, m.excess_pc))

def test_mixed_model_keeps_the_best_optimum_and_a_valid_standard_error_on_the_boundary():
    """statsmodels' default optimizer stops at a worse REML optimum on HANNA's corrected excess (with the null's shared
    loadings: log-likelihood 113 against Powell's 124, CI [-0.14, 0.20] against [0.01, 0.05]); on OpinSummEval, with every
    variance component at 0, its Hessian-based SE is 0.107 where the pairs' plain SE is 0.024. mixed_excess keeps the best
    converged fit over optimizers and the GLS SE at the fitted variances."""
    T = pd.read_csv(AUDIT/'hanna'/'tables'/'audit_hanna_corrgap_pairs.csv')
    h = mixed_excess(T)
    alone = {m: mixed_excess(T, optimizers=(m,)) for m in (None, 'powell', 'nm')}
    assert h['llf'] == max(a['llf'] for a in alone.values() if a['converged']), (h, alone)       # the best converged optimum is kept
    d = alone[None]
    assert h['llf'] > d['llf'] + 5 and h['ci_hi'] - h['ci_lo'] < (d['ci_hi'] - d['ci_lo'])/3, (h, d)   # the default's optimum is worse, its CI wider
    assert h['value'] == 'excess_corrected' and 0 < h['ci_lo'] < h['estimate'] < h['ci_hi'], h
    o = pd.read_csv(AUDIT/'opinsummeval'/'tables'/'audit_opinsummeval_corrgap_pairs.csv')
    r = mixed_excess(o); y = o.excess_corrected.dropna()
    assert r['estimate'] == pytest.approx(y.mean(), abs=1e-4) and r['se'] == pytest.approx(np.sqrt(r['var_residual']/len(y)), rel=1e-3), r
    assert r['var_model'] < 1e-6 and r['var_prompt'] < 1e-6 and 'only 2 model(s)' in r['note'] and 'no judge component' in r['note']

def test_mixed_model_recovers_a_simulated_mean_and_says_when_groups_are_too_few():
    rng = np.random.default_rng(0); rows = []
    me, pe = rng.normal(0, .05, 6), rng.normal(0, .05, 4)
    for a in range(6):
        for b in range(4):
            rows += [dict(judge=f'p{b}', model=f'm{a}', excess=.1 + me[a] + pe[b] + e) for e in rng.normal(0, .03, 12)]
    T = pd.DataFrame(rows)
    r = mixed_excess(T)
    assert r['converged'] and r['ci_lo'] < 0.1 < r['ci_hi'] and r['judges'] == 24 and r['note'] in ('', 'a variance component is on the boundary (0)')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        f = smf.mixedlm('excess ~ 1', T.assign(g=1, jm=T.judge + T.model), groups='g', re_formula='0',
                        vc_formula={'model': '0 + C(model)', 'prompt': '0 + C(judge)', 'judge': '0 + C(jm)'}).fit(reml=True)
    d = mixed_excess(T, optimizers=(None,))
    assert d['se'] == pytest.approx(f.bse_fe.iloc[0], rel=1e-6) and d['estimate'] == pytest.approx(f.fe_params.iloc[0], abs=1e-9)
    one = mixed_excess(T[T.model == 'm0'].iloc[:1])
    assert np.isnan(one['estimate']) and 'too few to fit' in one['note']

def test_human_reliability_and_the_judge_as_a_rater_on_real_data():
    rel = pd.concat([human_reliability(n) for n in ('topical_chat', 'qags')], ignore_index=True)
    assert not rel.raters_fixed.any() and rel.dropped.eq(0).all()
    q = rel[rel.dataset == 'qags'].iloc[0]
    assert q.level == 'sentence' and q.units == 953 and q.k == 3
    assert ((rel.icc2_1 - rel.alpha_interval).abs() < 0.03).all()                     # interval alpha and ICC(2,1) nearly coincide
    J = JM.load_judgments('opinsummeval', 'chatgpt_handcraft')
    jr = judge_as_rater(J, 'opinsummeval')
    assert len(jr) == 4 and jr.on_scale.all() and (jr.dropped == 51).all() and (jr.units == 1349).all()
    assert (jr.icc2_1_with_judge < jr.icc2_1_humans).all()                            # the raters agree far better with each other than with it

def _execute(name, tmp_path, **params):
    out = tmp_path/f'{name}.ipynb'
    pm.execute_notebook(str(ROOT/'nbs'/'experiments'/f'{name}.ipynb'), str(out), parameters=params, kernel_name='judgelab',
                        cwd=str(ROOT/'nbs'/'experiments'), progress_bar=False)
    return out

def test_reliability_template_small(tmp_path, tmp_outputs):
    runs = []
    for d in ('topical_chat', 'opinsummeval'):                                        # the committed audit runs' tables, in a temporary outputs folder
        dest = tmp_outputs/'embedded'/'corrgap_audit'/d/'tables'; dest.mkdir(parents=True)
        for what in ('corrgap_pairs', 'over_judges'): shutil.copy(AUDIT/d/'tables'/f'audit_{d}_{what}.csv', dest)
        runs.append(f'embedded/corrgap_audit/{d}')
    nb = _execute('reliability', tmp_path, datasets=['topical_chat', 'opinsummeval', 'qags'], n_boot=20, n_sims=3, sim_items=120,
                  judge_noise=[0.5, 2.0], runs=runs)
    T = tmp_outputs/'tables'
    for stem in ('reliability_icc', 'reliability_judge_as_rater', 'reliability_partial_pairs', 'reliability_partial_vs_corrgap',
                 'reliability_flagged_by_one', 'reliability_partial_null', 'reliability_mixed_model'):
        for ext in ('csv', 'md', 'tex'): assert (T/f'{stem}.{ext}').exists(), stem
    assert (tmp_outputs/'figures'/'reliability.png').stat().st_size > 1000
    icc_t = pd.read_csv(T/'reliability_icc.csv'); assert set(icc_t.dataset) == {'topical_chat', 'opinsummeval', 'qags'}
    pairs = pd.read_csv(T/'reliability_partial_pairs.csv')
    audited = sum(len(pd.read_csv(AUDIT/d/'tables'/f'audit_{d}_corrgap_pairs.csv')) for d in ('topical_chat', 'opinsummeval'))
    assert len(pairs) == audited, (len(pairs), audited)          # one partial-correlation row per audited (judge, target, non-target) pair
    agree = pd.read_csv(T/'reliability_partial_vs_corrgap.csv').set_index('dataset')
    judges = sum(pd.read_csv(AUDIT/d/'tables'/f'audit_{d}_corrgap_pairs.csv')[['judge', 'model']].drop_duplicates().shape[0] for d in ('topical_chat', 'opinsummeval'))
    assert agree.loc['all', 'pairs'] == audited and agree.loc['all', 'judges'] == judges, (agree.loc['all'], audited, judges)
    mix = pd.read_csv(T/'reliability_mixed_model.csv'); assert len(mix) == 4 and mix.estimate.notna().all()
    rows = [json.loads(l) for l in (tmp_outputs/'manifest.jsonl').read_text().splitlines()]
    assert all(r['notebook'] == 'nbs/experiments/reliability.ipynb' and r['parameters']['runs'] == runs for r in rows)
    assert any('audit_opinsummeval_corrgap_pairs.csv' in k for r in rows for k in r['inputs'])     # the audit table it read is an input
    text = json.dumps(json.loads(Path(nb).read_text())['cells'])
    assert 'What it adds to excess CorrGap' in text and 'Spearman over judges' in text and 'false-positive rate goes from' in text
