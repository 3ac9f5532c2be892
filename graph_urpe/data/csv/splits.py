"""Train / validation / test splits of a molecule list: seeded random, Murcko-scaffold (OGB style),
or given by a column of the input.

All functions return ``{"train", "valid", "test"}`` -> sorted ``torch.long`` index tensors (OGB's
``get_idx_split()`` convention) that partition ``range(n)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from rdkit import Chem, rdBase
from rdkit.Chem.Scaffolds import MurckoScaffold

from graph_urpe.data.csv.row_errors import refuse_values

SPLIT_NAMES = ("train", "valid", "test")
_ALIASES = {"train": "train", "training": "train", "valid": "valid", "val": "valid",
            "validation": "valid", "test": "test", "testing": "test"}


def _check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(
            f"split fractions must be three non-negative numbers summing to 1 "
            f"(train, valid, test), got {tuple(fractions)}"
        )
    return tuple(float(f) for f in fractions)


def _as_dict(train, valid, test) -> dict[str, torch.Tensor]:
    return {name: torch.tensor(sorted(idx), dtype=torch.long)
            for name, idx in zip(SPLIT_NAMES, (train, valid, test))}


def random_split(n: int, fractions: Sequence[float] = (0.8, 0.1, 0.1),
                 seed: int = 0) -> dict[str, torch.Tensor]:
    r"""Seeded random split of ``range(n)``: a NumPy ``default_rng(seed)`` permutation cut into
    ``round(n * f_train)`` training and ``round(n * f_valid)`` validation items, the rest test.

    Args:
        n (int): number of items.
        fractions (Sequence[float], optional): train, valid, test fractions. (default: ``(0.8, 0.1, 0.1)``)
        seed (int, optional): random seed. (default: :obj:`0`)

    Raises:
        ValueError: for fractions that are not three non-negative numbers summing to 1.
    """
    f_train, f_valid, _ = _check_fractions(fractions)
    perm = np.random.default_rng(seed).permutation(n)
    n_train, n_valid = round(n * f_train), round(n * f_valid)
    return _as_dict(perm[:n_train], perm[n_train:n_train + n_valid], perm[n_train + n_valid:])


def murcko_scaffold(smiles: str, include_chirality: bool = True) -> str:
    r"""Bemis-Murcko scaffold SMILES of a molecule (``""`` for an acyclic one), by
    :func:`rdkit.Chem.Scaffolds.MurckoScaffold.MurckoScaffoldSmiles`."""
    with rdBase.BlockLogs():
        return MurckoScaffold.MurckoScaffoldSmiles(smiles=smiles, includeChirality=include_chirality)


def mol_scaffold(mol: Chem.Mol, include_chirality: bool = True) -> str:
    r""":func:`murcko_scaffold` of a molecule already parsed (by
    :func:`~graph_urpe.data.featurize.parse_smiles`, which reads a SMILES as RDKit does): the same
    scaffold without parsing its SMILES again."""
    with rdBase.BlockLogs():
        return MurckoScaffold.MurckoScaffoldSmiles(mol=mol, includeChirality=include_chirality)


def scaffold_split(smiles: Sequence[str], fractions: Sequence[float] = (0.8, 0.1, 0.1),
                   include_chirality: bool = True,
                   scaffolds: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
    r"""Deterministic scaffold split as used for OGB's ``ogbg-mol*`` data sets (Hu et al.,
    "Strategies for Pre-training Graph Neural Networks", ICLR 2020, whose split code OGB used):

    molecules are grouped by Murcko scaffold (with chirality); the groups are sorted by size, largest
    first (ties: larger last index first); groups are then put into train while it stays within
    ``f_train * n`` molecules, else into valid while train + valid stays within
    ``(f_train + f_valid) * n``, else into test. Molecules with rare scaffolds therefore end up in
    valid and test.

    Args:
        smiles (Sequence[str]): valid SMILES strings (position = item index).
        fractions (Sequence[float], optional): train, valid, test fractions. (default: ``(0.8, 0.1, 0.1)``)
        include_chirality (bool, optional): keep stereo in scaffolds. (default: :obj:`True`)
        scaffolds (Sequence[str], optional): the molecules' scaffolds, already computed with
            this :obj:`include_chirality` (:func:`mol_scaffold` where the molecules were parsed);
            :obj:`None` computes them from :obj:`smiles`. (default: :obj:`None`)

    Raises:
        ValueError: for bad fractions, or :obj:`scaffolds` not one per SMILES.
    """
    f_train, f_valid, _ = _check_fractions(fractions)
    if scaffolds is None:
        scaffolds = [murcko_scaffold(s, include_chirality) for s in smiles]
    elif len(scaffolds) != len(smiles):
        raise ValueError(f"scaffolds must have one entry per SMILES ({len(smiles)}), got "
                         f"{len(scaffolds)}")
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(scaffolds):
        groups.setdefault(key, []).append(i)
    ordered = sorted(groups.values(), key=lambda idx: (len(idx), idx[-1]), reverse=True)
    n = len(smiles)
    train_cut, valid_cut = f_train * n, (f_train + f_valid) * n
    train, valid, test = [], [], []
    for group in ordered:
        if len(train) + len(group) > train_cut:
            if len(train) + len(valid) + len(group) > valid_cut:
                test.extend(group)
            else:
                valid.extend(group)
        else:
            train.extend(group)
    return _as_dict(train, valid, test)


def column_split(values: Sequence[object], column: str = "split") -> dict[str, torch.Tensor]:
    r"""Split given by a column whose values name the split of each item: ``train``, ``valid``
    (also ``val``, ``validation``) or ``test`` (case-insensitive).

    Args:
        values (Sequence): the column's values.
        column (str, optional): the column's name, for error messages. (default: :obj:`"split"`)

    Raises:
        ValueError: naming the first rows with another value.
    """
    parts: dict[str, list[int]] = {name: [] for name in SPLIT_NAMES}
    bad = []
    for i, value in enumerate(values):
        name = _ALIASES.get(str(value).strip().lower())
        if name is None:
            bad.append(i)
        else:
            parts[name].append(i)
    refuse_values(bad, values, f"split column {column!r} must contain train/valid/test (or val), "
                  "found", "other values", "; fix the column or use split='random' or 'scaffold'")
    return _as_dict(parts["train"], parts["valid"], parts["test"])
