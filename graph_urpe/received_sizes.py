"""A received checkpoint's sizes, checked before the real model is built: the Lightning module of
its canonical configuration (:func:`graph_urpe.received.check_class`) built on the ``meta`` device
and its tensors compared, name by name and shape by shape, with the checkpoint's state dict.

The build costs no memory: tensor factories asking for more than a few thousand elements make
``meta`` tensors (shapes without memory), and at most a few module / parameter / buffer
registrations per tensor of the state dict are allowed, so ``num_layers: 1000000`` stops at once.
Every refusal is a :class:`~graph_urpe.received.SizeRefusal` (the message names the entry; the
caller adds the file).
"""

from __future__ import annotations

import math
from typing import Any, Self

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._device import _device_constructors

from graph_urpe.received import Refusal, SizeRefusal, build
from graph_urpe.registry import COUNTS

__all__ = ["check_sizes", "shape_mismatch"]

_FACTORIES = _device_constructors() - {torch.tensor, torch.as_tensor, torch.asarray,
                                       torch.scalar_tensor, torch.frombuffer}
_SMALL = 4096


class _RegistrationBudget:
    """Counts module / parameter / buffer registrations; refuses beyond ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit, self.count, self.handles = limit, 0, []

    def _tick(self, *args: Any) -> None:
        self.count += 1
        if self.count > self.limit:
            raise SizeRefusal(f"its hyperparameters build far more layers and tensors than its state "
                          f"dict holds (more than {self.limit:,} registrations)")

    def __enter__(self) -> Self:
        from torch.nn.modules import module as m

        self.handles = [m.register_module_module_registration_hook(self._tick),
                        m.register_module_parameter_registration_hook(self._tick),
                        m.register_module_buffer_registration_hook(self._tick)]
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self.handles:
            handle.remove()


class _MetaFactories(TorchFunctionMode):
    """Tensor factories (``empty``, ``zeros``, ``arange``, ...) asking for more than ``_SMALL``
    elements make ``meta`` tensors: shapes without memory. Smaller ones and tensors made from data
    (``torch.tensor``) stay real, so the code may compute with them (the sum of vocabulary sizes,
    an ensemble's seeds)."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        kwargs = dict(kwargs or {})
        if func in _FACTORIES and _numel(args, kwargs) > _SMALL:
            kwargs["device"] = "meta"
        return func(*args, **kwargs)


def _numel(args: Any, kwargs: dict) -> int:
    """The element count a factory call asks for (its integer sizes multiplied; unknown: big)."""
    sizes = kwargs.get("size")
    if sizes is None:
        sizes = next((a for a in args if isinstance(a, (tuple, list, torch.Size))), None)
    if sizes is None:
        sizes = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    try:
        return math.prod(int(n) for n in sizes)
    except (TypeError, ValueError):
        return _SMALL + 1


def check_sizes(config: dict[str, Any], state_dict: Any, where: str = "state_dict") -> None:
    r"""Build the Lightning module of a canonical entry on the ``meta`` device and compare its
    tensors with ``state_dict`` (names and shapes) before anything real is built.

    Args:
        config (dict): the module's canonical ``{"class_path", "init_args"}``
            (:func:`~graph_urpe.received.check_class`).
        state_dict: the checkpoint's state dict.
        where (str, optional): its key, named in errors (default: ``"state_dict"``).

    Raises:
        Refusal: a state dict that is not ``{name: tensor}``, tensors the model does not have or
            lacks, a shape that differs, hyperparameters that build far more than the state dict
            holds, or that the class refuses.
    """
    if not isinstance(state_dict, dict) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state_dict.items()):
        raise SizeRefusal(f"{where} must map names to tensors")
    for name, value in _counts(config):
        if value > len(state_dict):
            raise SizeRefusal(f"its {name} is {value:,}, more than the {len(state_dict):,} tensors of "
                          f"its state dict (each of them has some)")
    with _RegistrationBudget(8 * len(state_dict) + 256), _MetaFactories():
        try:
            module = build(config)
        except Refusal:
            raise
        except Exception as err:  # noqa: BLE001  (the class's own check of its arguments)
            first = (str(err).strip().splitlines() or [""])[0][:300]
            raise SizeRefusal(f"its hyperparameters do not build a model ({type(err).__name__}: "
                          f"{first})") from None
    problem = shape_mismatch(module.state_dict(), state_dict)
    if problem:
        raise SizeRefusal(f"{where} does not fit the model its hyperparameters describe: {problem}")


def _counts(config: Any) -> list[tuple[str, int]]:
    """``(name, value)`` of the :data:`~graph_urpe.registry.COUNTS` arguments in a canonical
    configuration (nested classes included)."""
    found, stack = [], [config]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key in COUNTS and isinstance(value, int):
                    found.append((key, value))
                stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return found


def shape_mismatch(expected: dict[str, Any], found: dict[str, Any]) -> str | None:
    r"""One line saying how the tensors ``found`` differ from ``expected`` (names, shapes), or
    :obj:`None` when they fit.

    Args:
        expected (dict[str, Tensor]): the model's state dict.
        found (dict[str, Tensor]): the tensors received (only their shapes are read).

    Returns:
        str or None: the first difference: tensors the model does not have, tensors it lacks, or
        a shape that differs.
    """
    unknown = [k for k in found if k not in expected]
    missing = [k for k in expected if k not in found]
    if unknown:
        return f"{len(unknown)} tensor(s) the model does not have ({_few(unknown)})"
    if missing:
        return f"{len(missing)} tensor(s) of the model missing ({_few(missing)})"
    for key, tensor in expected.items():
        if tuple(tensor.shape) != tuple(found[key].shape):
            return (f"{key} has shape {list(found[key].shape)}, the model's is "
                    f"{list(tensor.shape)}")
    return None


def _few(names: list[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
