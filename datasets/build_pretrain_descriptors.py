"""Build the pretraining set of the shipped encoder: MOSES ZINC molecules (molsets==0.3.1) labelled
with standardised RDKit 2D descriptors (multi-task regression, as Chemprop's foundation model is
pretrained on Mordred descriptors).

    python datasets/build_pretrain_descriptors.py                 # fetches the wheel with pip download
    python datasets/build_pretrain_descriptors.py --wheel molsets-0.3.1-py3-none-any.whl \\
        --molecules 100000 --out data/pretrain/moses_descriptors.csv.gz

Reads ``moses/dataset/data/train.csv.gz`` from the wheel (1,584,663 SMILES), visits it in the order
of ``numpy.random.default_rng(seed).permutation``, skips the rows of the embedded ZINC-like set (so
that set stays unseen), keeps the first ``--molecules`` that RDKit parses, computes the descriptors
of :mod:`graph_urpe.data.descriptors` (heavy-tailed counts as ``log1p``) and standardises every
column with the mean and standard deviation of the ``train`` rows, clipped to ``[-6, 6]``. The last
``--valid`` molecules are ``valid`` and the ``--valid`` before them ``test``; the rest ``train``.
Columns: ``smiles, split, moses_row`` and one ``d_<descriptor>`` column each. Beside the CSV,
``<out>.stats.json`` holds the descriptors' names, means and standard deviations. The CSV is read by
``graph_urpe.data.modules.molecule.CSVDataModule`` (``split: split``), see
``configs/pretrain/descriptors.yaml``. Byte-for-byte reproducible. Provenance: ``datasets/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from multiprocessing import Pool

import numpy as np
import pandas as pd

from graph_urpe.data.descriptors import DESCRIPTORS, descriptor_vector
from graph_urpe.data.zinc import EMBEDDED_ZINC_LIKE

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_zinc_like import WHEEL, read_moses_train  # a script beside this one
from csvio import write_csv_gz
from wheels import fetch_wheel, sha256_of

CLIP = 6.0
"""Standardised descriptor values are clipped to ``[-CLIP, CLIP]``."""


def _safe_vector(smiles: str) -> list[float] | None:
    try:
        return descriptor_vector(smiles)
    except ValueError:
        return None


def build(smiles: pd.Series, molecules: int, valid: int, seed: int = 1,
          workers: int = 2) -> tuple[pd.DataFrame, dict]:
    """The labelled, split, standardised frame and its statistics (see the module docstring)."""
    if molecules <= 2 * valid:
        raise ValueError(f"--molecules ({molecules}) must exceed twice --valid ({valid})")
    excluded = set(pd.read_csv(EMBEDDED_ZINC_LIKE)["moses_row"].tolist())
    order = [int(i) for i in np.random.default_rng(seed).permutation(len(smiles))
             if int(i) not in excluded]
    rows, values = [], []
    start = 0
    with Pool(workers) as pool:
        while len(rows) < molecules and start < len(order):
            chunk = order[start:start + (molecules - len(rows)) + 64]
            start += len(chunk)
            for i, vec in zip(chunk, pool.map(_safe_vector, [smiles.iloc[i] for i in chunk],
                                              chunksize=256)):
                if vec is None or any(np.isnan(vec)) or len(rows) == molecules:
                    continue
                rows.append(i)
                values.append(vec)
    if len(rows) < molecules:
        raise ValueError(f"only {len(rows)} usable molecules, {molecules} requested")
    x = np.asarray(values, dtype=np.float64)
    n_train = molecules - 2 * valid
    mean, std = x[:n_train].mean(0), x[:n_train].std(0)
    std[std == 0] = 1.0
    z = np.clip((x - mean) / std, -CLIP, CLIP)
    frame = pd.DataFrame(z, columns=[f"d_{n}" for n in DESCRIPTORS])
    frame.insert(0, "smiles", [smiles.iloc[i] for i in rows])
    frame.insert(1, "split", ["train"] * n_train + ["test"] * valid + ["valid"] * valid)
    frame.insert(2, "moses_row", rows)
    stats = {"descriptors": list(DESCRIPTORS), "mean": mean.tolist(), "std": std.tolist(),
             "clip": CLIP, "train_molecules": n_train, "seed": seed}
    return frame, stats


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", help="local molsets-0.3.1 wheel (default: pip download it)")
    parser.add_argument("--out", default="data/pretrain/moses_descriptors.csv.gz")
    parser.add_argument("--molecules", type=int, default=100_000, help="molecules in all")
    parser.add_argument("--valid", type=int, default=1_000, help="valid (and test) molecules")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2, help="processes for the descriptors")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or fetch_wheel(*WHEEL, tmp)
        print(f"wheel {os.path.basename(wheel)} sha256 {sha256_of(wheel)}")
        smiles = read_moses_train(wheel)
    frame, stats = build(smiles, args.molecules, args.valid, args.seed, args.workers)
    write_csv_gz(frame, args.out, float_format="%.6g")
    with open(f"{args.out}.stats.json", "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=1)
    print(f"wrote {args.out} ({len(frame)} molecules, {len(DESCRIPTORS)} descriptors) sha256 "
          f"{sha256_of(args.out)}")


if __name__ == "__main__":
    main()
