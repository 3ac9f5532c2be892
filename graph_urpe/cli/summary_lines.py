"""Lines of the end-of-``fit`` summary (:func:`graph_urpe.cli.fit_report.print_fit_summary`)
beside the test metrics themselves: how far the monitored metric carries (its 95 % bootstrap
interval over the labelled test graphs, a warning when a class has few test graphs, the count of
test graphs without any label), the BCE loss's positive-class weights and how the blend of a
CSV fit is named (its weights).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from lightning.pytorch import LightningModule

__all__ = ["FEW_OF_A_CLASS", "metric_interval_line", "pos_weight_line", "sigma_floor_line",
           "tested_note", "unlabelled_test_graphs", "weight_note"]


def unlabelled_test_graphs(model: LightningModule) -> int:
    """How many graphs of ``model.test_outputs`` have no label at all (NaN in every column;
    masked by the metrics); 0 without test outputs or at node level.

    Args:
        model (LightningModule): after ``test``.

    Returns:
        int: the count.
    """
    outputs = getattr(model, "test_outputs", None)
    if outputs is None or getattr(model, "level", "graph") != "graph":
        return 0
    return int(torch.isnan(outputs[2]).all(dim=1).sum())


def metric_interval_line(model: LightningModule, seeds_command: str | None = None,
                         prediction: tuple[torch.Tensor, torch.Tensor] | None = None
                         ) -> str | None:
    """The summary's line on how much the monitored test metric could vary with the test graphs:
    its 95 % bootstrap interval (:func:`~graph_urpe.models.uncertainty.bootstrap_interval`) over
    the graphs that have a label, then :obj:`seeds_command` (the command that measures the
    spread over seeds) if given; :obj:`None` at node level, for test splits over
    :data:`~graph_urpe.models.uncertainty.MAX_BOOTSTRAP_CELLS` labels, or where it is
    undefined. The graphs are those of ``model.test_outputs`` (the network's), or
    :obj:`prediction` ``(values [n, T], labels [n, T])``: the blend, when it is the prediction
    (``ClassicalBaseline.tested_outputs``).

    Args:
        model (LightningModule): after ``test`` (its ``test_outputs``, ``metric_name``,
            ``record.task``).
        seeds_command (str, optional): the ``graph-urpe seeds`` command (default: :obj:`None`).
        prediction (tuple[Tensor, Tensor], optional): the blend's values and labels
            (default: :obj:`None`: the network's).

    Returns:
        str or None: the line.
    """
    from graph_urpe.models.metrics import METRICS
    from graph_urpe.models.uncertainty import (
        MAX_BOOTSTRAP_CELLS,
        bootstrap_interval,
        bootstrap_strata,
    )

    outputs = getattr(model, "test_outputs", None)
    if outputs is None or getattr(model, "level", "graph") != "graph":
        return None
    _, pred, target = outputs if prediction is None else (None, *prediction)
    if target.numel() > MAX_BOOTSTRAP_CELLS:
        return None
    metric = model.metric_name
    labelled = ~torch.isnan(target).all(dim=1)  # graphs with at least one label
    pred, target = pred[labelled], target[labelled]
    interval = bootstrap_interval(pred, target, model.record.task, metric)
    label = METRICS[metric].label + ("" if prediction is None else " of the blend (the prediction)")
    seeds = f". The spread over training seeds: {seeds_command}" if seeds_command else ""
    if interval is None:
        if pred.shape[0] < 2:
            return None
        # Defined on the split but not on every resample (several classification tasks, which
        # are resampled together; one task's resamples keep both classes: they are stratified).
        return (f"Test {label}: no bootstrap interval over the {pred.shape[0]} labelled test "
                f"graphs (the metric is undefined on some resamples of so few graphs){seeds}")
    how = "bootstrap, stratified by class" \
        if len(bootstrap_strata(target, model.record.task)) > 1 else "bootstrap"
    return (f"Test {label} 95% interval over the {pred.shape[0]} labelled test graphs ({how}): "
            f"{interval[0]:.4f} to {interval[1]:.4f}{_few_of_a_class(model, target)}{seeds}")


def sigma_floor_line(module: LightningModule) -> str | None:
    """The summary's line on the std floor the calibration fitted on the validation rows
    (:func:`~graph_urpe.models.calibration.fit_sigma_floor`), for a regression model with a
    per-molecule uncertainty (ensemble, MVE) whose floor is above 0 for some target; else
    :obj:`None`.

    Args:
        module (LightningModule): the trained module (its ``sigma_floor`` buffer ``[T]``).

    Returns:
        str or None: the line.
    """
    floor = getattr(module, "sigma_floor", None)
    if floor is None or not getattr(module, "per_molecule_uncertainty", False) \
            or not bool((floor > 0).any()):
        return None
    values = ", ".join(f"{name} {t:.3g}" for name, t in zip(module.target_names, floor.tolist()))
    return (f"Std floor fitted on the validation rows (labels' units): {values}: each molecule's "
            "raw spread counts as sqrt(spread^2 + floor^2); a floor above most spreads means they "
            "did not rank the validation errors, and every molecule gets nearly the same std")


def pos_weight_line(module: LightningModule) -> str | None:
    """The summary's line on the BCE loss's positive-class weights (``objective.pos_weight``),
    or :obj:`None` when the loss is unweighted (or the module has none).

    Args:
        module (LightningModule): the trained module (its ``bce_pos_weight``).

    Returns:
        str or None: the line.
    """
    weight = getattr(module, "bce_pos_weight", None)
    if weight is None:
        return None
    source = ("balanced: n_negative / n_positive of the training labels"
              if module.objective.pos_weight == "balanced" else "given")
    values = ", ".join(f"{name} {w:.3g}" for name, w in zip(module.target_names,
                                                            weight.tolist()))
    return f"Positive-class weights in the BCE loss ({source}): {values}"


FEW_OF_A_CLASS = 10
"""Below this many test graphs of a class (per task), the summary says the classification metric
rests on them."""


def _few_of_a_class(model: LightningModule, target: torch.Tensor) -> str:
    """For binary classification: a sentence naming the tasks whose test split holds fewer than
    :data:`FEW_OF_A_CLASS` positives or negatives (the metric, and an interval resampled from
    them, rest on those few graphs); else an empty string."""
    if model.record.task != "classification":
        return ""
    few = []
    for name, column in zip(model.target_names, target.T):
        labels = column[~torch.isnan(column)]
        positive, negative = int((labels == 1).sum()), int((labels == 0).sum())
        if min(positive, negative) < FEW_OF_A_CLASS:
            few.append(f"{name}: {positive} positive, {negative} negative")
    if not few:
        return ""
    return (f". Few of a class in the test split ({'; '.join(few)}): the metric and its "
            "interval rest on those graphs; read them as rough (more data, or "
            "--data.init_args.split random for a larger share of the rare class)")


def weight_note(weight: np.ndarray, names: tuple[str, ...] = ("SVM",)) -> str:
    """How the summary names the blend: ``"blend, network weight 0.42"`` with one member, with
    several the weights of the first column (``"blend of network 0.34, SVM 0.22, forest
    0.44"``); several columns say so and add the network's weight of each (the first four).

    Args:
        weight (numpy.ndarray): ``[T, 1 + K]`` the weights per label column (the network's
            first).
        names (tuple[str, ...], optional): the members' names. (default: ``("SVM",)``)

    Returns:
        str: e.g. ``"blend, network weight 0.42, 1.00"``.
    """
    weight = np.asarray(weight, np.float64)
    shown = ", ".join(f"{w:.2f}" for w in weight[:4, 0])
    more = ", ..." if len(weight) > 4 else ""
    if weight.shape[1] == 2:
        return f"blend, network weight {shown}{more}"
    first = ", ".join(f"{n} {w:.2f}" for n, w in zip(("network", *names), weight[0]))
    if len(weight) == 1:
        return f"blend of {first}"
    return f"blend of {first} in the first column; network weight of every column {shown}{more}"


def tested_note(callbacks: Any) -> str | None:
    """How the fit summary names the tested checkpoint's blend (:func:`weight_note`), or
    :obj:`None` when no callback holds a tested blend (``ClassicalBaseline.tested``).

    Args:
        callbacks (list): the trainer's callbacks.
    """
    tested = next((c.tested for c in callbacks if getattr(c, "tested", None) is not None
                   and c.tested.blend_weight is not None), None)
    return None if tested is None else weight_note(tested.blend_weight, tested.member_names)
