"""The alt-test's raters and epsilon come from the dataset registry."""

from judgelab.data import load

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
