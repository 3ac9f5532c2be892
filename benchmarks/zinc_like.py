"""Test MAE of Graphormer-slim with ``rpe`` vs ``urpe`` attention on the embedded ZINC-like data.

Runs ``graph-urpe fit`` (fit, then test of the best validation checkpoint) for each attention
variant and seed with the same configuration and budget (``configs/zinc/zinc-like-{rpe,urpe}.yaml``,
the settings of ``graph-urpe fit`` without arguments, overridable with ``--max-epochs``), prints
one JSON line per run, a markdown table with the mean and standard deviation over seeds and the
parameter counts, and the per-seed paired difference URPE - RPE. Each run is a separate process
that writes its JSON record to ``result.json`` in its run folder; ``--jobs N`` runs N at a time
(each with ``--threads`` torch threads), and a run whose folder already holds ``result.json`` is
not run again (delete the folder to rerun it).

Usage::

    python benchmarks/zinc_like.py                       # 3 seeds x {rpe, urpe}, the default budget
    python benchmarks/zinc_like.py --jobs 2 --threads 1  # two runs at a time, one thread each
    python benchmarks/zinc_like.py --max-epochs 6        # a shorter budget
    python benchmarks/zinc_like.py --variants urpe urpe-random --max-epochs 5   # batching
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import statistics
import sys
from pathlib import Path

from _common import run_command

ROOT = Path(__file__).resolve().parent.parent

#: variant -> (config under configs/zinc/, extra command-line arguments)
VARIANTS = {
    "rpe": ("zinc-like-rpe.yaml", []),
    "urpe": ("zinc-like-urpe.yaml", []),
    # the default job with random training batches instead of size buckets (issue 12)
    "urpe-random": ("zinc-like-urpe.yaml", ["--data.init_args.bucketing", "false"]),
}


def run(variant: str, seed: int, max_epochs: int | None, out_dir: Path,
        threads: int | None = None) -> dict:
    run_dir = out_dir / f"{variant}-seed{seed}"
    done = run_dir / "result.json"
    if done.is_file():
        record = json.loads(done.read_text())
        if record.get("max_epochs") != max_epochs:
            raise SystemExit(f"{done} holds a run with max_epochs={record.get('max_epochs')}, not "
                             f"{max_epochs}: use another --out or delete that folder.")
        return record
    env = dict(os.environ)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    cmd = [
        sys.executable, "-c", "from graph_urpe.cli import main; main()", "fit",
        "--config", str(ROOT / "graph_urpe" / "configs" / "zinc" / VARIANTS[variant][0]),
        "--seed_everything", str(seed),
        "--trainer.enable_progress_bar", "false",
        "--trainer.default_root_dir", str(run_dir),
        *VARIANTS[variant][1],
    ]
    if max_epochs is not None:
        cmd += ["--trainer.max_epochs", str(max_epochs)]
    proc, wall = run_command(cmd, cwd=ROOT, env=env)
    mae = re.search(r"Test MAE: ([0-9.]+)", proc.stdout)
    params = re.search(r"([0-9.]+ K|[0-9.]+ M)\s+Trainable params", proc.stdout + proc.stderr)
    if mae is None:
        raise SystemExit(f"no 'Test MAE' line in the output of {' '.join(cmd)}")
    ended = re.search(r"Training (.*)", proc.stdout)
    record = {
        "variant": variant, "seed": seed, "max_epochs": max_epochs, "test_mae": float(mae.group(1)),
        "trainable_params": params.group(1) if params else None, "wall_s": round(wall, 1),
        "threads": threads, "ended": ended.group(1) if ended else None,
        "loadavg_1min_at_end": round(os.getloadavg()[0], 2),
    }
    done.write_text(json.dumps(record))
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", default=["rpe", "urpe"], choices=VARIANTS,
                        help="paired differences are taken against the first (default: rpe urpe)")
    parser.add_argument("--max-epochs", type=int, default=None,
                        help="override the configs' max_epochs (default: keep them)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-zinc-like")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (default: 1)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads per run (default: torch's own choice)")
    args = parser.parse_args()
    grid = [(variant, seed) for seed in args.seeds for variant in args.variants]
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run, v, s, args.max_epochs, args.out, args.threads)
                   for v, s in grid]
        for future in futures:  # in grid order
            res = future.result()
            print(json.dumps(res), flush=True)
            results.append(res)
    print("\n| attention | parameters | seeds | test MAE (mean ± std) | runs |")
    print("|---|---|---|---|---|")
    for variant in args.variants:
        maes = [r["test_mae"] for r in results if r["variant"] == variant]
        n_params = next((r["trainable_params"] for r in results if r["variant"] == variant), "?")
        std = statistics.stdev(maes) if len(maes) > 1 else float("nan")
        runs = ", ".join(f"{m:.3f}" for m in maes)
        print(f"| {variant} | {n_params} | {len(maes)} | {statistics.mean(maes):.3f} ± {std:.3f} "
              f"| {runs} |")


    by = {(r["variant"], r["seed"]): r["test_mae"] for r in results}
    first = args.variants[0]
    for variant in args.variants[1:]:
        diffs = [by[(variant, s)] - by[(first, s)] for s in args.seeds]
        std = statistics.stdev(diffs) if len(diffs) > 1 else float("nan")
        print(f"\nPaired difference {variant} - {first} per seed: "
              + ", ".join(f"seed {s}: {d:+.3f}" for s, d in zip(args.seeds, diffs))
              + f"; mean {statistics.mean(diffs):+.3f} ± {std:.3f}")


if __name__ == "__main__":
    main()
