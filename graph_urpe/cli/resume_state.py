"""What ``fit --ckpt_path`` restores from a checkpoint is checked against what this version writes.

A checkpoint a user resumes from may come from someone else. Lightning restores from it the
states of the callbacks, the loops, the optimizers and the schedulers, and its
:class:`~lightning.pytorch.callbacks.ModelCheckpoint` later *removes* the "previous best" path it
restored (recursively, and without its inside-the-folder check for ``local://`` paths). So:

* :class:`RunCheckpoint` (the run's ``best.ckpt`` / ``last.ckpt`` writer) restores no path from a
  file: the only file it ever writes or removes is its own ``<dirpath>/<filename>.ckpt``; a
  recorded path that is not that file is dropped with a one-line notice, and a file is removed
  only when it is a regular file (never a link or a folder) directly in its own folder;
* :func:`training_state_difference` compares each restored state, by structure, key, type, dtype
  and shape, with the state this version's own objects produce (``state_dict()`` of the live
  callbacks, loops, optimizers and schedulers; an optimizer's per-parameter tensors with the
  parameters' shapes; a callback whose state has no fixed shape, e.g. the classical model's
  arrays, checks it with its own ``state_difference(found)``), and :func:`use_checked_restore` makes the trainer refuse a checkpoint
  that differs with one line (:class:`~graph_urpe.trust.ReceivedFileError`) before anything of
  it is loaded.
"""

from __future__ import annotations

import os.path as osp
import warnings
from typing import Any

import torch
from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.trainer.connectors.checkpoint_connector import _CheckpointConnector
from lightning.pytorch.trainer.states import TrainerFn

from graph_urpe.cli.run import RNGStateCheckpoint
from graph_urpe.trust import ReceivedFileError

__all__ = ["RunCheckpoint", "training_state_difference", "use_checked_restore"]


class RunCheckpoint(ModelCheckpoint):
    r"""Lightning's :class:`~lightning.pytorch.callbacks.ModelCheckpoint` with a fixed file name
    (``filename``, no version counter) that never takes a path from a checkpoint: on resume the
    recorded paths are kept only when they name its own file ``<dirpath>/<filename>.ckpt`` (a
    run folder moved elsewhere keeps its best score), any other path is dropped with a one-line
    warning; it removes a previous file only when that is a regular file (not a link, not a
    folder) in ``dirpath``.

    Args:
        dirpath (str): the run's ``checkpoints`` folder.
        filename (str): ``"best"`` or ``"last"``.
        **kwargs: as for :class:`~lightning.pytorch.callbacks.ModelCheckpoint`
            (``enable_version_counter`` is always :obj:`False`).
    """

    def __init__(self, dirpath: str, filename: str, **kwargs: Any) -> None:
        kwargs["enable_version_counter"] = False
        super().__init__(dirpath=dirpath, filename=filename, **kwargs)

    @property
    def own_path(self) -> str:
        """The one file this callback writes: ``<dirpath>/<filename>.ckpt`` (absolute)."""
        return osp.abspath(osp.join(str(self.dirpath), f"{self.filename}{self.FILE_EXTENSION}"))

    def _own(self, path: Any) -> bool:
        return isinstance(path, str) and bool(path) and osp.abspath(path) == self.own_path \
            and "://" not in path

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the best score and this callback's own file path; drop the rest (a notice)."""
        dropped = []
        score = state_dict.get("best_model_score")
        if score is None or _scalar(score):
            self.best_model_score = score
        else:
            dropped.append("best_model_score")
        kth = state_dict.get("kth_value")
        if _scalar(kth):
            self.kth_value = kth
        for name in ("best_model_path", "kth_best_model_path", "last_model_path"):
            path = state_dict.get(name, "")
            if self._own(path):
                setattr(self, name, self.own_path)
            elif path not in ("", None):
                dropped.append(name)
        best_k = state_dict.get("best_k_models") or {}
        items = list(best_k.items()) if isinstance(best_k, dict) else [(None, None)]
        own = [v for k, v in items if self._own(k) and _scalar(v)]
        if len(own) != len(items):
            dropped.append("best_k_models")
        self.best_k_models = {self.own_path: own[0]} if own else {}
        if dropped:
            warnings.warn(f"the checkpoint's {self.filename} record ({', '.join(dropped)}) names "
                          f"other files than this run's {self.own_path}: not restored (the "
                          "checkpoint writer removes only its own file)", stacklevel=1)

    def _should_remove_checkpoint(self, trainer: Trainer, previous: str, current: str) -> bool:
        return (previous != current and self._own(previous) and osp.isfile(previous)
                and not osp.islink(previous)
                and super()._should_remove_checkpoint(trainer, previous, current))


def _scalar(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() == 0 and value.is_floating_point()


def _difference(expected: Any, found: Any, where: str) -> str | None:
    """Where ``found`` differs from ``expected`` in structure, key, type, dtype or shape."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(found, torch.Tensor):
            return f"{where} is {type(found).__name__}, this version writes a tensor"
        if found.dtype != expected.dtype or found.shape != expected.shape:
            return (f"{where} is a {found.dtype} tensor of shape {list(found.shape)}, this version"
                    f" writes {expected.dtype} {list(expected.shape)}")
        return None
    if isinstance(expected, dict):
        if not isinstance(found, dict):
            return f"{where} is {type(found).__name__}, this version writes a mapping"
        if set(found) != set(expected):
            extra, missing = set(found) - set(expected), set(expected) - set(found)
            return f"{where} has keys {sorted(map(str, extra or missing))[:3]} " + (
                "that this version does not write" if extra else "missing")
        for key in expected:
            problem = _difference(expected[key], found[key], f"{where}.{key}")
            if problem:
                return problem
        return None
    if isinstance(expected, (list, tuple)):
        if not isinstance(found, (list, tuple)) or len(found) != len(expected):
            return f"{where} is not a list of {len(expected)} values as this version writes"
        for i, (e, f) in enumerate(zip(expected, found)):
            problem = _difference(e, f, f"{where}[{i}]")
            if problem:
                return problem
        return None
    if expected is None or (found is None and isinstance(expected, float)):
        # an optional number (Python's pending Gaussian, a score not yet seen): None or a number
        if found is None or (isinstance(found, (int, float)) and not isinstance(found, bool)):
            return None
        return f"{where} is {type(found).__name__}, this version writes None or a number"
    kinds = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}
    allowed = next((v for k, v in kinds.items() if type(expected) is k), (type(expected),))
    if type(found) not in allowed or (bool not in allowed and isinstance(found, bool)):
        return f"{where} is {type(found).__name__}, this version writes {type(expected).__name__}"
    if type(expected) is int and expected >= 0 and found < 0:  # counters, sizes, indices
        return f"{where} is {found}, this version writes a count (never negative)"
    return None


def _optimizer_difference(optimizer: torch.optim.Optimizer, found: Any, where: str) -> str | None:
    """An optimizer state: param groups as the live optimizer's, per-parameter tensors of the
    parameter's shape (or scalars, e.g. Adam's ``step``)."""
    live = optimizer.state_dict()
    if not isinstance(found, dict) or set(found) != {"state", "param_groups"}:
        return f"{where} is not an optimizer state ('state', 'param_groups')"
    problem = _difference(live["param_groups"], found["param_groups"], f"{where}.param_groups")
    if problem:
        return problem
    params = [p for group in optimizer.param_groups for p in group["params"]]
    if not isinstance(found["state"], dict):
        return f"{where}.state is not a mapping"
    for index, entry in found["state"].items():
        if not isinstance(index, int) or not 0 <= index < len(params) or not isinstance(entry,
                                                                                        dict):
            return f"{where}.state has an entry {str(index)[:20]} for no parameter"
        for key, value in entry.items():
            shape = params[index].shape
            if not isinstance(value, torch.Tensor) or (value.dim() and value.shape != shape):
                return (f"{where}.state[{index}].{key} is not a tensor of the parameter's shape "
                        f"{list(shape)}")
    return None


def training_state_difference(trainer: Trainer, checkpoint: dict, part: str) -> str | None:
    r"""Where a checkpoint's Lightning state differs from what this version writes, or
    :obj:`None`.

    Args:
        trainer (Trainer): the trainer about to restore it (its callbacks, loops, optimizers and
            schedulers are the reference).
        checkpoint (dict): the checkpoint.
        part (str): ``"callbacks"`` (the callbacks' states; :class:`RunCheckpoint` checks its
            own), or ``"training"`` (the fit loop, optimizers and schedulers).

    Returns:
        str or None: one line naming the entry and how it differs.
    """
    if part == "callbacks":
        states = checkpoint.get("callbacks")
        if states is None:
            return None
        if not isinstance(states, dict):
            return "callbacks is not a mapping of callback states"
        for callback in trainer.callbacks:
            key, live = callback.state_key, callback.state_dict()
            if isinstance(callback, RunCheckpoint) or not (live or key in states):
                continue
            if key not in states:
                if isinstance(callback, RNGStateCheckpoint):  # every fit writes it: exact resume
                    return f"callbacks[{key}] is missing (every fit of this version writes it)"
                continue  # a callback added at resume (e.g. early stopping) starts afresh
            own_check = getattr(callback, "state_difference", None)  # a state of varying shape
            problem = own_check(states[key]) if callable(own_check) else _difference(
                live, states[key], f"callbacks[{key}]")
            if problem:
                return problem if not callable(own_check) else f"callbacks[{key}]: {problem}"
        return None
    for key in ("epoch", "global_step"):
        value = checkpoint.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"{key} is {str(value)[:20]}, this version writes a count (never negative)"
    loops = checkpoint.get("loops")
    if not isinstance(loops, dict):
        return "loops are missing or not a mapping of loop states (this version writes them)"
    problem = _difference(trainer.fit_loop.state_dict(), loops.get("fit_loop"), "loops.fit_loop")
    if problem:
        return problem
    for name, live in (("optimizer_states", trainer.optimizers),
                       ("lr_schedulers", [c.scheduler for c in trainer.lr_scheduler_configs])):
        found = checkpoint.get(name)
        if found is None:
            return (f"{name} are missing (saved without its training state, as "
                    "save_weights_only writes)")
        if not isinstance(found, list) or len(found) != len(live):
            return f"{name} is not a list of {len(live)} states as this version writes"
        for i, (obj, state) in enumerate(zip(live, found)):
            problem = (_optimizer_difference(obj, state, f"{name}[{i}]") if name.startswith(
                "optimizer") else _difference(obj.state_dict(), state, f"{name}[{i}]"))
            if problem:
                return problem
    return None


class _CheckedConnector(_CheckpointConnector):
    """Lightning's checkpoint connector that checks a checkpoint's callback and training states
    (:func:`training_state_difference`) before restoring them."""

    def _check(self, part: str) -> None:
        ckpt = self._loaded_checkpoint
        if not ckpt:
            return
        problem = training_state_difference(self.trainer, ckpt, part)
        if problem:
            raise ReceivedFileError(self.trainer.ckpt_path, f"its {problem}; it was changed or "
                                    "written by another version of graph-urpe: resume from a "
                                    "last.ckpt this version's `graph-urpe fit` wrote, or "
                                    "fine-tune from its weights with --model.init_args.finetune.pretrained")

    def restore_callbacks(self) -> None:
        self._check("callbacks")
        super().restore_callbacks()

    def restore_training_state(self) -> None:
        if self.trainer.state.fn == TrainerFn.FITTING:
            self._check("training")
        super().restore_training_state()


def use_checked_restore(trainer: Trainer) -> Trainer:
    """Give ``trainer`` a checkpoint connector that checks what it restores (see the module
    docstring).

    Returns:
        Trainer: ``trainer`` itself.
    """
    connector = _CheckedConnector(trainer)
    connector._ckpt_path = trainer._checkpoint_connector._ckpt_path
    connector._user_managed = trainer._checkpoint_connector._user_managed
    trainer._checkpoint_connector = connector
    return trainer

