"""DimCheck's trained small editor on a CPU, as a pipeline (the `[train]` extra; `make test-train`): a DimCheck run recorded
with the embedded model -> supervised examples (requests and replies from the generation cache, split by document) ->
the training template: a few LoRA steps on a tiny randomly initialised Llama built here (the embedded model's own
tokenizer, read from its GGUF file: no download) -> the adapter saved with its model card, reloaded, merged -> the
trained model as DimCheck's editor through the transformers backend, its replies parsed and rescored. The test asserts
the path, not the quality: a tiny random model is no editor. In 10 LoRA steps it learns no "Edited analysis:", so its edits
end as DimCheck's own recorded failures (restarted, then the analysis kept); the rescoring of a parsed edit is the same
code as for any editor (tests/methods/test_dimcheck.py)."""

import json, os, subprocess, sys
from pathlib import Path
import pandas as pd, pytest
from tests.conftest import ROOT

for _pkg in ('torch', 'transformers', 'trl', 'peft', 'datasets', 'gguf'):
    pytest.importorskip(_pkg, reason="DimCheck's editor training needs the [train] extra: pip install -e '.[train]' (make test-train)")

from judgelab import methods as M
from judgelab.llm.backends import embedded_model_path
from judgelab.llm.cache import GenerationCache
from judgelab.llm.models import get_backend
from judgelab.methods.editor import edit_steps, editor_examples, split_by_document, example_counts
from judgelab.methods.dimcheck import NO_MARKER, CUT_AT_CAP

DIMCHECK = dict(thinking=False, others=['groundedness', 'engagingness'], max_tokens=96, base_max_tokens=48, max_restarts=2)

@pytest.fixture(scope='module')
def outputs(tmp_path_factory):
    out = tmp_path_factory.mktemp('outputs')
    old = {k: os.environ.get(k) for k in ('JUDGELAB_OUTPUTS', 'JUDGELAB_RUN_ID')}
    os.environ.update(JUDGELAB_OUTPUTS=str(out), JUDGELAB_RUN_ID='t/judge')
    yield out
    for k, v in old.items():
        if v is None: os.environ.pop(k, None)
        else: os.environ[k] = v

@pytest.fixture(scope='module')
def recorded(outputs):
    "A DimCheck run of the embedded model (no thinking) on 8 Topical-Chat items, saved as a judge run saves it."
    b = get_backend('llamacpp', cache=GenerationCache(outputs/'cache'/'generations.sqlite'))
    return M.run('dimcheck', 'topical_chat', backend=b, n_items=8, dims=['naturalness'], save=True, progress=False, **DIMCHECK)

@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    "A 2-layer Llama with random weights and the embedded SmolLM2's tokenizer and chat template, saved as a model folder."
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    d = tmp_path_factory.mktemp('tiny')
    gguf = embedded_model_path()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=4096, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, tie_word_embeddings=True)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d

def test_examples_are_the_recorded_edits_split_by_document(recorded, outputs):
    st = edit_steps(recorded, 'topical_chat')
    assert len(st) == 8*2 and st.key.notna().all() and st.editor.str.contains('SmolLM2').all()
    ex = split_by_document(editor_examples(recorded, 'topical_chat'), 0.34, seed=0)
    assert len(ex) == (st.failure.isna()).sum() == len(ex) and ex.attrs['failed'] == st.failure.notna().sum()
    assert len(ex) >= 3, st.failure.value_counts()           # the 135M editor often writes no edited analysis: those are left out
    cache = GenerationCache(outputs/'cache'/'generations.sqlite')
    for r in ex.itertuples():                       # the request as sent, the reply as generated
        assert json.loads(r.messages) == cache.requests([r.key])[r.key]['messages'] and 'Remove from the analysis' in r.messages
        assert r.reply == cache.get_many([r.key])[r.key].text
    assert not set(ex[ex.split == 'train'].doc_id) & set(ex[ex.split == 'validation'].doc_id) and set(ex.split) == {'train', 'validation'}
    c = example_counts(ex).set_index('dimension')
    assert c.loc['all', 'train'] + c.loc['all', 'validation'] == len(ex) and 0 <= c.loc['all', 'no_change_share'] <= 1

def test_training_template_then_the_trained_editor_in_dimcheck(recorded, outputs, tiny, tmp_path):
    import papermill as pm
    nb = tmp_path/'train_editor.ipynb'
    env = dict(os.environ, JUDGELAB_RUN_ID='t/train_editor')
    params = dict(runs=['t/judge'], method='dimcheck_nothink', base_model=str(tiny), val_share=0.34,
                  train=dict(max_steps=10, eval_steps=5, learning_rate=5e-3, grad_accum=1, max_length=1024), merge=True)
    os.environ['JUDGELAB_RUN_ID'] = 't/train_editor'
    try: pm.execute_notebook(str(ROOT/'nbs'/'experiments'/'train_editor.ipynb'), str(nb), parameters=params, kernel_name='python3', progress_bar=False, cwd=str(ROOT/'nbs'/'experiments'))
    finally: os.environ['JUDGELAB_RUN_ID'] = 't/judge'
    run = outputs/'t'/'train_editor'
    losses = pd.read_csv(run/'tables'/'editor_losses.csv')
    t = losses.train_loss.dropna()
    assert len(t) == 10 and t.tail(3).mean() < t.head(3).mean(), t.tolist()           # the loss goes down
    assert losses.validation_loss.notna().sum() >= 2
    card = (run/'adapter'/'README.md').read_text()
    assert f'base_model: {tiny.name}' in card and str(tiny) not in card and 'sha256' in card and 'Llama-3.3-70B' in card and (run/'adapter'/'adapter_config.json').exists()
    assert (run/'merged'/'config.json').exists() and (run/'editor_data'/'train.jsonl').exists()
    rows = [json.loads(l) for l in (run/'manifest.jsonl').read_text().splitlines()]
    assert any(a.endswith('train.jsonl') for r in rows for a in r['artifacts'])
    nbj = json.loads(nb.read_text())
    assert not [o for c in nbj['cells'] for o in c.get('outputs', []) if o.get('name') == 'stderr']
    assert 'train_runtime' not in json.dumps(nbj)                     # no trainer log dict printed per step: the losses are a table
    # the trained adapter as DimCheck's editor (named in the options, as a sweep file names it); the judge stays the embedded model
    judge = get_backend('llamacpp', cache=GenerationCache(outputs/'cache'/'generations.sqlite'))
    editor = dict(backend='transformers', model=str(tiny), adapter=str(run/'adapter'))
    j = M.run('dimcheck', 'topical_chat', backend=judge, n_items=8, dims=['naturalness'], progress=False, **{**DIMCHECK, 'editor': editor})
    st = edit_steps(j, 'topical_chat')
    assert len(st) == 16 and st.editor.str.contains('+lora:adapter@sha256:', regex=False).all()
    assert set(j.scoring) <= {'rescored', 'kept'} and (j.changed == (j.scoring == 'rescored')).all()
    assert st.failure.dropna().isin([NO_MARKER, CUT_AT_CAP]).all() and (st.failure.isna() | ~st.changed).all()   # every reply went through DimCheck's parser
    assert (j.edit_failures == st.groupby('item_id').failure.count().reindex(j.item_id).values).all()
    cache = GenerationCache(outputs/'cache'/'generations.sqlite')
    assert all(k in cache.requests([k]) for k in st.key)               # the trained editor's requests and replies are in the cache
    assert j.attrs['file_method'].startswith('dimcheck_nothink_editor')
    # the merged weights load as a plain model folder: the same greedy replies as base + adapter
    from judgelab.llm import Request
    req = [Request([{'role': 'user', 'content': 'Edited analysis:'}], max_tokens=8)]
    a = get_backend('transformers', cache=False, model=str(tiny), adapter=str(run/'adapter')).generate(req)[0].text
    b = get_backend('transformers', cache=False, model=str(run/'merged')).generate(req)[0].text
    assert a == b
