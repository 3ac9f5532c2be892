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
    # issue 44 part C: {RPE, URPE} x {SPD, SPD + resistance distance} (Graphormer-GD), 3 seeds
    python benchmarks/zinc_like.py --variants gd-urpe gd-rpe urpe rpe --jobs 2 --threads 1

Each run's CPU seconds (user + system) and peak RSS come from ``/usr/bin/time``. The paired
differences are taken between RPE / URPE twins (``rpe``/``urpe``, ``gd-rpe``/``gd-urpe``) when
both are in the grid, else against the first variant: per seed with a 95 % paired bootstrap
interval over the test molecules, and their mean over seeds with a 95 % t interval.
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
    # Graphormer-GD: B and C from the SPD and the resistance distance (issue 44, part C)
    "gd-rpe": ("graphormer-gd-rpe.yaml", []),
    "gd-urpe": ("graphormer-gd-urpe.yaml", []),
}

#: (RPE variant, its URPE twin): the pairs whose per-seed differences measure what C adds
TWINS = [("rpe", "urpe"), ("gd-rpe", "gd-urpe")]


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
        "/usr/bin/time", "-f", "CPU-TIME %U %S %M",  # user s, system s, peak RSS KiB
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
    cpu = re.findall(r"CPU-TIME ([0-9.]+) ([0-9.]+) ([0-9]+)", proc.stderr)
    user, system, rss_kib = cpu[-1] if cpu else (None, None, None)
    record = {
        "variant": variant, "seed": seed, "max_epochs": max_epochs, "test_mae": float(mae.group(1)),
        "trainable_params": params.group(1) if params else None, "wall_s": round(wall, 1),
        "threads": threads, "ended": ended.group(1) if ended else None,
        "loadavg_1min_at_end": round(os.getloadavg()[0], 2),
        "cpu_s": round(float(user) + float(system), 1) if user else None,
        "peak_rss_gb": round(int(rss_kib) / 2**20, 2) if rss_kib else None,
        "run_dir": str(run_dir),
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


    by = {(r["variant"], r["seed"]): r for r in results}
    pairs = [(a, b) for a, b in TWINS if a in args.variants and b in args.variants]
    if not pairs:  # no RPE / URPE twins in the grid: differences against the first variant
        pairs = [(args.variants[0], v) for v in args.variants[1:]]
    for first, variant in pairs:
        print(f"\nPaired difference {variant} - {first} (test MAE; 95 % paired bootstrap over the "
              "test molecules of each seed):")
        diffs = []
        for seed in args.seeds:
            a, b = by[(first, seed)], by[(variant, seed)]
            diff = b["test_mae"] - a["test_mae"]
            diffs.append(diff)
            lo, hi = paired_bootstrap(Path(a["run_dir"]), Path(b["run_dir"]))
            print(f"  seed {seed}: {diff:+.4f} [{lo:+.4f}, {hi:+.4f}]")
        if len(diffs) > 1:
            mean, std = statistics.mean(diffs), statistics.stdev(diffs)
            half = T_975[len(diffs) - 1] * std / len(diffs) ** 0.5 if len(diffs) - 1 in T_975 else float("nan")
            print(f"  mean over {len(diffs)} seeds {mean:+.4f} ± {std:.4f} (sample std); 95 % t "
                  f"interval [{mean - half:+.4f}, {mean + half:+.4f}]")


#: two-sided 95 % Student t quantiles by degrees of freedom
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def _test_errors(run_dir: Path):
    """Absolute test errors by source row, from the run's ``test_predictions.csv``."""
    import pandas as pd

    (path,) = run_dir.glob("**/test_predictions.csv")
    frame = pd.read_csv(path)
    (target,) = [c for c in frame.columns if f"{c}_pred" in frame.columns]
    return (frame[f"{target}_pred"] - frame[target]).abs().set_axis(frame["row"])


def paired_bootstrap(run_a: Path, run_b: Path, draws: int = 10_000) -> tuple[float, float]:
    """95 % percentile interval of MAE(b) - MAE(a) over molecules resampled together (seed 0)."""
    import numpy as np

    err_a, err_b = _test_errors(run_a), _test_errors(run_b)
    if not err_a.index.equals(err_b.index):
        err_b = err_b.reindex(err_a.index)
    delta = (err_b - err_a).to_numpy()
    rng = np.random.default_rng(0)
    idx = rng.integers(0, delta.size, size=(draws, delta.size))
    means = delta[idx].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


if __name__ == "__main__":
    main()
