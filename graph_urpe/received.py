"""What a received file may say, checked before anything is built: registry classes, plain values.

A checkpoint's hyperparameters and a run folder's ``config.yaml`` are read on the user's behalf;
they are data, never handed to a generic resolver. Each class entry ``{class_path, init_args}``
must name a class of :mod:`graph_urpe.registry` (an exact key or alias) in a position of its role,
and every argument must be a parameter of that class's ``__init__`` holding a value of the type
its annotation declares: numbers, strings, booleans, :obj:`None`, and lists / dicts of them,
a dict of fields where the annotation is an option group (a dataclass such as
:class:`~graph_urpe.models.record.ModelRecord`), or a nested registry class where the annotation
is a network, optimizer or scheduler. A class may regroup the arguments of its earlier versions
(its ``upgrade_arguments``, plain data to plain data) before they are checked. Anything
else (an unknown key, a tensor, a string where a class or callable stands, a type without a
declaration) is refused by :class:`Refusal`, naming the entry. :func:`check_class` returns the
**canonical** configuration: the same plain values, class paths replaced by the registry's own.

:func:`build` makes objects from a canonical configuration directly (networks built,
optimizers / schedulers as :func:`functools.partial`).
:func:`graph_urpe.received_sizes.check_sizes` builds the Lightning module on the ``meta`` device
(no memory; at most a few registrations per tensor of the state dict, so ``num_layers: 1000000``
stops at once) and compares its tensors, name by name and shape by shape, with the checkpoint's
state dict before the real model is built.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import functools
import inspect
import math
import types
import typing
from typing import Any, Literal, Union

import torch
from torch import nn

from graph_urpe.registry import CLASSES, RegisteredClass, lookup

__all__ = ["MAX_NODES", "Refusal", "SizeRefusal", "build", "check_class", "check_module_hparams",
           "count_nodes", "module_kwargs"]

MAX_NODES = 100_000
"""Most containers and values walked in a received configuration (shared references counted at
every place they appear: an alias or pickle-memo bomb stops here)."""
MAX_STRING = 4096
"""Longest string value a received configuration may hold."""

_CLASS_KEYS = frozenset({"class_path", "init_args"})


class Refusal(ValueError):
    """A received configuration says something graph-urpe does not build from a file (the
    message names the entry; the caller adds the file)."""


class SizeRefusal(Refusal):
    """A received checkpoint's sizes do not fit its state dict (or do not build a model:
    :mod:`graph_urpe.received_sizes`)."""


def count_nodes(value: Any, limit: int = MAX_NODES, what: str = "it") -> int:
    r"""Count the containers and values of ``value`` (every visit, shared references included),
    refusing beyond ``limit``.

    Raises:
        Refusal: more than :obj:`limit` nodes, or nesting deeper than 100.
    """
    count, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > limit or depth > 100:
            raise Refusal(f"{what} holds more than {limit:,} values or nests deeper than 100 "
                          "(a graph-urpe file holds far fewer)")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
            stack.extend((k, depth + 1) for k in item)
        elif isinstance(item, (list, tuple)):
            stack.extend((v, depth + 1) for v in item)
    return count


# ----------------------------------------------------------------------------- signatures
def _role_of(hint: Any) -> str | None:
    """The registry role an annotation stands for (a network, optimizer or scheduler), or None."""
    from lightning.pytorch import LightningDataModule

    if isinstance(hint, type):
        if issubclass(hint, nn.Module):
            return "network"
        if issubclass(hint, LightningDataModule):
            return "data"
        return None
    if typing.get_origin(hint) is cabc.Callable:
        args = typing.get_args(hint)
        returned = args[-1] if args else None
        parts = typing.get_args(returned) or (returned,)
        if any(isinstance(p, type) and issubclass(p, torch.optim.Optimizer) for p in parts):
            return "optimizer"
        if any(isinstance(p, type) and p.__name__ in ("LRScheduler", "ReduceLROnPlateau")
               for p in parts):
            return "scheduler"
    return None


@functools.cache
def _parameters(key: str) -> dict[str, Any]:
    """``name -> annotation`` of the registered class's ``__init__`` (its ``**kwargs`` followed
    to :attr:`~graph_urpe.registry.RegisteredClass.kwargs_to` or the next ``__init__`` of its
    MRO, whose arguments with defaults are accepted too)."""
    entry = CLASSES[key]
    cls = entry.load()
    params: dict[str, Any] = {}
    skip_first = entry.role in ("optimizer", "scheduler")  # params / optimizer: given at build
    _collect(cls, params, skip_first, entry.load_kwargs_target(), defaults_only=False)
    return params


def _collect(cls: type, params: dict[str, Any], skip_first: bool, kwargs_to: type | None,
             defaults_only: bool) -> None:
    hints = typing.get_type_hints(cls.__init__)
    signature = inspect.signature(cls.__init__)
    follow = False
    for i, (name, p) in enumerate(list(signature.parameters.items())[1:]):
        if p.kind is p.VAR_KEYWORD:
            follow = True
        elif p.kind is p.VAR_POSITIONAL or (skip_first and i == 0):
            continue
        elif name not in params and not (defaults_only and p.default is p.empty):
            params[name] = hints.get(name, type(p.default) if p.default not in (p.empty, None)
                                     else Any)
    if follow:
        nxt = kwargs_to or next((c for c in cls.__mro__[1:] if "__init__" in vars(c)), None)
        if nxt is not None and nxt is not object and nxt.__module__.startswith(
                ("graph_urpe.", "torch.optim")):
            _collect(nxt, params, False, None, defaults_only=kwargs_to is not None)


# ------------------------------------------------------------------------------- checking
def check_class(value: Any, role: str, where: str) -> dict[str, Any]:
    r"""Check one class entry of a received configuration and return its canonical form.

    Args:
        value: ``{"class_path": NAME, "init_args": {...}}`` or a bare ``NAME`` (a registry key
            or alias).
        role (str): the role the position calls for (:data:`graph_urpe.registry.ROLES`).
        where (str): the entry's key path, named in errors.

    Returns:
        dict: ``{"class_path": the registry's class path, "init_args": checked plain values}``.

    Raises:
        Refusal: a name outside the registry or of another role, an unknown argument, or a
            value of another type than the class declares.
    """
    if isinstance(value, str):
        name, args = value, {}
    elif isinstance(value, dict) and "class_path" in value and set(value) <= _CLASS_KEYS:
        name, args = value["class_path"], value.get("init_args") or {}
    else:
        raise Refusal(f"{where} must name a {role} class as {{class_path: KEY, init_args: "
                      f"{{...}}}}, not {_show(value)}")
    entry = lookup(name)
    if entry is None:
        known = ", ".join(k for k, e in CLASSES.items() if e.role == role)
        raise Refusal(f"{where} names {_show(name)}, which is not in graph-urpe's registry of "
                      f"classes (a {role} may be: {known})")
    if entry.role != role:
        raise Refusal(f"{where} names {entry.key}, a {entry.role}, where a {role} stands")
    if not isinstance(args, dict):
        raise Refusal(f"{where}.init_args must be a mapping, not {_show(args)}")
    return {"class_path": entry.class_path, "init_args": _check_args(entry, args, where)}


RETIRED_DATA_ARGUMENTS = frozenset({"predict_csv", "predict_smiles", "predict_output",
                                    "predict_chunk_rows", "smiles_column"})
"""Arguments the graph data modules had in earlier versions and no longer read (``predict``'s
inputs became its own options; ``smiles_column`` stays only where a CSV is read): a run folder
written then still loads, these values dropped."""


def _check_args(entry: RegisteredClass, args: dict, where: str) -> dict[str, Any]:
    params = _parameters(entry.key)
    upgrade = getattr(entry.load(), "upgrade_arguments", None)
    if upgrade is not None:  # arguments of an earlier version, regrouped (plain data only)
        try:
            args = upgrade(args)
        except ValueError as err:
            raise Refusal(f"{where}.init_args: {err}") from None
    out = {}
    for name, value in args.items():
        at = f"{where}.init_args.{name}"
        if name not in params and entry.role == "data" and name in RETIRED_DATA_ARGUMENTS:
            continue
        if name not in params:
            raise Refusal(f"{at}: {entry.key} has no argument {_show(name)} (its arguments: "
                          f"{', '.join(params)})")
        out[name] = _check_value(value, params[name], at)
    return out


def _check_value(value: Any, hint: Any, where: str) -> Any:
    """``value`` checked against the annotation ``hint``; canonical class entries inside."""
    if hint is Any:  # no declared type: plain values only, no class entries
        return _plain_any(value, where)
    role = _role_of(hint)
    if role is not None:
        return check_class(value, role, where)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for option in (a for a in args if a is not type(None)):
            try:
                return _check_value(value, option, where)
            except Refusal as err:
                errors.append(err)
        classy = [e for e in errors if "class" in str(e)]
        raise (classy or errors)[0] if len(errors) == 1 or classy else Refusal(
            f"{where} holds {_show(value)}; expected {_type_name(hint)}")
    if origin is Literal:
        if any(type(value) is type(a) and value == a for a in args):
            return value
        raise Refusal(f"{where} holds {_show(value)}; expected one of {list(args)}")
    if dataclasses.is_dataclass(hint):  # an option group: its fields, each of its declared type
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            fields = typing.get_type_hints(hint)
            unknown = [k for k in value if k not in fields]
            if unknown:
                raise Refusal(f"{where}: {hint.__name__} has no field {_show(unknown[0])} (its "
                              f"fields: {', '.join(fields)})")
            return {k: _check_value(v, fields[k], f"{where}.{k}") for k, v in value.items()}
    elif hint is type(None):
        if value is None:
            return None
    elif hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            if len(value) > MAX_STRING:
                raise Refusal(f"{where} holds a string of {len(value):,} characters (at most "
                              f"{MAX_STRING})")
            return value
    elif origin in (list, tuple, set, frozenset, cabc.Sequence, cabc.Iterable,
                    cabc.MutableSequence) or hint in (list, tuple):
        if isinstance(value, (list, tuple)):
            if origin is tuple and args and args[-1] is not Ellipsis:
                if len(value) != len(args):
                    raise Refusal(f"{where} holds {len(value)} values; expected {len(args)}")
                return [_check_value(v, a, f"{where}[{i}]")
                        for i, (v, a) in enumerate(zip(value, args, strict=True))]
            item = args[0] if args else Any
            return [_check_value(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    elif origin in (dict, cabc.Mapping) or hint is dict:
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            item = args[1] if len(args) == 2 else Any
            return {k: _check_value(v, item, f"{where}.{k}") for k, v in value.items()}
    else:
        raise Refusal(f"{where} holds {_show(value)} where the class declares {_type_name(hint)}"
                      ", which a received file may not hold (only plain values)")
    raise Refusal(f"{where} holds {_show(value)}; expected {_type_name(hint)}")


def check_module_hparams(hparams: Any, where: str = "hyper_parameters",
                         role: str = "module") -> dict[str, Any] | None:
    r"""Check a checkpoint's ``hyper_parameters`` (Lightning's form: ``_class_path``,
    ``_instantiator`` and the module's arguments at the top level).

    Args:
        hparams: the hyperparameters (:obj:`None`: nothing to check).
        where (str, optional): their key, named in errors (default: ``"hyper_parameters"``).
        role (str, optional): the role of the class they name (default: ``"module"``).

    Returns:
        dict or None: the canonical ``{"class_path", "init_args"}`` of the Lightning module;
        :obj:`None` when the hyperparameters name no class (a module built in Python): their
        values are still checked to be plain.

    Raises:
        Refusal: as :func:`check_class`; an ``_instantiator`` other than Lightning's own.
    """
    if hparams is None:
        return None
    if not isinstance(hparams, dict):
        raise Refusal(f"{where} must be a mapping, not {_show(hparams)}")
    count_nodes(hparams, what=where)
    args = dict(hparams)
    instantiator = args.pop("_instantiator", None)
    if instantiator not in (None, "lightning.pytorch.cli.instantiate_module",
                            "pytorch_lightning.cli.instantiate_module"):
        raise Refusal(f"{where}._instantiator names {_show(instantiator)}; graph-urpe builds "
                      "received models itself")
    class_path = args.pop("_class_path", None)
    if class_path is None:
        _plain_any(args, where)
        return None
    return check_class({"class_path": class_path, "init_args": args}, role, where)


def _plain_any(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return _check_value(value, str, where)
    if isinstance(value, (list, tuple)):
        return [_plain_any(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        if "class_path" in value:  # a registry class, checked as its own role
            entry = lookup(value["class_path"])
            return check_class(value, entry.role if entry else "class", where)
        if "_class_path" in value:
            raise Refusal(f"{where} names a class where no class may stand")
        return {k: _plain_any(v, f"{where}.{k}") for k, v in value.items()}
    raise Refusal(f"{where} holds {_show(value)}; only plain values may stand here")


# ------------------------------------------------------------------------------- building
def build(config: dict[str, Any], **overrides: Any) -> Any:
    r"""Build a canonical class entry (:func:`check_class`'s output) directly: networks and data
    modules are instantiated, optimizers and schedulers become :func:`functools.partial`.

    Args:
        config (dict): ``{"class_path", "init_args"}`` from :func:`check_class`.
        **overrides: arguments that replace the entry's (e.g. a network instance).
    """
    entry = lookup(config["class_path"])
    assert entry is not None, config  # canonical entries name registry classes only
    kwargs = {k: _built(v) for k, v in config["init_args"].items()}
    kwargs.update(overrides)
    cls = entry.load()
    if entry.role in ("optimizer", "scheduler"):
        return functools.partial(cls, **kwargs)
    return cls(**kwargs)


def _built(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == _CLASS_KEYS and lookup(value["class_path"]):
        return build(value)
    return value


def module_kwargs(config: dict[str, Any]) -> dict[str, Any]:
    """The Lightning module's keyword arguments built from its canonical entry (nested classes
    built by :func:`build`)."""
    return {k: _built(v) for k, v in config["init_args"].items()}


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, float) or math.isfinite(value) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
