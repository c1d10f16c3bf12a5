"""G-Eval: the full distribution, the official prompt and the sampling fallback."""

import time
import pytest
from judgelab import data as D
from judgelab.llm import ScriptedBackend
from judgelab.methods import run
import math, re
import numpy as np
from judgelab.llm import Choice, Request
from judgelab.methods.judges import geval_offset, geval_position, geval_labels, summarize
from judgelab.llm.parse import geval_distribution

# ==============================================================================================================
# G-Eval sampling records how many samples parsed (a scripted backend, no LLM); failed on the code before the fix.
# ==============================================================================================================

def test_geval_fallback_row_records_the_parsed_sample_count():
    tc = D.load('topical_chat'); items = tc.items.item_id.iloc[:2].tolist()
    texts = ['Score: 2', 'Rating: 3', 'I cannot say']
    b = ScriptedBackend(lambda r, s: texts[s] if r.meta['item_id'] == items[0] else (texts[0] if s == 0 else 'unclear'))
    j = run('geval', tc, b, dims=['naturalness'], items=items, n_samples=3, progress=False).set_index('item_id')
    assert j.loc[items[0], 'score'] == 2.5 and j.loc[items[0], 'scoring'] == 'no logprobs: mean of 3 samples (2 of 3 samples parsed)'
    assert not j.loc[items[1], 'parse_ok'] and j.loc[items[1], 'scoring'] == 'no logprobs: mean of 3 samples (1 of 3 samples parsed)'
    assert j.loc[items[1], 'failure'] == 'no score found: 1 of 3 samples parsed (< min_share 0.5)'
    j2 = run('geval', tc, b, dims=['naturalness'], items=items, n_samples=3, min_share=0.3, progress=False).set_index('item_id')
    assert j2.loc[items[1], 'score'] == 2.0

# ==============================================================================================================
# G-Eval's released SummEval prompts, read from their registered file group at run time.
# ==============================================================================================================

def test_geval_on_summeval_sends_the_official_prompt_with_its_placeholders_filled():
    se = D.load('summeval'); it = se.items.iloc[3]
    b = ScriptedBackend(lambda r, s: 'Coherence: 4')
    run('geval', se, b, dims=['coherence'], items=[it.item_id], progress=False)
    official = (D.raw_dir('summeval')/'methods/geval/prompts/summeval/coh_detailed.txt').read_text()
    want = official.replace('{{Document}}', it.source).replace('{{Summary}}', it.output)
    assert b.requests[0].messages == [dict(role='user', content=want)] and b.requests[0].meta['prompt'] == 'geval (official)'
    b2 = ScriptedBackend(lambda r, s: 'Coherence: 4')
    run('geval', se, b2, dims=['coherence'], items=[it.item_id], progress=False, prompts='judgelab')
    assert b2.requests[0].messages != b.requests[0].messages and '{{' not in str(b2.requests[0].messages)
    with pytest.raises(ValueError, match=r"G-Eval released no prompts for hanna \(only \['summeval'\]\)"):
        run('geval', D.load('hanna'), b, dims=['coherence'], n_items=1, progress=False, prompts='official')
    with pytest.raises(ValueError, match='auto_steps needs'):
        run('geval', se, b, dims=['coherence'], items=[it.item_id], progress=False, auto_steps=True)

# ==============================================================================================================
# G-Eval from the full distribution: every valid rating's probability at the score position (llama.cpp's
# full softmax, top-20 elsewhere), the mass on valid ratings recorded, the score position after a field label and never
# a list number, 20 samples only without logprobs. Scripted backends (`ScriptedBackend`) pin each rule; the embedded model shows the rest.
# ==============================================================================================================

def entry(tok, lp=-0.1, top=None, scores=None):
    e = dict(token=tok, logprob=lp, top=top if top is not None else [[tok, lp]])
    if scores is not None: e['scores'] = scores
    return e

def dist(probs:dict, space=False):
    "`scores` as llama.cpp returns them: the logprob of every score token '1'..'5'."
    return [[(' ' if space else '') + str(s), math.log(p)] for s, p in probs.items()]

LIST_REPLY = [entry('1', -0.05, scores=dist({1: .9, 2: .01, 3: .01, 4: .01, 5: .01})), entry('.'), entry(' Co'), entry('herence'), entry(':'),
              entry(' '), entry('4', math.log(.5), scores=dist({1: .05, 2: .05, 3: .1, 4: .5, 5: .1}))]

def one_item(dim='coherence'):
    se = D.load('summeval'); return se, [se.items.item_id.iloc[0]], dim

def test_a_list_numbered_reply_is_scored_after_its_label_never_as_the_list_number():
    # before: the first token '1' was the score position, and the row scored ~1 from the list number
    se, items, dim = one_item()
    b = ScriptedBackend(lambda r, s: Choice('1. Coherence: 4', 'stop', 7, 100, logprobs=LIST_REPLY))
    j = run('geval', se, b, dims=[dim], items=items, progress=False)
    row = j.iloc[0]
    assert row.parse_ok and row.score == pytest.approx((1*.05 + 2*.05 + 3*.1 + 4*.5 + 5*.1)/.8)
    assert row.valid_mass == pytest.approx(.8) and row.scoring == 'logprobs (full distribution)'

@pytest.mark.parametrize('reply,want', [('Coherence: 4', 11), ('Score: 4', 7), ('**Rating**: 4', 12), ('- Coherence (1-5): 4', 19),
                                        ('1. Coherence: 4', 14), (' 4', 1), ('4\n- Fluency: 2', 0), ('Coherence score: **4**', 19)])
def test_the_score_position_follows_an_optional_label(reply, want):
    labels = geval_labels(D.load('summeval').dim('coherence'))
    assert geval_offset(reply, labels) == want and reply[want] in '0123456789'

@pytest.mark.parametrize('reply', ['1. The summary is coherent', '1.\nRead the article', '2) Coherence', 'The score is 4', 'Fluency: 4', ''])
def test_list_numbering_and_unlabelled_numbers_are_not_scores(reply):
    assert geval_offset(reply, geval_labels(D.load('summeval').dim('coherence'))) is None

def test_a_reply_starting_with_the_dimension_name_is_not_rejected():
    # before: 'Coherence: 4' had no 'score:' field and did not start with a number, so it was 'no score found'
    labels = geval_labels(D.load('summeval').dim('coherence'))
    toks = [entry('Co'), entry('herence'), entry(':'), entry(' '), entry('4', top=[['4', -0.1], ['3', -2.5]])]
    assert geval_position(toks, labels) == 4
    tc = D.load('topical_chat')                                      # Topical-Chat's coherence is written 'Maintains Context'
    assert geval_offset('Maintains Context: 3', geval_labels(tc.dim('coherence'))) == 19

def test_full_distribution_scoring_records_the_valid_mass_and_ignores_the_top_list():
    # the top alternatives hold only '4': with the full distribution every rating counts, off-scale ones do not
    ch = [entry('Score:'), entry(' '), entry('3', math.log(.4), top=[['3', math.log(.4)], ['the', math.log(.3)]],
                                                scores=[['1', math.log(.1)], ['2', math.log(.1)], ['3', math.log(.4)], ['4', math.log(.05)], ['5', math.log(.05)]])]
    p, mass, src = geval_distribution(ch, 1, 3)
    assert p.value == pytest.approx((1*.1 + 2*.1 + 3*.4)/.6) and mass == pytest.approx(.6) and src == 'full distribution'
    p5, mass5, _ = geval_distribution(ch, 1, 5)
    assert p5.value == pytest.approx((.1 + .2 + 1.2 + .2 + .25)/.7) and mass5 == pytest.approx(.7)
    ptop, masstop, srctop = geval_distribution([{k: v for k, v in e.items() if k != 'scores'} for e in ch], 1, 5)
    assert ptop.value == pytest.approx(3) and masstop == pytest.approx(.4) and srctop == 'top 2'    # top-k: a lower bound on the mass

def test_geval_requests_ask_for_every_score_token_room_for_a_label_and_top_20():
    se, items, dim = one_item()
    b = ScriptedBackend(lambda r, s: Choice('Coherence: 4', 'stop', 5, 100, logprobs=[entry('Coherence:'), entry(' '), entry('4', top=[['4', -0.2], ['5', -1.8]])]))
    j = run('geval', se, b, dims=[dim], items=items, progress=False)
    r = b.requests[0]
    assert r.score_tokens == ('1', '2', '3', '4', '5') and r.top_logprobs == 20 and r.logprobs and r.max_tokens == 16
    assert re.search(r.stop_pattern, '1. Coherence: 4') and not re.search(r.stop_pattern, '1. Co')
    row = j.iloc[0]
    assert row.scoring == 'logprobs (top 2)' and row.score == pytest.approx((4*math.exp(-.2) + 5*math.exp(-1.8))/(math.exp(-.2) + math.exp(-1.8)))
    t = summarize(j)
    assert {'failure_rate', 'valid_mass'} <= set(t.columns) and t.valid_mass.iloc[0] == pytest.approx(math.exp(-.2) + math.exp(-1.8))

def test_without_logprobs_twenty_samples_and_the_scoring_says_so():
    se, items, dim = one_item()
    b = ScriptedBackend(lambda r, s: Choice(['1. Coherence: 4', 'Coherence: 2', '1. The summary'][s % 3], 'stop', 5, 100))
    j = run('geval', se, b, dims=[dim], items=items, progress=False)
    assert len(b.requests) == 21 and b.requests[1].n == 20 and not b.requests[1].logprobs
    row = j.iloc[0]
    assert row.scoring == 'no logprobs: mean of 20 samples (14 of 20 samples parsed)'
    assert row.score == pytest.approx((7*4 + 7*2)/14) and np.isnan(row.valid_mass)      # the list numbers '1' are never read

def test_other_methods_tables_have_no_valid_mass_column():
    se, items, dim = one_item()
    j = run('analyze_rate', se, ScriptedBackend(lambda r, s: Choice('Analysis: fine.\nRating: 4', 'stop', 5, 100)), dims=[dim], items=items, progress=False)
    assert 'valid_mass' not in j and 'valid_mass' not in summarize(j)

# --- the embedded model -----------------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def embedded():
    from judgelab.llm.backends import LlamaCppBackend
    return LlamaCppBackend(n_ctx=2048)

def test_llamacpp_returns_every_score_tokens_logprob_and_stops_at_the_pattern(embedded, tmp_outputs):
    msgs = [{'role': 'user', 'content': 'Rate the fluency of "The cat sat on the mat." from 1 to 5. Answer "Score: N".'}]
    r = Request(msgs, max_tokens=24, logprobs=True, top_logprobs=5, score_tokens=('1', '2', '3', '4', '5'))
    out = embedded.generate([r], progress=False)[0].choices[0]
    assert out.logprobs and all(len(e['scores']) == 5 and {s.strip() for s, _ in e['scores']} == set('12345') for e in out.logprobs)
    for e in out.logprobs:
        lps = np.array([lp for _, lp in e['scores']]); assert (lps <= 0).all() and np.exp(lps).sum() <= 1 + 1e-9
        for tok, lp in e['top']:                                     # the same softmax as the top alternatives
            for s, slp in e['scores']:
                if s == tok: assert slp == pytest.approx(lp)
    plain = embedded.generate([Request(msgs, max_tokens=24, logprobs=True, top_logprobs=5)], progress=False)[0].choices[0]
    assert plain.text == out.text and all('scores' not in e for e in plain.logprobs)   # the request field changes nothing else
    stopped = embedded.generate([Request(msgs, max_tokens=24, stop_pattern=r'\S\S')], progress=False)[0].choices[0]
    assert stopped.finish_reason == 'stop' and len(stopped.text.strip()) >= 2 and stopped.completion_tokens < 24

def test_geval_on_the_embedded_model_reads_no_list_number_and_records_the_valid_mass(embedded, tmp_outputs, tmp_path):
    from judgelab.llm.cache import GenerationCache, CachedBackend
    se = D.load('summeval')
    short = se.items.assign(n=se.items.source.str.len() + se.items.output.str.len()).nsmallest(3, 'n').item_id.tolist()
    b = CachedBackend(embedded, GenerationCache(tmp_path/'c.sqlite'), verbose=False)
    t0 = time.perf_counter()
    j = run('geval', se, b, dims=['coherence', 'relevance'], items=short, progress=False)
    took = time.perf_counter() - t0
    t = summarize(j)
    print(f"\nembedded G-Eval, 3 summeval items x 2 dims in {took:.0f} s:\n"
          + t[['dimension', 'items', 'parse_failures', 'failure_rate', 'valid_mass', 'completion_tokens_per_item']].to_string())
    assert len(j) == 6 and set(j.scoring) == {'logprobs (full distribution)'}
    assert (j.parse_ok == j.score.notna()).all() and j.loc[~j.parse_ok, 'failure'].notna().all()
    assert j.loc[j.parse_ok, 'score'].between(1, 5).all() and j.loc[j.parse_ok, 'valid_mass'].notna().all()
    assert j.valid_mass.dropna().between(0, 1).all()
    labels = geval_labels(se.dim('coherence')) + geval_labels(se.dim('relevance'))
    for row in j[j.parse_ok].itertuples():                       # a parsed row's score is never a leading list number
        off = geval_offset(row.rationale, labels)
        assert off is not None and not re.match(r'\s*\d+[.)]\s*\S', row.rationale[:off + 1] + 'x')
    assert t.failure_rate.between(0, 1).all() and (t.parse_failures == (~j.parse_ok).groupby(j.dimension, sort=False).sum().values).all()
    assert j.parse_ok.sum() >= 1 and (j.completion_tokens <= 16).all()
