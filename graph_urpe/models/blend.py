r"""The blend of the network and the classical model of a CSV fit (issue 41, item 2): per label
column :math:`w \cdot \text{network} + (1 - w) \cdot \text{classical}` (labels' units for
regression, probabilities of class 1 for classification).

The weight of a column is chosen on the validation rows of the checkpoint it belongs to and
shrunk towards a prior (:func:`blend_weights`):

.. math::
    w = \frac{n \, w_\text{val} + n_0 \, w_0}{n + n_0}

with :math:`n` the column's labelled validation rows, :math:`w_\text{val}` the weight of
:data:`WEIGHT_GRID` with the smallest validation MSE (regression) or log-loss
(classification), and the prior :data:`PRIOR_WEIGHT` (:math:`w_0`) worth
:data:`PRIOR_ROWS` (:math:`n_0`) rows. A validation split of ~50 molecules is too small to
choose between two models (issue 41: on six ChEMBL sets a freely chosen weight had one bad
choice), so a small one mostly keeps the prior and a large one decides. A column without a
classical model keeps :math:`w = 1` (the network).

:class:`~graph_urpe.models.classical_baseline.ClassicalBaseline` fits it (the stored weight of
each checkpoint from that checkpoint's validation predictions; the tested checkpoint's again
at ``test``), logs ``val|test/<metric>_blend`` and keeps it in the checkpoint
(``blend_weight``); ``predict`` writes ``<target>_blend``
(:func:`~graph_urpe.models.classical_baseline.classical_columns`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

__all__ = ["PRIOR_ROWS", "PRIOR_WEIGHT", "SUFFIX", "WEIGHT_GRID", "blend", "blend_weights",
           "network_predictions", "shrunk_weight", "summary_note", "validation_weight",
           "weight_note", "weight_problem"]

PRIOR_WEIGHT = 0.5
"""The prior weight of the network (:math:`w_0`): the 50/50 average. A prior to be measured on
the public benchmark (``benchmarks/peers/chemprop.py``, its validation rows), never on test
rows."""

PRIOR_ROWS = 100
"""How many validation rows the prior is worth (:math:`n_0`). A prior to be measured on the
public benchmark (``benchmarks/peers/chemprop.py``, its validation rows), never on test rows."""

WEIGHT_GRID = np.linspace(0.0, 1.0, 21)
"""The network weights :math:`w_\\text{val}` is chosen from: 0, 0.05, ..., 1."""

SUFFIX = "_blend"
"""``predict``'s column of the blend, ``<target>_blend``, and the metrics' suffix
(``val|test/<metric>_blend``)."""


def blend(network: np.ndarray, classical: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The blend ``w * network + (1 - w) * classical`` per column; a column with ``w = 1`` is the
    network's (whatever the classical model's value, NaN for a column without one).

    Args:
        network (numpy.ndarray): ``[N, T]`` the network's predictions (labels' units or
            probabilities).
        classical (numpy.ndarray): ``[N, T]`` the classical model's, NaN = no model.
        weight (numpy.ndarray): ``[T]`` the network's weight per column.

    Returns:
        numpy.ndarray: ``[N, T]`` float64.
    """
    network, classical = np.asarray(network, np.float64), np.asarray(classical, np.float64)
    weight = np.asarray(weight, np.float64)
    with np.errstate(invalid="ignore"):
        mixed = weight * network + (1.0 - weight) * classical
    return np.where(weight == 1.0, network, mixed)


def _losses(network: np.ndarray, classical: np.ndarray, target: np.ndarray,
            task: str) -> np.ndarray:
    """The validation loss of each weight of :data:`WEIGHT_GRID` (``[W]``)."""
    from sklearn.metrics import log_loss, mean_squared_error

    out = []
    with np.errstate(over="ignore", invalid="ignore"):  # labels near the float range
        for w in WEIGHT_GRID:
            p = w * network + (1.0 - w) * classical
            if not np.isfinite(p).all():
                out.append(math.inf)
                continue
            out.append(mean_squared_error(target, p) if task == "regression" else
                       log_loss(target, np.clip(p, 0.0, 1.0), labels=[0, 1]))
    losses = np.asarray(out, dtype=np.float64)
    return np.where(np.isnan(losses), math.inf, losses)


def validation_weight(network: np.ndarray, classical: np.ndarray, target: np.ndarray,
                      task: str) -> float:
    """:math:`w_\\text{val}`: the weight of :data:`WEIGHT_GRID` with the smallest validation MSE
    (regression) or log-loss (classification, scikit-learn's
    :func:`~sklearn.metrics.log_loss`); the smallest such weight on a tie.

    Args:
        network (numpy.ndarray): ``[n]`` the network's predictions of one column's labelled rows.
        classical (numpy.ndarray): ``[n]`` the classical model's (probabilities in ``[0, 1]``
            for classification).
        target (numpy.ndarray): ``[n]`` their labels (0/1 for classification).
        task (str): ``"regression"`` or ``"classification"``.

    Returns:
        float: in ``[0, 1]``; NaN when ``n = 0``; 1 (the network's) when no weight has a finite
        validation loss (e.g. labels near the float range).

    Raises:
        ValueError: for an unknown task.
    """
    if task not in ("regression", "classification"):
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
    if len(target) == 0:
        return math.nan
    losses = _losses(network, classical, target, task)
    if not np.isfinite(losses).any():  # e.g. labels near the float range: keep the network's
        return 1.0
    return float(WEIGHT_GRID[int(np.argmin(losses))])


def shrunk_weight(w_val: float, n: int, w0: float = PRIOR_WEIGHT,
                  n0: float = PRIOR_ROWS) -> float:
    """:math:`(n \\, w_\\text{val} + n_0 w_0) / (n + n_0)` (the module docstring).

    Args:
        w_val (float): the validation weight (ignored when ``n = 0``).
        n (int): the labelled validation rows it was chosen on.
        w0 (float, optional): the prior weight. (default: :data:`PRIOR_WEIGHT`)
        n0 (float, optional): the prior's rows. (default: :data:`PRIOR_ROWS`)

    Returns:
        float: the weight; ``w0`` when ``n = 0``.
    """
    return float(w0) if n == 0 else (n * w_val + n0 * w0) / (n + n0)


def blend_weights(network: np.ndarray, classical: np.ndarray, target: np.ndarray,
                  task: str, modelled: np.ndarray | None = None) -> np.ndarray:
    """The network's weight of each column from validation rows (module docstring): the rows
    where the label and both predictions are finite; ``1`` for a column without a classical
    model.

    Args:
        network (numpy.ndarray): ``[N, T]`` the network's validation predictions.
        classical (numpy.ndarray): ``[N, T]`` the classical model's, NaN = no model.
        target (numpy.ndarray): ``[N, T]`` labels, NaN = missing.
        task (str): ``"regression"`` or ``"classification"``.
        modelled (numpy.ndarray, optional): ``[T]`` bool, the columns with a classical model.
            (default: :obj:`None`: those with a prediction that is not NaN)

    Returns:
        numpy.ndarray: ``[T]`` float64 in ``[0, 1]``.
    """
    network, classical, target = (np.asarray(a, np.float64) for a in (network, classical, target))
    out = np.ones(target.shape[1])
    modelled = (~np.isnan(classical)).any(0) if modelled is None else modelled
    for t in np.flatnonzero(modelled):
        keep = np.isfinite(network[:, t]) & np.isfinite(classical[:, t]) & np.isfinite(target[:, t])
        n = int(keep.sum())
        w_val = validation_weight(network[keep, t], classical[keep, t], target[keep, t], task)
        out[t] = shrunk_weight(w_val, n)
    return out


def weight_problem(value: Any, num_tasks: int) -> str | None:
    """What makes a stored ``blend_weight`` differ from what this version writes (a float64
    tensor ``[T]`` of finite values in ``[0, 1]``), or :obj:`None`."""
    if not isinstance(value, torch.Tensor) or value.dtype != torch.float64 or value.dim() != 1:
        kind = f"a {value.dtype} tensor of {value.dim()} dims" if isinstance(
            value, torch.Tensor) else type(value).__name__
        return f"blend_weight is {kind}, this version writes a torch.float64 tensor of 1 dims"
    if value.shape[0] != num_tasks:
        return f"blend_weight has {value.shape[0]} values for {num_tasks} label columns"
    if not bool(torch.isfinite(value).all()) or bool((value < 0).any() | (value > 1).any()):
        return "blend_weight holds values that are not finite numbers in [0, 1]"
    return None


def network_predictions(trainer: Any, module: Any, loader: Any, size: int) -> np.ndarray:
    """The network's predictions of one split from the module's own ``predict_step``
    (``prediction``: labels' units, probabilities for classification), in sample-id order, under
    the trainer's precision as ``predict`` runs it (its ``predict_step_context``).

    Args:
        trainer (Trainer): the trainer (it moves the batches to the module's device).
        module (LightningModule): a :class:`~graph_urpe.models.graph.GraphPropertyModule`.
        loader (Iterable): the split's loader (batches with ``sample_id``).
        size (int): the split's number of molecules.

    Returns:
        numpy.ndarray: ``[size, T]`` float64, NaN for a molecule the loader did not give.
    """
    out = np.full((size, module.num_labels), np.nan)
    with torch.no_grad(), trainer.precision_plugin.predict_step_context():
        for batch in loader:
            rows = module.predict_step(trainer.strategy.batch_to_device(batch, module.device), 0)
            out[rows["sample_id"].cpu().numpy()] = rows["prediction"].double().cpu().numpy()
    return out


def weight_note(weight: np.ndarray) -> str:
    """How the summary names the blend: ``"blend, w 0.42"`` (one weight per column, the first
    four)."""
    shown = ", ".join(f"{w:.2f}" for w in np.asarray(weight)[:4])
    return f"blend, w {shown}{', ...' if len(weight) > 4 else ''}"


def summary_note(callbacks: Any, value: float | None, fmt: Any) -> str:
    """The fit summary's blend after a test metric: ``" | 0.3610 (blend, w 0.42)"``, or ``""``
    when no callback holds a tested weight (``ClassicalBaseline.tested_weight``) or no value.

    Args:
        callbacks (list): the trainer's callbacks.
        value (float, optional): the blend's ``test/<metric>_blend``.
        fmt (Callable): formats a metric's value.
    """
    weight = next((c.tested_weight for c in callbacks
                   if getattr(c, "tested_weight", None) is not None), None)
    return "" if weight is None or value is None else f" | {fmt(value)} ({weight_note(weight)})"
