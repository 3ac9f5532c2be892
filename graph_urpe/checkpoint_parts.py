"""The parts of a received checkpoint beside its model, checked for their form before Lightning or
``predict`` reads them: Lightning's own state (its version, loop, optimizer and scheduler states),
the training vocabulary, and the bytes of the tensors outside the state dict.

:func:`graph_urpe.trust.read_checkpoint` calls them after the hyperparameters are checked; each
refuses with a :class:`~graph_urpe.received.Refusal` (one line naming the entry; the caller adds
the file), so a changed file never reaches Lightning's restore as a traceback.
"""

from __future__ import annotations

from typing import Any

import torch

from graph_urpe.received import Refusal, SizeRefusal

SOUP_SIZE = 5
"""Epochs whose weights a fit keeps for its soup (:class:`graph_urpe.models.soup.EpochSoup`;
``benchmarks/README.md`` section 30c measured five): the copies the size bound allows for."""

__all__ = ["check_lightning_state", "check_tensor_bytes", "check_vocabulary"]

_EXTRA_BYTES = 16 * 2**20
_LOOPS = ("fit_loop", "validate_loop", "test_loop", "predict_loop")


def check_lightning_state(ckpt: dict) -> None:
    """The form of what Lightning restores from a checkpoint (its version, loop states, optimizer
    and scheduler states), so a changed file is refused here in one line and never reaches
    Lightning's restore as a traceback; a scheduler's state may not reach past its own numbers
    (``load_state_dict`` copies the keys onto the scheduler).

    Args:
        ckpt (dict): the checkpoint, read as plain data.

    Raises:
        Refusal: a Lightning version other than 2, loop states that are not mappings, optimizer
            states without ``state`` / ``param_groups``, a scheduler state holding more than
            its own numbers.
    """
    version = ckpt.get("pytorch-lightning_version")
    if version is not None:
        try:
            major = int(str(version).split(".")[0]) if isinstance(version, str) else 0
        except ValueError:
            major = 0
        if major != 2:
            raise Refusal(f"pytorch-lightning_version {str(version)[:40]!r} is not a Lightning 2 "
                          "version this graph-urpe writes")
    loops = ckpt.get("loops")
    if loops is not None and (not isinstance(loops, dict) or any(
            not isinstance(loops.get(name), dict) for name in _LOOPS)):
        raise Refusal(f"loops must map {', '.join(_LOOPS)} to their states")
    states = ckpt.get("optimizer_states")
    if states is not None and (not isinstance(states, list) or any(
            not isinstance(s, dict) or not isinstance(s.get("state"), dict)
            or not isinstance(s.get("param_groups"), list) for s in states)):
        raise Refusal("optimizer_states must be a list of optimizer state dicts "
                      "('state', 'param_groups')")
    schedulers = ckpt.get("lr_schedulers")
    if schedulers is not None and (not isinstance(schedulers, list) or any(
            not isinstance(s, dict) or any(not isinstance(k, str) or k.startswith("__")
                                           or k in ("optimizer", "class_path", "_class_path")
                                           for k in s) for s in schedulers)):
        raise Refusal("lr_schedulers must be a list of scheduler states holding the scheduler's "
                      "own numbers")


def check_vocabulary(vocabulary: Any) -> None:
    """``None`` or ``{"atom": [[int, ...], ...], "bond": [[int, ...], ...]}`` and optionally
    ``"max_atoms": int`` (predict's warnings read it; checkpoints before it have no size).

    Args:
        vocabulary: the checkpoint's ``training_vocabulary``.

    Raises:
        Refusal: any other form.
    """
    if vocabulary is None:
        return
    form = ("training_vocabulary must map 'atom' and 'bond' to lists of lists of non-negative "
            "integers (and 'max_atoms', if present, to a non-negative integer)")
    if not isinstance(vocabulary, dict) or set(vocabulary) - {"atom", "bond", "max_atoms"}:
        raise Refusal(form)
    largest = vocabulary.get("max_atoms", 0)
    if not isinstance(largest, int) or isinstance(largest, bool) or largest < 0:
        raise Refusal(form)
    for key, columns in vocabulary.items():
        if key == "max_atoms":
            continue
        if not isinstance(columns, list) or not all(
                isinstance(col, list) and all(isinstance(v, int) and not isinstance(v, bool)
                                              and v >= 0 for v in col) for col in columns):
            raise Refusal(form)


def check_tensor_bytes(ckpt: dict) -> None:
    """Tensors outside the state dict take at most ``4 + SOUP_SIZE`` times its bytes plus 16 MiB
    (an optimizer's state and the copies :class:`~graph_urpe.models.soup.EpochSoup` keeps).

    Args:
        ckpt (dict): the checkpoint, read as plain data.

    Raises:
        SizeRefusal: more bytes than an optimizer's state for its state dict would take, or a
            tensor that is not dense (a sparse one has no byte count).
    """
    state = ckpt.get("state_dict")
    inside = sum(t.nbytes for t in state.values() if isinstance(t, torch.Tensor)) \
        if isinstance(state, dict) else 0
    outside, stack = 0, [v for k, v in ckpt.items() if k != "state_dict"]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            if item.layout != torch.strided:
                raise SizeRefusal(f"it holds a {item.layout} tensor outside its state dict; this "
                                  "version writes dense ones")
            outside += item.nbytes
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    if outside > (4 + SOUP_SIZE) * inside + _EXTRA_BYTES:
        raise SizeRefusal(f"its tensors outside the state dict take {outside / 2**20:.1f} MiB, "
                          "more than an optimizer's state and the soup's copies for its state "
                          "dict")
