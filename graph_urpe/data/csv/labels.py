"""Reading label columns of a table into a float matrix, refusing values that are not labels.

Missing labels (empty cells, ``NaN``, ``NA``) become NaN and are kept: losses and metrics mask them.
A non-numeric value (a typo, a unit) or an infinite one (``inf``, ``-inf``, or a value such as
``1e300`` that becomes infinite in float32: MSE would turn every
weight into NaN after one step) is an error naming the column and rows, never a silent NaN; a label
of magnitude above :data:`LARGE_LABEL` is accepted with a warning naming the column.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np
import pandas as pd

from graph_urpe.choices import check_choice
from graph_urpe.data.csv.row_errors import refuse_values

CSVTask = Literal["regression", "classification"]
TASKS = get_args(CSVTask)

LARGE_LABEL = 1e6
"""Labels of larger magnitude are accepted with a warning (check the units, or rescale)."""


def label_matrix(frame: pd.DataFrame, columns: Sequence[str], task: str = "regression",
                 source: str = "the input") -> np.ndarray:
    r"""Returns the label columns as a ``float64`` ``[N, T]`` matrix (NaN = missing).

    Args:
        frame (pandas.DataFrame): the table.
        columns (Sequence[str]): label column names (``T`` of them).
        task (str, optional): ``"regression"`` or ``"classification"`` (labels must then be 0 or 1,
            or missing). (default: :obj:`"regression"`)
        source (str, optional): name of the input, for messages.

    Raises:
        ValueError: for an unknown task, no or missing columns, a column without any value, a
            non-numeric or infinite value (naming the column and rows), or a classification label
            other than 0/1.

    Warns:
        UserWarning: naming each column holding a label of magnitude above :data:`LARGE_LABEL`.
    """
    check_choice("task", task, CSVTask)
    columns = list(columns)
    if not columns:
        raise ValueError("give at least one label (target) column")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(
            f"label columns {missing} not found in {source}; available columns: "
            f"{list(frame.columns)}"
        )
    out = np.empty((len(frame), len(columns)), dtype=np.float64)
    for t, column in enumerate(columns):
        raw = frame[column]
        values = pd.to_numeric(raw, errors="coerce")
        blank = raw.isna() | raw.astype(str).str.strip().isin(["", "nan", "NaN", "NA"])
        head = f"label column {column!r} of {source} has"
        refuse_values(np.flatnonzero(values.isna().to_numpy() & ~blank.to_numpy()), raw,
                      head, "non-numeric values", "; leave a cell empty for a missing label")
        out[:, t] = values.to_numpy(dtype=np.float64)
        if len(out) and np.isnan(out[:, t]).all():
            raise ValueError(
                f"label column {column!r} of {source} has no value in any of its {len(out)} rows "
                "(0 labels); fill it in or leave it out of the target columns"
            )
        with np.errstate(over="ignore"):  # finite after the cast to the training dtype
            trained = out[:, t].astype(np.float32)
        refuse_values(np.flatnonzero(np.isinf(trained)), out[:, t], head, "infinite values",
                      "; replace them with finite numbers (training uses float32: at most "
                      "3.4e38), or leave the cells empty to mark the labels missing")
        big = np.flatnonzero(np.abs(out[:, t]) > LARGE_LABEL)
        if len(big):
            warnings.warn(
                f"label column {column!r} of {source} has {len(big)} values of magnitude above "
                f"{LARGE_LABEL:g} (largest {float(np.abs(out[big, t]).max()):g}, row {int(big[0])}"
                f" (CSV line {int(big[0]) + 2})); check the units or rescale the column", stacklevel=2)
        if task == "classification":
            known = ~np.isnan(out[:, t])
            refuse_values(
                np.flatnonzero(known & ~np.isin(out[:, t], [0.0, 1.0])), out[:, t],
                f"classification label column {column!r} of {source} must hold 0, 1 or an empty "
                "cell; found", "other values",
                f" among {int(known.sum())} labels. Use task='regression' for continuous targets.")
    return out
