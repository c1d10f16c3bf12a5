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
