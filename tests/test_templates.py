"The papermill templates run end to end (into a temporary outputs folder) and write their artifacts + manifest."
import json, sys
from pathlib import Path
import papermill as pm, pytest

ROOT = Path(__file__).resolve().parents[1]

def _execute(name, tmp_path, **params):
    out = tmp_path/f'{name}.ipynb'
    pm.execute_notebook(str(ROOT/'nbs'/'experiments'/f'{name}.ipynb'), str(out), parameters=params, kernel_name='judgelab',
                        cwd=str(ROOT/'nbs'/'experiments'), progress_bar=False)
    return out

def test_data_overview(tmp_path, tmp_outputs):
    _execute('data_overview', tmp_path, datasets=['topical_chat', 'qags', 'seahorse'])
    for stem in ['datasets', 'dimension_correlations', 'published_judgments']:
        for ext in ['csv', 'md', 'tex']: assert (tmp_outputs/'tables'/f'{stem}.{ext}').exists()
    for stem in ['score_distributions', 'dimension_correlations']:
        for ext in ['pdf', 'png']: assert (tmp_outputs/'figures'/f'{stem}.{ext}').stat().st_size > 1000
    rows = [json.loads(l) for l in (tmp_outputs/'manifest.jsonl').read_text().splitlines()]
    assert len(rows) == 5
    for r in rows:
        assert r['notebook'] == 'nbs/experiments/data_overview.ipynb' and r['commit']
        assert r['parameters']['datasets'] == ['topical_chat', 'qags', 'seahorse']
        assert any(k.startswith('topical_chat/') for k in r['inputs'])
    md = (tmp_outputs/'tables'/'datasets.md').read_text()
    assert 'not available' in md and '360' in md

def test_bad_parameter_fails_before_work(tmp_path, tmp_outputs):
    with pytest.raises(pm.PapermillExecutionError, match="Unknown dataset 'summevl'"):
        _execute('data_overview', tmp_path, datasets=['summevl'])
    assert not (tmp_outputs/'tables').exists()

def test_corrgap_synthetic_small(tmp_path, tmp_outputs):
    _execute('corrgap_synthetic', tmp_path, datasets=['simulated', 'topical_chat'], seeds=2, w_grid=[0.0, 1.0], n_perm=99,
             controls=['round', 'none'])
    import pandas as pd
    s = pd.read_csv(tmp_outputs/'tables'/'corrgap_synthetic.csv')
    assert set(s.dataset) == {'simulated', 'topical_chat'} and set(s.w) == {0.0, 1.0}
    ctl = s[s.control == 'round'].groupby('w').gap_mean.mean()
    assert ctl[1.0] > ctl[0.0] + 0.2 and abs(ctl[0.0]) < 0.1
    assert (tmp_outputs/'figures'/'corrgap_synthetic.png').exists()

def test_corrgap_noise_small(tmp_path, tmp_outputs):
    _execute('corrgap_noise', tmp_path, n_sims=4, n_sims_curve=2, n_boot=20, n_perm=19, datasets=['summeval'])
    import pandas as pd
    fp = pd.read_csv(tmp_outputs/'tables'/'corrgap_noise_false_positives.csv')
    assert set(fp.setting) == {'generic', 'summeval'} and fp.share_excess.between(0, 1).all()
    curve = pd.read_csv(tmp_outputs/'tables'/'corrgap_noise_curve.csv')
    assert set(curve.w) == {0.0, 0.25, 0.5} and set(curve.judge_noise) == {1.0, 0.5}
    assert (tmp_outputs/'figures'/'corrgap_noise.png').exists()

def test_corrgap_audit_small(tmp_path, tmp_outputs):
    _execute('corrgap_audit', tmp_path, dataset='topical_chat', sources=['closerlook_analyze_rate'], n_perm=99, n_boot_excess=50,
             n_perm_quality=19, n_boot=20)
    import pandas as pd
    t = pd.read_csv(tmp_outputs/'tables'/'audit_topical_chat.csv')
    assert set(t.dimension) == {'naturalness', 'coherence', 'engagingness', 'groundedness'}
    assert {'corr_sample', 'corrgap', 'gap_human', 'excess', 'sig_raw', 'sig_excess'} <= set(t.columns)
    pairs = pd.read_csv(tmp_outputs/'tables'/'audit_topical_chat_corrgap_pairs.csv')
    assert len(pairs) == 4*4 and pairs.p.between(0, 1).all() and pairs.p_excess.between(0, 1).all()
    assert ((pairs.excess - (pairs.gap_judge_loo - pairs.gap_human)).abs() < 1e-12).all() and (pairs.k_raters == 3).all()
    for f in ['audit_topical_chat_excess.png', 'audit_topical_chat_excess_heatmaps.png']: assert (tmp_outputs/'figures'/f).exists()
    assert set(pd.read_csv(tmp_outputs/'tables'/'audit_topical_chat_quality.csv').quality) == {'low', 'high'}
    h = pd.read_csv(tmp_outputs/'tables'/'audit_topical_chat_headline.csv').iloc[0]
    assert (h.n_perm, h.n_boot_excess, h.bins) == (99, 50, 'exact')      # the counts quoted come from the run's parameters
    d = pd.read_csv(tmp_outputs/'tables'/'audit_topical_chat_quality_direction.csv').iloc[0]
    assert d.paper_finding == 'more severe for low-quality texts' and d.agrees in ('yes', 'no')
    nb = json.loads((tmp_path/'corrgap_audit.ipynb').read_text())
    errs = [o for c in nb['cells'] for o in c.get('outputs', []) if o.get('name') == 'stderr']
    assert not errs, errs                                              # no warnings or progress bars in the executed notebook

def test_corrgap_audit_of_imported_judgments(tmp_path, tmp_outputs):
    import pandas as pd
    from judgelab import data as D
    from judgelab import judgments as JM
    ds = D.load('opinsummeval'); hm = ds.human_mean()
    rng = __import__('numpy').random.default_rng(0)
    rows = [dict(item_id=i, dimension=d, score=float(min(5, max(1, round(hm.loc[i, d] + rng.normal(0, 1))))))
            for i in hm.index for d in ['aspect_relevance', 'readability']]
    f = tmp_path/'mine.csv'; pd.DataFrame(rows).to_csv(f, index=False)
    j = JM.import_judgments(f, 'opinsummeval', 'mine', 'noisy'); out = tmp_path/'mine__noisy.parquet'; j.to_parquet(out)
    _execute('corrgap_audit', tmp_path, dataset='opinsummeval', judgments_path=str(out), n_perm=49, n_boot_excess=20, n_perm_quality=9, n_boot=10)
    t = pd.read_csv(tmp_outputs/'tables'/'audit_opinsummeval_mine__noisy.csv')
    assert set(t.dimension) == {'aspect_relevance', 'readability'} and (t.k_raters == 2).all()

def test_agreement_reproduces_official_alttest(tmp_path, tmp_outputs):
    # the template asserts the pooled SummEval APs of the official AltTest notebook
    _execute('agreement', tmp_path, datasets=['summeval', 'qags'])
    import pandas as pd
    alt = pd.read_csv(tmp_outputs/'tables'/'alttest.csv')
    assert (alt[alt.dimension == 'pooled'].winning_rate == 0).all() and len(alt) == 6*5
    h = pd.read_csv(tmp_outputs/'tables'/'agreement_human.csv')
    assert h.set_index('dimension').loc['consistency', 'alpha_interval'] > 0.8

def test_judge_template_on_the_embedded_model(tmp_path, tmp_outputs):
    # real generations on 2 Topical-Chat items x 2 dimensions; the cache lives under the temporary outputs folder
    _execute('judge', tmp_path, dataset='topical_chat', method='analyze_rate', n_items=2, dims=['naturalness', 'groundedness'],
             method_options={'max_tokens': 64}, n_boot=20, n_perm=19)
    import pandas as pd
    files = list((tmp_outputs/'judgments'/'topical_chat').glob('analyze_rate__*.parquet'))
    assert len(files) == 1
    j = pd.read_parquet(files[0])
    assert len(j) == 4 and j.rationale.str.len().min() > 0 and (j.parse_ok | j.failure.notna()).all()
    cost = list((tmp_outputs/'tables'/'judge').glob('judge_topical_chat__analyze_rate__*_cost.md'))
    assert cost and 'too small to be a competent judge' in cost[0].read_text()
