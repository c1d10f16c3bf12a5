"""Start-up time of the `judgelab` command, measured side by side with a bare `python -c pass` in one run.

`judgelab.cli` parses the arguments before it loads `judgelab.run.commands` (and pandas, scipy, matplotlib under it), so
`--help`, `--version` and an argument error should cost little more than starting Python. Each round runs every
command once, in a shuffled order, as a new process (the installed `judgelab` console script, as a user types it);
the table gives each command's median, minimum and maximum over the rounds and its median as a multiple of
`python -c pass` measured in the same rounds. A command that loads the library (`data info` of an unknown dataset:
the dataset registry is needed to say it is unknown) is timed too, to show what the deferral saves. No absolute
time is asserted anywhere: the ratios are the result.

    python bench/bench_cli.py [--rounds 15]
"""
import argparse, random, statistics, subprocess, sys, time
from pathlib import Path

BIN = Path(sys.executable).parent

def commands():
    j = str(BIN/'judgelab')
    return {'python -c pass': [sys.executable, '-c', 'pass'],
            'judgelab --version': [j, '--version'],
            'judgelab --help': [j, '--help'],
            'judgelab sweep --jobs two (argument error)': [j, 'sweep', 'configs/embedded.yaml', '--jobs', 'two'],
            'judgelab data info summevall (bad input, library loaded)': [j, 'data', 'info', 'summevall']}

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--rounds', type=int, default=15, help='runs of each command (default 15)')
    a = ap.parse_args(argv)
    cmds, times = commands(), {}
    root = Path(__file__).resolve().parents[1]
    for name, cmd in cmds.items():                    # one warm-up each (file-system caches), not counted
        subprocess.run(cmd, capture_output=True, cwd=root)
    rng = random.Random(0)
    for _ in range(a.rounds):
        order = list(cmds); rng.shuffle(order)
        for name in order:
            t = time.perf_counter(); subprocess.run(cmds[name], capture_output=True, cwd=root)
            times.setdefault(name, []).append(time.perf_counter() - t)
    base = statistics.median(times['python -c pass'])
    print(f"judgelab start-up, {a.rounds} rounds, each command a new process (median, min..max; x = median / python -c pass's median)")
    w = max(map(len, cmds))
    for name in cmds:
        ts = times[name]; m = statistics.median(ts)
        print(f"  {name:<{w}}  {m:6.3f} s  ({min(ts):.3f}..{max(ts):.3f})  x{m / base:5.1f}")

if __name__ == '__main__': main()
