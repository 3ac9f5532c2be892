"""How much a test metric could vary with the test molecules: a bootstrap confidence interval.

On a small test split the metric of one run is itself uncertain: 65 test molecules (FreeSolv's
scaffold split) give a MAE whose 95 % interval is about +-20 % wide. :func:`bootstrap_interval`
resamples the test rows with replacement (paired: a resample keeps each row's prediction with its
label) and recomputes the metric each time with the same functions as the epoch metrics
(:func:`~graph_urpe.models.metrics.epoch_metrics`,
:func:`~graph_urpe.models.metrics.multiclass_metrics`). For one classification task and for
multi-class labels the resampling is stratified (as pROC's ``ci.auc`` does by default): the rows
of each class are resampled among themselves, so every resample holds each class as often as the
split does and ROC-AUC is defined on every resample, also with a handful of positives. (With
several tasks the rows are resampled together: a resample's metric is the mean over the tasks
that hold both classes, as in the epoch metrics.) It says nothing of the spread over training
seeds: ``graph-urpe seeds`` measures that.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from graph_urpe.models.metrics import epoch_metrics, multiclass_metrics

__all__ = ["MAX_BOOTSTRAP_CELLS", "bootstrap_interval", "bootstrap_strata"]

MAX_BOOTSTRAP_CELLS = 20_000
"""Largest ``rows x label columns`` bootstrapped (the summary skips larger test splits: there the
interval is narrow and 1,000 recomputations of every task's metric would cost minutes)."""


def bootstrap_strata(target: Tensor, task: str) -> list[np.ndarray]:
    r"""The groups of rows a bootstrap resamples separately: the rows of each class for one
    classification task (``0``, ``1``; unlabelled rows a group of their own) and for multi-class
    labels; one group (all rows) for regression and for several classification tasks.

    Args:
        target (Tensor): ``[R, T]`` labels, NaN = missing (multiclass: ``[R, 1]`` class ids).
        task (str): ``"regression"``, ``"classification"`` or ``"multiclass"``.

    Returns:
        list[numpy.ndarray]: row indices of each group, together every row once.
    """
    rows = target.shape[0]
    if task == "regression" or (task == "classification" and target.shape[1] > 1) or not rows:
        return [np.arange(rows)]
    keys = np.nan_to_num(target[:, 0].detach().float().cpu().numpy(), nan=-1.0)
    return [np.flatnonzero(keys == k) for k in np.unique(keys)]


def bootstrap_interval(pred: Tensor, target: Tensor, task: str, metric: str,
                       n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0
                       ) -> tuple[float, float] | None:
    r"""Percentile bootstrap interval of a test metric over the test rows, stratified by class
    for classification (:func:`bootstrap_strata`).

    Args:
        pred (Tensor): ``[R, T]`` predictions in the labels' units (classification: scores or
            logits; multiclass: ``[R, C]`` logits).
        target (Tensor): ``[R, T]`` labels, NaN = missing (multiclass: ``[R, 1]`` class ids).
        task (str): ``"regression"``, ``"classification"`` or ``"multiclass"``.
        metric (str): a key of the task's metrics (``"mae"``, ``"rocauc"``, ``"accuracy"``, ...).
        n_resamples (int, optional): bootstrap resamples. (default: :obj:`1000`)
        confidence (float, optional): the interval's level. (default: :obj:`0.95`)
        seed (int, optional): the resampling's random seed (deterministic). (default: :obj:`0`)

    Returns:
        tuple[float, float] or None: ``(low, high)`` in the metric's units, the
        ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of the resamples'
        metrics; :obj:`None` when it is undefined: fewer than 2 rows, the metric is NaN on the
        split (no labels, one class only) or on some resample (several classification tasks
        resampled together, none of them with both classes).

    Raises:
        KeyError: for a metric the task does not compute.
    """
    pred, target = pred.detach().float().cpu(), target.detach().float().cpu()
    rows = pred.shape[0]

    def value(idx: np.ndarray) -> float:
        idx = torch.as_tensor(idx, dtype=torch.long)
        if task == "multiclass":
            return multiclass_metrics(pred[idx], target[idx, :1])[metric]
        return epoch_metrics(pred[idx], target[idx], task, names=(metric,))[metric]

    if rows < 2 or not np.isfinite(value(np.arange(rows))):
        return None
    strata = bootstrap_strata(target, task)
    rng = np.random.default_rng(seed)
    values = np.array([value(np.concatenate([g[rng.integers(0, g.size, g.size)] for g in strata]))
                       for _ in range(n_resamples)])
    if not np.isfinite(values).all():
        return None
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)
