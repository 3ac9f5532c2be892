"""Losses and metrics for graph property prediction, with missing labels (NaN) masked.

Regression: L1 (ZINC, PCQM4Mv2) or MSE loss; the metric is the mean absolute error over all labelled
entries, or :class:`ogb.lsc.PCQM4Mv2Evaluator` for PCQM4Mv2. Binary (multi-task) classification:
BCE-with-logits loss; the metric is OGB's :class:`ogb.graphproppred.Evaluator` for ``ogbg-*``
datasets (ROC-AUC or average precision, averaged over tasks), else the same ROC-AUC / AP rule
computed here with scikit-learn (tasks without both classes among the labelled entries are skipped,
as OGB does).

Metrics are computed on *all* predictions of an epoch at once (not averaged over batches), gathered
from every DDP rank and de-duplicated by sample id (:func:`gather_unique`), so they equal the
single-process value.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

__all__ = ["LOSSES", "METRICS", "compute_metric", "gather_unique", "masked_loss"]

LOSSES = ("l1", "mse", "bce")
METRICS = ("mae", "rmse", "rocauc", "ap")


def masked_loss(pred: Tensor, target: Tensor, loss: str) -> Tensor:
    """Mean loss over the labelled (non-NaN) entries of ``target``.

    Args:
        pred (Tensor): predictions (logits for ``"bce"``), ``[G, T]`` float.
        target (Tensor): labels, ``[G, T]`` float, NaN = missing.
        loss (str): ``"l1"``, ``"mse"`` or ``"bce"`` (binary cross-entropy with logits).

    Returns:
        Tensor: scalar float32; ``0`` (with gradient) when nothing is labelled.

    Raises:
        ValueError: for an unknown ``loss`` or mismatched shapes.
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}.")
    if pred.shape != target.shape:
        raise ValueError(
            f"predictions {tuple(pred.shape)} and labels {tuple(target.shape)} differ in shape; "
            f"the model's num_tasks must equal the number of label columns."
        )
    mask = ~torch.isnan(target)
    p, t = pred[mask].float(), target[mask].float()
    if p.numel() == 0:
        return pred.sum() * 0.0
    if loss == "l1":
        return F.l1_loss(p, t)
    if loss == "mse":
        return F.mse_loss(p, t)
    return F.binary_cross_entropy_with_logits(p, t)


def _per_task_scores(y_true: np.ndarray, y_score: np.ndarray, metric: str) -> list[float]:
    from sklearn.metrics import average_precision_score, roc_auc_score

    scores = []
    for task in range(y_true.shape[1]):
        labelled = ~np.isnan(y_true[:, task])
        t = y_true[labelled, task]
        if t.size == 0 or t.min() == t.max():
            continue  # needs both classes (OGB's rule)
        fn = roc_auc_score if metric == "rocauc" else average_precision_score
        scores.append(float(fn(t, y_score[labelled, task])))
    return scores


def _ogb_eval(name: str, metric: str, y_true: np.ndarray, y_score: np.ndarray) -> float:
    from ogb.graphproppred import Evaluator

    evaluator = Evaluator(name)
    if evaluator.eval_metric != metric:
        raise ValueError(f"{name}'s official metric is {evaluator.eval_metric!r}, not {metric!r}.")
    return float(evaluator.eval({"y_true": y_true, "y_pred": y_score})[metric])


def compute_metric(pred: Tensor, target: Tensor, metric: str, evaluator: str | None = None) -> float:
    """Epoch-level metric on all predictions.

    Args:
        pred (Tensor): ``[G, T]`` predictions (logits for classification).
        target (Tensor): ``[G, T]`` labels, NaN = missing.
        metric (str): ``"mae"``, ``"rmse"``, ``"rocauc"`` or ``"ap"``.
        evaluator (str, optional): ``"ogbg-..."`` uses :class:`ogb.graphproppred.Evaluator` of that
            dataset, ``"pcqm4mv2"`` :class:`ogb.lsc.PCQM4Mv2Evaluator`. (default: :obj:`None`)

    Returns:
        float: the metric; NaN if undefined (no labelled entries, or no task with both classes).

    Raises:
        ValueError: for an unknown metric.
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}.")
    pred = pred.detach().float().cpu()
    target = target.detach().float().cpu()
    if evaluator == "pcqm4mv2":
        from ogb.lsc import PCQM4Mv2Evaluator

        mask = ~torch.isnan(target[:, 0])
        if not bool(mask.any()):
            return float("nan")
        out = PCQM4Mv2Evaluator().eval({"y_pred": pred[mask, 0], "y_true": target[mask, 0]})
        return float(out["mae"])
    y_true, y_score = target.numpy(), pred.numpy()
    if metric in ("mae", "rmse"):
        if evaluator is not None and evaluator.startswith("ogbg-"):
            return _ogb_eval(evaluator, metric, y_true, y_score)
        mask = ~torch.isnan(target)
        if not bool(mask.any()):
            return float("nan")
        err = pred[mask] - target[mask]
        return float(err.abs().mean() if metric == "mae" else err.square().mean().sqrt())
    if evaluator is not None and evaluator.startswith("ogbg-"):
        if not _per_task_scores(y_true, y_score, metric):
            return float("nan")  # OGB would raise: no task has both classes
        return _ogb_eval(evaluator, metric, y_true, y_score)
    scores = _per_task_scores(y_true, y_score, metric)
    return float(np.mean(scores)) if scores else float("nan")


def gather_unique(ids: Tensor, *tensors: Tensor) -> tuple[Tensor, ...]:
    """Gather per-sample rows from all DDP ranks, drop duplicates, sort by sample id.

    The size-bucketed sampler pads ranks to equal batch counts by repeating batches, so some
    samples can appear twice; keeping one copy per id makes epoch metrics exact. Works with any
    backend (uses :func:`torch.distributed.all_gather_object` on CPU copies). Without an
    initialised process group it only de-duplicates and sorts.

    Args:
        ids (Tensor): ``[G]`` int64 sample ids.
        *tensors (Tensor): ``[G, ...]`` rows aligned with ``ids``.

    Returns:
        tuple: ``(ids, *tensors)``, unique ids in increasing order, on the CPU.
    """
    parts = [ids.detach().cpu(), *(t.detach().cpu() for t in tensors)]
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        gathered: list = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, parts)
        parts = [torch.cat([g[i] for g in gathered]) for i in range(len(parts))]
    uid, inverse = torch.unique(parts[0], return_inverse=True)
    first = torch.full((uid.numel(),), parts[0].numel(), dtype=torch.long)
    first.scatter_reduce_(0, inverse, torch.arange(parts[0].numel()), reduce="amin")
    return (uid, *(p[first] for p in parts[1:]))
