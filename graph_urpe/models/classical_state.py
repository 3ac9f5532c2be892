"""The stored form of a classical model (:class:`~graph_urpe.models.classical.ClassicalModel`),
checked on receipt: what :meth:`~graph_urpe.models.classical.ClassicalModel.state_dict` writes
(its ``format``, the entries of each label column's model) and :func:`state_problem`, the one-line
difference of a received state from it (keys, dtypes, shapes, index ranges, finiteness, the
forests' arrays, the blend's entries), read before anything is computed from the state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from graph_urpe.data.fingerprints import ECFP4_BITS
from graph_urpe.models.forest import NODE_BUDGET, forest_problem
from graph_urpe.models.logit_pool import factor_rows

__all__ = ["STATE_FORMAT", "TASK_KEYS", "state_problem", "stored_blend_problem"]

STATE_FORMAT = "graph-urpe-classical/1"
"""The ``format`` entry of a stored classical model."""

TASK_KEYS = ("support", "dual_coef", "intercept", "C", "platt_a", "platt_b", "mean", "std")
"""The entries of one label column's model, as
:func:`~graph_urpe.models.classical.fit_task` returns them and a state stores them."""

_PACKED = ECFP4_BITS // 8


def _tensor(value: Any, dtype: torch.dtype, dims: int, name: str) -> str | None:
    if not isinstance(value, torch.Tensor) or value.dtype != dtype or value.dim() != dims:
        kind = f"a {value.dtype} tensor of {value.dim()} dims" if isinstance(
            value, torch.Tensor) else type(value).__name__
        return f"{name} is {kind}, this version writes a {dtype} tensor of {dims} dims"
    if type(value) is not torch.Tensor or value.layout != torch.strided or value.requires_grad:
        return f"{name} is not a plain tensor (a parameter, sparse, or requiring gradients)"
    if value.is_floating_point() and not bool(torch.isfinite(value).all()):
        return f"{name} holds values that are not finite"
    return None


def _number(value: Any, name: str, low: float = -math.inf, nan: bool = False) -> str | None:
    if type(value) is not float:
        return f"{name} is {type(value).__name__}, this version writes a float"
    if math.isnan(value) and nan:
        return None
    if not math.isfinite(value) or value < low:
        return f"{name} is {value}, this version writes a finite number >= {low}"
    return None


def state_problem(state: Any, num_tasks: int | None = None) -> str | None:
    """What makes ``state`` differ from a
    :meth:`~graph_urpe.models.classical.ClassicalModel.state_dict` of this version, or :obj:`None`
    (see :meth:`~graph_urpe.models.classical.ClassicalModel.from_state`): keys, dtypes, shapes,
    index ranges, finiteness, the forests (classification only; one per column, :obj:`None`
    exactly where the column has no SVM: :func:`graph_urpe.models.forest.forest_problem`) and
    the blend entries (:func:`stored_blend_problem`).

    Args:
        state (Any): the state read from a received checkpoint (plain data only).
        num_tasks (int, optional): the label columns it must describe. (default: :obj:`None`,
            not checked)

    Returns:
        str or None: one line naming the first difference, or :obj:`None`.
    """
    keys = {"format", "task", "train_fingerprints", "train_rows", "similarity_threshold", "tasks"}
    optional = {"blend_weight", "blend_calibration", "forests"}
    if not isinstance(state, dict) or set(state) - optional != keys:
        return f"state is not a mapping of {sorted(keys)} (and {', '.join(sorted(optional))})"
    if not isinstance(state["format"], str) or not isinstance(state["task"], str) or state[
            "format"] != STATE_FORMAT or state["task"] not in ("regression", "classification"):
        return (f"format / task {str(state['format'])[:40]!r} / {str(state['task'])[:20]!r} is "
                f"not {STATE_FORMAT!r} with regression or classification")
    fps, rows = state["train_fingerprints"], state["train_rows"]
    problem = _tensor(fps, torch.uint8, 2, "train_fingerprints") or _tensor(
        rows, torch.int64, 1, "train_rows")
    if problem:
        return problem
    n = fps.shape[0]
    if n == 0 or fps.shape[1] != _PACKED or rows.shape[0] != n or bool((rows < 0).any()):
        return (f"train_fingerprints {list(fps.shape)} / train_rows {list(rows.shape)} are not "
                f"[N, {_PACKED}] bit-packed ECFP4 and N CSV rows (N >= 1, rows >= 0)")
    threshold = state["similarity_threshold"]
    problem = _number(threshold, "similarity_threshold", 0.0, nan=True)
    if problem or threshold > 1:
        return problem or f"similarity_threshold is {threshold}, above 1"
    tasks = state["tasks"]
    if not isinstance(tasks, list) or not tasks or (num_tasks is not None
                                                    and len(tasks) != num_tasks):
        return f"tasks is not a list of {num_tasks or 'one or more'} label columns' models"
    for t, entry in enumerate(tasks):
        where = f"tasks[{t}]"
        if not isinstance(entry, dict) or set(entry) != set(TASK_KEYS):
            return f"{where} is not a mapping of {list(TASK_KEYS)}"
        support, dual = entry["support"], entry["dual_coef"]
        problem = _tensor(support, torch.int64, 1, f"{where}.support") or _tensor(
            dual, torch.float64, 1, f"{where}.dual_coef")
        if problem:
            return problem
        if dual.shape != support.shape or (len(support) and (
                int(support.min()) < 0 or int(support.max()) >= n
                or len(torch.unique(support)) != len(support))):
            return (f"{where}.support / dual_coef are not as many distinct indices into the {n} "
                    "training fingerprints as coefficients")
        for key, low in (("intercept", -math.inf), ("C", 0.0), ("platt_a", -math.inf),
                         ("platt_b", -math.inf), ("mean", -math.inf), ("std", 1e-300)):
            problem = _number(entry[key], f"{where}.{key}", low)
            if problem:
                return problem
        if (entry["C"] == 0) != (len(support) == 0):
            return f"{where} has C = {entry['C']} with {len(support)} support vectors"
    problem = _forests_problem(state, tasks)
    if problem:
        return problem
    return stored_blend_problem(state, len(tasks), 1 + ("forests" in state))


def _forests_problem(state: dict, tasks: list[dict]) -> str | None:
    """One line if a state's ``forests`` is not what this version writes: absent, or (for
    classification) a list of one forest per column with an SVM and :obj:`None` for one
    without."""
    if "forests" not in state:
        return None
    forests = state["forests"]
    if state["task"] != "classification" or not isinstance(forests, list) or len(
            forests) != len(tasks):
        return f"forests is not a list of {len(tasks)} classification columns' forests"
    molecules = state["train_fingerprints"].shape[0]
    for t, (forest, entry) in enumerate(zip(forests, tasks)):
        if (forest is None) != (entry["C"] == 0):
            return f"forests[{t}] is {'missing' if forest is None else 'given'} for a column " \
                f"with C = {entry['C']}"
        problem = None if forest is None else forest_problem(forest, molecules, f"forests[{t}]")
        if problem:
            return problem
    nodes = sum(len(f["value"]) for f in forests if f is not None)
    most = NODE_BUDGET + len(tasks) * (2 * molecules - 1)  # a column keeps >= 1 tree (Forest.fit)
    if nodes > most:
        return f"forests hold {nodes} nodes, more than the {most} this version writes"
    return None


def stored_blend_problem(state: Mapping[str, Any], num_tasks: int, members: int = 1
                         ) -> str | None:
    """What makes the blend's entries of a stored classical state differ from what this version
    writes, or :obj:`None`: ``blend_weight`` a float64 tensor ``[T, 1 + K]`` of finite values
    in ``[0, 1]``, each row summing to 1 (or ``[T]``, the network's weight beside one member, as
    versions before the forest wrote it); ``blend_calibration`` (only with a weight) a float64
    tensor: for regression ``[2, T]`` of values >= 0 or NaN; for classification the pool's
    factors ``[2 (1 + K) + 2, T]`` (:func:`~graph_urpe.models.logit_pool.fit_pool`: centres,
    scales > 0, Platt's a > 0 and b; finite or NaN). A state with neither (no blend) has no
    problem.

    Args:
        state (Mapping[str, Any]): the state read from a received checkpoint.
        num_tasks (int): ``T``, the label columns.
        members (int, optional): ``K``, the classical model's members. (default: :obj:`1`)

    Returns:
        str or None: one line naming the first difference, or :obj:`None`.
    """
    if "blend_calibration" in state and "blend_weight" not in state:
        return "blend_calibration without blend_weight"
    for name, dims, values_problem in (("blend_weight", (2, 1), _weight_values_problem),
                                       ("blend_calibration", (2,), _calibration_values_problem)):
        if name not in state:
            continue
        value = state[name]
        if not (type(value) is torch.Tensor and value.layout == torch.strided
                and not value.requires_grad and value.dtype == torch.float64
                and value.dim() in dims):
            kind = f"a {value.dtype} tensor of {value.dim()} dims" if isinstance(
                value, torch.Tensor) else type(value).__name__
            return f"{name} is {kind}, this version writes a torch.float64 tensor of {dims[0]} dims"
        problem = values_problem(value, num_tasks, members) if name == "blend_weight" or state.get(
            "task") == "regression" else _pool_values_problem(value, num_tasks, members)
        if problem:
            return problem
    return None


def _weight_values_problem(value: torch.Tensor, num_tasks: int, members: int) -> str | None:
    """One line if a float64 ``blend_weight`` is not ``[T, 1 + K]`` (or, with one member,
    ``[T]``) finite values in ``[0, 1]`` whose rows sum to 1."""
    if value.shape[0] != num_tasks:
        return f"blend_weight has {value.shape[0]} rows for {num_tasks} label columns"
    if value.dim() == 1 and members != 1:
        return f"blend_weight holds one weight a column for a classical model of {members} members"
    if value.dim() == 2 and value.shape[1] != 1 + members:
        return (f"blend_weight has {value.shape[1]} weights a column for the network and "
                f"{members} member(s)")
    if not bool(torch.isfinite(value).all()) or bool((value < 0).any() | (value > 1).any()):
        return "blend_weight holds values that are not finite numbers in [0, 1]"
    if value.dim() == 2 and bool(((value.sum(1) - 1).abs() > 1e-9).any()):
        return "blend_weight has a column whose weights do not sum to 1"
    return None


def _calibration_values_problem(value: torch.Tensor, num_tasks: int, members: int
                                ) -> str | None:
    """One line if a float64 ``blend_calibration`` is not ``[2, T]`` values >= 0 or NaN."""
    if tuple(value.shape) != (2, num_tasks):
        return f"blend_calibration has shape {list(value.shape)}, not [2, {num_tasks}]"
    finite = value[~torch.isnan(value)]
    if not bool(torch.isfinite(finite).all()) or bool((finite < 0).any()):
        return "blend_calibration holds values that are not NaN or finite numbers >= 0"
    return None


def _pool_values_problem(value: torch.Tensor, num_tasks: int, members: int) -> str | None:
    """One line if a float64 classification ``blend_calibration`` is not the pool's factors
    ``[2 (1 + K) + 2, T]``: finite or NaN, the scales and Platt's a > 0."""
    rows = factor_rows(members)
    if tuple(value.shape) != (rows, num_tasks):
        return f"blend_calibration has shape {list(value.shape)}, not [{rows}, {num_tasks}]"
    if bool(torch.isinf(value).any()):
        return "blend_calibration holds values that are not NaN or finite"
    positive = value[1 + members:2 + 2 * members + 1]  # the scales and Platt's a
    if bool((positive <= 0).any()):
        return "blend_calibration has a scale or Platt slope that is not > 0"
    return None
