r"""The applicability domain of a CSV fit's classical model
(:class:`~graph_urpe.models.classical.ClassicalModel`): the Tanimoto similarity (ECFP4) of each
molecule to its nearest training molecule, and the threshold below which a prediction is flagged.

The threshold (:func:`similarity_threshold`) is chosen on the validation rows from the classical
model's error there (:func:`row_errors`; regression: absolute error over the training std;
classification: :math:`|y - p|`; averaged over a row's labels): among the 10th, 20th, ..., 50th
percentiles of their similarities, the one with the largest ratio of the mean error below it to
the mean error above it, if that ratio is at least :data:`ERROR_RATIO`; otherwise the smallest
validation similarity (the edge of what was validated). At least 10 labelled validation rows
are needed (else no threshold, no warning). ``predict`` warns (one line) for the molecules
below it (:func:`domain_warning`, in the columns of
:func:`~graph_urpe.models.classical_columns.classical_columns`) and counts them
(:func:`count_outside_domain`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from graph_urpe.models.classical import ClassicalModel

__all__ = ["ERROR_RATIO", "count_outside_domain", "domain_warning", "row_errors",
           "similarity_threshold"]

ERROR_RATIO = 1.5
"""How much worse the validation error below the applicability threshold must be."""


def row_errors(pred: np.ndarray, target: np.ndarray, model: ClassicalModel) -> np.ndarray:
    """The error of each row that :func:`similarity_threshold` reads.

    Args:
        pred (numpy.ndarray): ``[N, T]`` the SVM's predictions (the first member of
            :meth:`ClassicalModel.predict <graph_urpe.models.classical.ClassicalModel.predict>`).
        target (numpy.ndarray): ``[N, T]`` labels, NaN = missing.
        model (ClassicalModel): the model (its task; regression: the training stds).

    Returns:
        numpy.ndarray: ``[N]`` mean over the row's labelled, modelled columns of the absolute
        error over the training std (regression) or :math:`|y - p|` (classification); NaN if
        none.
    """
    error = np.abs(pred - target)
    if model.task == "regression":
        error = error / np.array([e["std"] for e in model.tasks])
    with np.errstate(invalid="ignore"):
        counts = (~np.isnan(error)).sum(1)
        return np.where(counts > 0, np.nansum(error, 1) / np.maximum(counts, 1), np.nan)


def similarity_threshold(similarity: np.ndarray, error: np.ndarray) -> float:
    """The applicability threshold from validation rows (rule in the module docstring).

    Args:
        similarity (numpy.ndarray): ``[N]`` Tanimoto similarity to the nearest training molecule.
        error (numpy.ndarray): ``[N]`` the row's error (NaN: unlabelled, left out).

    Returns:
        float: the threshold in ``[0, 1]``; NaN with fewer than 10 labelled rows (no warning).
    """
    keep = ~np.isnan(error)
    s, e = similarity[keep], error[keep]
    if len(s) < 10:
        return float("nan")
    chosen, best = float(s.min()), ERROR_RATIO
    for q in (10, 20, 30, 40, 50):
        t = float(np.percentile(s, q))
        below, above = e[s < t], e[s >= t]
        if len(below) and len(above) and below.mean() >= best * above.mean():
            chosen, best = t, below.mean() / max(above.mean(), 1e-300)
    return chosen


def domain_warning(warning: str, similarity: float, nearest: Any, threshold: float) -> str:
    """A row's ``warning`` with the applicability-domain note added below the threshold.

    Args:
        warning (str): the row's ``warning`` so far (``""``: none).
        similarity (float): its ECFP4 Tanimoto similarity to the nearest training molecule (NaN:
            a row that failed, no note).
        nearest (Any): that molecule's CSV data row.
        threshold (float): the model's applicability threshold.

    Returns:
        str: ``warning``, with the note appended when ``similarity`` is below ``threshold``
        (both with two decimals, more where two would print them equal).
    """
    if not similarity < threshold:  # NaN (a failed row) too
        return warning
    digits = 2  # as many as tell the two apart (0.157 below 0.161, not 0.16 below 0.16)
    while f"{similarity:.{digits}f}" == f"{threshold:.{digits}f}" and digits < 6:
        digits += 1
    note = (f"outside the applicability domain: ECFP4 similarity {similarity:.{digits}f} to the "
            f"nearest training molecule (row {int(nearest)}), below {threshold:.{digits}f}")
    return f"{warning}; {note}" if warning else note


def count_outside_domain(table: pd.DataFrame, model: ClassicalModel) -> int:
    """Rows of a :func:`~graph_urpe.models.classical_columns.classical_columns` table below the model's applicability threshold.

    Args:
        table (pandas.DataFrame): ``N`` rows with ``nearest_train_similarity`` (ECFP4 Tanimoto,
            in ``[0, 1]``; empty for rows that failed).
        model (ClassicalModel): its ``similarity_threshold`` (NaN: no threshold, count 0).

    Returns:
        int: the number of rows whose similarity is below the threshold.
    """
    if np.isnan(model.similarity_threshold):
        return 0
    similarity = pd.to_numeric(table["nearest_train_similarity"], errors="coerce").to_numpy()
    return int((similarity < model.similarity_threshold).sum())
