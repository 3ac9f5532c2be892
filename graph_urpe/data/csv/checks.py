"""Warnings about a CSV dataset that trains but may not mean what the user thinks: a label column
that is constant in the training split, a molecule listed more than once within one split, and a
scaffold split far from its fractions.

All go through the module's :mod:`logging` logger (``graph_urpe.data.csv.checks``), one line each,
reason first, naming the file and the column or split.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping, Sequence

import numpy as np
import torch
from rdkit import Chem

__all__ = ["warn_constant_labels", "warn_duplicate_smiles", "warn_lopsided_split"]

log = logging.getLogger(__name__)


def warn_constant_labels(y: torch.Tensor, train: torch.Tensor, columns: Sequence[str],
                         source: str) -> list[str]:
    """Warn for every label column whose training labels are all the same value (the model can
    learn nothing from it; a classification column with one class also has no ROC-AUC).

    Args:
        y (Tensor): ``[N, T]`` float labels, NaN for missing.
        train (Tensor): ``[N_train]`` long indices of the training split.
        columns (sequence of str): the ``T`` column names.
        source (str): the file, for the message.

    Returns:
        list[str]: the constant columns.
    """
    constant = []
    for t, column in enumerate(columns):
        values = y[train, t]
        values = values[~torch.isnan(values)]
        if len(values) >= 2 and bool((values == values[0]).all()):
            constant.append(column)
            log.warning(
                "constant target: label column %r of %s has the same value (%g) for all %d "
                "labelled training molecules, so there is nothing to learn from it; check the "
                "column (or the split)", column, source, float(values[0]), len(values))
    return constant


def _canonical(smiles: str) -> str:
    mol = Chem.MolFromSmiles(smiles)
    return Chem.MolToSmiles(mol) if mol is not None else smiles


def warn_duplicate_smiles(smiles: Sequence[str], splits: Mapping[str, torch.Tensor],
                          source: str, keys: Sequence[Hashable] | None = None) -> dict[str, int]:
    """Warn for every split that lists one molecule (same canonical SMILES) more than once: its
    labels then weigh more in training, or in the metrics of the split.

    Args:
        smiles (sequence of str): SMILES of every graph ``[N]``.
        splits (mapping): split name -> ``[N_split]`` long indices.
        source (str): the file, for the message.
        keys (sequence, optional): one key per graph that is equal exactly for equal molecules,
            e.g. :func:`graph_urpe.data.processing.canonical_key` computed at featurization
            (default: :obj:`None`: each SMILES is parsed and canonicalised here).

    Returns:
        dict[str, int]: per split with duplicates, the number of surplus rows.
    """
    canonical = np.asarray([_canonical(s) for s in smiles] if keys is None else keys)
    found = {}
    for name, idx in splits.items():
        positions = np.asarray(idx, dtype=np.int64)
        _, first, counts = np.unique(canonical[positions], return_index=True, return_counts=True)
        repeated = counts > 1
        if not repeated.any():
            continue
        surplus = int((counts[repeated] - 1).sum())
        found[name] = surplus
        # The most repeated molecule; of equals, the one met first in the split.
        most = np.flatnonzero(counts == counts.max())
        best = most[np.argmin(first[most])]
        at = int(positions[first[best]])
        times, example = int(counts[best]), canonical[at] if keys is None else smiles[at]
        log.warning(
            "duplicate SMILES: %d of the %d rows of the %s split of %s repeat a molecule already "
            "in it (%d molecules more than once, e.g. %s %d times), so their labels count more "
            "than once; remove the duplicates or average their labels",
            surplus, len(idx), name, source, int(repeated.sum()), example, times)
    return found


def warn_lopsided_split(sizes: Mapping[str, int], fractions: Sequence[float], source: str) -> bool:
    """Warn when a scaffold split came out far from its fractions: training holds under half its
    share, or a split with a positive fraction is empty.

    The scaffold split keeps each Murcko-scaffold group whole and gives train only groups that
    fit its share (:func:`~graph_urpe.data.csv.splits.scaffold_split`); a set dominated by one
    group (mostly acyclic molecules, whose scaffold is empty; one ring system) sends that group to
    valid or test.

    Args:
        sizes (Mapping[str, int]): molecules per split, keys ``train``, ``valid``, ``test``.
        fractions (Sequence[float]): the train, valid and test fractions asked for.
        source (str): the file, for the message.

    Returns:
        bool: True if it warned.
    """
    n = sum(sizes.values())
    names = ("train", "valid", "test")
    if n == 0 or not (sizes["train"] < 0.5 * fractions[0] * n or any(
            sizes[name] == 0 and f > 0 for name, f in zip(names, fractions))):
        return False
    got = ", ".join(f"{name} {sizes[name]} ({sizes[name] / n:.0%})" for name in names)
    asked = " / ".join(f"{f:g}" for f in fractions)
    log.warning(
        "lopsided scaffold split: %s gives %s against the fractions %s; the scaffold split keeps "
        "each scaffold group whole and sends a group larger than train's share (mostly acyclic "
        "molecules share the empty scaffold) to valid or test. Use a random split "
        "(--data.init_args.split random) or your own split column", source, got, asked)
    return True
