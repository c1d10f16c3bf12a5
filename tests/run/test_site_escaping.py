"""Hostile input in the website: judge and model names, replies and rationales that carry HTML, scripts and
`javascript:` links reach the site's pages as text, never as markup."""

import os, re, json, shutil
from html.parser import HTMLParser
from pathlib import Path
import nbformat
import pandas as pd
import pytest
from judgelab import site as S
from tests.conftest import ROOT, run_cli

SWEEP = 'hostile'

# each payload, if it ever runs, leaves a mark the browser test reads: window.__pwned or the page title
IMG = '<img src=x onerror="window.__pwned=1;document.title=\'pwned\'">'

SCRIPT = '<script>window.__pwned=2;document.title="pwned"</script>'

SVG = '<svg onload="window.__pwned=3"><circle r=4 /></svg>'

JSLINK = '[click me](javascript:window.__pwned=4)'

AJS = '<a href="javascript:window.__pwned=5">link</a>'

BREAK = '"><script>window.__pwned=6</script><b x="'

QUOTE = "' onmouseover='window.__pwned=7' x='"

DETAILS = '<details open ontoggle="window.__pwned=8">x</details>'

PAYLOADS = [IMG, SCRIPT, SVG, JSLINK, AJS, BREAK, QUOTE, DETAILS]

MODEL = f'org/{IMG}{BREAK}'                       # a model name as `judgelab judgments import --model` takes it

RATIONALE = ' '.join(PAYLOADS)                    # a judge's reply

class _Tags(HTMLParser):
    "Every start tag of a page with its attributes, as a browser's tokenizer sees them."
    def __init__(self):
        super().__init__(); self.tags = []
    def handle_starttag(self, tag, attrs): self.tags.append((tag, dict(attrs)))

def _unsafe(page:str)->list:
    "What in an HTML page could run: script-like elements, on* attributes, javascript:/vbscript: URLs."
    p = _Tags(); p.feed(page)
    bad = []
    for tag, attrs in p.tags:
        if tag == 'script' and re.fullmatch(r'(\.\./)*assets/replies\.js', attrs.get('src') or ''): continue    # the reply viewer's own file, never data
        if tag in ('script', 'svg', 'iframe', 'object', 'embed', 'math', 'style'): bad.append(f'<{tag}>')
        for k, v in attrs.items():
            if k.startswith('on'): bad.append(f'<{tag} {k}="{v}">')
            if k in ('href', 'src', 'action', 'formaction', 'xlink:href') and v and \
               ''.join(v.split()).lower().startswith(('javascript:', 'vbscript:', 'data:text')):
                bad.append(f'<{tag} {k}="{v}">')
    return bad

# ---- fast: the HTML strings ----

def test_table_cells_and_prose_from_data_are_escaped():
    md = ('<!-- a caption -->\n| judge | model | rationale |\n|:--|:--|:--|\n'
          + ''.join(f'| evil | {MODEL} | {p.replace("|", "/")} |\n' for p in PAYLOADS))
    h = S.table_html(md)
    assert not _unsafe(h), _unsafe(h)
    assert h.count('<tr>') == len(PAYLOADS) + 1 and '&lt;img src=x onerror=' in h      # the rows are there, as text
    prose = f'**{MODEL}** leans on fluency.\n\n- {RATIONALE}\n\n```mermaid\n{SCRIPT}\n```'
    h = S.markdown_html(prose)
    assert not _unsafe(h), _unsafe(h)
    assert '<strong>' in h and '<li>' in h and '&lt;script&gt;' in h

def _hostile_notebook(path:Path):
    "An executed notebook whose outputs name a hostile judge the ways the templates do: markdown, HTML tables, JavaScript."
    df = pd.DataFrame(dict(judge=['evil'], model=[MODEL], rationale=[RATIONALE]))
    outs = [nbformat.v4.new_output('display_data', {'text/markdown': f'**{MODEL} (evil)**\n\n- {RATIONALE}', 'text/plain': 'verdicts'}),
            nbformat.v4.new_output('execute_result', {'text/html': df.to_html(escape=False), 'text/plain': df.to_string()}, execution_count=1),
            nbformat.v4.new_output('display_data', {'text/html': RATIONALE}, metadata={'text/html': {'isolated': True}}),
            nbformat.v4.new_output('display_data', {'application/javascript': 'window.__pwned=9', 'text/plain': 'js'}),
            nbformat.v4.new_output('display_data', {'image/svg+xml': SVG, 'text/plain': 'svg'}),
            nbformat.v4.new_output('stream', name='stdout', text=RATIONALE)]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell('# Hostile run\n\nThe **template** keeps <em>its own</em> HTML.'),
                                         nbformat.v4.new_code_cell('show(judge)', outputs=outs, execution_count=1)])
    nb.metadata['widgets'] = {'application/vnd.jupyter.widget-state+json': {'state': {}, 'x': '</script><script>window.__pwned=10</script>'}}
    path.parent.mkdir(parents=True, exist_ok=True); nbformat.write(nb, path)
    return path

def test_notebook_outputs_from_data_are_made_safe(tmp_path):
    h = S.notebook_html(_hostile_notebook(tmp_path/'run.ipynb'), 'run')
    assert not _unsafe(h), _unsafe(h)
    # what the outputs said is still on the page, as text and as a table; the template's own HTML is kept
    assert '&lt;img src=x onerror=' in h and '<table' in h and '<strong>org/' in h and '<em>its own</em>' in h

# ---- a site built from a hostile import and run ----

RUN_NB = r'''
import os, pandas as pd, matplotlib; matplotlib.use('Agg')
import matplotlib.pyplot as plt
from IPython.display import display, Markdown, HTML
from judgelab.report import Report, judge_label
J = pd.read_parquet(os.environ['HOSTILE_JUDGMENTS'])
rep = Report('nbs/experiments/corrgap_audit.ipynb', dict(dataset='summeval', judgments_path=os.environ['HOSTILE_JUDGMENTS']))
model = J.model.iloc[0]
per = J.groupby(['judge', 'model', 'dimension'], as_index=False).score.mean().assign(rationale=J.rationale.iloc[0])
rep.table(per, 'audit_hostile_scores', caption=f'scores of {judge_label("evil", model)}')
rep.text(f'**{judge_label("evil", model)}**\n\n- coherence: {J.rationale.iloc[0]}', 'audit_hostile_verdicts_text',
         caption=f'the verdicts of {model}')
fig, ax = plt.subplots(figsize=(3, 2)); ax.plot([0, 1], [0, 1]); ax.set_title('scores')
rep.figure(fig, 'audit_hostile_excess', caption=f'{model}: {J.rationale.iloc[0]}')
display(Markdown(f'**{model}** ({J.judge.iloc[0]})\n\n- {J.rationale.iloc[0]}'))
display(HTML(per.to_html(escape=False)))
per
'''

@pytest.fixture(scope='module')
def hostile_site(tmp_path_factory):
    "`judgelab judgments import` of a judge with a hostile model name and rationales, a run that reports on it, and the site."
    tmp = tmp_path_factory.mktemp('hostile')
    outputs, runs = tmp/'outputs', tmp/'runs'
    env = dict(JUDGELAB_OUTPUTS=str(outputs), JUDGELAB_RUNS=str(runs), JUDGELAB_RUN_ID=f'{SWEEP}/audit')
    from judgelab.data import load
    items = load('summeval').human_mean().index[:40]
    csv = tmp/'scores.csv'
    pd.DataFrame([dict(item_id=i, dimension=d, score=3, rationale=RATIONALE) for i in items for d in ('coherence', 'fluency')]).to_csv(csv, index=False)
    r = run_cli('judgments', 'import', str(csv), '--dataset', 'summeval', '--judge', 'evil', '--model', MODEL, env=env)
    assert r.returncode == 0, r.stderr
    stored = next(outputs.rglob('*.parquet'))
    assert pd.read_parquet(stored).model.iloc[0] == MODEL
    # the run, executed by a real kernel as papermill would: its outputs name the judge
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(RUN_NB)])
    from nbclient import NotebookClient
    from judgelab.run.sweep import _kernel
    old = {k: os.environ.get(k) for k in [*env, 'HOSTILE_JUDGMENTS']}
    os.environ.update(env, HOSTILE_JUDGMENTS=str(stored))
    try: NotebookClient(nb, kernel_name=_kernel('judgelab'), timeout=300, resources={'metadata': {'path': str(ROOT)}}).execute()
    finally:
        for k, v in old.items():
            if v is None: os.environ.pop(k, None)
            else: os.environ[k] = v
    (runs/SWEEP).mkdir(parents=True, exist_ok=True); nbformat.write(nb, runs/SWEEP/'audit.ipynb')
    _hostile_notebook(runs/SWEEP/'notebook.ipynb')
    for m in outputs.rglob('manifest.jsonl'):       # a manifest row's every field is data: its commit too (once raw HTML in every page's footer)
        rows = [json.loads(l) for l in m.read_text().splitlines() if l.strip()]
        m.write_text(''.join(json.dumps({**r, 'commit': IMG}) + '\n' for r in rows))
    site = tmp/'_site'
    S.build_site(site, outputs=outputs, runs=runs, sweep=SWEEP, lib=False, jobs=1)
    return site

PAGES = ['runs.html', f'runs/{SWEEP}/audit.html', f'runs/{SWEEP}/notebook.html']     # the pages that show the run's tables and notebooks

def test_the_site_of_a_hostile_run_has_no_markup_from_data(hostile_site):
    for page in PAGES:
        h = (hostile_site/page).read_text()
        assert '&lt;img src=x onerror=' in h, page          # the payloads reached the page, as text
    every = sorted(p.relative_to(hostile_site).as_posix() for p in hostile_site.rglob('*.html'))
    assert {'index.html', 'figures.html', 'runs.html'} <= set(every)
    for page in every: assert not _unsafe((hostile_site/page).read_text()), (page, _unsafe((hostile_site/page).read_text())[:10])   # the reply viewer's pages too
    index, figures, runs = ((hostile_site/p).read_text() for p in ('index.html', 'figures.html', 'runs.html'))
    assert 'audit_hostile_scores' in runs and '<figure class="card"' in figures and 'the verdicts of' in index

# ---- in a real browser ----

@pytest.fixture(scope='module')
def browser(tmp_path_factory):
    "Headless Chromium through chromedriver (as tests/run/test_site.py): `make browser` installs them."
    chromium, driver = shutil.which('chromium'), shutil.which('chromedriver')
    if not (chromium and driver):
        pytest.fail('chromium and chromedriver are needed (make browser, or apt-get install -y chromium chromium-driver)')
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    o = webdriver.ChromeOptions(); o.binary_location = chromium
    for a in ['--headless=new', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
              '--disable-component-update', '--disable-sync', '--window-size=1400,1000', f'--user-data-dir={tmp_path_factory.mktemp("chromium")}']:
        o.add_argument(a)
    d = webdriver.Chrome(options=o, service=Service(driver))
    yield d
    d.quit()

_DOM = """
const all = [...document.querySelectorAll('*')];
const url = v => (v || '').replace(/\\s/g, '').toLowerCase();
return {pwned: window.__pwned === undefined ? null : String(window.__pwned), title: document.title,
        on: all.flatMap(e => [...e.attributes].filter(a => a.name.startsWith('on')).map(a => e.tagName + ' ' + a.name)),
        js: all.filter(e => ['href', 'src', 'action', 'formaction'].some(k => /^(javascript|vbscript):/.test(url(e.getAttribute(k))))).map(e => e.outerHTML.slice(0, 120)),
        scripts: document.querySelectorAll('script, iframe, object, embed, svg').length,
        text: document.body.innerText};
"""

@pytest.mark.parametrize('page', PAGES)
def test_no_payload_runs_in_the_browser(hostile_site, browser, page):
    from selenium.webdriver.support.ui import WebDriverWait
    browser.get((hostile_site/page).as_uri())
    WebDriverWait(browser, 60, poll_frequency=0.1).until(lambda d: d.execute_script("return document.readyState === 'complete'"))
    # hover and toggle everything once: handlers that need an event would fire now
    browser.execute_script("document.querySelectorAll('*').forEach(e => { e.dispatchEvent(new MouseEvent('mouseover', {bubbles: true})); "
                           "if (e.tagName === 'DETAILS') e.open = !e.open; });")
    browser.execute_script("return new Promise(r => setTimeout(r, 200))")
    r = browser.execute_script(_DOM)
    assert r['pwned'] is None and r['title'] != 'pwned', (page, r['pwned'], r['title'])
    assert not r['on'] and not r['js'] and r['scripts'] == 0, (page, r['on'][:5], r['js'][:5], r['scripts'])
    assert 'onerror=' in r['text'], page          # the payloads are on the page, as text a reader sees

# ---- the markdown that report writes: a name stays in its cell, a caption in its comment ----

def test_a_hostile_name_stays_in_its_table_cell_and_caption(tmp_outputs):
    import re
    from judgelab.report import save_table, save_text, _caption
    model = 'org/a|b\n| c | d |'
    caption = f'scores of {model} --> {IMG}\nsecond line'
    csv, md, _ = save_table(pd.DataFrame(dict(judge=['geval', 'geval'], model=[model, 'gpt-4o'], score=[1.0, 2.0])), 'hostile', caption=caption)
    lines = md.read_text().splitlines()
    assert len(lines) == 5, lines                                       # caption, header, rule, two rows
    cells = lambda l: len(re.split(r'(?<!\\)\|', l))
    assert len({cells(l) for l in lines[1:]}) == 1, lines              # every row has the header's columns
    assert lines[0].startswith('<!--') and lines[0].count('-->') == 1 and lines[0].endswith('-->'), lines[0]
    assert _caption(md) == ' '.join(caption.splitlines())               # read back as written, on one line
    h = S.table_html(md.read_text())
    assert h.count('<td') == 2 * cells(lines[1]) - 4 and not _unsafe(h), h   # two rows of the header's cells (the outer pipes split off empty ends)
    (t,) = save_text('**x**', 'hostile_text', caption=caption)
    assert t.read_text().splitlines()[1] == '**x**' and _caption(t) == ' '.join(caption.splitlines())
