"""Build the embedded ZINC-like 12k dataset from the MOSES ZINC molecules (molsets==0.3.1).

    python datasets/build_zinc_like.py                    # fetches the wheel with pip download
    python datasets/build_zinc_like.py --wheel /path/molsets-0.3.1-py3-none-any.whl

Reads ``moses/dataset/data/train.csv.gz`` from the wheel (1,584,663 SMILES), visits it in the order
of a seeded random permutation (NumPy ``default_rng(seed)``), keeps the first 12,000 molecules that
RDKit parses and that have ZINC atom types, computes the ZINC constrained-solubility target with
RDKit (:mod:`graph_urpe.data.zinc_target`), and writes the first 10,000 as ``train``, the next 1,000
as ``valid`` and the last 1,000 as ``test`` to ``graph_urpe/data/embedded/zinc_like_12k.csv.gz``
(columns ``smiles, target, split, moses_row``; ``moses_row`` = 0-based data row in MOSES'
train.csv.gz). The output is byte-for-byte reproducible (fixed gzip header). Provenance and
licences: ``datasets/README.md``.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile

import numpy as np
import pandas as pd

# Helpers beside this script (datasets/ is the script's folder, first on sys.path).
from csvio import write_csv_gz
from wheels import fetch_wheel, read_wheel_member, sha256_of

from graph_urpe.data.featurize import MoleculeError, smiles_to_zinc_graph
from graph_urpe.data.zinc import EMBEDDED_ZINC_LIKE
from graph_urpe.data.zinc_target import constrained_solubility

WHEEL = ("molsets", "0.3.1")
MEMBER = "moses/dataset/data/train.csv.gz"
SIZES = {"train": 10_000, "valid": 1_000, "test": 1_000}


def read_moses_train(wheel: str) -> pd.Series:
    """The SMILES column of MOSES' training set, read from the molsets wheel."""
    frame = pd.read_csv(io.BytesIO(read_wheel_member(wheel, MEMBER)), compression="gzip")
    return frame["SMILES"]


def build(smiles: pd.Series, seed: int = 0, sizes: dict[str, int] = SIZES) -> pd.DataFrame:
    """Seeded sample of ``sum(sizes)`` usable molecules with their target and split."""
    total = sum(sizes.values())
    rows, skipped = [], []
    for i in np.random.default_rng(seed).permutation(len(smiles)):
        s = smiles.iloc[i]
        try:
            smiles_to_zinc_graph(s)
            target = constrained_solubility(s).value
        except MoleculeError as exc:
            skipped.append((int(i), s, str(exc)))
            continue
        rows.append((s, target, int(i)))
        if len(rows) == total:
            break
    if len(rows) < total:
        raise ValueError(f"only {len(rows)} usable molecules, {total} requested")
    for i, s, reason in skipped:
        print(f"skipped MOSES row {i} {s!r}: {reason}", file=sys.stderr)
    split = np.concatenate([[name] * n for name, n in sizes.items()])
    frame = pd.DataFrame(rows, columns=["smiles", "target", "moses_row"])
    frame.insert(2, "split", split)
    return frame


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", help="local molsets-0.3.1 wheel (default: pip download it)")
    parser.add_argument("--out", default=EMBEDDED_ZINC_LIKE, help="output .csv.gz")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or fetch_wheel(*WHEEL, tmp)
        print(f"wheel {os.path.basename(wheel)} sha256 {sha256_of(wheel)}")
        smiles = read_moses_train(wheel)
    frame = build(smiles, seed=args.seed)
    write_csv_gz(frame, args.out, float_format="%.10g")
    print(f"wrote {len(frame)} molecules to {args.out} (sha256 {sha256_of(args.out)})")
    for name, part in frame.groupby("split", sort=False):
        t = part["target"]
        print(f"  {name}: {len(part)} molecules, target mean {t.mean():.4f} std {t.std():.4f} "
              f"min {t.min():.4f} max {t.max():.4f}")


if __name__ == "__main__":
    main()
