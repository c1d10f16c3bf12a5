"""Every prompt template rendered for every registered dataset and dimension reads as English: no "summarys"/"storys"
(the templates once wrote `{{ output_label | lower }}s`). No data is loaded: the items are stand-ins, so only the
template's own words and the registry's labels are checked."""

import re
from types import SimpleNamespace
import jinja2, pandas as pd, pytest
from judgelab import data as D
from judgelab.llm import prompts as P

BROKEN = re.compile(r'\b\w*[^aeiou\W]ys\b', re.I)         # a consonant + "ys": "summarys", "storys" (not "days", "keys")

def _stand_in(spec):
    return SimpleNamespace(name=spec.name, spec=spec, dim=spec.dim,
                           items=pd.DataFrame([dict(item_id='x', source='SOURCE', output='OUTPUT', fact='FACT', reference='REFERENCE')]))

def _render(t, **v):
    "The template's texts with `v`, the variables a caller adds (examples, analyses, questions) left empty."
    env = jinja2.Environment(undefined=jinja2.ChainableUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(P._ENV.filters)
    return '\n'.join(env.from_string(x).render(**v) for x in (t.system, t.user) if x)

@pytest.mark.parametrize('name', P.list_prompts())
def test_no_rendered_prompt_has_a_broken_plural(name):
    t = P.load_prompt(name); checked = 0
    for spec in D.DATASETS.values():
        ds = _stand_in(spec)
        for d in spec.dims:
            text = _render(t, **P.item_variables(ds, 'x', d.name))
            bad = BROKEN.findall(text) + re.findall(r'(?i)summarys|storys', text)
            assert not bad, (name, spec.name, d.name, bad)
            checked += 1
    assert checked >= len(D.DATASETS)

def test_plural_filter():
    assert [P.plural(w) for w in ['summary', 'story', 'response', 'Dialogue history', 'day']] == ['summaries', 'stories', 'responses', 'Dialogue histories', 'days']
    t = P.load_prompt('analyze_rate')
    for label, want in [('Summary', 'summaries'), ('Story', 'stories'), ('Response', 'responses')]:
        assert f'You evaluate {want} for one quality criterion' in _render(t, output_label=label)
