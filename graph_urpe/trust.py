"""Files a user receives are data: checkpoints and run folders name only graph-urpe's own classes.

A user's ``--config`` and command-line options are trusted like a script: jsonargparse imports and
builds whatever classes they name. A checkpoint (``--ckpt_path``, ``load_from_checkpoint``, ``plot
CKPT``) and a run folder's ``config.yaml`` read on the user's behalf are not: the classes and
callables they name are checked against :func:`allowed_class` **before anything they name is
imported**, and anything else is refused with :class:`UntrustedFileError` (one line naming the file,
the class and where it sits). Allowed are

* classes defined in graph-urpe (``graph_urpe.*``) that are Lightning modules, data modules,
  ``torch.nn`` modules or learning-rate schedulers (everything the shipped configurations use);
* PyTorch's optimizers and learning-rate schedulers (``torch.optim.*``).

Checked before import means: a class path outside ``graph_urpe.`` / ``torch.optim.`` is refused
from its text alone; one inside is imported (the package's and PyTorch's own modules) and must
resolve to such a class. Every string value that jsonargparse could resolve to an import (a dotted
name whose first part is an importable module) and every reference to another configuration file
is refused the same way, wherever it sits in the nested ``class_path`` / ``init_args`` structure.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import pickle
import re
import sys
import zipfile
from typing import Any

import torch

__all__ = [
    "TrustedLoadMixin",
    "UntrustedFileError",
    "allowed_class",
    "check_file_config",
    "read_checkpoint",
    "read_checkpoint_bytes",
    "read_run_data",
]

_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
_CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".jsonnet")
_INSTANTIATORS = ("lightning.pytorch.cli.instantiate_module",
                  "pytorch_lightning.cli.instantiate_module")


class UntrustedFileError(ValueError):
    r"""A checkpoint or run folder the user received names something graph-urpe does not build from
    a file (or holds pickled objects). Nothing it names was imported or run. :attr:`path` names
    the file."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = str(path)
        super().__init__(f"refusing {path}: {reason}")


def _advice(kind: str) -> str:
    return (f"nothing in it was run. A {kind} is data: it may name only graph-urpe's own classes "
            "and torch optimizers / schedulers. If you trust its author like a script, build the "
            "model yourself (e.g. in a --config you have read) and load only its weights.")


def allowed_class(path: str) -> bool:
    r"""Whether a checkpoint or run folder may name the class ``path`` (a full dotted path).

    Only paths under ``graph_urpe.`` or ``torch.optim.`` are imported to answer; any other path
    is refused from its text alone.

    Args:
        path (str): a dotted class path, e.g. ``"graph_urpe.nn.Graphormer"``.

    Returns:
        bool: :obj:`True` for a graph-urpe Lightning module, data module, ``torch.nn`` module or
        scheduler defined under ``graph_urpe``, or a ``torch.optim`` optimizer / scheduler.
    """
    if not isinstance(path, str) or not _DOTTED.fullmatch(path):
        return False
    if path.startswith("graph_urpe."):
        from lightning.pytorch import LightningDataModule, LightningModule

        bases: tuple[type, ...] = (LightningModule, LightningDataModule, torch.nn.Module,
                                   torch.optim.lr_scheduler.LRScheduler)
        home = "graph_urpe."
    elif path.startswith("torch.optim."):
        bases = (torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler,
                 torch.optim.lr_scheduler.ReduceLROnPlateau)
        home = "torch.optim."
    else:
        return False
    obj = _resolve(path)
    return (isinstance(obj, type) and issubclass(obj, bases)
            and obj.__module__.startswith(home))


def _resolve(path: str) -> Any:
    """The object at ``path`` (longest importable module prefix, then attributes), or None."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name, None)
        return obj
    return None


def _names_module(text: str) -> bool:
    """Whether jsonargparse could import ``text``: a dotted name whose first part is a module."""
    if not _DOTTED.fullmatch(text):
        return False
    top = text.split(".", 1)[0]
    if top in sys.modules:
        return True
    try:
        return importlib.util.find_spec(top) is not None  # a top-level spec: nothing is run
    except (ImportError, ValueError):
        return False


def check_file_config(value: Any, path: str, kind: str = "checkpoint", where: str = "") -> None:
    r"""Refuse a configuration read from a received file unless everything it names is allowed.

    Walks nested dicts and lists; checks every ``class_path`` / ``_class_path`` (which must be a
    full dotted path passing :func:`allowed_class`), Lightning's ``_instantiator`` (its own
    ``instantiate_module`` only), every string that names an importable module, and every
    reference to another configuration file.

    Args:
        value: the configuration (plain dicts, lists, scalars).
        path (str): the file it came from (named in the error).
        kind (str, optional): ``"checkpoint"`` or ``"run folder"`` (default: ``"checkpoint"``).
        where (str, optional): the key path of :obj:`value` (default: ``""``).

    Raises:
        UntrustedFileError: naming :obj:`path`, the refused name and its key path.
    """
    if isinstance(value, dict):
        for key, item in value.items():
            at = f"{where}.{key}" if where else str(key)
            if key == "_instantiator":
                if item not in _INSTANTIATORS:
                    raise UntrustedFileError(path, f"it names the instantiator {item!r} (at {at}); "
                                             + _advice(kind))
            elif key in ("class_path", "_class_path"):
                if not allowed_class(item):
                    raise UntrustedFileError(path, f"it names the class {item!r} (at {at}); "
                                             + _advice(kind))
            else:
                check_file_config(item, path, kind, at)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_file_config(item, path, kind, f"{where}[{i}]")
    elif isinstance(value, str):
        text = value.strip()
        if text.lower().endswith(_CONFIG_SUFFIXES):
            raise UntrustedFileError(path, f"it refers to another configuration file {text!r} "
                                     f"(at {where}); " + _advice(kind))
        if _names_module(text) and not allowed_class(text):
            raise UntrustedFileError(path, f"it names {text!r} (at {where}), which would be "
                                     "imported; " + _advice(kind))


def read_checkpoint(path: str, map_location: Any = "cpu") -> dict:
    r"""Read a checkpoint as plain data and check what its hyperparameters name.

    ``torch.load(weights_only=True)``: tensors, containers and numbers only; pickled code is
    refused by our own message (never PyTorch's advice to turn ``weights_only`` off). Then
    :func:`check_file_config` on ``hyper_parameters``.

    Args:
        path (str or file-like): the checkpoint.
        map_location (optional): as for :func:`torch.load` (default: ``"cpu"``).

    Returns:
        dict: the checkpoint.

    Raises:
        UntrustedFileError: pickled objects, or a class / callable outside the allow-list.
        ValueError: the file is corrupt, truncated or not a checkpoint.
        FileNotFoundError: it does not exist.
    """
    name = getattr(path, "name", path)
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        if "global" not in str(err).lower():  # not a refused class: a broken file
            raise ValueError(f"cannot read checkpoint {name}: corrupt, truncated or not a PyTorch "
                             "checkpoint (UnpicklingError); use the best.ckpt or last.ckpt that "
                             "`graph-urpe fit` wrote.") from None
        first = str(err).strip().splitlines()
        detail = next((line.strip() for line in first if "GLOBAL" in line or "global" in line),
                      "not plain data")
        raise UntrustedFileError(name, f"it holds pickled Python objects ({detail[:160]}); "
                                 + _advice("checkpoint")) from None
    except FileNotFoundError:
        raise
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, KeyError) as err:
        raise ValueError(f"cannot read checkpoint {name}: corrupt, truncated or not a PyTorch "
                         f"checkpoint ({type(err).__name__}); use the best.ckpt or last.ckpt "
                         "that `graph-urpe fit` wrote.") from None
    if not isinstance(ckpt, dict):
        raise ValueError(f"{name} is not a checkpoint (a dict with a state_dict); use the "  # noqa: TRY004
                         "best.ckpt or last.ckpt that `graph-urpe fit` wrote.")
    for key in ("hyper_parameters", "datamodule_hyper_parameters"):
        check_file_config(ckpt.get(key) or {}, name, "checkpoint", key)
    return ckpt


def read_checkpoint_bytes(path: str) -> io.BytesIO:
    r"""The checkpoint's bytes, checked by :func:`read_checkpoint`, for a loader that reads it again
    (:meth:`~lightning.pytorch.LightningModule.load_from_checkpoint`): the bytes checked are the
    bytes loaded.

    Raises:
        UntrustedFileError, ValueError, FileNotFoundError: as :func:`read_checkpoint`.
    """
    if hasattr(path, "read"):
        data = path.read()
    else:
        with open(path, "rb") as handle:
            data = handle.read()
    buffer = io.BytesIO(data)
    buffer.name = getattr(path, "name", str(path))
    read_checkpoint(buffer)
    buffer.seek(0)
    return buffer


def read_run_data(path: str) -> dict | None:
    r"""The ``data`` section of a run folder's ``config.yaml``, read as plain data (YAML's safe
    loader: no ``!!python`` tags) and checked by :func:`check_file_config` (kind
    ``"run folder"``); :obj:`None` if the file has no data section.

    Raises:
        UntrustedFileError: a ``!!python`` tag, or a class / callable outside the allow-list.
        ValueError: the file is not YAML or not a mapping.
    """
    import yaml

    try:
        with open(path) as handle:
            config = yaml.safe_load(handle) or {}
    except yaml.constructor.ConstructorError as err:
        raise UntrustedFileError(path, f"it holds a Python object tag ({err.problem}); "
                                 + _advice("run folder")) from None
    except yaml.YAMLError as err:
        raise ValueError(f"cannot read {path}: not YAML ({type(err).__name__}); pass --config "
                         "and --data options yourself.") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} is not a run configuration (a mapping); pass --config and "  # noqa: TRY004
                         "--data options yourself.")
    data = config.get("data")
    if not isinstance(data, dict):
        return None
    check_file_config(data, path, "run folder", "data")
    return data


class TrustedLoadMixin:
    r"""Mixin for Lightning modules: :meth:`load_from_checkpoint` checks the checkpoint with
    :func:`read_checkpoint` (plain data, allow-listed classes) before Lightning builds anything
    from it; the bytes checked are the bytes loaded. Put it before ``LightningModule`` in the
    bases.

    Raises:
        UntrustedFileError: from :meth:`load_from_checkpoint`, as :func:`read_checkpoint`.
    """

    @classmethod
    def load_from_checkpoint(cls, checkpoint_path: Any, *args: Any, **kwargs: Any) -> Any:
        """:meth:`lightning.pytorch.LightningModule.load_from_checkpoint` of a checked file."""
        return super().load_from_checkpoint(  # type: ignore[misc]
            read_checkpoint_bytes(checkpoint_path), *args, **kwargs)
