"""Build the pretraining set of the shipped encoders: MOSES ZINC molecules (molsets==0.3.1) labelled
with the full RDKit 2D descriptor set (RDKit fragment counts included) and Morgan count bits
(multi-task regression, as Chemprop's foundation model CheMeleon is pretrained on Mordred
descriptors).

    python datasets/build_pretrain_descriptors.py --molecules 300000 --workers 2 \\
        --shards data/pretrain/shards --out data/pretrain/moses_rdkit.csv.gz   # [--wheel W.whl]

Two stages. **Shards**: MOSES ``train.csv.gz`` (1,584,663 SMILES) is visited in the order of
``numpy.random.default_rng(seed).permutation``, skipping the rows of the embedded ZINC-like set (so
that set stays unseen); shard ``k`` holds positions ``[k * shard_size, (k + 1) * shard_size)`` of
that order: raw values of every function of ``rdkit.Chem.Descriptors._descList`` (NaN where RDKit
cannot compute one) and the 2048 folded Morgan radius-2 count bits (ECFP4 counts, capped at 255),
written to ``<shards>/shard_KKK.npz`` (atomically: a killed build leaves no partial shard; rerun
and the finished shards are skipped). Molecules RDKit cannot parse are left out of their shard.
**Table**: the shards covering ``--molecules`` positions are read; the first ``--valid`` molecules
of the order are ``valid``, the next ``--test`` ``test`` (fixed whatever ``--molecules`` is), the
rest ``train``. From the train rows: descriptors that are unbounded (``|x| > 1e6``: ``Ipc``), NaN
in more than 1 % of the rows, (near-)constant (fewer than 0.1 % of the rows differ from the most
common value) or duplicates (``|Pearson r| > 0.999`` with an earlier column, e.g. ``ExactMolWt``)
are dropped; the ``--morgan_bits`` bits set in the most training molecules are kept. Every column
is standardised with the train rows' mean and standard deviation and winsorised to ``[-6, 6]``
(CheMeleon's +-6 sigma); remaining NaN stay missing labels (masked in the loss). Columns:
``smiles, split, moses_row``, ``d_<descriptor>`` and ``m_<bit>``. Beside the CSV,
``<out>.stats.json`` holds every column's name, family (``topological``, ``physchem``, ``counts``),
mean and standard deviation, and ``<out>.targets.yaml`` the label columns as a second ``--config``
of ``graph-urpe fit``. The CSV is read by ``CSVDataModule`` (``split: split``), see
``configs/pretrain/rdkit.yaml``. Byte-for-byte reproducible. Provenance: ``datasets/README.md``.
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
from rdkit import Chem, RDLogger
from rdkit.Chem import Descriptors, rdFingerprintGenerator

from graph_urpe.data.zinc import EMBEDDED_ZINC_LIKE

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_zinc_like import WHEEL, read_moses_train  # a script beside this one
from csvio import write_csv_gz
from wheels import fetch_wheel, sha256_of

CLIP = 6.0
"""Standardised values are winsorised to ``[-CLIP, CLIP]``."""
FP_SIZE = 2048
"""Morgan count bits computed per molecule (radius 2, folded)."""
NAMES: tuple[str, ...] = tuple(name for name, _ in Descriptors._descList)
"""The RDKit descriptors computed, in column order."""
_TOPOLOGICAL = ("Chi", "Kappa", "BalabanJ", "BertzCT", "HallKierAlpha", "Ipc", "AvgIpc", "Phi",
                "BCUT2D", "FpDensityMorgan", "SPS")
_COUNTS = ("fr_", "Num", "NHOHCount", "NOCount", "RingCount", "HeavyAtomCount")


def family(column: str) -> str:
    """Descriptor family of a column: ``topological`` (connectivity / shape indices: Chi, Kappa,
    Balaban J, Bertz CT, Ipc, BCUT2D, ...), ``counts`` (atom, bond, ring and fragment counts,
    Morgan count bits) or ``physchem`` (the rest: weight, logP, MR, TPSA, VSA partitions, E-state,
    charges, QED)."""
    name = column[2:]
    if column.startswith("m_") or name.startswith(_COUNTS):
        return "counts"
    return "topological" if name.startswith(_TOPOLOGICAL) else "physchem"


def _labels(smiles: str) -> tuple[np.ndarray, np.ndarray] | None:
    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return None
    values = np.full(len(NAMES), np.nan)
    for j, (_, function) in enumerate(Descriptors._descList):
        try:
            values[j] = float(function(mol))
        except (ValueError, RuntimeError, ZeroDivisionError, OverflowError):
            pass
    values[~np.isfinite(values)] = np.nan
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=FP_SIZE)
    counts = np.minimum(generator.GetCountFingerprintAsNumPy(mol), 255).astype(np.uint8)
    return values, counts


def visiting_order(n_smiles: int, seed: int) -> np.ndarray:
    """MOSES row numbers in the order they are visited (ZINC-like rows left out)."""
    excluded = np.asarray(pd.read_csv(EMBEDDED_ZINC_LIKE)["moses_row"], dtype=np.int64)
    order = np.random.default_rng(seed).permutation(n_smiles)
    return order[~np.isin(order, excluded)]


def build_shards(smiles: pd.Series, order: np.ndarray, n_shards: int, shard_size: int,
                 folder: str, workers: int = 2, part: tuple[int, int] = (0, 1)) -> list[str]:
    """Write the missing shards ``k`` of ``0 .. n_shards - 1`` with ``k % part[1] == part[0]``
    (see the module docstring); the paths of all ``n_shards``."""
    os.makedirs(folder, exist_ok=True)
    paths = []
    with Pool(workers) as pool:
        for k in range(n_shards):
            path = os.path.join(folder, f"shard_{k:03d}.npz")
            paths.append(path)
            if os.path.isfile(path) or k % part[1] != part[0]:
                continue
            rows = order[k * shard_size:(k + 1) * shard_size]
            results = pool.map(_labels, [smiles.iloc[i] for i in rows], chunksize=128)
            keep = [j for j, r in enumerate(results) if r is not None]
            tmp = f"{path}.tmp.npz"
            np.savez(tmp, moses_row=rows[keep],
                     descriptors=np.stack([results[j][0] for j in keep]),
                     morgan=np.stack([results[j][1] for j in keep]), names=np.asarray(NAMES))
            os.replace(tmp, path)
            print(f"shard {k}: {len(keep)} molecules", flush=True)
    return paths


def _kept_descriptors(x: np.ndarray) -> list[int]:
    """Columns of the train rows that are bounded, mostly finite, not constant, not duplicates."""
    kept: list[int] = []
    finite = np.isfinite(x)
    for j in range(x.shape[1]):
        col = x[finite[:, j], j]
        if finite[:, j].mean() < 0.99 or np.abs(col).max() > 1e6:
            continue
        _, counts = np.unique(col, return_counts=True)
        if len(col) - counts.max() < 0.001 * len(col):
            continue
        both = finite[:, j].copy()
        for i in kept:
            rows = both & finite[:, i]
            if abs(np.corrcoef(x[rows, j], x[rows, i])[0, 1]) > 0.999:
                break
        else:
            kept.append(j)
    return kept


def build_table(smiles: pd.Series, paths: list[str], molecules: int, valid: int, test: int,
                morgan_bits: int) -> tuple[pd.DataFrame, dict]:
    """The split, standardised table of the first :obj:`molecules` visited positions."""
    parts = [np.load(p) for p in paths]
    rows = np.concatenate([p["moses_row"] for p in parts])
    x = np.concatenate([p["descriptors"] for p in parts])
    fp = np.concatenate([p["morgan"] for p in parts])
    n = min(molecules, len(rows))
    rows, x, fp = rows[:n], x[:n], fp[:n]
    split = np.array(["valid"] * valid + ["test"] * test + ["train"] * (n - valid - test))
    train = split == "train"
    kept = _kept_descriptors(x[train])
    bits = np.argsort(-(fp[train] > 0).sum(0), kind="stable")[:morgan_bits]
    bits.sort()
    y = np.concatenate([x[:, kept], fp[:, bits].astype(np.float64)], axis=1)
    mean, std = np.nanmean(y[train], 0), np.nanstd(y[train], 0)
    z = np.clip((y - mean) / std, -CLIP, CLIP)
    columns = [f"d_{NAMES[j]}" for j in kept] + [f"m_{b}" for b in bits]
    frame = pd.DataFrame(z.astype(np.float32), columns=columns)
    frame.insert(0, "smiles", smiles.iloc[rows].to_numpy())
    frame.insert(1, "split", split)
    frame.insert(2, "moses_row", rows)
    stats = {"columns": columns, "family": [family(c) for c in columns],
             "mean": mean.tolist(), "std": std.tolist(), "clip": CLIP,
             "dropped": [NAMES[j] for j in range(len(NAMES)) if j not in kept],
             "train_molecules": int(train.sum()), "valid": valid, "test": test}
    return frame, stats


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", help="local molsets-0.3.1 wheel (default: pip download it)")
    parser.add_argument("--out", default="data/pretrain/moses_rdkit.csv.gz")
    parser.add_argument("--shards", default="data/pretrain/shards", help="folder of the shards")
    parser.add_argument("--molecules", type=int, default=300_000, help="visited positions in all")
    parser.add_argument("--shard_size", type=int, default=50_000)
    parser.add_argument("--valid", type=int, default=1_000, help="valid molecules")
    parser.add_argument("--test", type=int, default=5_000, help="test molecules")
    parser.add_argument("--morgan_bits", type=int, default=256, help="Morgan count bits kept")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2, help="processes for the labels")
    parser.add_argument("--shards_only", action="store_true", help="stop after the shards")
    parser.add_argument("--part", default="0/1", help="I/N: build only shards k with k %% N == I "
                        "(N independent processes share the shards; then run once without it)")
    args = parser.parse_args(argv)
    if args.molecules <= args.valid + args.test:
        raise ValueError(f"--molecules ({args.molecules}) must exceed --valid + --test")
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or fetch_wheel(*WHEEL, tmp)
        print(f"wheel {os.path.basename(wheel)} sha256 {sha256_of(wheel)}")
        smiles = read_moses_train(wheel)
    order = visiting_order(len(smiles), args.seed)
    n_shards = -(-args.molecules // args.shard_size)
    part = tuple(int(v) for v in args.part.split("/"))
    paths = build_shards(smiles, order, n_shards, args.shard_size, args.shards, args.workers, part)
    if args.shards_only or part != (0, 1):
        return
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise SystemExit(f"{len(missing)} shards missing (first {missing[0]}); build them first")
    frame, stats = build_table(smiles, paths, args.molecules, args.valid, args.test,
                               args.morgan_bits)
    write_csv_gz(frame, args.out, float_format="%.4g")
    with open(f"{args.out}.stats.json", "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=1)
    with open(f"{args.out}.targets.yaml", "w", encoding="utf-8") as f:  # a second --config
        f.write("data:\n  init_args:\n    target_columns:\n")
        f.writelines(f"      - {c}\n" for c in stats["columns"])
    print(f"wrote {args.out} ({len(frame)} molecules, {len(stats['columns'])} labels) sha256 "
          f"{sha256_of(args.out)}")


if __name__ == "__main__":
    main()
