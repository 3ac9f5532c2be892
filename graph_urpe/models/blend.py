r"""The blend of the network and the classical model of a CSV fit (issue 41, item 2): per label
column :math:`w \cdot \text{network} + (1 - w) \cdot \text{classical}` (labels' units for
regression, probabilities of class 1 for classification).

The weight of a column is chosen on the validation rows of the checkpoint it belongs to, as far
as those rows agree (:func:`blend_weights`): :math:`w_\text{val}`, the weight of
:data:`WEIGHT_GRID` with the smallest validation MSE (regression) or log-loss (classification),
is found again on :data:`BOOTSTRAP_DRAWS` bootstrap resamples of the validation rows (seeded),
and :math:`w` is their mean (:func:`bagged_weight`; bagging, Breiman 1996, applied to the choice).
Where the rows say one thing (one model clearly ahead) every resample picks it and :math:`w` is
that model's; where they are split (a validation split of ~50 molecules between two close
models), the picks scatter and :math:`w` stays between them. It replaced a fixed prior
(:math:`w_0 = 0.5` worth 100 rows), which on FreeSolv kept :math:`w` near 0.7 although the
validation rows put the network far ahead (test MAE 1.76 against the network's 1.50; the bagged
weight 1.51, on BACE, BACE pIC50 and Lipophilicity as good as the prior:
``benchmarks/blend_rules.py``, ``benchmarks/README.md`` section 21b). No validation row:
:data:`NO_EVIDENCE_WEIGHT`. A column without a classical model keeps :math:`w = 1` (the network).

:class:`~graph_urpe.models.classical_baseline.ClassicalBaseline` fits it (the stored weight of
each checkpoint from that checkpoint's validation predictions; the tested checkpoint's again
at ``test``), logs ``val|test/<metric>_blend`` and keeps it in the checkpoint
(``blend_weight``). For regression the blend has its own uncertainty, fitted on the same
validation rows (:func:`fit_blend_calibration`, ``blend_calibration``). ``predict`` writes the
blend as ``<target>_pred`` with its ``_std`` / ``_lower`` / ``_upper`` (:func:`blended_outputs`)
and the network's own prediction as ``<target>_network``
(:func:`~graph_urpe.models.classical_columns.classical_columns`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

__all__ = ["BOOTSTRAP_DRAWS", "NO_EVIDENCE_WEIGHT", "SUFFIX", "WEIGHT_GRID", "bagged_weight",
           "blend", "blend_std", "blend_weights", "blended_outputs", "fit_blend_calibration",
           "network_predictions", "stored_blend_problem", "tested_note", "validation_weight",
           "weight_note"]

NO_EVIDENCE_WEIGHT = 0.5
"""The network's weight of a column with no labelled validation row: the 50/50 average."""

BOOTSTRAP_DRAWS = 200
"""Bootstrap resamples of the validation rows whose choices :func:`bagged_weight` averages."""

WEIGHT_GRID = np.linspace(0.0, 1.0, 21)
"""The network weights :math:`w_\\text{val}` is chosen from: 0, 0.05, ..., 1."""

SUFFIX = "_blend"
"""The blend's metrics' suffix (``val|test/<metric>_blend``)."""


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


def _row_losses(network: np.ndarray, classical: np.ndarray, target: np.ndarray,
                task: str) -> np.ndarray:
    """``[W, n]``: each row's loss under each weight of :data:`WEIGHT_GRID` (squared error, or
    log-loss with the probabilities clipped to ``[eps, 1 - eps]`` as scikit-learn's
    :func:`~sklearn.metrics.log_loss` does); ``inf`` where it is not finite (labels near the
    float range)."""
    w = WEIGHT_GRID[:, None]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        p = w * network[None] + (1.0 - w) * classical[None]
        if task == "regression":
            loss = (p - target[None]) ** 2
        else:
            eps = np.finfo(np.float64).eps
            p = np.clip(p, eps, 1.0 - eps)
            loss = -(target[None] * np.log(p) + (1.0 - target[None]) * np.log1p(-p))
    return np.where(np.isfinite(loss), loss, math.inf)


def _choose(mean_losses: np.ndarray) -> np.ndarray:
    """The weight of :data:`WEIGHT_GRID` with the smallest loss (the smallest on a tie) per
    column of ``mean_losses`` ``[W, B]``; 1 (the network) where no loss is finite."""
    picks = WEIGHT_GRID[np.argmin(mean_losses, axis=0)]
    return np.where(np.isfinite(mean_losses).any(0), picks, 1.0)


def validation_weight(network: np.ndarray, classical: np.ndarray, target: np.ndarray,
                      task: str) -> float:
    """:math:`w_\\text{val}`: the weight of :data:`WEIGHT_GRID` with the smallest validation MSE
    (regression) or log-loss (classification, as scikit-learn's
    :func:`~sklearn.metrics.log_loss` computes it); the smallest such weight on a tie.

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
    _check_task(task)
    if len(target) == 0:
        return math.nan
    losses = _row_losses(*(np.asarray(a, np.float64) for a in (network, classical, target)),
                         task)
    return float(_choose(losses.mean(1, keepdims=True))[0])


def bagged_weight(network: np.ndarray, classical: np.ndarray, target: np.ndarray, task: str,
                  draws: int = BOOTSTRAP_DRAWS, seed: int = 0) -> float:
    """The mean of :func:`validation_weight` over ``draws`` bootstrap resamples of the rows
    (the module docstring).

    Args:
        network (numpy.ndarray): ``[n]`` the network's predictions of one column's labelled rows.
        classical (numpy.ndarray): ``[n]`` the classical model's.
        target (numpy.ndarray): ``[n]`` their labels (0/1 for classification).
        task (str): ``"regression"`` or ``"classification"``.
        draws (int, optional): resamples. (default: :data:`BOOTSTRAP_DRAWS`)
        seed (int, optional): the resampling seed. (default: :obj:`0`)

    Returns:
        float: in ``[0, 1]``; :data:`NO_EVIDENCE_WEIGHT` when ``n = 0``.

    Raises:
        ValueError: for an unknown task.
    """
    _check_task(task)
    n = len(target)
    if n == 0:
        return NO_EVIDENCE_WEIGHT
    losses = _row_losses(*(np.asarray(a, np.float64) for a in (network, classical, target)),
                         task)
    idx = np.random.default_rng(seed).integers(0, n, size=(draws, n))
    with np.errstate(invalid="ignore"):
        return float(_choose(losses[:, idx].mean(-1)).mean())


def _check_task(task: str) -> None:
    if task not in ("regression", "classification"):
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")


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
        out[t] = bagged_weight(network[keep, t], classical[keep, t], target[keep, t], task)
    return out


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
    around the blend. Classification: an ensemble's ``std`` of the probability times ``w`` (the
    classical model's probability is one number). A column with ``w = 1`` is the network's,
    every output unchanged.

    Args:
        network (dict[str, numpy.ndarray]): the network's outputs ``[N, T]`` (``prediction``,
            optionally ``std``, ``lower``, ``upper``).
        classical (numpy.ndarray): ``[N, T]`` the classical model's predictions, NaN = none.
        weight (numpy.ndarray): ``[T]`` the network's weight per column.
        calibration (numpy.ndarray, optional): ``[2, T]`` from :func:`fit_blend_calibration`.

    Returns:
        dict[str, numpy.ndarray]: the same keys as :obj:`network`, ``[N, T]`` float64.
    """
    weight = np.asarray(weight, np.float64)
    mean = blend(network["prediction"], classical, weight)
    out = {"prediction": mean}
    own = weight == 1.0
    if "lower" not in network:
        if "std" in network:
            out["std"] = np.where(own, network["std"], weight * np.asarray(network["std"]))
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


def stored_blend_problem(state: Mapping[str, Any], num_tasks: int) -> str | None:
    """What makes the blend's entries of a stored classical state differ from what this version
    writes, or :obj:`None`: ``blend_weight`` a float64 tensor ``[T]`` of finite values in
    ``[0, 1]``; ``blend_calibration`` (only with a weight) a float64 tensor ``[2, T]`` of values
    >= 0 or NaN. A state with neither (no blend) has no problem.

    Args:
        state (Mapping[str, Any]): the state read from a received checkpoint.
        num_tasks (int): ``T``, the label columns.

    Returns:
        str or None: one line naming the first difference, or :obj:`None`.
    """
    if "blend_calibration" in state and "blend_weight" not in state:
        return "blend_calibration without blend_weight"
    for name, dims, values_problem in (("blend_weight", 1, _weight_values_problem),
                                       ("blend_calibration", 2, _calibration_values_problem)):
        if name not in state:
            continue
        value = state[name]
        if not (isinstance(value, torch.Tensor) and value.dtype == torch.float64
                and value.dim() == dims):
            kind = f"a {value.dtype} tensor of {value.dim()} dims" if isinstance(
                value, torch.Tensor) else type(value).__name__
            return f"{name} is {kind}, this version writes a torch.float64 tensor of {dims} dims"
        problem = values_problem(value, num_tasks)
        if problem:
            return problem
    return None


def _weight_values_problem(value: torch.Tensor, num_tasks: int) -> str | None:
    """One line if a float64 ``blend_weight`` is not ``[T]`` finite values in ``[0, 1]``."""
    if value.shape[0] != num_tasks:
        return f"blend_weight has {value.shape[0]} values for {num_tasks} label columns"
    if not bool(torch.isfinite(value).all()) or bool((value < 0).any() | (value > 1).any()):
        return "blend_weight holds values that are not finite numbers in [0, 1]"
    return None


def _calibration_values_problem(value: torch.Tensor, num_tasks: int) -> str | None:
    """One line if a float64 ``blend_calibration`` is not ``[2, T]`` values >= 0 or NaN."""
    if tuple(value.shape) != (2, num_tasks):
        return f"blend_calibration has shape {list(value.shape)}, not [2, {num_tasks}]"
    finite = value[~torch.isnan(value)]
    if not bool(torch.isfinite(finite).all()) or bool((finite < 0).any()):
        return "blend_calibration holds values that are not NaN or finite numbers >= 0"
    return None


def weight_note(weight: np.ndarray) -> str:
    """How the summary names the blend: ``"blend, network weight 0.42"`` (one weight per
    column, the first four).

    Args:
        weight (numpy.ndarray): ``[T]`` the network's weight per label column, in ``[0, 1]``.

    Returns:
        str: e.g. ``"blend, network weight 0.42, 1.00"``.
    """
    shown = ", ".join(f"{w:.2f}" for w in np.asarray(weight)[:4])
    return f"blend, network weight {shown}{', ...' if len(weight) > 4 else ''}"


def tested_note(callbacks: Any) -> str | None:
    """How the fit summary names the tested checkpoint's blend (:func:`weight_note`), or
    :obj:`None` when no callback holds a tested weight (``ClassicalBaseline.tested_weight``).

    Args:
        callbacks (list): the trainer's callbacks.
    """
    weight = next((c.tested_weight for c in callbacks
                   if getattr(c, "tested_weight", None) is not None), None)
    return None if weight is None else weight_note(weight)
