r"""The blend of the network and the classical model's members in a CSV fit (issue 41 item 2;
classification pools standardised logits instead, :mod:`graph_urpe.models.logit_pool`):
per label column :math:`w_0 \cdot \text{network} + \sum_k w_k \cdot \text{member}_k` with
weights :math:`w \ge 0` summing to 1 (labels' units for regression, probabilities of class 1 for
classification). The members are those of
:class:`~graph_urpe.models.classical.ClassicalModel`
(:attr:`~graph_urpe.models.classical.ClassicalModel.members`): the ECFP4 SVM, and for
classification a random forest on ECFP4 beside it (:mod:`graph_urpe.models.forest`); with one
member the blend is
:math:`w \cdot \text{network} + (1 - w) \cdot \text{SVM}`.

The weights of a column are chosen on the validation rows of the checkpoint they belong to, as
far as those rows agree (:func:`blend_weights`): :math:`w_\text{val}`, the point of the simplex
grid of step 0.05 (:func:`simplex_grid`) with the smallest validation MSE (regression) or
log-loss (classification), is found again on :data:`BOOTSTRAP_DRAWS` bootstrap resamples of the
validation rows (seeded), and :math:`w` is their mean (:func:`bagged_weight`; bagging, Breiman
1996, applied to the choice). Where the rows say one thing (one model clearly ahead) every
resample picks it and :math:`w` is that model's; where they are split (a validation split of ~50
molecules between two close models), the picks scatter and :math:`w` stays between them. It
replaced a fixed prior (:math:`w_0 = 0.5` worth 100 rows), which on FreeSolv kept :math:`w_0`
near 0.7 although the validation rows put the network far ahead (test MAE 1.76 against the
network's 1.50; the bagged weight 1.51, on BACE, BACE pIC50 and Lipophilicity as good as the
prior: ``benchmarks/blend_rules.py``, ``benchmarks/README.md`` section 21b). Choosing among three
(network, SVM, forest) on the same rows lifts BACE's test ROC-AUC from 0.841 (network and SVM) to
0.855 and leaves the other sets within 0.001 (section 29). No validation row: the network's
weight is :data:`NO_EVIDENCE_WEIGHT`, the members share the rest. A column without a classical
model keeps :math:`w_0 = 1` (the network).

:class:`~graph_urpe.models.classical_baseline.ClassicalBaseline` fits it (the stored weights of
each checkpoint from that checkpoint's validation predictions; the tested checkpoint's again
at ``test``), logs ``val|test/<metric>_blend`` and keeps them in the checkpoint
(``blend_weight``). For regression the blend has its own uncertainty, fitted on the same
validation rows (:func:`fit_blend_calibration`, ``blend_calibration``). ``predict`` writes the
blend as ``<target>_pred`` with its ``_std`` / ``_lower`` / ``_upper`` (:func:`blended_outputs`)
and the network's own prediction as ``<target>_network``
(:func:`~graph_urpe.models.classical_columns.classical_columns`).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import torch

__all__ = ["BOOTSTRAP_DRAWS", "GRID_STEPS", "NO_EVIDENCE_WEIGHT", "SUFFIX", "bagged_weight",
           "blend", "blend_std", "blend_weights", "blended_outputs", "column_rows",
           "fit_blend_calibration",
           "network_predictions", "simplex_grid", "upgrade_weight", "validation_weight"]

NO_EVIDENCE_WEIGHT = 0.5
"""The network's weight of a column with no labelled validation row (the members share the
rest equally): with one member the 50/50 average."""

BOOTSTRAP_DRAWS = 200
"""Bootstrap resamples of the validation rows whose choices :func:`bagged_weight` averages."""

GRID_STEPS = 20
"""The simplex grid's resolution: weights in steps of 1 / 20 = 0.05."""

SUFFIX = "_blend"
"""The blend's metrics' suffix (``val|test/<metric>_blend``)."""


def simplex_grid(members: int) -> np.ndarray:
    """The weights the blend is chosen from: every ``(w_0, w_1, ..., w_K)`` of multiples of
    ``1 / GRID_STEPS`` summing to 1, ordered by the network's weight ``w_0``, then ``w_1``, ...
    (ascending; a tie between losses keeps the first). One member: ``(w, 1 - w)`` for ``w`` in
    0, 0.05, ..., 1 (21 points); two: 231 points.

    Args:
        members (int): ``K >= 1``, the classical model's members.

    Returns:
        numpy.ndarray: ``[G, 1 + K]`` float64.

    Raises:
        ValueError: ``members < 1``.
    """
    if members < 1:
        raise ValueError(f"members must be >= 1, got {members}")
    points = [p + (GRID_STEPS - sum(p),) for p in itertools.product(range(GRID_STEPS + 1),
                                                                    repeat=members)
              if sum(p) <= GRID_STEPS]
    return np.array(points, dtype=np.float64) / GRID_STEPS


def _as_members(classical: np.ndarray) -> np.ndarray:
    """``[n, K]`` float64 from members given as ``[n, K]`` or, for one member, ``[n]``."""
    classical = np.asarray(classical, np.float64)
    return classical[:, None] if classical.ndim < 2 else classical


def blend(network: np.ndarray, classical: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The blend ``w_0 * network + sum_k w_k * member_k`` per column; a column with ``w_0 = 1``
    is the network's (whatever the members' values, NaN for a column without a model).

    Args:
        network (numpy.ndarray): ``[N, T]`` the network's predictions (labels' units or
            probabilities).
        classical (numpy.ndarray): ``[N, T, K]`` the members' predictions, NaN = no model.
        weight (numpy.ndarray): ``[T, 1 + K]`` the weights per column (the network's first).

    Returns:
        numpy.ndarray: ``[N, T]`` float64.
    """
    network = np.asarray(network, np.float64)
    classical, weight = np.asarray(classical, np.float64), np.asarray(weight, np.float64)
    with np.errstate(invalid="ignore"):
        mixed = weight[:, 0] * network + (classical * weight[:, 1:]).sum(-1)
    return np.where(weight[:, 0] == 1.0, network, mixed)


def _row_losses(network: np.ndarray, classical: np.ndarray, target: np.ndarray,
                task: str) -> np.ndarray:
    """``[G, n]``: each row's loss under each weight of :func:`simplex_grid` (squared error, or
    log-loss with the probabilities clipped to ``[eps, 1 - eps]`` as scikit-learn's
    :func:`~sklearn.metrics.log_loss` does); ``inf`` where it is not finite (labels near the
    float range)."""
    grid = simplex_grid(classical.shape[1])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        p = grid[:, :1] * network[None] + grid[:, 1:] @ classical.T
        if task == "regression":
            loss = (p - target[None]) ** 2
        else:
            eps = np.finfo(np.float64).eps
            p = np.clip(p, eps, 1.0 - eps)
            loss = -(target[None] * np.log(p) + (1.0 - target[None]) * np.log1p(-p))
    return np.where(np.isfinite(loss), loss, math.inf)


def _choose(mean_losses: np.ndarray, members: int) -> np.ndarray:
    """``[B, 1 + K]``: the grid point with the smallest loss (the first on a tie) for each column
    of ``mean_losses`` ``[G, B]``; the network alone where no loss is finite."""
    grid = simplex_grid(members)
    picks = grid[np.argmin(mean_losses, axis=0)]
    return np.where(np.isfinite(mean_losses).any(0)[:, None], picks, _network_alone(members))


def _network_alone(members: int) -> np.ndarray:
    return np.eye(1, 1 + members).ravel()


def validation_weight(network: np.ndarray, classical: np.ndarray, target: np.ndarray,
                      task: str) -> np.ndarray:
    """:math:`w_\\text{val}`: the point of :func:`simplex_grid` with the smallest validation MSE
    (regression) or log-loss (classification, as scikit-learn's
    :func:`~sklearn.metrics.log_loss` computes it); the first such point on a tie.

    Args:
        network (numpy.ndarray): ``[n]`` the network's predictions of one column's labelled rows.
        classical (numpy.ndarray): ``[n, K]`` the members' (``[n]`` for one; probabilities in
            ``[0, 1]`` for classification).
        target (numpy.ndarray): ``[n]`` their labels (0/1 for classification).
        task (str): ``"regression"`` or ``"classification"``.

    Returns:
        numpy.ndarray: ``[1 + K]`` float64 weights summing to 1 (the network's first); NaN when
        ``n = 0``; the network alone when no point has a finite validation loss (e.g. labels
        near the float range).

    Raises:
        ValueError: for an unknown task.
    """
    _check_task(task)
    classical = _as_members(classical)
    if len(target) == 0:
        return np.full(1 + classical.shape[1], math.nan)
    losses = _row_losses(np.asarray(network, np.float64), classical,
                         np.asarray(target, np.float64), task)
    return _choose(losses.mean(1, keepdims=True), classical.shape[1])[0]


def bagged_weight(network: np.ndarray, classical: np.ndarray, target: np.ndarray, task: str,
                  draws: int = BOOTSTRAP_DRAWS, seed: int = 0) -> np.ndarray:
    """The mean of :func:`validation_weight` over ``draws`` bootstrap resamples of the rows
    (the module docstring); a resample's mean losses are its rows' counts times the rows'
    losses (memory ``G x n`` and ``draws x n``).

    Args:
        network (numpy.ndarray): ``[n]`` the network's predictions of one column's labelled rows.
        classical (numpy.ndarray): ``[n, K]`` the members' (``[n]`` for one).
        target (numpy.ndarray): ``[n]`` their labels (0/1 for classification).
        task (str): ``"regression"`` or ``"classification"``.
        draws (int, optional): resamples. (default: :data:`BOOTSTRAP_DRAWS`)
        seed (int, optional): the resampling seed. (default: :obj:`0`)

    Returns:
        numpy.ndarray: ``[1 + K]`` float64 weights summing to 1 (the network's first); when
        ``n = 0`` the network's :data:`NO_EVIDENCE_WEIGHT` and the members' equal shares.

    Raises:
        ValueError: for an unknown task.
    """
    _check_task(task)
    n = len(target)
    classical = _as_members(classical)
    k = classical.shape[1]
    if n == 0:
        return np.array([NO_EVIDENCE_WEIGHT] + [(1 - NO_EVIDENCE_WEIGHT) / k] * k)
    losses = _row_losses(np.asarray(network, np.float64), classical,
                         np.asarray(target, np.float64), task)
    idx = np.random.default_rng(seed).integers(0, n, size=(draws, n))
    counts = np.zeros((draws, n))
    np.add.at(counts, (np.arange(draws)[:, None], idx), 1.0)
    finite = np.isfinite(losses)
    with np.errstate(invalid="ignore"):
        means = (np.where(finite, losses, 0.0) @ counts.T) / n  # [G, draws]
    means = np.where((~finite).astype(np.float64) @ counts.T > 0, math.inf, means)
    return _choose(means, k).mean(0)


def _check_task(task: str) -> None:
    if task not in ("regression", "classification"):
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")


def blend_weights(network: np.ndarray, classical: np.ndarray, target: np.ndarray,
                  task: str, modelled: np.ndarray | None = None) -> np.ndarray:
    """The weights of each column from validation rows (module docstring): the rows where the
    label, the network's and every member's predictions are finite; the network alone for a
    column without a classical model.

    Args:
        network (numpy.ndarray): ``[N, T]`` the network's validation predictions.
        classical (numpy.ndarray): ``[N, T, K]`` the members', NaN = no model.
        target (numpy.ndarray): ``[N, T]`` labels, NaN = missing.
        task (str): ``"regression"`` or ``"classification"``.
        modelled (numpy.ndarray, optional): ``[T]`` bool, the columns with a classical model.
            (default: :obj:`None`: those with a prediction that is not NaN)

    Returns:
        numpy.ndarray: ``[T, 1 + K]`` float64, each row summing to 1 (the network's first).
    """
    k = np.shape(classical)[2]
    out = np.tile(_network_alone(k), (np.shape(target)[1], 1))
    for t, net, members, y in column_rows(network, classical, target, modelled):
        out[t] = bagged_weight(net, members, y, task)
    return out


def column_rows(network: np.ndarray, classical: np.ndarray, target: np.ndarray,
                modelled: np.ndarray | None = None):
    """Each column with a classical model and the rows where its label, the network's and every
    member's predictions are finite (what the column's blend is fitted on).

    Args:
        network (numpy.ndarray): ``[N, T]`` the network's validation predictions.
        classical (numpy.ndarray): ``[N, T, K]`` the members', NaN = no model.
        target (numpy.ndarray): ``[N, T]`` labels, NaN = missing.
        modelled (numpy.ndarray, optional): ``[T]`` bool, the columns with a classical model.
            (default: :obj:`None`: those with a prediction that is not NaN)

    Yields:
        tuple: ``(t, network [n], members [n, K], target [n])``, float64.
    """
    network, classical, target = (np.asarray(a, np.float64) for a in (network, classical, target))
    modelled = (~np.isnan(classical)).any((0, 2)) if modelled is None else modelled
    for t in np.flatnonzero(modelled):
        keep = np.isfinite(network[:, t]) & np.isfinite(classical[:, t]).all(1) & np.isfinite(
            target[:, t])
        yield int(t), network[keep, t], classical[keep, t], target[keep, t]


def upgrade_weight(weight: np.ndarray) -> np.ndarray:
    """``[T, 1 + K]`` weights from a stored ``blend_weight``: one written before the classical
    model had several members (``[T]``, the network's weight ``w`` beside the SVM's ``1 - w``)
    becomes ``[T, 2]``; a ``[T, 1 + K]`` one is returned as it is.

    Args:
        weight (numpy.ndarray): ``[T]`` or ``[T, 1 + K]`` float64.
    """
    weight = np.asarray(weight, np.float64)
    return np.stack([weight, 1.0 - weight], 1) if weight.ndim == 1 else weight


def network_predictions(trainer: Any, module: Any, loader: Any, size: int
                        ) -> dict[str, np.ndarray]:
    """The network's outputs for one split from the module's own ``predict_step``, in
    sample-id order, under the trainer's precision as ``predict`` runs it (its
    ``predict_step_context``).

    Args:
        trainer (Trainer): the trainer (it moves the batches to the module's device).
        module (LightningModule): a :class:`~graph_urpe.models.graph.GraphPropertyModule`.
        loader (Iterable): the split's loader (batches with ``sample_id``).
        size (int): the split's number of molecules.

    Returns:
        dict[str, numpy.ndarray]: each output of ``predict_step`` but ``sample_id``
        (``prediction``: labels' units, probabilities for classification; regression also
        ``lower``, ``upper`` and, with per-molecule uncertainty, ``std``), ``[size, T]``
        float64, NaN for a molecule the loader did not give.
    """
    out: dict[str, np.ndarray] = {}
    with torch.no_grad(), trainer.precision_plugin.predict_step_context():
        for batch in loader:
            rows = module.predict_step(trainer.strategy.batch_to_device(batch, module.device), 0)
            ids = rows.pop("sample_id").cpu().numpy()
            for key, value in rows.items():
                out.setdefault(key, np.full((size, module.num_labels), np.nan))[ids] = \
                    value.double().cpu().numpy()
    return out


def fit_blend_calibration(blended: np.ndarray, network: dict[str, np.ndarray],
                          target: np.ndarray) -> np.ndarray:
    r"""The blend's uncertainty, fitted on validation rows as the network's own is
    (:func:`~graph_urpe.models.calibration.fit_calibration`: z-scaling and split conformal
    prediction with normalised residuals, level :data:`~graph_urpe.models.calibration.LEVEL`),
    with the network's calibrated interval half-width :math:`h` as the per-molecule scale:
    :math:`z = (y - \text{blend}) / h`. Conformal prediction holds for any such score, so the
    interval ``blend +- q h`` covers a new label with probability at least 95 % when the
    validation and new molecules are exchangeable.

    Args:
        blended (numpy.ndarray): ``[N, T]`` the blend's validation predictions (labels' units).
        network (dict[str, numpy.ndarray]): the network's outputs for those rows (``lower``,
            ``upper`` ``[N, T]``: :func:`network_predictions`).
        target (numpy.ndarray): ``[N, T]`` their labels, NaN = missing.

    Returns:
        numpy.ndarray: ``[2, T]`` float64: the z-scaling factor (the blend's std is it times
        :math:`h`) and the conformal factor :math:`q` of each column; NaN for a column without
        validation labels.
    """
    from graph_urpe.models.calibration import LEVEL, fit_calibration

    half = torch.as_tensor(_half_width(network)).clamp(min=1e-12)
    scale, quantile = fit_calibration(torch.as_tensor(np.asarray(blended, np.float64)), half,
                                      torch.as_tensor(np.asarray(target, np.float64)), LEVEL)
    return torch.stack([scale, quantile]).double().numpy()


def _half_width(network: dict[str, np.ndarray]) -> np.ndarray:
    return (np.asarray(network["upper"], np.float64) - np.asarray(network["lower"],
                                                                   np.float64)) / 2


def blended_outputs(network: dict[str, np.ndarray], classical: np.ndarray, weight: np.ndarray,
                    calibration: np.ndarray | None) -> dict[str, np.ndarray]:
    r"""What ``predict`` writes for a checkpoint with a blend: the blend as the prediction, and
    its uncertainty in the same columns as the network's.

    Regression (``lower`` / ``upper`` present): the interval ``blend +- q h`` and, where the
    network has a ``std``, the blend's std ``s h`` (:func:`fit_blend_calibration`: ``h`` the
    network's half-width); a column whose factors are NaN (no validation label, or a
    checkpoint written before the blend had its own) keeps the network's half-width and std
    around the blend. Classification: an ensemble's ``std`` of the probability times ``w_0`` (the
    members' probabilities are single numbers). A column with ``w_0 = 1`` is the network's,
    every output unchanged.

    Args:
        network (dict[str, numpy.ndarray]): the network's outputs ``[N, T]`` (``prediction``,
            optionally ``std``, ``lower``, ``upper``).
        classical (numpy.ndarray): ``[N, T, K]`` the members' predictions, NaN = none.
        weight (numpy.ndarray): ``[T, 1 + K]`` the weights per column (the network's first).
        calibration (numpy.ndarray, optional): ``[2, T]`` from :func:`fit_blend_calibration`.

    Returns:
        dict[str, numpy.ndarray]: the same keys as :obj:`network`, ``[N, T]`` float64.
    """
    weight = np.asarray(weight, np.float64)
    mean = blend(network["prediction"], classical, weight)
    out = {"prediction": mean}
    own = weight[:, 0] == 1.0
    if "lower" not in network:
        if "std" in network:
            out["std"] = np.where(own, network["std"], weight[:, 0] * np.asarray(network["std"]))
        return out
    half = _half_width(network)
    factors = np.full((2, len(weight)), np.nan) if calibration is None else calibration
    width = np.where(np.isnan(factors[1]), half, factors[1] * half)
    out["lower"] = np.where(own, network["lower"], mean - width)
    out["upper"] = np.where(own, network["upper"], mean + width)
    if "std" in network:
        out["std"] = np.where(own, network["std"], blend_std(network, calibration))
    return out


def blend_std(network: dict[str, np.ndarray], calibration: np.ndarray | None) -> np.ndarray:
    """``[N, T]`` the blend's z-scaled standard deviation ``s h`` (labels' units;
    :func:`fit_blend_calibration`); where ``s`` is NaN (no validation label, or no factors)
    the network's own ``std``, or without one the uncalibrated Gaussian's
    ``h / 1.959964`` (what :meth:`~graph_urpe.models.calibration.CalibrationMixin.calibrated`
    falls back to).

    Args:
        network (dict[str, numpy.ndarray]): the network's ``lower``, ``upper`` ``[N, T]`` and
            optionally ``std``.
        calibration (numpy.ndarray, optional): ``[2, T]`` from :func:`fit_blend_calibration`.
    """
    from graph_urpe.models.calibration import GAUSSIAN_HALF_WIDTH

    half = _half_width(network)
    scale = np.full(half.shape[1], np.nan) if calibration is None else calibration[0]
    fallback = network["std"] if "std" in network else half / GAUSSIAN_HALF_WIDTH
    return np.where(np.isnan(scale), fallback, scale * half)
