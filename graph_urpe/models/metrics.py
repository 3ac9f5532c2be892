"""Losses and epoch metrics for graph property prediction, with missing labels (NaN) masked.

Every epoch metric is computed on *all* predictions of the split at once (not averaged over
batches). :class:`EpochPredictions` is a torchmetrics :class:`~torchmetrics.Metric` whose state
(sample ids, predictions, labels) torchmetrics gathers from every DDP rank; it then keeps one copy
per sample id, because the size-bucketed sampler pads ranks to equal batch counts by repeating
batches. The loss and metrics computed from it therefore equal the single-process values exactly.

Metrics (:func:`epoch_metrics`), all from :mod:`torchmetrics.functional` on the labelled entries:

* regression: ``mae``, ``rmse`` (over all labelled entries) and ``r2`` (per task, averaged);
* classification (binary, multi-task): ``rocauc`` and ``ap`` per task and averaged over tasks
  that have both classes among their labelled entries (the OGB rule);
* multi-class (one label per graph or node, :func:`multiclass_metrics`): ``accuracy``,
  ``f1_macro`` and the majority-class ``baseline_accuracy``;
* the dataset's official evaluator where it has one (OGB :class:`~ogb.graphproppred.Evaluator`
  for ``ogbg-*``, :class:`ogb.lsc.PCQM4Mv2Evaluator`): its value replaces the metric of the same
  name, so the monitored ``val/<metric>`` is the official number.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal, NamedTuple, get_args

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.functional import mean_absolute_error, mean_squared_error, r2_score
from torchmetrics.functional.classification import (
    binary_auroc,
    binary_average_precision,
    multiclass_accuracy,
    multiclass_f1_score,
)

from graph_urpe.choices import check_choice

__all__ = [
    "LOSSES",
    "METRICS",
    "EpochPredictions",
    "MetricInfo",
    "balanced_pos_weight",
    "epoch_metrics",
    "masked_loss",
    "multiclass_loss",
    "multiclass_metrics",
    "tasks_with_both_classes",
]

Loss = Literal["l1", "mse", "bce"]
LOSSES = get_args(Loss)


class MetricInfo(NamedTuple):
    """What the package knows of an epoch metric."""

    label: str
    """How summaries and tables name it."""
    higher_is_better: bool
    """Checkpointing / early stopping direction."""
    task: str
    """The task kind it scores (``"regression"``, ``"classification"`` or ``"multiclass"``)."""


METRICS: dict[str, MetricInfo] = {
    "mae": MetricInfo("MAE", False, "regression"),
    "rmse": MetricInfo("RMSE", False, "regression"),
    "r2": MetricInfo("R2", True, "regression"),
    "rocauc": MetricInfo("ROC-AUC", True, "classification"),
    "ap": MetricInfo("AP", True, "classification"),
    "accuracy": MetricInfo("accuracy", True, "multiclass"),
    "f1_macro": MetricInfo("macro-F1", True, "multiclass"),
}
"""Every metric a task can monitor (``val/<name>``), in the order tables show them."""


def masked_loss(pred: Tensor, target: Tensor, loss: Loss,
                pos_weight: Tensor | None = None) -> Tensor:
    r"""Mean loss over the labelled (non-NaN) entries of ``target``.

    With ``pos_weight`` (``"bce"`` only) the loss of a labelled entry of task :math:`t` is
    :math:`-[w_t\, y \log \sigma(x) + (1 - y) \log(1 - \sigma(x))]` (PyTorch's
    :func:`~torch.nn.functional.binary_cross_entropy_with_logits`), still averaged over the
    labelled entries: :math:`w_t > 1` makes a missed positive of task :math:`t` cost more.

    Args:
        pred (Tensor): predictions (logits for ``"bce"``), ``[G, T]`` float.
        target (Tensor): labels, ``[G, T]`` float, NaN = missing.
        loss (str): ``"l1"``, ``"mse"`` or ``"bce"`` (binary cross-entropy with logits).
        pos_weight (Tensor, optional): ``[T]`` positive-class weight per task (``"bce"``).
            (default: :obj:`None`: every entry weighs 1)

    Returns:
        Tensor: scalar float32; ``0`` (with gradient) when nothing is labelled.

    Raises:
        ValueError: for an unknown ``loss``, mismatched shapes, or ``pos_weight`` with a loss
            other than ``"bce"`` or of a length other than ``T``.
    """
    check_choice("loss", loss, Loss)
    if pred.shape != target.shape:
        raise ValueError(
            f"predictions {tuple(pred.shape)} and labels {tuple(target.shape)} differ in shape; "
            f"the model's num_tasks must equal the number of label columns."
        )
    if pos_weight is not None and (loss != "bce" or pos_weight.numel() != target.shape[-1]):
        raise ValueError(
            f"pos_weight ({pos_weight.numel()} values) weighs the BCE loss of each of the "
            f"{target.shape[-1]} tasks: give one value per task, with loss 'bce' (got {loss!r})."
        )
    mask = ~torch.isnan(target)
    p, t = pred[mask].float(), target[mask].float()
    if p.numel() == 0:
        return pred.sum() * 0.0
    if loss == "l1":
        return F.l1_loss(p, t)
    if loss == "mse":
        return F.mse_loss(p, t)
    weight = None if pos_weight is None else pos_weight.float().expand_as(target)[mask]
    return F.binary_cross_entropy_with_logits(p, t, pos_weight=weight)


def balanced_pos_weight(positive_fraction: Sequence[float]) -> list[float]:
    """Positive-class weights that balance each task's classes: ``n_negative / n_positive``
    of its labelled training entries (PyTorch's advice for ``pos_weight``; the ratio of
    scikit-learn's ``class_weight="balanced"``), so positives and negatives weigh the same in
    the BCE loss.

    Args:
        positive_fraction (Sequence[float]): per task, the share of positive (1) labels among its
            labelled training entries, in ``[0, 1]``.

    Returns:
        list[float]: ``(1 - p) / p`` per task; ``1.0`` for a task with no positive or no
        negative label (nothing to balance).
    """
    return [(1.0 - p) / p if 0.0 < p < 1.0 else 1.0 for p in map(float, positive_fraction)]


class EpochPredictions(Metric):
    """All ``(sample id, prediction, label)`` rows of an epoch, gathered over DDP ranks and
    de-duplicated by sample id.

    Shapes:
        - **update(ids, pred, target)**: ``[G]`` int64, ``[G, T]`` float, ``[G, T]`` float
        - **compute()**: ``(ids [U], pred [U, T], target [U, T])``, unique ids in increasing order
    """

    full_state_update = False

    def __init__(self, num_tasks: int) -> None:
        super().__init__()
        self.num_tasks = int(num_tasks)
        self.add_state("ids", default=[], dist_reduce_fx="cat")
        self.add_state("preds", default=[], dist_reduce_fx="cat")
        self.add_state("targets", default=[], dist_reduce_fx="cat")

    def update(self, ids: Tensor, pred: Tensor, target: Tensor) -> None:
        """Add one batch of rows."""
        self.ids.append(ids.detach().view(-1).long())
        self.preds.append(pred.detach().float().reshape(-1, self.num_tasks))
        self.targets.append(target.detach().float().reshape(-1, self.num_tasks))

    def rows(self) -> tuple[Tensor, Tensor, Tensor]:
        """:meth:`compute` with the shapes kept: torchmetrics squeezes one-element results to
        scalars, which would turn a split of one sample into 0-d tensors.

        Returns:
            tuple: ``(ids [U], pred [U, T], target [U, T])``.
        """
        ids, pred, target = self.compute()
        return ids.reshape(-1), pred.reshape(-1, self.num_tasks), target.reshape(-1, self.num_tasks)

    def compute(self) -> tuple[Tensor, Tensor, Tensor]:
        """Unique rows sorted by sample id (the first copy of a repeated id is kept); call
        :meth:`rows` for results whose shapes survive torchmetrics' squeezing."""
        def cat(state, shape):
            if isinstance(state, Tensor):
                return state
            return torch.cat(state) if state else torch.zeros(shape, device=self.device)

        ids = cat(self.ids, (0,)).long()
        preds = cat(self.preds, (0, self.num_tasks))
        targets = cat(self.targets, (0, self.num_tasks))
        uid, inverse = torch.unique(ids, return_inverse=True)
        first = torch.full((uid.numel(),), ids.numel(), dtype=torch.long, device=ids.device)
        first.scatter_reduce_(0, inverse, torch.arange(ids.numel(), device=ids.device), "amin")
        return uid, preds[first], targets[first]


def tasks_with_both_classes(target: Tensor) -> list[int]:
    """The tasks (columns of ``target`` ``[G, T]``, NaN = missing) whose labelled entries hold
    both classes: OGB's rule for which tasks ROC-AUC and AP are averaged over."""
    tasks = []
    for task in range(target.shape[1]):
        t = target[~torch.isnan(target[:, task]), task]
        if t.numel() and bool(t.min() != t.max()):
            tasks.append(task)
    return tasks


def _official(evaluator: str, metric: str, pred: Tensor, target: Tensor) -> float | None:
    """The official evaluator's value of ``metric``, or :obj:`None` if it has none."""
    if evaluator == "pcqm4mv2":
        if metric != "mae":
            return None
        from ogb.lsc import PCQM4Mv2Evaluator

        mask = ~torch.isnan(target[:, 0])
        out = PCQM4Mv2Evaluator().eval({"y_pred": pred[mask, 0], "y_true": target[mask, 0]})
        return float(out["mae"])
    from ogb.graphproppred import Evaluator

    ev = Evaluator(evaluator)
    if ev.eval_metric != metric:
        return None
    y_true, y_pred = target.numpy(), pred.numpy()
    if metric in ("rocauc", "ap") and not tasks_with_both_classes(target):
        return float("nan")  # OGB raises when no task has both classes: undefined
    return float(ev.eval({"y_true": y_true, "y_pred": y_pred})[metric])


def _root_mean_squared_error(pred: Tensor, target: Tensor) -> Tensor:
    """torchmetrics' RMSE (``mean_squared_error(..., squared=False)``)."""
    return mean_squared_error(pred, target, squared=False)


def epoch_metrics(
    pred: Tensor, target: Tensor, task: str, evaluator: str | None = None,
    names: Collection[str] | None = None,
) -> dict[str, float]:
    """Epoch-level metrics on all (de-duplicated) predictions of a split.

    Args:
        pred (Tensor): ``[G, T]`` predictions in the labels' units (probabilities or logits for
            classification: only their order matters).
        target (Tensor): ``[G, T]`` labels, NaN = missing.
        task (str): ``"regression"`` or ``"classification"``.
        evaluator (str, optional): ``"ogbg-..."`` or ``"pcqm4mv2"``: the official evaluator's value
            replaces the metric it defines. (default: :obj:`None`)
        names (Collection[str], optional): compute only these metrics (``"rocauc/<t>"`` counts as
            ``"rocauc"``), each with the same value as in the full result: a bootstrap that needs
            one metric per resample skips the others. :obj:`None` = all. (default: :obj:`None`)

    Returns:
        dict[str, float]: regression ``{"mae", "rmse", "r2"}``; classification ``{"rocauc",
        "ap"}`` plus ``"rocauc/<t>"``, ``"ap/<t>"`` per task when ``T > 1``. NaN where undefined
        (no labelled entry; no task with both classes; R² with fewer than 2 labels).

    Raises:
        ValueError: for an unknown task.
    """
    pred, target = pred.detach().float().cpu(), target.detach().float().cpu()
    wanted = None if names is None else {name.split("/")[0] for name in names}
    out: dict[str, float] = {}
    if task == "regression":
        mask = ~torch.isnan(target)
        for name, fn in (("mae", mean_absolute_error), ("rmse", _root_mean_squared_error)):
            if wanted is None or name in wanted:
                out[name] = float(fn(pred[mask], target[mask])) if bool(mask.any()) \
                    else float("nan")
        if wanted is None or "r2" in wanted:
            r2 = []
            for t in range(target.shape[1]):
                m = mask[:, t]
                if int(m.sum()) >= 2:
                    r2.append(float(r2_score(pred[m, t], target[m, t])))
            out["r2"] = float(np.mean(r2)) if r2 else float("nan")
    elif task == "classification":
        both = tasks_with_both_classes(target)
        for name, fn in (("rocauc", binary_auroc), ("ap", binary_average_precision)):
            if wanted is not None and name not in wanted:
                continue
            scores = {}
            for t in both:
                labelled = ~torch.isnan(target[:, t])
                scores[t] = float(fn(pred[labelled, t], target[labelled, t].long()))
            out[name] = float(np.mean(list(scores.values()))) if scores else float("nan")
            if target.shape[1] > 1:
                out.update({f"{name}/{t}": value for t, value in scores.items()})
    else:
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}.")
    if evaluator is not None and pred.shape[0]:
        for name in list(out):
            value = _official(evaluator, name, pred, target)
            if value is not None:
                out[name] = value
    return out


def _multiclass_labels(target: Tensor) -> tuple[Tensor, Tensor]:
    """``(labels [R] long, labelled [R] bool)`` of ``[R, 1]`` float class labels: NaN or negative
    (e.g. PyTorch's ``ignore_index`` -100) = missing; missing rows get label 0."""
    t = target.reshape(-1)
    labelled = t >= 0  # False for NaN
    return torch.where(labelled, t, torch.zeros_like(t)).long(), labelled


def multiclass_loss(logits: Tensor, target: Tensor) -> Tensor:
    """Mean cross-entropy over the labelled rows (no host read: missing rows are weighted 0).

    Args:
        logits (Tensor): ``[R, C]`` float, one row per graph or node.
        target (Tensor): ``[R, 1]`` float class indices in ``[0, C)``; NaN or negative = missing.

    Returns:
        Tensor: scalar float32; ``0`` (with gradient) when nothing is labelled.
    """
    labels, labelled = _multiclass_labels(target)
    losses = F.cross_entropy(logits.float(), labels, reduction="none")
    weight = labelled.to(losses.dtype)
    return (losses * weight).sum() / weight.sum().clamp(min=1.0)


def multiclass_metrics(logits: Tensor, target: Tensor) -> dict[str, float]:
    """Epoch metrics of single-label multi-class predictions, on the labelled rows (from
    :mod:`torchmetrics.functional`).

    Args:
        logits (Tensor): ``[R, C]`` logits (or probabilities: only the arg-max is used).
        target (Tensor): ``[R, 1]`` float class indices; NaN or negative = missing.

    Returns:
        dict[str, float]: ``accuracy`` (share of rows whose arg-max is the label), ``f1_macro``
        (F1 per class, averaged over the classes present among the labels or predictions) and
        ``baseline_accuracy`` (accuracy of always predicting the most frequent label of these
        rows: the best constant prediction). NaN when no row is labelled.

    Raises:
        ValueError: for a label outside ``[0, C)``.
    """
    logits, target = logits.detach().float().cpu(), target.detach().float().cpu()
    labels, labelled = _multiclass_labels(target)
    labels, pred = labels[labelled], logits[labelled].argmax(-1)
    num_classes = logits.shape[-1]
    if labels.numel() == 0:
        return {"accuracy": float("nan"), "f1_macro": float("nan"),
                "baseline_accuracy": float("nan")}
    if int(labels.max()) >= num_classes:
        raise ValueError(
            f"class label {int(labels.max())} is out of range for a network with {num_classes} "
            "outputs: give the network (num_tasks) as many outputs as there are classes."
        )
    return {
        "accuracy": float(multiclass_accuracy(pred, labels, num_classes, average="micro")),
        "f1_macro": float(multiclass_f1_score(pred, labels, num_classes, average="macro")),
        "baseline_accuracy": float(torch.bincount(labels).max()) / labels.numel(),
    }
