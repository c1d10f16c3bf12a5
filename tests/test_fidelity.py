"""Judge methods faithful to their papers (the fidelity issue), pinned with scripted backends and loopback servers:
DimCheck rescoring re-runs the unchanged evaluation prompt with the edited analysis as the start of the answer, the
no-thinking ablation switches the model's own thinking off on vLLM and OpenAI-compatible servers, a reply without the
edit marker is a restart and then a counted failure."""
import hashlib, json, re, types
import pytest
from judgelab import backends as B
from judgelab.llm import Request, Job, Choice
from judgelab.data import load
from judgelab.methods import run
from test_hardening import scripted, ok, _backend

QWEN = 'Qwen/Qwen3-32B'

def test_enable_thinking_false_reaches_an_openai_compatible_server():
    b = B.OpenAIBackend('http://127.0.0.1:8000/v1', QWEN)
    body = b.body(Job(0, Request([{'role': 'user', 'content': 'x'}], chat_options={'enable_thinking': False}), 0))
    assert body['chat_template_kwargs'] == {'enable_thinking': False} and 'continue_final_message' not in body
    pre = b.body(Job(0, Request([{'role': 'user', 'content': 'x'}, {'role': 'assistant', 'content': 'Analysis: a\nRating:'}], continue_final=True), 0))
    assert pre['continue_final_message'] is True and pre['add_generation_prompt'] is False and pre['messages'][-1]['role'] == 'assistant'
    plain = b.body(Job(0, Request([{'role': 'user', 'content': 'x'}]), 0))
    assert not {'chat_template_kwargs', 'continue_final_message', 'add_generation_prompt'} & set(plain)

def test_enable_thinking_false_and_prefill_reach_vllm_chat(monkeypatch):
    calls = []
    class FakeLLM:
        def chat(self, messages, params, use_tqdm=True, **kw):
            calls.append((len(messages), kw))
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text='4', finish_reason='stop', token_ids=[1], logprobs=None)], prompt_token_ids=[1, 2])
                    for _ in messages]
    monkeypatch.setattr(B, 'to_sampling_params', lambda kw: kw)
    v = B.VLLMBackend(QWEN); v._llm = FakeLLM()
    reqs = [Request([{'role': 'user', 'content': 'a'}], chat_options={'enable_thinking': False}),
            Request([{'role': 'user', 'content': 'b'}]),
            Request([{'role': 'user', 'content': 'c'}, {'role': 'assistant', 'content': 'Analysis: c\nRating:'}], continue_final=True),
            Request([{'role': 'user', 'content': 'd'}], chat_options={'enable_thinking': False})]
    out = v.generate(reqs, progress=False)
    assert [c.text for c in out] == ['4'] * 4
    kws = sorted((n, json.dumps(kw, sort_keys=True)) for n, kw in calls)
    assert len(calls) == 3                                               # one LLM.chat call per distinct set of template options
    by = {json.dumps(kw, sort_keys=True): n for n, kw in calls}
    assert by[json.dumps(dict(add_generation_prompt=True, continue_final_message=False, chat_template_kwargs={'enable_thinking': False}), sort_keys=True)] == 2
    assert by[json.dumps(dict(add_generation_prompt=False, continue_final_message=True, chat_template_kwargs=None), sort_keys=True)] == 1

def test_template_options_are_part_of_the_cache_key_only_when_set():
    from judgelab.cache import request_key
    r = Request([{'role': 'user', 'content': 'x'}])
    assert 'chat_options' not in r.sampling() and 'continue_final' not in r.sampling()          # every earlier key is unchanged
    assert request_key('m', r) != request_key('m', Request([{'role': 'user', 'content': 'x'}], chat_options={'enable_thinking': False}))

def test_dimcheck_over_a_server_no_thinking_edits_and_a_prefilled_rescoring(http_stub, tmp_path):
    # the whole method against a loopback vLLM-style server: what each request carried
    def reply(n, body, h):
        last = body['messages'][-1]
        if body.get('continue_final_message'): return ok(' 1')
        if 'Remove from the analysis' in last['content']: return ok('Edited analysis: It reads naturally.')
        # each item's analysis its own (two equal edit requests would be one request: a batch generates a key once)
        return ok(f"Analysis: It reads naturally. It is engaging (item {hashlib.sha256(last['content'].encode()).hexdigest()[:8]}).\nRating: 2")
    srv, seen = scripted(http_stub, reply)
    tc = load('topical_chat')
    j = run('dimcheck', tc, backend=_backend(srv, tmp_path), dims=['naturalness'], n_items=2, others=['engagingness'], thinking=False, progress=False)
    bodies = [b for _, b, _ in seen]
    base = [b for b in bodies if not b.get('continue_final_message') and 'Remove from the analysis' not in b['messages'][-1]['content']]
    edits = [b for b in bodies if 'Remove from the analysis' in b['messages'][-1]['content']]
    resc = [b for b in bodies if b.get('continue_final_message')]
    assert len(base) == len(edits) == len(resc) == 2
    assert all(b['chat_template_kwargs'] == {'enable_thinking': False} for b in edits)
    assert all('chat_template_kwargs' not in b for b in base + resc)
    for r in resc:                                                   # the evaluation prompt, unchanged, then the prefilled answer
        b = next(x for x in base if x['messages'] == r['messages'][:-1])
        assert r['messages'][-1] == {'role': 'assistant', 'content': 'Analysis: It reads naturally.\nRating:'} and r['add_generation_prompt'] is False
    assert (j.score == 1).all() and (j.base_score == 2).all() and (j.scoring == 'rescored').all()

def test_prefilled_rescoring_on_the_embedded_model(tmp_path):
    # llama.cpp renders the model's chat template itself and continues the prefilled answer
    from judgelab.models import get_backend
    b = get_backend(cache=tmp_path/'c.sqlite')
    m = [{'role': 'user', 'content': 'Rate the fluency of "The cat sat on the mat." from 1 to 5. Answer "Analysis: ..." then "Rating: N".'}]
    out = b.generate([Request(m + [{'role': 'assistant', 'content': 'Analysis: Fluent and grammatical.\nRating:'}], continue_final=True, max_tokens=4)], progress=False)
    assert out[0].choices[0].completion_tokens >= 1 and not out[0].text.lstrip().lower().startswith('analysis')
    fmt = b.inner._formatter(b.inner.llm())
    prompt, _, _ = b.inner._render(b.inner.llm(), Request(m + [{'role': 'assistant', 'content': 'Analysis: X\nRating:'}], continue_final=True))
    assert prompt == fmt(messages=m).prompt + 'Analysis: X\nRating:'       # the evaluation prompt, then the answer's start: no new turn

def test_alt_test_raters_come_from_the_registry():
    # Steindl et al. treat Topical-Chat's 3 annotation slots as the annotators, not its 5 named people
    import pandas as pd
    from judgelab.stats import alt_test_inputs
    ds = load('topical_chat')
    j = pd.DataFrame(dict(item_id=ds.items.item_id, dimension='naturalness', judge='x', model='m', score=2.0, parse_ok=True, sample=0))
    _, slots = alt_test_inputs(ds, j, 'naturalness')
    _, people = alt_test_inputs(ds, j, 'naturalness', raters='annotators')
    assert sorted(slots) == ['slot1', 'slot2', 'slot3'] and all(len(v) == len(ds.items) for v in slots.values())
    assert sorted(people) == ['er', 'fl', 'me', 'sm', 'yf']
    assert ds.spec.alt_test_epsilon == 0.1 and load('summeval').spec.alt_test_epsilon == 0.2
    assert load('hanna').spec.alt_test_caveat and not ds.spec.alt_test_caveat
