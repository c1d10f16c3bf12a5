"""Where the main job's time goes, from the executed notebooks' own timings (nothing is rerun): per experiment and
in total, wall seconds and their split into per-run overhead, generation and statistics.

Reads every executed notebook of the main job, `papermill_runs/embedded/**/*.ipynb` (the experiment is the path below
`papermill_runs/embedded/`: `judge/hanna__SmolLM2-135M-Instruct.ipynb` is a run of `judge`). papermill records the
notebook's duration and each cell's duration in their `metadata.papermill`; the sweep records the run's wall seconds
from outside (process start, papermill import, kernel start included) in `metadata.judgelab.seconds`.

- wall: the sweep's wall seconds of the run (`metadata.judgelab.seconds`; papermill's notebook duration where the
  sweep recorded none).
- overhead: wall minus the sum of the cell durations (outside papermill's clock: starting the process, importing
  papermill; inside it: starting the kernel, papermill's work between cells), plus the import cells (the code
  cells before the `parameters` cell), the parameter cells and the markdown cells. The columns `outside`, `kernel`
  and `imports` split it (`cells` = parameter and markdown cells).
- generation: in the `judge` template, the code cell of the "Running the methods" section (it calls
  `run(p['method'], ...)` for every entry of the plan; the model is loaded and every generation happens there).
  No other template generates.
- statistics: every other code cell.

The committed notebooks of a fresh clone are those of the last `make reproduce`, so this reads the run that made the
committed outputs (cold or warm: the judge runs also print how many generations came from the cache, shown as
`generated/cached`). `make reproduce FORCE=1` then this script measures the next change against this one.

Run: `.venv/bin/python bench/bench_main_job.py [--runs papermill_runs/embedded] [--per-run]` (or `make bench`).
"""
import argparse, ast, json, re, sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = ('overhead', 'generation', 'statistics')

def src(cell): return ''.join(cell.get('source', ''))
def tags(cell): return cell.get('metadata', {}).get('tags', [])
def duration(cell): return float((cell.get('metadata', {}).get('papermill') or {}).get('duration') or 0.0)

def is_heading(cell, title=None):
    "A markdown cell that starts a section (any heading, or one titled `title`)."
    if cell['cell_type'] != 'markdown': return False
    m = re.match(r'\s*#+\s*(.+)', src(cell))
    return bool(m) and (title is None or m.group(1).strip().lower().startswith(title.lower()))

GENERATION_HEADING = 'Running the methods'
GENERATION_SOURCE = re.compile(r"for\s+p\s+in\s+PLAN\b[\s\S]*\brun\(\s*p\[['\"]method['\"]\]")

def generation_cells(cells):
    """Indices of the code cells that generate: those of the "Running the methods" section of the judge template;
    where no heading has that title, any code cell that runs the plan's methods (`for p in PLAN: ... run(p['method'], ...)`)."""
    out, inside = set(), False
    for i, c in enumerate(cells):
        if c['cell_type'] == 'markdown' and is_heading(c): inside = is_heading(c, GENERATION_HEADING)
        elif inside and c['cell_type'] == 'code': out.add(i)
    if not out: out = {i for i, c in enumerate(cells) if c['cell_type'] == 'code' and GENERATION_SOURCE.search(src(c))}
    return out

def only_imports(code):
    try: body = ast.parse(code).body
    except SyntaxError: return False
    return bool(body) and all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in body)

def import_cells(cells):
    "The code cells before the `parameters` cell (the templates' import cells); with no parameters cell, leading cells of imports only."
    code = [i for i, c in enumerate(cells) if c['cell_type'] == 'code']
    par = next((i for i in code if 'parameters' in tags(cells[i])), None)
    if par is not None: return {i for i in code if i < par}
    out = set()
    for i in code:
        if not only_imports(src(cells[i])): break
        out.add(i)
    return out

def parse_time(s): return datetime.fromisoformat(s.replace('Z', '+00:00')) if s else None

def breakdown(path:Path, root:Path)->dict:
    "One executed notebook: its experiment and seconds per part."
    nb = json.loads(path.read_text())
    pm = nb.get('metadata', {}).get('papermill')
    if not pm: raise ValueError(f'{path}: no metadata.papermill (not a notebook executed by papermill)')
    jl = nb.get('metadata', {}).get('judgelab') or {}
    cells = nb.get('cells', [])
    nb_dur = pm.get('duration')
    if nb_dur is None:                                    # an interrupted run: from its first to its last cell
        t = [parse_time((c.get('metadata', {}).get('papermill') or {}).get(k)) for c in cells for k in ('start_time', 'end_time')]
        t = [x for x in t if x]; nb_dur = (max(t) - min(t)).total_seconds() if t else 0.0
    wall = float(jl['seconds']) if jl.get('seconds') is not None else float(nb_dur)
    gen, imp = generation_cells(cells), import_cells(cells)
    d = dict(imports=0.0, cells=0.0, generation=0.0, statistics=0.0)
    for i, c in enumerate(cells):
        t = duration(c)
        if c['cell_type'] != 'code' or {'parameters', 'injected-parameters'} & set(tags(c)): d['cells'] += t
        elif i in imp: d['imports'] += t
        elif i in gen: d['generation'] += t
        else: d['statistics'] += t
    cell_sum = sum(duration(c) for c in cells)
    d.update(outside=wall - float(nb_dur), kernel=float(nb_dur) - cell_sum)
    d['overhead'] = d['outside'] + d['kernel'] + d['imports'] + d['cells']
    d['wall'] = wall
    rel = path.relative_to(root)
    d['experiment'] = rel.parts[0] if len(rel.parts) > 1 else rel.stem
    d['run'] = str(rel.with_suffix(''))
    d['status'] = jl.get('status') or ('failed' if pm.get('exception') else 'ok')
    d['template'] = pm.get('input_path') or jl.get('template')
    d['started'], d['finished'] = jl.get('started'), jl.get('finished')
    d['generated'] = d['cached'] = None
    if gen:   # the judge template prints "<label>: ...; N cache hits, M generated, S s" per method entry
        text = ''.join(''.join(o.get('text', '')) for i in gen for o in cells[i].get('outputs', []) if o.get('output_type') == 'stream')
        hits = [(int(a), int(b)) for a, b in re.findall(r'(\d+) cache hits, (\d+) generated', text)]
        if hits: d['cached'], d['generated'] = sum(h for h, _ in hits), sum(g for _, g in hits)
    if d['experiment'] == 'judge' and not gen:
        print(f'warning: {rel}: no generation cell found (no "{GENERATION_HEADING}" section and no cell running the plan)', file=sys.stderr)
    return d

def fmt_row(name, n, d, gen_note=''):
    w = d['wall'] or float('nan')
    share = lambda k: f"{d[k]:9.1f} {100*d[k]/w:5.1f}%"
    return (f"{name:34s} {n:4d} {d['wall']:9.1f}  {share('overhead')}  {share('generation')}  {share('statistics')}   "
            f"{d['outside']:7.1f} {d['kernel']:6.1f} {d['imports']:7.1f} {d['cells']:5.1f}  {gen_note}")

def main(runs='papermill_runs/embedded', per_run=False):
    root = Path(runs) if Path(runs).is_absolute() else ROOT/runs
    files = sorted(root.glob('**/*.ipynb')) if root.is_dir() else []
    files = [f for f in files if '.ipynb_checkpoints' not in f.parts]
    if not files:
        sys.exit(f"error: no executed notebooks under {root} (expected papermill_runs/embedded/**/*.ipynb, written by the main job): "
                 "run `make reproduce` first, or pass --runs DIR")
    rows, problems = [], []
    for f in files:
        try: rows.append(breakdown(f, root))
        except (ValueError, KeyError, json.JSONDecodeError) as e: problems.append(f'{f.relative_to(root)}: {e}')
    if not rows: sys.exit('error: none of the notebooks could be read:\n  ' + '\n  '.join(problems))
    keys = ('wall', 'overhead', 'generation', 'statistics', 'outside', 'kernel', 'imports', 'cells')
    by = defaultdict(list)
    for r in rows: by[r['experiment']].append(r)
    def total(rs):
        t = {k: sum(r[k] for r in rs) for k in keys}
        g = [r for r in rs if r['generated'] is not None]
        note = f"{sum(r['generated'] for r in g)}/{sum(r['cached'] for r in g)}" if g else ''
        return t, note
    print(f"Main job breakdown from {len(rows)} executed notebooks under {root.relative_to(ROOT) if root.is_relative_to(ROOT) else root} "
          f"(seconds of each run, summed; shares of wall)")
    head = (f"{'experiment':34s} {'runs':>4s} {'wall s':>9s}  {'overhead':>15s}  {'generation':>15s}  {'statistics':>15s}   "
            f"{'outside':>7s} {'kernel':>6s} {'imports':>7s} {'cells':>5s}  generated/from cache")
    print(head); print('-'*len(head))
    for e in sorted(by, key=lambda e: -sum(r['wall'] for r in by[e])):
        t, note = total(by[e]); print(fmt_row(e, len(by[e]), t, note))
        if per_run:
            for r in sorted(by[e], key=lambda r: r['run']):
                note = f"{r['generated']}/{r['cached']}" if r['generated'] is not None else ''
                print(fmt_row('  ' + r['run'].split('/', 1)[-1][:32], 1, r, note))
    t, note = total(rows); print('-'*len(head)); print(fmt_row('total', len(rows), t, note))
    n = len(rows)
    print(f"per run: overhead {t['overhead']/n:.1f} s (outside papermill {t['outside']/n:.1f} s, kernel start and between cells "
          f"{t['kernel']/n:.1f} s, import cells {t['imports']/n:.1f} s, parameter/markdown cells {t['cells']/n:.2f} s)")
    st = [r['started'] for r in rows if r['started']]; fi = [r['finished'] for r in rows if r['finished']]
    if st and fi and len(st) == len(fi) == n:
        span = max(fi) - min(st)
        print(f"first start to last finish: {span:.0f} s ({t['wall']/span:.2f} runs at a time on average; "
              f"the committed runs may come from more than one sweep call)")
    failed = [r['run'] for r in rows if r['status'] != 'ok']
    if failed: print(f"not ok: {', '.join(failed)}")
    for p in problems: print(f'skipped {p}', file=sys.stderr)
    return rows

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--runs', default='papermill_runs/embedded', help='folder of executed notebooks (relative to the repository root)')
    ap.add_argument('--per-run', action='store_true', help='also one line per run')
    a = ap.parse_args(); main(a.runs, a.per_run)
