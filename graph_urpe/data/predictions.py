"""The prediction table for SMILES inputs: one output row per input row, in input order.

Rows that could not become a graph (invalid SMILES, an atom the featurization cannot type, a graph
larger than the limit) or whose outputs are broken (:func:`output_errors`: a prediction or
uncertainty that is not finite, a negative std, an interval whose lower end is above its upper
end) keep their place with empty predictions and the reason in ``error``. The input's own columns
are kept as they are: an input column named like one the table adds (:func:`output_columns`) is
refused (:func:`check_output_columns`), never overwritten.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["NOT_FINITE", "UNCERTAINTY_KEYS", "check_output_columns", "output_columns",
           "output_errors", "prediction_table"]

NOT_FINITE = ("the model's {what} is not finite (NaN or infinite): the checkpoint's weights or "
              "statistics are broken; use another checkpoint")
"""The reason of a row whose model output is not finite (``{what}``: e.g. ``prediction``), the
same in ``predict``, :class:`~graph_urpe.Predictor`, ``fingerprint`` and ``explain``."""

UNCERTAINTY_KEYS = ("std", "lower", "upper")
"""Suffixes of the uncertainty columns an ensemble's table adds after each ``<target>_pred``."""


def output_columns(target_names: list[str], keys: tuple[str, ...] = UNCERTAINTY_KEYS
                   ) -> list[str]:
    """The columns :func:`prediction_table` may add: ``row``, ``<target>_pred`` (and
    ``<target>_<key>`` for each of ``keys``), ``error``, ``warning``."""
    return ["row", *(f"{name}_{key}" for name in target_names for key in ("pred", *keys)),
            "error", "warning"]


def check_output_columns(columns: list[str], target_names: list[str], source: str,
                         keys: tuple[str, ...] = UNCERTAINTY_KEYS) -> None:
    """Refuse input ``columns`` named like the table's own (:func:`output_columns`).

    Raises:
        ValueError: naming ``source``, the columns and the fix.
    """
    clash = [c for c in output_columns(target_names, keys) if c in set(columns)]
    if clash:
        raise ValueError(f"{source} has column(s) {clash}, which predict writes (row, "
                         "<target>_pred / _std / _lower / _upper, error, warning): rename them in "
                         "the input so that none of your values is overwritten.")


def output_errors(predictions: np.ndarray, target_names: list[str],
                  uncertainty: dict[str, np.ndarray] | None = None) -> dict[int, str]:
    """Positions of the predicted rows whose outputs cannot be given, with the reason: a
    prediction or uncertainty that is not finite (:data:`NOT_FINITE`), a negative ``std``, or
    ``lower > upper``. A checkpoint with broken weights or calibration buffers (a negative
    ``uncertainty_scale`` or ``interval_factor``) gives such rows.

    Args:
        predictions (numpy.ndarray): ``[G, T]`` predictions.
        target_names (list[str]): ``T`` names (name the column in the reason).
        uncertainty (dict[str, numpy.ndarray], optional): ``{"std" | "lower" | "upper": [G, T]}``
            (default: :obj:`None`).

    Returns:
        dict[int, str]: position in ``predictions`` (``0 .. G-1``) -> the first problem of that
        row.
    """
    columns = {"pred": np.asarray(predictions, dtype=np.float64),
               **{k: np.asarray(v, dtype=np.float64) for k, v in (uncertainty or {}).items()}}
    found: dict[int, str] = {}

    def note(bad: np.ndarray, reason) -> None:
        for g, t in np.argwhere(bad).tolist():
            found.setdefault(g, reason(g, t))

    for key, values in columns.items():
        note(~np.isfinite(values), lambda g, t, key=key: NOT_FINITE.format(
            what="prediction" if key == "pred" else f"{target_names[t]}_{key}"))
    if "std" in columns:
        std = columns["std"]
        note(std < 0, lambda g, t: (
            f"the model's {target_names[t]}_std is negative ({std[g, t]:.4g}): the checkpoint's "
            "calibration is broken; use another checkpoint"))
    if "lower" in columns and "upper" in columns:
        lower, upper = columns["lower"], columns["upper"]
        note(lower > upper, lambda g, t: (
            f"the model's interval is inverted ({target_names[t]}_lower {lower[g, t]:.4g} > "
            f"{target_names[t]}_upper {upper[g, t]:.4g}): the checkpoint's calibration is "
            "broken; use another checkpoint"))
    return found


def prediction_table(
    frame: pd.DataFrame,
    rows: np.ndarray,
    predictions: np.ndarray,
    errors: dict[int, str],
    target_names: list[str],
    warnings: dict[int, str] | None = None,
    uncertainty: dict[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """The output table: ``row`` (the 0-based input row, as in ``test_predictions.csv``; a CSV's
    line is row + 2), the input columns, ``<target>_pred`` columns (named as in
    ``test_predictions.csv``), ``error`` and ``warning`` (inputs outside the training vocabulary).

    Args:
        frame (pandas.DataFrame): the input table (``N`` rows, in input order).
        rows (numpy.ndarray): ``[G]`` input row numbers of the predicted graphs.
        predictions (numpy.ndarray): ``[G, T]`` predictions aligned with ``rows``.
        errors (dict[int, str]): input row -> reason, for rows without a graph; the rows whose
            outputs are broken (:func:`output_errors`) are added.
        target_names (list[str]): ``T`` names.
        warnings (dict[int, str], optional): input row -> why the prediction is doubtful.
            (default: :obj:`None`)
        uncertainty (dict[str, numpy.ndarray], optional): ``[G, T]`` arrays aligned with
            ``rows``, written after each target's prediction as ``<target>_<key>``: ``std``,
            ``lower``, ``upper`` (the 95 % interval). (default: :obj:`None`)

    Returns:
        pandas.DataFrame: ``N`` rows in input order; predictions and uncertainty empty (NaN)
        where ``error`` is set.

    Raises:
        ValueError: an input column is named like an output column (:func:`check_output_columns`).
        RuntimeError: if an input row got neither a prediction nor an error.
    """
    check_output_columns(list(frame.columns), target_names, "the input table",
                         tuple(uncertainty or ()))
    out = frame.copy()
    out.insert(0, "row", np.arange(len(frame)))
    rows = np.asarray(rows, dtype=np.int64)
    broken = output_errors(predictions, target_names, uncertainty)
    errors = {**errors, **{int(rows[g]): reason for g, reason in broken.items()}}
    kept = np.ones(len(rows), dtype=bool)
    kept[list(broken)] = False
    columns = {"pred": predictions, **(uncertainty or {})}
    for key, array in columns.items():
        values = np.full((len(frame), len(target_names)), np.nan)
        values[rows[kept]] = np.asarray(array, dtype=np.float64)[kept]
        columns[key] = values
    for t, name in enumerate(target_names):
        for key, values in columns.items():
            out[f"{name}_{key}"] = values[:, t]
    reason = [errors.get(i, "") for i in range(len(frame))]
    missing = sorted(set(range(len(frame))) - set(rows.tolist()) - set(errors))
    if missing:
        raise RuntimeError(f"rows {missing[:10]} got neither a prediction nor an error.")
    out["error"] = reason
    out["warning"] = [(warnings or {}).get(i, "") for i in range(len(frame))]
    return out
