"""URPE against its RPE twin on the pretraining task: test MAE overall and per descriptor family,
with paired 95 % bootstrap intervals over the test molecules.

    python benchmarks/pretrain_twin.py --data data/pretrain/moses_rdkit.csv.gz \\
        --runs urpe=runs/pretrain-rdkit/version_0 rpe=runs/pretrain-rdkit-rpe/version_0

Reads the pretraining CSV's test rows (``split == "test"``), the label families of
``<data>.stats.json`` (``topological``, ``physchem``, ``counts``; written by
``datasets/build_pretrain_rdkit.py``) and each run's ``test_predictions.csv`` (``<label>_pred``
columns, rows by ``row``). Per test molecule and family, the error is the mean absolute error over
the family's labelled columns (standardised units: every label has train standard deviation 1);
a family's MAE is the mean over molecules. Intervals: ``--resamples`` bootstrap resamples of the
test molecules (seeded), the same resamples for every run, so the difference of two runs gets its
own interval (percentile method, 2.5 % and 97.5 %).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table

FAMILIES = ("all", "topological", "physchem", "counts")


def per_molecule_errors(data: pd.DataFrame, pred: pd.DataFrame, columns: list[str],
                        families: list[str]) -> dict[str, np.ndarray]:
    """``{family: [N] mean absolute error of each test molecule over the family's labelled
    columns}`` (``"all"``: every column).

    Raises:
        ValueError: if a test row has no prediction.
    """
    pred = pred.set_index("row")
    missing = sorted(set(data.index) - set(pred.index))
    if missing:
        raise ValueError(f"{len(missing)} test rows have no prediction (first: row {missing[0]})")
    y = data[columns].to_numpy(np.float64)
    p = pred.loc[data.index, [f"{c}_pred" for c in columns]].to_numpy(np.float64)
    err = np.abs(p - y)
    out = {}
    for name in FAMILIES:
        cols = np.array([name in ("all", f) for f in families])
        e = err[:, cols]
        out[name] = np.nanmean(e, axis=1)
    return out


def bootstrap(values: np.ndarray, resamples: np.ndarray) -> tuple[float, float, float]:
    """Mean of :obj:`values` (NaN = a molecule without labels in the family, left out) and the
    2.5 / 97.5 percentiles of its means over the index :obj:`resamples` ``[B, N]``."""
    means = np.nanmean(values[resamples], axis=1)
    return float(np.nanmean(values)), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="the pretraining CSV")
    parser.add_argument("--runs", nargs="+", required=True, help="NAME=RUN_FOLDER, two or more")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    stats = json.loads(Path(f"{args.data}.stats.json").read_text())
    columns, families = stats["columns"], stats["family"]
    frame = pd.read_csv(args.data, usecols=["split", *columns])
    data = frame[frame["split"] == "test"]
    runs = dict(r.split("=", 1) for r in args.runs)
    errors = {name: per_molecule_errors(data, pd.read_csv(Path(folder) / "test_predictions.csv"),
                                        columns, families) for name, folder in runs.items()}
    rng = np.random.default_rng(args.seed)
    resamples = rng.integers(0, len(data), size=(args.resamples, len(data)))
    names = list(runs)
    rows = []
    for family in FAMILIES:
        n_cols = len(columns) if family == "all" else families.count(family)
        cells = [family, str(n_cols)]
        for name in names:
            mean, lo, hi = bootstrap(errors[name][family], resamples)
            cells.append(f"{mean:.4f} [{lo:.4f}, {hi:.4f}]")
        if len(names) >= 2:
            diff = errors[names[0]][family] - errors[names[1]][family]
            mean, lo, hi = bootstrap(diff, resamples)
            cells.append(f"{mean:+.4f} [{lo:+.4f}, {hi:+.4f}]")
        rows.append(cells)
    header = ["family", "labels", *[f"{n} test MAE [95 % CI]" for n in names]]
    if len(names) >= 2:
        header.append(f"{names[0]} - {names[1]} [95 % CI]")
    print(f"{len(data)} test molecules, {args.resamples} paired bootstrap resamples "
          f"(seed {args.seed}); standardised units")
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
