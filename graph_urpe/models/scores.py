"""A split's epoch scores from the rows a :class:`~graph_urpe.models.graph.GraphPropertyModule`
collected over it: the metrics of :mod:`graph_urpe.models.metrics` in the labels' units, the loss
in training units, the row counts, and (regression) the calibration of
:mod:`graph_urpe.models.calibration`.

The rows are the gathered, de-duplicated ones of
:class:`~graph_urpe.models.metrics.EpochPredictions` (every rank holds the same), so the scores
are exact under DDP.
"""

from __future__ import annotations

import torch
from torch import Tensor

from graph_urpe.models.metrics import epoch_metrics, multiclass_metrics
from graph_urpe.models.sample_ids import NODE_ID_STRIDE

__all__ = ["row_labels", "split_scores"]


def row_labels(batch, rows: int, level: str, num_labels: int) -> Tensor:
    """``batch.y`` as ``[rows, num_labels]`` float32, one row per output row of the network.

    Raises:
        ValueError: ``batch.y`` has another number of rows than the network's outputs (labels
            per graph for a node-level network, or the other way round).
    """
    y = batch.y
    if y.shape[0] != rows:
        per = "node" if level == "node" else "graph"
        raise ValueError(
            f"the network predicts {rows} rows (level={level!r}: one per {per}) but batch.y has "
            f"{y.shape[0]}: a {per}-level network needs labels per {per} (y [num_{per}s] or "
            f"[num_{per}s, T]); set the network's level to fit the data.")
    return y.reshape(rows, num_labels).to(torch.float32)


def split_scores(module, stage: str, ids: Tensor, pred: Tensor, target: Tensor
                 ) -> dict[str, float]:
    r"""Score one split's collected rows.

    Args:
        module (GraphPropertyModule): the module (its task, labels, loss, calibration).
        stage (str): ``"val"`` or ``"test"``: the keys' prefix; at ``"val"`` the calibration is
            fitted, at ``"test"`` it is scored and Platt scaling applied.
        ids (Tensor): row ids ``[R]`` (int64; node level: :func:`node_sample_ids`).
        pred (Tensor): what the module collected per row, ``[R, width]`` float32: regression and
            classification ``[values, variances]`` (``2 T`` columns), multiclass the logits.
        target (Tensor): the labels as collected, ``[R, width]`` (the labels twice, or the class
            label in every column).

    Returns:
        dict[str, float]: ``{"<stage>/<metric>": value}`` with ``<stage>/loss``,
        ``<stage>/num_graphs`` (node level also ``<stage>/num_nodes``) and, for regression
        and ensembles, the calibration scores.

    Side effects:
        ``module.test_outputs = (ids, pred, target)`` at ``"test"`` (logits or the labels'
        units), what the run's ``test_predictions.csv`` is written from.
    """
    task, labels = module.record.task, module.num_labels
    variance = None
    if task == "multiclass":
        target = target[:, :1]
    else:  # (values, variances) with the labels twice: see GraphPropertyModule._eval_rows
        pred, variance, target = pred[:, :labels], pred[:, labels:], target[:, :labels]
    if stage == "test" and task == "classification":  # calibrated (platt_scaling)
        pred = module.platt_logits(pred)
    raw = pred
    if task == "regression":
        raw = (pred - module.target_mean) / module.target_std
        if module.mve:
            raw = torch.cat([raw, variance / module.target_std.square()], dim=-1)
    loss = module.loss(raw, target)  # over the de-duplicated rows, in training units
    values = multiclass_metrics(pred, target) if task == "multiclass" else \
        epoch_metrics(pred, target, task, module.record.evaluator)
    values = {f"{stage}/{k}": v for k, v in values.items()}
    values[f"{stage}/loss"] = float(loss)
    graph_ids = ids
    if module.level == "node":
        values[f"{stage}/num_nodes"] = float(ids.numel())
        graph_ids = torch.unique(torch.div(ids, NODE_ID_STRIDE, rounding_mode="floor"))
    values[f"{stage}/num_graphs"] = float(graph_ids.numel())
    if variance is not None:
        values.update(module._uncertainty_epoch(stage, pred, variance, target))
    if stage == "test":
        module.test_outputs = (ids, pred, target)
    return values
