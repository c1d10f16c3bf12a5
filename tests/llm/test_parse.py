"""The parsers on adversarial inputs: the final score field wins, denominators must match the scale, conflicting
checklist answers are recorded conflicts, G-Eval sampling records how many samples parsed, and every parser is
linear-time on 100,000 characters of adversarial input.
Every test of a behaviour failed on the code before the fix (8fa2fee), except the cases marked `guard`: inputs
that code already handled and that must stay so (the timing cases say which ones timed out or raised before)."""

import gc, time
import pytest
from judgelab.llm.parse import (Parsed, OUT_OF_RANGE, NO_SCORE, parse_score, score_position, geval_score, geval_from_samples,
                            parse_checklist, checklist_score)

# --- parse_score: the final score field wins over earlier mentions ----------------------------------------------

def test_final_score_field_after_a_score_field_on_the_same_line():
    assert parse_score('Score: 3. Final score: 4') == Parsed(4.0)
    assert parse_score('Rating: 2, final rating: 5').value == 5
    assert parse_score('Score: 3 Overall score: 4/5').value == 4

def test_final_score_field_still_conflicts_within_its_rank():
    assert parse_score('Final score: 3. Final score: 4').failure == 'conflicting scores: [3.0, 4.0]'

# --- score phrases: a reply without a score field ------------------------------------------------------------------

@pytest.mark.parametrize('text,want', [          # before: every one 'no score found'
    ('so I would give it a score of 4.', 4), ('I give it a score of 4', 4), ('Overall: 4', 4), ('a rating of 4/5', 4),
    ("I'd rate it 4", 4), ('I would rate it a 4', 4), ('I rate this summary 3 out of 5', 3),
    ('The summary lacks detail, resulting in a score of 2.', 2),
    ('A score of 1 means poor and a score of 5 means excellent. I give it a score of 4.', 4)])
def test_score_phrase_is_read(text, want):
    assert parse_score(text, 1, 5) == Parsed(float(want))

@pytest.mark.parametrize('text', [               # guards: no phrase, or one that is not the judge's score
    'The summary has 3 sentences and 2 errors.', 'The reviewer wrote "I would give it a score of 4".',
    'I would rate it\n1. Coherence is fine', 'I would not give it a score of 5.', 'One review rates the price as 3.5/5.',
    'The rating of 4 stars for the server', 'a rating of 2 for relevance, 3 for coherence', 'I give it a 3 or 4',
    'It is good. I would say four.'])
def test_numbers_that_no_score_phrase_names_are_not_a_score(text):
    assert parse_score(text, 1, 5) == Parsed(None, NO_SCORE)

def test_a_score_field_wins_over_a_phrase_and_phrases_keep_the_scale():
    assert parse_score('Score: 2. On reflection, I would give it a score of 4.') == Parsed(2.0)
    assert parse_score('Overall: the summary has 2 errors. Score: 3') == Parsed(3.0)
    assert parse_score('a score of 3. Then again, a score of 4').failure == 'conflicting scores: [3.0, 4.0]'
    assert parse_score("I'd rate it 7 out of 10", 1, 5).failure == 'out of range: 7/10, denominator 10 does not match the scale 1-5'
    assert parse_score("I'd rate it 7 out of 10", 1, 10) == Parsed(7.0)
    assert parse_score('I give it a score of 6', 1, 5).failure == 'out of range: 6 not in [1, 5]'

# --- denominators -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('text', ['4/5', '4 out of 5', 'Score: 4/5', 'Rating: 4 out of 5', '**4/5**'])   # before: '4 out of 5' no score; the rest guards
def test_denominator_equal_to_the_scale_maximum_is_read(text):
    assert parse_score(text, 1, 5) == Parsed(4.0)

@pytest.mark.parametrize('text', ['3/10', 'Rating: 4 out of 10', 'Score: 8/10', 'Final score: 4/10'])
def test_denominator_not_matching_the_scale_is_an_out_of_range_failure(text):
    p = parse_score(text, 1, 5)
    assert p.value is None and p.failure.startswith(OUT_OF_RANGE)
    assert 'denominator 10 does not match the scale 1-5' in p.failure

def test_denominator_is_not_rescaled():
    assert parse_score('Score: 7/10', 1, 10) == Parsed(7.0)
    assert parse_score('Score: 4/5', 1, 10).failure == 'out of range: 4/5, denominator 5 does not match the scale 1-10'

# --- checklist answers --------------------------------------------------------------------------------------------

def test_checklist_question_answered_yes_then_no_is_a_recorded_conflict():
    p = parse_checklist('Q1: Yes\nQ2: No\nLet me reconsider. Q1: No', 3)
    assert p == dict(answers={2: 0}, missing=[3], conflicts=[1])
    assert checklist_score(p) == 0.0

def test_checklist_question_repeated_with_the_same_answer_is_not_a_conflict():
    assert parse_checklist('Q1: Yes\nQ1: yes', 1) == dict(answers={1: 1}, missing=[], conflicts=[])

# --- G-Eval sampling fallback ---------------------------------------------------------------------------------------

def test_geval_samples_one_of_three_parsed_is_a_failure():
    p = geval_from_samples(['Score: 4', 'I think it is fine', 'no idea'], 1, 5)
    assert p.value is None and p.failure == 'no score found: 1 of 3 samples parsed (< min_share 0.5)'
    assert p.detail == '1 of 3 samples parsed'

def test_geval_samples_record_how_many_parsed():
    p = geval_from_samples(['Score: 2', 'Score: 4', 'no idea'], 1, 5)
    assert p == Parsed(3.0, None, '2 of 3 samples parsed')

def test_geval_samples_min_share_is_configurable():
    assert geval_from_samples(['Score: 4', 'x', 'y'], 1, 5, min_share=0.3) == Parsed(4.0, None, '1 of 3 samples parsed')
    assert not geval_from_samples(['Score: 4', 'Score: 4', 'y'], 1, 5, min_share=0.9).ok
    with pytest.raises(ValueError, match='min_share'): geval_from_samples(['Score: 4'], min_share=1.5)

# --- linear time on 100,000 characters ----------------------------------------------------------------------------

N = 100_000

# before (20 s limit per test): timed out = number_spaces_letter, score_spaces_letter, spaces_asterisk_spaces_letter,
# score_then_many_number_tokens, score_digit_pairs; ValueError = q_then_digits; every other timing case is a guard

def best_of_3(f):
    "The fastest of 3 timings of `f` in this thread's CPU time (a busy machine's waits left out), with the garbage collector off as `timeit` does (a collection that happens to fall\n    in one timing made a linear parser look superlinear: 'Score:' x 16,666 gave 34-49 with it, 10-11 without)."
    ts = []
    on = gc.isenabled(); gc.disable()
    try:
        for _ in range(3):
            t0 = time.thread_time(); f(); ts.append(time.thread_time() - t0)   # CPU time: waiting for a busy CPU is not counted
    finally:
        if on: gc.enable()
    return min(ts)

def growth(make, name, f, rounds:int=5):
    """How much longer `f` takes on the 100,000-character case than on the same case at 10,000 characters, timed side by
    side: `rounds` rounds, each timing the small case then the big one (each a loop long enough to time), the fastest
    of each kept. Interleaving means a burst of load that slows one timing cannot make the other look fast. Linear time
    gives about 10, quadratic about 100; no absolute time is asserted."""
    small, big = make(N // 10)[name], make(N)[name]
    reps = 1
    while best_of_3(lambda: [f(small) for _ in range(reps)]) < 2e-3 and reps < 10_000: reps *= 4
    pairs = [(best_of_3(lambda: [f(small) for _ in range(reps)]), best_of_3(lambda: [f(big) for _ in range(reps)])) for _ in range(rounds)]
    return min(b for _, b in pairs) / min(s for s, _ in pairs)

LINEAR = 30                                                     # 10x the input: linear ~10x the time, quadratic ~100x

def score_texts(N): return {
    'spaces': ' ' * N,
    'score_colon_then_spaces': 'Score:' + ' ' * N,
    'digits': '1' * N,
    'score_then_many_ones': 'Score: ' + '1 ' * (N // 2),
    'asterisks': '*' * N,
    'number_spaces_letter': '4' + ' ' * N + 'x',              # the bare-number pattern: cubic before
    'number_slash_spaces_letter': '4/' + ' ' * N + 'x',
    'score_spaces_letter': 'Score' + ' ' * N + 'x',
    'spaces_asterisk_spaces_letter': ' ' * (N // 2) + '*' + ' ' * (N // 2) + 'x',
    'final_then_spaces': 'Final' + ' ' * N + 'x',
    'score_colon_repeated': 'Score:' * (N // 6),
    'score_fields_repeated': 'Score: 4. ' * (N // 10),
    'score_fractions_repeated': 'Score: 4/5 ' * (N // 11),
    'scale_hint_digits': 'Score (' + '1' * N,
    'out_of_spaces': 'Score: 4 out' + ' ' * N + 'x',
    'one_dot_repeated': '1.' * (N // 2),
    'q1_colon_repeated': 'Q1:' * 30_000,
    # score phrases (no score field): guards, all linear since they were added
    'give_it_a_score_of_repeated': 'give it a score of ' * (N // 19),
    'phrases_repeated': 'so I would give it a score of 4. ' * (N // 33),
    'hedged_phrases_repeated': 'I would not rate it 4 ' * (N // 22),
    'quoted_phrases_repeated': '"a rating of 4/5" ' * (N // 18),
    'rate_it_spaces_letter': 'rate it' + ' ' * N + 'x',
    'rate_this_summary_as_spaces': 'I rate this summary as' + ' ' * N + 'x',
    'a_score_of_spaces_letter': 'a score of' + ' ' * N + 'x',
    'score_of_then_for_spaces': 'a score of 4 for' + ' ' * N + 'x',
    'articles_then_score_of': 'a ' * (N // 2) + 'score of 4',
    'words_then_rate_it': 'rate ' * (N // 5) + 'it 4',
    'overall_spaces_colon': 'Overall' + ' ' * N + ': x',
    'overall_colon_repeated': 'Overall: ' * (N // 9),
}

SCORE_TEXTS = score_texts(N)

@pytest.mark.parametrize('name', list(SCORE_TEXTS))
def test_parse_score_linear_time(name):
    assert len(SCORE_TEXTS[name]) >= 90_000
    assert growth(score_texts, name, parse_score) < LINEAR

def check_texts(N): return {
    'q1_colon_repeated': 'Q1:' * 30_000,
    'q_then_digits': 'Q' + '1' * N + ': Yes',                # a 100,000-digit question number: int() refused it before
    'q1_colon_spaces_letter': 'Q1:' + ' ' * N + 'x',
    'q1_spaces_colon_spaces': 'Q1' + ' ' * (N // 2) + ':' + ' ' * (N // 2) + 'x',
    'spaces': ' ' * N,
    'answers_repeated': 'Q1: Yes\n' * (N // 8),
    'question_then_blank_lines': 'Q1: Is it fluent?\n' + ' \n' * (N // 2) + 'x',
    'question_then_spaces_tabs': 'Q1: Is it?\n' + ' \t' * (N // 2) + 'A',
    'questions_repeated': 'Q1: Is it fluent?\n' * (N // 18),
}

CHECK_TEXTS = check_texts(N)

@pytest.mark.parametrize('name', list(CHECK_TEXTS))
def test_parse_checklist_linear_time(name):
    assert len(CHECK_TEXTS[name]) >= 90_000
    assert growth(check_texts, name, lambda t: parse_checklist(t, 10)) < LINEAR

def tokens(*toks): return [dict(token=t, logprob=-0.1, top=[[t, -0.1]]) for t in toks]

def position_tokens(N): return {
    'score_then_many_number_tokens': tokens('Score:', *[' 1'] * (N // 2)),
    'score_digit_pairs': tokens(*['Score:', ' 1'] * (N // 8)),
    'score_then_spaces_then_digit': tokens('Score:', *[' '] * N, '1'),
    'one_token_of_spaces': tokens('Score:', ' ' * N + '4'),
    'asterisks': tokens('Score:', *['*'] * N, ' 3'),
}

POSITION_TOKENS = position_tokens(N)

@pytest.mark.parametrize('name', list(POSITION_TOKENS))
def test_score_position_and_geval_score_linear_time(name):
    assert sum(len(t['token']) for t in POSITION_TOKENS[name]) >= 90_000
    assert growth(position_tokens, name, score_position) < LINEAR
    assert growth(position_tokens, name, geval_score) < LINEAR

def test_score_position_results_on_the_adversarial_tokens():     # guard: right before too, but in minutes
    assert score_position(POSITION_TOKENS['score_then_many_number_tokens']) == 1
    assert score_position(POSITION_TOKENS['score_digit_pairs']) == 2 * (N // 8) - 1
    assert score_position(POSITION_TOKENS['score_then_spaces_then_digit']) == N + 1
    assert geval_score(POSITION_TOKENS['one_token_of_spaces']) == Parsed(4.0)

def test_geval_score_ignores_a_huge_number_token():
    lp = [dict(token='Score:', logprob=0.0, top=[]), dict(token=' 3', logprob=-0.1, top=[[' ' + '1' * N, -0.5], [' 3', -0.1]])]
    assert geval_score(lp).value == pytest.approx(3.0)
