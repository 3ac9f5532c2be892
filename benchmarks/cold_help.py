"""CPU time of ``graph-urpe SUBCOMMAND --help``, first call (an empty help cache) and second call,
for one or more checkouts of graph-urpe side by side (issue 32: ``fit --help`` under 3 CPU s on
the first call).

Each call is ``python -m graph_urpe.cli SUBCOMMAND --help`` in a fresh process with
``PYTHONPATH`` set to the checkout and ``GRAPH_URPE_CACHE_DIR`` set to a new empty folder (so
neither an earlier run's help nor the user's cache is read); the same command again in that folder
is the second call. CPU time is the process's user + system time (``os.wait4``), which a busy
machine inflates less than wall time; wall time is printed beside it.

Usage::

    git archive BASE_COMMIT graph_urpe | tar -x -C /tmp/before   # the code before a change
    python benchmarks/cold_help.py --checkout before=/tmp/before --checkout after=. --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import os.path as osp
import statistics
import subprocess
import sys
import tempfile
import time


def timed_call(checkout: str, sub: str, cache_dir: str) -> tuple[float, float, str]:
    """``(cpu_s, wall_s, stdout)`` of one ``graph-urpe SUB --help`` run from ``checkout``."""
    env = {**os.environ, "PYTHONPATH": osp.abspath(checkout), "GRAPH_URPE_CACHE_DIR": cache_dir,
           "OMP_NUM_THREADS": "1"}
    env.pop("GRAPH_URPE_HELP_CACHE", None)
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([sys.executable, "-m", "graph_urpe.cli", sub, "--help"], env=env,
                                stdout=out, stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir())
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"{checkout}: graph-urpe {sub} --help failed")
        out.seek(0)
        text = out.read().decode()
    return usage.ru_utime + usage.ru_stime, wall, text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", action="append", required=True, metavar="NAME=PATH",
                        help="a checkout's root (holding graph_urpe/); repeat for side by side")
    parser.add_argument("--subcommands", nargs="+", default=["fit", "predict"])
    parser.add_argument("--repeats", type=int, default=1, help="first + second call pairs (median)")
    args = parser.parse_args(argv)
    checkouts = [c.split("=", 1) if "=" in c else (c, c) for c in args.checkout]
    rows = []
    for sub in args.subcommands:
        for name, path in checkouts:
            first, second, walls = [], [], []
            for _ in range(args.repeats):
                with tempfile.TemporaryDirectory() as cache:
                    cpu, wall, text = timed_call(path, sub, cache)
                    cpu2, _, text2 = timed_call(path, sub, cache)
                if text2 != text:
                    raise RuntimeError(f"{name}: the second call printed another help text")
                first.append(cpu)
                walls.append(wall)
                second.append(cpu2)
            rows.append((sub, name, statistics.median(first), statistics.median(walls),
                         statistics.median(second), len(text.splitlines())))
            print(json.dumps(dict(zip(("subcommand", "checkout", "first_cpu_s", "first_wall_s",
                                       "second_cpu_s", "lines"), rows[-1]))), flush=True)
    print("\n| subcommand | checkout | first call CPU s (wall s) | second call CPU s | help lines |"
          "\n|---|---|---|---|---|")
    for sub, name, cpu, wall, cpu2, lines in rows:
        print(f"| `{sub} --help` | {name} | {cpu:.2f} ({wall:.1f}) | {cpu2:.2f} | {lines} |")


if __name__ == "__main__":
    main()
