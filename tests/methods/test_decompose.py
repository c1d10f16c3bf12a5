"""HypoEval's published hypotheses, read from their registered file group at run time, scored with their prompt."""

import json
import numpy as np, pytest
from judgelab import data as D
from judgelab.llm import ScriptedBackend
from judgelab.methods.decompose import hypoeval_hypotheses, hypoeval_aggregate, decomposition

def test_hypoeval_scores_the_five_published_hypotheses_with_their_prompt(tmp_outputs):
    ha = D.load('hanna'); it = ha.items.iloc[0]
    hyps = hypoeval_hypotheses(ha, ['coherence'])['coherence']
    raw = json.loads((D.raw_dir('hanna')/'methods/hypoeval/selected_hypotheses/story_coherence.json').read_text())
    assert hyps == raw and len(hyps) == 5
    scores = iter([4, 3, 5, 2, 4])
    b = ScriptedBackend(lambda r, s: f'Step 1: ... Step 3: {{Final score: {next(scores)}}}')
    j = decomposition(ha, ha.items.iloc[[0]], ['coherence'], b, variant='hypoeval', progress=False)
    assert len(b.requests) == 5 and [r.meta['sub'] for r in b.requests] == list(raw)
    for r, h in zip(b.requests, raw):
        sys_, user = r.messages
        assert sys_['role'] == 'system' and h in user['content'] and it.output in user['content'] and it.source in user['content']
        assert '${' not in sys_['content'] + user['content']
    assert j.score.tolist() == [4, 3, 5, 2, 4] and set(j.subcriterion) == set(raw)
    agg = hypoeval_aggregate(j, {'coherence': raw}).set_index('judge').score
    assert agg['hypoeval_mean'] == round(np.mean([4, 3, 5, 2, 4]), 1)                 # their evaluator.py: mean, rounded to 1 decimal
    w = np.array(list(raw.values()))
    assert agg['hypoeval_weighted'] == pytest.approx(float((np.array([4, 3, 5, 2, 4])*w).sum()/w.sum()))
    j2 = j.copy(); j2.loc[1, ['score', 'parse_ok']] = [np.nan, False]
    a2 = hypoeval_aggregate(j2, {'coherence': raw})
    assert not a2.parse_ok.any() and (a2.failure == '1 of 5 hypothesis scores unparsed').all()     # never a default
    with pytest.raises(ValueError, match='summeval and hanna only'): hypoeval_hypotheses(D.load('topical_chat'), ['coherence'])
