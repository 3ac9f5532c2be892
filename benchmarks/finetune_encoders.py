"""Which pretrained encoder should the CSV template fine-tune from? Chosen on the validation rows of
the Chemprop peer benchmark's sets (``benchmarks/peers/chemprop.py``: same data, same scaffold
split, same template, one thread), never on the test rows.

    python benchmarks/finetune_encoders.py --out runs/bench-chemprop --sets freesolv bbbp \\
        --seeds 0 --encoders moses-descriptors moses-rdkit path/to/other.pt

Each encoder (a shipped name of :mod:`graph_urpe.pretrained` or a file) is fine-tuned with the
template as it is, only ``--model.init_args.finetune.pretrained`` changed (and the attention kind set to the
encoder's, e.g. ``rpe`` for an RPE twin), by the benchmark's own ``run_ours``. The validation metric is the one of the checkpoint the template tests
(``test_checkpoint: auto``): for regression the last epoch's ``val/mae``, for classification the
best ``val/rocauc``, read from the run's ``metrics.csv``. Records go to
``OUT/encoders/<set>/<encoder>-seed<S>.json`` (a run whose file exists is not run again). The
choice is made on the validation columns; the test columns are reported beside them, never used
to choose. An encoder pretrained with relations other than the SPD alone (``moses-gd-urpe``,
``moses-gd-rpe``: ``relations: [spd, resistance]``) is fine-tuned with those relations and the
data (which follows them).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("chemprop_bench", HERE / "peers" / "chemprop.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def validation_metric(run_dir: Path, metric: str) -> float:
    """The validation metric of the checkpoint the template tests (see the module docstring).

    Raises:
        ValueError: if ``metrics.csv`` has no validation rows.
    """
    frame = pd.read_csv(run_dir / "metrics.csv")
    column = "val/mae" if metric == "mae" else "val/rocauc"
    values = frame[column].dropna() if column in frame else pd.Series(dtype=float)
    if values.empty:
        raise ValueError(f"{run_dir}/metrics.csv has no {column}")
    return float(values.iloc[-1] if metric == "mae" else values.max())


def encoder_options(encoder: str) -> list[str]:
    """The fit options that fine-tune from :obj:`encoder` (a shipped name or a file)."""
    import torch

    from graph_urpe.pretrained import resolve

    path = resolve(encoder)
    if path is None:
        raise SystemExit(f"no encoder file or shipped encoder named {encoder!r}")
    args = torch.load(path, map_location="cpu", weights_only=True)["encoder_args"]
    options = ["--model.init_args.finetune.pretrained", encoder,
               "--model.init_args.model.init_args.attention", str(args.get("attention", "urpe"))]
    relations = list(args.get("relations", ["spd"]))
    if relations != ["spd"]:  # e.g. Graphormer-GD's [spd, resistance] (the data follows them)
        options += ["--model.init_args.model.init_args.relations", json.dumps(relations)]
    return options


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the peer benchmark's --out")
    parser.add_argument("--wheel-dir", type=Path, default=bench.ROOT / "runs" / "wheels")
    parser.add_argument("--sets", nargs="+", choices=sorted(bench.SETS), default=["freesolv"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--encoders", nargs="+", required=True)
    args = parser.parse_args(argv)
    out = args.out.resolve()
    records = []
    for name in args.sets:
        _, task, metric = bench.SETS[name]
        folder = bench.prepare_set(name, args.wheel_dir, out / "sets")
        for encoder in args.encoders:
            tag = Path(encoder).stem if os.path.sep in encoder else encoder
            for seed in args.seeds:
                path = out / "encoders" / name / f"{tag}-seed{seed}.json"
                if not path.exists():
                    record = bench.run_ours(folder, task, metric, seed, f"enc-{tag}",
                                            out / "runs" / name,
                                            encoder_options(encoder))
                    record["val"] = validation_metric(Path(record["run_dir"]), metric)
                    record.update(set=name, encoder=encoder, seed=seed, metric=metric)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(json.dumps(record, indent=1))
                records.append(json.loads(path.read_text()))
    rows = []
    for name in args.sets:
        for encoder in args.encoders:
            mine = [r for r in records if r["set"] == name and r["encoder"] == encoder]
            vals, tests = [r["val"] for r in mine], [r["value"] for r in mine]
            rows.append([name, "MAE" if mine[0]["metric"] == "mae" else "ROC-AUC", encoder,
                         f"{statistics.fmean(vals):.3f}", ", ".join(f"{v:.3f}" for v in vals),
                         f"{statistics.fmean(tests):.3f}", ", ".join(f"{v:.3f}" for v in tests),
                         f"{statistics.fmean(r['cpu_s'] for r in mine):.0f}"])
    print(bench.markdown_table(["set", "metric", "encoder", "val mean", "val per seed",
                                "test mean", "test per seed", "CPU s / run"], rows))
    print("\n" + choice_line(records, args.sets, args.encoders))


def choice_line(records: list[dict], sets: list[str], encoders: list[str]) -> str:
    """Which encoder has the best mean validation metric on each set, and how many sets each
    wins: the rule that chooses the template's default (validation only; ties go to the encoder
    named first)."""
    wins = dict.fromkeys(encoders, 0)
    parts = []
    for name in sets:
        means = {}
        for encoder in encoders:
            vals = [r["val"] for r in records if r["set"] == name and r["encoder"] == encoder]
            if vals:
                means[encoder] = statistics.fmean(vals)
        if not means:
            continue
        higher = next(r["metric"] for r in records if r["set"] == name) != "mae"
        best = max(means, key=lambda e: (means[e] if higher else -means[e],
                                         -encoders.index(e)))
        wins[best] += 1
        parts.append(f"{name}: {best}")
    return ("best mean validation metric per set: " + "; ".join(parts) + ". Sets won: "
            + ", ".join(f"{e} {n}" for e, n in wins.items()))


if __name__ == "__main__":
    main()
