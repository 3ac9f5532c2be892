"""What a :class:`~graph_urpe.models.graph.GraphPropertyModule` optimises, and the checks that
task, loss, metric, network and class weights fit together.

:class:`Objective` groups the training options a user chooses (the loss, target
standardisation, positive-class weights, Platt scaling, the class count); the task and the
monitored metric are the data's (:class:`~graph_urpe.models.record.ModelRecord`). Each check
refuses a combination that cannot train in one line naming the option and the fix, before
anything is built.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch
from torch import Tensor, nn

from graph_urpe.choices import check_choice
from graph_urpe.models.metrics import METRICS

__all__ = ["LEVELS", "LossName", "MetricName", "Objective", "Task", "check_task_options",
           "num_outputs", "pos_weight_tensor"]

Task = Literal["regression", "classification", "multiclass"]
LossName = Literal["l1", "mse", "mve", "bce", "cross_entropy"]
MetricName = Literal["mae", "rmse", "r2", "rocauc", "ap", "accuracy", "f1_macro"]
LEVELS = ("graph", "node")
"""Where the labels are: one row per graph or one per node."""


@dataclasses.dataclass(frozen=True)
class Objective:
    r"""The training objective of a :class:`~graph_urpe.models.graph.GraphPropertyModule`: its
    loss and what shapes it. On the command line ``--model.init_args.objective.loss mve`` (one
    option per field); in YAML ``objective: {loss: mve}``.

    Args:
        loss (str, optional): ``"l1"``, ``"mse"``, ``"mve"`` (regression with a mean-variance
            head: Gaussian negative log-likelihood; the network has ``outputs_per_task=2``,
            which ``graph-urpe fit`` sets), ``"bce"`` or ``"cross_entropy"``; :obj:`None` picks
            the task's (:meth:`loss_name`). (default: :obj:`None`)
        standardize (bool, optional): train regression on targets standardised per task with
            the training split's NaN-aware mean and std. (default: :obj:`True`)
        pos_weight (list[float] or str, optional): positive-class weight per task in the BCE
            loss (classification; :func:`~graph_urpe.models.metrics.masked_loss`), for
            imbalanced classes: ``"balanced"`` takes ``n_negative / n_positive`` of each task's
            training labels at ``fit`` (:func:`~graph_urpe.models.metrics.balanced_pos_weight`),
            or one positive number per task. Kept in the checkpoint and printed in the summary;
            weighted training shifts the predicted probabilities towards the positive class
            (ROC-AUC and AP only rank them). (default: :obj:`None`: unweighted)
        platt_scaling (bool, optional): calibrate classification probabilities on the
            validation split by Platt scaling (:func:`~graph_urpe.models.calibration.fit_platt`),
            used by the test and ``predict``. (default: :obj:`False`)
        num_classes (int, optional): classes of a ``"multiclass"`` task; must equal the
            network's outputs. (default: :obj:`None`: the network's outputs)

    Raises:
        ValueError: (in :func:`check_task_options`) for a loss that does not fit the task; see
            there.
    """

    loss: LossName | None = None
    standardize: bool = True
    pos_weight: list[float] | Literal["balanced"] | None = None
    platt_scaling: bool = False
    num_classes: int | None = None

    def loss_name(self, task: str, metric: str | None) -> str:
        """The loss in use: :attr:`loss`, else ``bce`` (classification), ``cross_entropy``
        (multiclass), ``mse`` (RMSE-scored regression) or ``l1``."""
        if self.loss is not None:
            return self.loss
        if task == "classification":
            return "bce"
        if task == "multiclass":
            return "cross_entropy"
        return "mse" if metric == "rmse" else "l1"


def check_task_options(model: nn.Module, task: str, metric: str | None,
                       objective: Objective) -> tuple[str, int]:
    """Check that a network, task, metric and objective fit together.

    Args:
        model (torch.nn.Module): the network (its ``level``, ``num_tasks`` or ``out_channels``,
            ``outputs_per_task``).
        task (str): ``"regression"``, ``"classification"`` or ``"multiclass"``.
        metric (str, optional): the monitored metric asked for.
        objective (Objective): the loss and its options.

    Returns:
        tuple[str, int]: the network's level (``"graph"`` or ``"node"``) and its outputs per
        graph or node.

    Raises:
        ValueError: for an unknown choice, a loss or metric that does not fit the task, a level
            other than graph / node, an MVE loss without two outputs per task (or two outputs
            without it), a multiclass network with fewer than 2 outputs or another count than
            ``num_classes``, or ``platt_scaling`` for a task other than classification.
    """
    check_choice("task", task, Task)
    loss, num_classes = objective.loss, objective.num_classes
    loss_name = objective.loss_name(task, metric)
    if loss is not None:
        check_choice("loss", loss, LossName)
    if metric is not None:
        check_choice("metric", metric, MetricName)
    fitting = {"regression": ("l1", "mse", "mve"), "classification": ("bce",),
               "multiclass": ("cross_entropy",)}
    if loss_name not in fitting[task]:
        raise ValueError(
            f"loss {loss_name!r} does not fit a {task} task: use 'bce' for "
            "classification, 'cross_entropy' for multiclass and 'l1', 'mse' or 'mve' for "
            "regression."
        )
    if metric is not None and (task == "multiclass") != (METRICS[metric].task == "multiclass"):
        multi = [m for m, info in METRICS.items() if info.task == "multiclass"]
        others = [m for m in METRICS if m not in multi]
        raise ValueError(
            f"metric {metric!r} does not fit a {task} task: multiclass tasks are scored by "
            f"{', '.join(multi)}, the others by {', '.join(others)}."
        )
    level = getattr(model, "level", "graph")
    if level not in LEVELS:
        raise ValueError(
            f"the network's level is {level!r}; it must be one of {LEVELS} (its "
            "outputs: one row per graph or one per node)."
        )
    outputs = num_outputs(model)
    if (loss_name == "mve") != (getattr(model, "outputs_per_task", 1) == 2):
        raise ValueError(
            "loss='mve' needs a network with two outputs per task (mean, variance), and only "
            "it does: set the network's outputs_per_task to 2 with loss mve, 1 otherwise "
            "(graph-urpe fit sets it from --model.init_args.objective.loss)."
        )
    if task == "multiclass":
        if num_classes is not None and num_classes != outputs:
            raise ValueError(
                f"num_classes={num_classes} but the network has {outputs} outputs: "
                "give it one output (logit) per class (its num_tasks)."
            )
        if outputs < 2:
            raise ValueError(
                f"a multiclass task needs a network with at least 2 outputs (one logit per "
                f"class), got {outputs}."
            )
    elif num_classes is not None:
        raise ValueError(
            f"num_classes is for task='multiclass'; this task is {task!r}: leave it unset."
        )
    if objective.platt_scaling and task != "classification":
        raise ValueError("platt_scaling calibrates the probabilities of binary classification; "
                         f"this task is {task!r}: leave it false.")
    return level, outputs


def pos_weight_tensor(pos_weight: list[float] | str, task: str, num_labels: int) -> Tensor:
    """The ``[num_labels]`` buffer of ``pos_weight`` (ones for ``"balanced"``, set at ``fit``);
    refuses it for other tasks, a wrong length or values that are not positive and finite."""
    if task != "classification":
        raise ValueError(
            f"pos_weight weighs the positive class of a binary classification task; this task is "
            f"{task!r}: leave pos_weight unset."
        )
    if isinstance(pos_weight, str):
        check_choice("pos_weight", pos_weight, Literal["balanced"])
        return torch.ones(num_labels)
    weight = torch.as_tensor(list(pos_weight), dtype=torch.float32).reshape(-1)
    if weight.numel() != num_labels or not bool(torch.isfinite(weight).all() & (weight > 0).all()):
        raise ValueError(
            f"pos_weight={list(pos_weight)}: give {num_labels} positive number(s), one per task "
            "(e.g. n_negative / n_positive of its training labels), or 'balanced' to take them "
            "from the training labels."
        )
    return weight


def num_outputs(model: nn.Module) -> int:
    """Outputs per graph of a network: its ``num_tasks`` (Graphormer; times its
    ``outputs_per_task``) or ``out_channels``."""
    for name in ("num_tasks", "out_channels"):
        value = getattr(model, name, None)
        if isinstance(value, int) and value > 0:
            return value * getattr(model, "outputs_per_task", 1)
    raise ValueError(
        f"cannot tell how many outputs {type(model).__name__} has: give it a positive integer "
        "attribute `num_tasks` (or `out_channels`)."
    )
