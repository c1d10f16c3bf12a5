"""Data layer, end to end: counts, joins, published judgments, fetching, and the clear errors."""

import json, re, shutil
from pathlib import Path
import numpy as np, pandas as pd, pytest
from judgelab import data as D
from judgelab.data import judgments as JM
from judgelab.datasets import seahorse as SH
import io, signal, zipfile
from contextlib import contextmanager
from judgelab.cli import main
from tests.conftest import run_cli, guard, refused

# ==============================================================================================================
# Data layer, end to end: counts, joins, published judgments, and the clear errors.
# ==============================================================================================================

COUNTS = dict(summeval=(1600, 4, 3, 19200), topical_chat=(360, 6, 5, 6480), hanna=(1056, 6, 3, 19008),
              opinsummeval=(1400, 4, 2, 11200))

@pytest.mark.parametrize('name', list(COUNTS))
def test_counts(name):
    ds = D.load(name); items, dims, annotators, rows = COUNTS[name]
    assert len(ds.items) == items and ds.items.item_id.is_unique
    assert len(ds.dims) == dims and len(ds.annotators) == annotators and len(ds.human) == rows
    assert not ds.human.score.isna().any()
    assert ds.human_mean().shape == (items, dims)
    for d in ds.dims: assert d.in_range(ds.human[ds.human.dimension == d.name].score).all()

def test_registry_files_hold_the_dataset_specs():
    # data/datasets/<name>.yaml, one per dataset, in the order of the files' `order` keys
    assert list(D.DATASETS) == ['summeval', 'topical_chat', 'hanna', 'opinsummeval', 'qags', 'seahorse']
    assert sorted(p.stem for p in (D.paths.data/'datasets').glob('*.yaml')) == sorted(D.DATASETS)
    se = D.DATASETS['summeval']
    assert [f.path for f in se.files_of(None)] == ['alttest_summeval_human_annotations.json', 'ppairs_summeval.jsonl', 'judgments/alttest__llm_annotations.json']
    assert se.files[1] == D.FileSpec('ppairs_summeval.jsonl', '7b152ee2f44aca4259e4bbde69900bd0aebc97550d95d54681430595f0fb94d3',
        'https://raw.githubusercontent.com/maiush/PPairS/e6e002d8891e19238b7910ef81b998ab3af1a6a4/data/summeval.jsonl', 4169110)
    assert se.dims[1].aliases == ('con', 'factual consistency') and se.dims[0].scale == (1, 5, 1)
    assert se.licence.startswith('MIT (Yale-LILY/SummEval)') and se.quality_threshold == 'median' and se.quality_source == D.QUALITY_SOURCE
    tc = D.DATASETS['topical_chat']
    assert [d.scale for d in tc.dims] == [(0, 1, 1), (1, 3, 1), (1, 3, 1), (1, 3, 1), (0, 1, 1), (1, 5, 1)]
    assert tc.dim('maintains context').label == 'Maintains Context' and len(tc.files_of(None)) == 11
    assert D.DATASETS['qags'].dims[0].step is None and D.DATASETS['hanna'].source_label == 'Story prompt'
    sh = D.DATASETS['seahorse']
    assert sh.optional and all(f.sha256 is None for f in sh.files) and D.DATASETS['summeval'].optional is False

def test_a_registry_file_that_does_not_fit_names_the_file_and_the_key(tmp_path):
    good = (D.paths.data/'datasets'/'hanna.yaml').read_text()
    f = tmp_path/'hanna.yaml'
    f.write_text(good); assert D.load_registry(tmp_path) == {'hanna': D.DATASETS['hanna']}
    for broken, msg in [(good.replace('\ntitle:', '\ntitel:'), "hanna.yaml: unknown key(s) ['titel'] in the dataset"),
                        (good.replace('  sha256:', '  sha:', 1), "hanna.yaml: unknown key(s) ['sha'] in files[1]"),
                        (good.replace('  definition: How well the story matches its prompt.\n', ''), "hanna.yaml: dims[1] lacks the required key(s) ['definition']"),
                        (good.replace('aliases: [re]', 'aliases: re'), "hanna.yaml: aliases in dims[1] must be a list of strings, not 're'"),
                        (good.replace('name: hanna', 'name: hana'), "must be called hana.yaml"),
                        (good + 'dims: []\n', "found the key 'dims' twice"),
                        (good.replace('\ntitle:', '\n  title:'), 'hanna.yaml: not valid YAML'),
                        ('- just a list\n', 'hanna.yaml: must hold one mapping')]:
        f.write_text(broken)
        with pytest.raises(D.RegistryError) as e: D.load_registry(tmp_path)
        assert str(f) in str(e.value) and msg in str(e.value), (msg, str(e.value))

def test_qags_summary_level_matches_unieval_file():
    ds = D.load('qags')
    assert len(ds.items) == 474 and ds.items.n_sentences.sum() == 953
    # the human score stored in UniEval's files is the fraction of majority-yes sentences (QAGS paper)
    raw = D.raw_dir('qags')
    stored = [r['scores']['consistency'] for s in ('cnndm', 'xsum')
              for r in json.loads((raw/f'judgments/unieval__qags_{s}_result.json').read_text())]
    np.testing.assert_allclose(ds.human_mean()['consistency'].values, stored, atol=1e-9)

def test_topical_chat_means_match_unieval_copy_and_real_annotators():
    ds = D.load('topical_chat'); uni = json.loads((D.raw_dir('topical_chat')/'unieval_topical_chat.json').read_text())
    hm = ds.human_mean()
    for dim in ['naturalness', 'coherence', 'engagingness', 'groundedness', 'understandability', 'overall']:
        np.testing.assert_allclose(hm[dim].values, [u['scores'][dim] for u in uni], atol=1e-9)
    assert set(ds.annotators) == {'sm', 'me', 'er', 'fl', 'yf'}
    assert (ds.human.groupby('item_id').annotator.apply(lambda a: 'sm' in set(a))).all()

def test_hanna_and_opinsummeval_means_match_stored_means():
    ha = D.load('hanna'); pp = pd.read_json(D.raw_dir('hanna')/'ppairs_hanna.jsonl', lines=True)
    hm = ha.human_mean().set_axis(ha.items.ppairs_id.values)
    pp.index = pp.prompt_id + '/' + pp.story_id
    for dim in ['relevance', 'coherence', 'empathy', 'surprise', 'engagement', 'complexity']:
        np.testing.assert_allclose(hm.loc[pp.index, dim].values, pp[dim].values, atol=1e-6)
    tie = ha.extra['tie_resolution']
    assert sorted(tie.assigned) == ['GPT', 'RoBERTa'] and len(tie) == 2

@pytest.mark.parametrize('name', ['summeval', 'topical_chat', 'hanna', 'opinsummeval', 'qags'])
def test_published_judgments_align(name):
    ds = D.load(name); ids = set(ds.items.item_id)
    srcs = JM.list_judgments(name)
    assert len(srcs) >= 1
    for src in srcs.index:
        j = JM.load_judgments(name, src)
        assert list(j.columns) == JM.JUDGMENT_COLUMNS
        assert set(j.item_id) <= ids and set(j.dimension) <= set(ds.spec.dim_names)
        assert j.loc[~j.parse_ok, 'score'].isna().all(), 'a failure must never carry a score'
        assert j.loc[~j.parse_ok, 'failure'].notna().all()
        assert not j.duplicated(['item_id', 'dimension', 'judge', 'model', 'sample']).any()

def test_known_failure_counts_of_published_files():
    # SOURCE.md: HANNA's LLM columns hold 173+203+402+259+14 values outside 1-5;
    # OpinSummEval handcraft replies leave 204 dimension slots unnamed.
    assert (~JM.load_judgments('hanna', 'chhun2024').parse_ok).sum() == 1051
    assert (~JM.load_judgments('opinsummeval', 'chatgpt_handcraft').parse_ok).sum() == 204
    alt = JM.load_judgments('summeval', 'alttest')
    assert alt.groupby('model').size().to_dict() == {m: 6400 for m in alt.model.unique()} and alt.model.nunique() == 6

def test_unknown_dataset_error():
    with pytest.raises(D.UnknownDatasetError, match="Unknown dataset 'sumeval'.*Known datasets: summeval"):
        D.load('sumeval')
    r = run_cli('data', 'fetch', 'sumeval')
    assert r.returncode != 0 and "Unknown dataset 'sumeval'" in r.stderr

def test_checksum_mismatch_is_clear_and_leaves_nothing(tmp_path, monkeypatch):
    mirror = tmp_path/'mirror'; raw = tmp_path/'raw'
    src = D.default_mirror()
    shutil.copytree(src/'topical_chat', mirror/'topical_chat')
    target = mirror/'topical_chat'/'raw'/'usr_topical_chat.json'
    target.write_bytes(target.read_bytes().replace(b'"sm"', b'"xx"', 1))
    monkeypatch.setenv('JUDGELAB_RAW', str(raw))
    with pytest.raises(D.ChecksumError) as e: D.fetch('topical_chat', mirror=mirror, verbose=False)
    msg = str(e.value)
    assert 'usr_topical_chat.json' in msg and '8e4e6961585f58edb573c0153766547442bde69577e8df6ba9e24a84dc9483e5' in msg
    assert D.sha256_file(target) in msg
    assert not (raw/'topical_chat'/'usr_topical_chat.json').exists()
    assert not list((raw/'topical_chat').glob('*.part')) if (raw/'topical_chat').exists() else True
    # a file tampered with after fetching is caught at load time
    D.fetch('topical_chat', mirror=src, verbose=False)
    f = raw/'topical_chat'/'unieval_topical_chat.json'; f.write_text(f.read_text() + ' ')
    with pytest.raises(D.ChecksumError, match='unieval_topical_chat.json: expected sha256 f6361daa'):
        D.load('topical_chat')

def test_missing_files_without_mirror_say_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv('JUDGELAB_RAW', str(tmp_path/'raw'))
    monkeypatch.setenv('JUDGELAB_DATA_MIRROR', str(tmp_path/'nowhere'))
    with pytest.raises(D.MissingDataError, match='judgelab data fetch qags'):
        D.load('qags', fetch_missing=False)
    with pytest.raises(D.MissingDataError, match='seahorse_data/train.tsv'):
        D.load('seahorse')

def test_seahorse_loader_on_a_small_file_we_make(tmp_path, monkeypatch):
    monkeypatch.setenv('JUDGELAB_RAW', str(tmp_path/'raw'))
    d = tmp_path/'raw'/'seahorse'/'seahorse_data'; d.mkdir(parents=True)
    head = 'gem_id\tworker_lang\tsummary\tmodel\tquestion1\tquestion2\tquestion3\tquestion4\tquestion5\tquestion6\n'
    rows = {'train': ['xsum-train-1\ten-US\tA summary.\tt5_base\tYes\tYes\tNo\tYes\tUnsure\tNo'],
            'validation': ['xsum-validation-2\ten-US\tBad.\tmt5_small\tNo\t\t\t\t\t'],
            'test': ['xlsum_english-test-3\ten-US\tAnother one.\treference\tYes\tYes\tYes\tYes\tYes\tYes']}
    for s, r in rows.items(): (d/f'{s}.tsv').write_text(head + '\n'.join(r) + '\n')
    with pytest.warns(UserWarning, match='no pinned sha256'):
        SH.record_hashes(D.DATASETS['seahorse'])
    ds = D.load('seahorse')
    assert len(ds.items) == 3
    hm = ds.human_mean()
    assert hm.loc['xsum-train-1__t5-base', 'grammar'] == 0 and np.isnan(hm.loc['xsum-train-1__t5-base', 'main_ideas'])
    assert hm.loc['xsum-validation-2__mt5-small'].notna().sum() == 1   # Q1 = No: nothing else rated
    (d/'test.tsv').write_text(head)   # changed after its hash was recorded
    with pytest.raises(D.ChecksumError, match='seahorse_data/test.tsv'):
        D.load('seahorse')

def test_bad_import_lists_every_problem(tmp_path):
    ds = D.load('summeval'); a, b = ds.items.item_id[:2]
    f = tmp_path/'mine.csv'
    pd.DataFrame(dict(item_id=[a, a, 'ghost', b, b], dimension=['coherence', 'coherence', 'fluency', 'verbosity', 'relevance'],
                      score=[3, 3, 2, 4, 7])).to_csv(f, index=False)
    with pytest.raises(JM.JudgmentImportError) as e: JM.import_judgments(f, 'summeval', 'mine', 'm')
    msg = str(e.value)
    for what in ['unknown item_id: 1 row', 'unknown dimension: 1 row', 'outside the dimension scale: 1 row',
                 'duplicate (item_id, dimension, sample): 2 row']:
        assert what in msg, (what, msg)
    assert 'ghost' in msg and 'verbosity' in msg

def test_import_cli_writes_parquet(tmp_path, tmp_outputs):
    ds = D.load('opinsummeval')
    f = tmp_path/'mine.jsonl'
    pd.DataFrame(dict(item_id=ds.items.item_id[:4], dimension='asp_rel', score=[1, 2, 3, 4],
                      rationale='because')).to_json(f, orient='records', lines=True)
    r = run_cli('judgments', 'import', str(f), '--dataset', 'opinsummeval', '--judge', 'mine', '--model', 'tiny')
    assert r.returncode == 0, r.stderr
    j = pd.read_parquet(tmp_outputs/'judgments'/'opinsummeval'/'mine__tiny.parquet')
    assert j.dimension.unique().tolist() == ['aspect_relevance'] and len(j) == 4
    bad = tmp_path/'bad.csv'; bad.write_text('item_id,dimension,score\nnope,readability,3\n')
    r = run_cli('judgments', 'import', str(bad), '--dataset', 'opinsummeval', '--judge', 'x', '--model', 'y')
    assert r.returncode == 2 and 'unknown item_id' in r.stderr

def test_cli_help_and_list():
    r = run_cli('--help', check=True); assert 'data' in r.stdout and 'judgments' in r.stdout
    r = run_cli('data', 'fetch', '--help', check=True); assert '--mirror' in r.stdout
    r = run_cli('data', 'list', check=True)
    for n in D.DATASETS: assert n in r.stdout
    r = run_cli('data', 'verify', '--all', check=True); assert 'summeval/ppairs_summeval.jsonl: ok' in r.stdout

# ==============================================================================================================
# A corrupted mirror file is named in the error; `judgelab data info` says where a missing dataset's files go.
# Each test failed on the code before its fix.
# ==============================================================================================================

def test_a_corrupted_mirror_file_is_named_in_the_error(tmp_path, monkeypatch):
    # before: the error named the deleted staging '.part' file instead of the mirror file
    from judgelab import data as D
    spec = D.get_spec('qags'); f = spec.files[0]
    mirror = tmp_path/'mirror'; (mirror/'qags'/'raw').mkdir(parents=True); bad = mirror/'qags'/'raw'/Path(f.path).name
    bad.write_text('not the file')
    monkeypatch.setenv('JUDGELAB_RAW', str(tmp_path/'raw'))
    with pytest.raises(D.ChecksumError) as e: D.fetch('qags', mirror=mirror, force=True)
    assert str(bad) in str(e.value) and '.part' not in str(e.value), str(e.value)

def test_data_info_says_where_the_files_of_a_missing_dataset_go():
    # before: `judgelab data info seahorse` listed URLs but not where the files must be put
    r = run_cli('data', 'info', 'seahorse', check=True)
    assert 'they go to data/raw/seahorse/' in r.stdout and 'seahorse_data/train.tsv  missing' in r.stdout
    assert 'to get them: Seahorse is not available' in r.stdout and 'seahorse_data.zip' in r.stdout

# ==============================================================================================================
# A corrupt or garbage Seahorse download is a clear error (the CLI's exit 2, no traceback) and nothing is written or
# pinned. The CLI runs in this process (`judgelab.cli.main`) under a guard alarm.
# ==============================================================================================================

# --- row 20: the Seahorse fetch ----------------------------------------------------------------------------------------

HEAD = 'gem_id\tworker_lang\tsummary\tmodel\tquestion1\tquestion2\tquestion3\tquestion4\tquestion5\tquestion6\n'

GOOD = {s: HEAD + f'xsum-{s}-1\ten-US\tA summary.\tt5_base\tYes\tYes\tNo\tYes\tUnsure\tNo\n' for s in ('train', 'validation', 'test')}

GARBAGE = '<html><head><title>Access denied</title></head><body>quota exceeded</body></html>\n'

def _zip(files:dict)->bytes:
    b = io.BytesIO()
    with zipfile.ZipFile(b, 'w', zipfile.ZIP_DEFLATED) as z:
        for s, text in files.items(): z.writestr(f'seahorse_data/{s}.tsv', text)
    return b.getvalue()

def _raw_files(raw:Path)->list: return sorted(p.name for p in (raw/'seahorse').rglob('*') if p.is_file()) if (raw/'seahorse').exists() else []

def test_a_corrupt_seahorse_zip_is_a_clear_error(tmp_path, monkeypatch, cli):
    mirror, raw = tmp_path/'mirror', tmp_path/'raw'; z = mirror/'seahorse'/'raw'/'seahorse_data.zip'; z.parent.mkdir(parents=True)
    monkeypatch.setenv('JUDGELAB_RAW', str(raw))
    z.write_bytes(GARBAGE.encode())                                      # an error page saved as the zip
    r = cli('data', 'fetch', 'seahorse', '--mirror', mirror)    # before: a BadZipFile traceback, exit 1
    refused(r, f'{z} is not a zip archive', 'nothing was written to data/raw')
    assert _raw_files(raw) == []
    good = _zip(GOOD)
    z.write_bytes(good[:40] + b'\0' * 30 + good[70:])                    # a damaged member
    with pytest.raises(D.DataError, match='is a damaged zip archive'): D.fetch('seahorse', mirror=mirror, verbose=False)
    z.write_bytes(_zip({**GOOD, 'test': GARBAGE}))                       # a zip, but not Seahorse's content
    with pytest.raises(D.DataError, match=r'seahorse_data/test.tsv\) is not a Seahorse TSV: its header lacks the columns'):
        D.fetch('seahorse', mirror=mirror, verbose=False)
    assert _raw_files(raw) == []
    z.write_bytes(good)                                                  # the real layout is fetched, pinned and verified
    with pytest.warns(UserWarning, match='no pinned sha256'): D.fetch('seahorse', mirror=mirror, verbose=False)
    assert set(D.verify('seahorse')) == {'seahorse_data/train.tsv', 'seahorse_data/validation.tsv', 'seahorse_data/test.tsv'}

def test_garbage_seahorse_tsvs_are_not_pinned_on_first_use(tmp_path, monkeypatch, cli):
    mirror, raw = tmp_path/'mirror', tmp_path/'raw'; d = mirror/'seahorse'/'raw'/'seahorse_data'; d.mkdir(parents=True)
    monkeypatch.setenv('JUDGELAB_RAW', str(raw))
    for s in GOOD: (d/f'{s}.tsv').write_text(GARBAGE)
    r = cli('data', 'fetch', 'seahorse', '--mirror', mirror)    # before: fetched, hashes recorded, exit 0
    refused(r, 'train.tsv is not a Seahorse TSV', "its header lacks the columns ['gem_id'", 'Its hash was not recorded')
    assert _raw_files(raw) == []
    rc, out, err = cli('data', 'verify', 'seahorse')                    # before: "ok" for each file
    assert rc != 0 and ': ok' not in out, out + err
    # files pinned that way by an earlier version: verify checks their content too
    (raw/'seahorse').mkdir(parents=True); shutil.copytree(d, raw/'seahorse'/'seahorse_data')
    (raw/'seahorse'/'SHA256SUMS').write_text(''.join(f"{D.sha256_file(raw/'seahorse'/'seahorse_data'/f'{s}.tsv')}  seahorse_data/{s}.tsv\n" for s in GOOD))
    rc, out, err = cli('data', 'verify', 'seahorse')
    assert rc != 0 and 'is not a Seahorse TSV' in err and ': ok' not in out, out + err

# ==============================================================================================================
# One module per dataset: the registry file holds the dataset's facts and its published sources (checked when read),
# the module its code (found by name); a source without a reader, or a reader without a source, is an error.
# ==============================================================================================================

def test_registry_checks_the_facts_and_the_published_sources(tmp_path):
    good = (D.paths.data/'datasets'/'summeval.yaml').read_text(); p = tmp_path/'summeval.yaml'
    for broken, msg in [(good.replace('paper_quality: high', 'paper_quality: medium'), "paper_quality must be 'low' or 'high', not 'medium'"),
                        (good.replace('crowd_group: crowd', 'crowd_group: crowds'), "crowd_group 'crowds' is not one of its file groups"),
                        (good.replace('  story: source', '  story: title'), 'hypoeval must be {kind: ..., config: ..., story: source or output}'),
                        (good.replace('  - judgments/alttest__llm_annotations.json', '  - judgments/alttest.json'), "judgment source 'alttest' names file(s) ['judgments/alttest.json']"),
                        (good.replace('  authors_procedure: >-', '  authors_procedur: >-'), "unknown key(s) ['authors_procedur'] in judgment_sources[2]"),
                        (re.sub(r'\n  authors_procedure: >-\n(    .*\n)+', '\n', good), "a replayed source has both authors_rules"),
                        (good.replace('- name: llm_summeval\n  description', '- name: alttest\n  description'), "judgment source(s) ['alttest'] given twice")]:
        assert broken != good, msg
        p.write_text(broken)
        with pytest.raises(D.RegistryError, match=re.escape(msg)): D.load_registry(tmp_path)

def test_a_source_and_its_reader_come_together(monkeypatch):
    spec = D.DATASETS['qags']
    monkeypatch.setitem(D.DATASETS, 'qags', D.replace(spec, judgment_sources=[]))      # the reader stays registered
    with pytest.raises(D.DataError, match=r"registers readers of \['unieval'\], which data/datasets/qags.yaml does not list"):
        JM.JUDGMENT_SOURCES['qags']
    extra = D.SourceSpec('mine', 'A judge nobody reads.', ('mturk_xsum.jsonl',))
    monkeypatch.setitem(D.DATASETS, 'qags', D.replace(spec, judgment_sources=spec.judgment_sources + [extra]))
    with pytest.raises(D.DataError, match="lists the published source 'mine', but judgelab.datasets.qags registers no reader"):
        JM.JUDGMENT_SOURCES['qags']

def test_a_dataset_without_a_module_has_no_loader(tmp_path, monkeypatch):
    spec = D.replace(D.DATASETS['qags'], name='qags_copy', module='judgelab.datasets.no_such_module', judgment_sources=[])
    monkeypatch.setitem(D.DATASETS, 'qags_copy', spec)
    assert D.dataset_module('qags_copy') is None and D.hook('qags_copy', 'load') is None
    shutil.copytree(D.raw_dir('qags'), tmp_path/'qags_copy')
    monkeypatch.setenv('JUDGELAB_RAW', str(tmp_path))
    with pytest.raises(D.DataError, match=r"qags_copy has a registry file but no loader: register one with @register\('qags_copy'\)"):
        D.load('qags_copy', fetch_missing=False)
