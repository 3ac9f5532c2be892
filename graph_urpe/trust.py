"""Files a user receives are data: checkpoints and run folders are read as plain values, checked
against graph-urpe's registry of classes, and bounded, before anything is built.

A user's ``--config`` and command-line options are trusted like a script: jsonargparse imports and
builds whatever classes they name. A checkpoint (``--ckpt_path``, ``load_from_checkpoint``, ``plot
CKPT``) and a run folder's ``config.yaml`` read on the user's behalf are not, and never reach a
generic resolver (jsonargparse's class resolution, an import by a dotted name found in the file):

* a checkpoint is read by :func:`torch.load` with ``weights_only=True`` (tensors, containers and
  numbers; pickled code refused), only from a zip archive whose entries are stored uncompressed as
  :func:`torch.save` writes them (reading costs about the file's size in memory), and holds at
  most :data:`~graph_urpe.received.MAX_NODES` values in its hyperparameters;
* its hyperparameters and a run folder's data section name classes only by a key or exact alias
  of :mod:`graph_urpe.registry` and hold plain values of the types each class declares
  (:mod:`graph_urpe.received`); anything else is refused with :class:`UntrustedFileError` (one
  line naming the file and the entry) before anything it names is imported;
* the model its hyperparameters describe is built on the ``meta`` device and its tensors compared,
  name by name and shape by shape, with the state dict; tensors outside the state dict may take
  at most four times its bytes (optimizer moments) plus 16 MiB;
* what is built is built from the checked values: :meth:`TrustedLoadMixin.load_from_checkpoint`
  builds the classes itself; ``graph-urpe`` hands jsonargparse only the canonical form (class
  paths from the registry's table, plain values where the class declares plain types), under the
  user's own ``--config`` and options.

Every refusal is a :class:`ReceivedFileError` (a :class:`ValueError`): one line naming the file,
what was refused and what to do.
"""

from __future__ import annotations

import inspect
import os.path as osp
import pickle
import zipfile
from typing import Any

import torch

from graph_urpe.checkpoint_parts import check_lightning_state, check_tensor_bytes, check_vocabulary
from graph_urpe.pretrained import ENCODER_FORMAT
from graph_urpe.received import (
    MAX_NODES,
    Refusal,
    SizeRefusal,
    check_class,
    check_module_hparams,
    count_nodes,
    module_kwargs,
)
from graph_urpe.received_sizes import check_sizes, shape_mismatch
from graph_urpe.registry import lookup

__all__ = [
    "CheckedCheckpoint",
    "ReceivedFileError",
    "TrustedLoadMixin",
    "UntrustedFileError",
    "read_checkpoint",
    "read_run_config",
    "read_run_data",
]

class ReceivedFileError(ValueError):
    r"""A checkpoint or run folder the user received cannot be used as it is: corrupt, not
    graph-urpe's, or its sizes do not fit. One line; :attr:`path` names the file."""

    def __init__(self, path: Any, reason: str) -> None:
        self.path = str(path)
        super().__init__(f"refusing {path}: {reason}")


class UntrustedFileError(ReceivedFileError):
    r"""A received checkpoint or run folder names something graph-urpe does not build from a file
    (a class outside its registry, a value of another type than the class declares, pickled
    objects). Nothing it names was imported or run."""


class CheckedCheckpoint(dict):
    r"""A checkpoint read by :func:`read_checkpoint`; :attr:`module_config` is the canonical
    ``{"class_path", "init_args"}`` of its Lightning module (:obj:`None` if it names none)."""

    module_config: dict[str, Any] | None = None


def _advice(kind: str) -> str:
    return (f"nothing in it was run. A {kind} is data: it may name only classes of graph-urpe's "
            "registry (graph_urpe.registry) with plain values of the types they declare. If you "
            "trust its author like a script, build the model yourself (e.g. in a --config you "
            "have read) and load only its weights.")


def _refused(path: Any, err: Refusal, kind: str) -> UntrustedFileError:
    return UntrustedFileError(path, f"{err}; " + _advice(kind))


def _name(path: Any) -> str:
    """A path as given, or a file object's ``name``."""
    return str(getattr(path, "name", path) if hasattr(path, "read") else path)


def _check_archive(source: Any, name: str) -> None:
    """A zip archive whose entries are stored uncompressed (what :func:`torch.save` writes)."""
    try:
        with zipfile.ZipFile(source) as archive:
            packed = [i.filename for i in archive.infolist()
                      if i.compress_type != zipfile.ZIP_STORED]
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        raise ReceivedFileError(name, "corrupt, truncated or not a PyTorch checkpoint (not the zip "
                                "archive torch.save writes); use the best.ckpt or last.ckpt that "
                                "`graph-urpe fit` wrote.") from None
    finally:
        if hasattr(source, "seek"):
            source.seek(0)
    if packed:
        raise UntrustedFileError(name, f"its entry {packed[0]} is compressed; torch.save stores "
                                 "tensors uncompressed, so a compressed one could take far more "
                                 "memory than the file's size. Re-save it with torch.save.")


def read_checkpoint(path: Any, map_location: Any = "cpu") -> CheckedCheckpoint:
    r"""Read a received checkpoint as plain data, check everything it names, bound its sizes.

    In order: a zip archive with uncompressed entries; :func:`torch.load` with
    ``weights_only=True`` (pickled code refused by our own message, never PyTorch's advice to turn
    ``weights_only`` off); at most ``10 * MAX_NODES`` values in all; the hyperparameters checked
    against the registry (:func:`graph_urpe.received.check_module_hparams`); Lightning's state,
    the training vocabulary's form and the tensors outside the state dict, bounded by it
    (:mod:`graph_urpe.checkpoint_parts`); the model built on the
    ``meta`` device and compared with the state dict
    (:func:`graph_urpe.received_sizes.check_sizes`).
    An encoder file of :mod:`graph_urpe.pretrained` (``format: graph-urpe-encoder/1``) is checked
    for plain values.

    Args:
        path (str or file-like): the checkpoint.
        map_location (optional): as for :func:`torch.load` (default: ``"cpu"``).

    Returns:
        CheckedCheckpoint: the checkpoint (a dict), with the canonical module configuration.

    Raises:
        UntrustedFileError: pickled objects, a compressed entry, a class outside the registry, a
            value of another type than its class declares.
        ReceivedFileError: the file is a folder, corrupt, truncated, not a checkpoint, or its
            tensors do not fit the model its hyperparameters describe.
        FileNotFoundError: it does not exist.
    """
    name = _name(path)
    if not hasattr(path, "read"):
        if osp.isdir(path):
            raise ReceivedFileError(name, "it is a folder; pass the .ckpt file (e.g. "
                                    "RUN/checkpoints/best.ckpt).")
        if not osp.exists(path):
            raise FileNotFoundError(f"checkpoint {name} not found: pass an existing .ckpt file.")
    _check_archive(path, name)
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True,
                          mmap=not hasattr(path, "read"))
    except pickle.UnpicklingError as err:
        if "global" not in str(err).lower():  # not a refused class: a broken file
            raise ReceivedFileError(name, "corrupt, truncated or not a PyTorch checkpoint "
                                    "(UnpicklingError); use the best.ckpt or last.ckpt that "
                                    "`graph-urpe fit` wrote.") from None
        lines = str(err).strip().splitlines()
        detail = next((line.strip() for line in lines if "GLOBAL" in line or "global" in line),
                      "not plain data")
        raise UntrustedFileError(name, f"it holds pickled Python objects ({detail[:160]}); "
                                 + _advice("checkpoint")) from None
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, KeyError, ValueError,
            TypeError, AttributeError, IndexError) as err:
        raise ReceivedFileError(name, f"corrupt, truncated or not a PyTorch checkpoint "
                                f"({type(err).__name__}); use the best.ckpt or last.ckpt that "
                                "`graph-urpe fit` wrote.") from None
    if not isinstance(ckpt, dict):
        raise ReceivedFileError(name, "not a checkpoint (a mapping with a state_dict); use the "
                                "best.ckpt or last.ckpt that `graph-urpe fit` wrote.")
    checked = CheckedCheckpoint(ckpt)
    try:
        count_nodes(ckpt, 10 * MAX_NODES, "the checkpoint")
        if ckpt.get("format") == ENCODER_FORMAT:
            check_module_hparams(ckpt.get("encoder_args"), "encoder_args")
            check_module_hparams(ckpt.get("metadata"), "metadata")
            return checked
        if "state_dict" not in ckpt:
            raise ReceivedFileError(name, "it holds no state_dict: not a checkpoint of "
                                    "`graph-urpe fit`; use the best.ckpt or last.ckpt it wrote.")
        checked.module_config = check_module_hparams(ckpt.get("hyper_parameters"))
        check_module_hparams(ckpt.get("datamodule_hyper_parameters"),
                             "datamodule_hyper_parameters", role="data")
        check_vocabulary(ckpt.get("training_vocabulary"))
        check_lightning_state(ckpt)
        check_tensor_bytes(ckpt)
        if checked.module_config is not None:
            _upgrade_state(lookup(checked.module_config["class_path"]).load(), ckpt)
            check_sizes(checked.module_config, ckpt["state_dict"])
    except SizeRefusal as err:
        raise ReceivedFileError(name, f"{err}; it was changed, or written by another version "
                                "of graph-urpe: use a checkpoint that this version's `graph-urpe "
                                "fit` wrote.") from None
    except Refusal as err:
        raise _refused(name, err, "checkpoint") from None
    return checked


def _upgrade_state(klass: type, ckpt: dict) -> None:
    """The tensors an earlier version's state dict lacks, added by the module class's
    ``upgrade_state_dict`` (plain defaults, e.g. an uncalibrated buffer), before its sizes are
    compared with the model's."""
    upgrade = getattr(klass, "upgrade_state_dict", None)
    state = ckpt.get("state_dict")
    if upgrade is not None and isinstance(state, dict):
        upgrade(state)


def read_run_config(path: str) -> dict:
    r"""A run folder's ``config.yaml`` as plain data: YAML's safe loader (no ``!!python`` tags),
    at most :data:`~graph_urpe.received.MAX_NODES` nodes with every alias expanded (an alias bomb
    stops there), a mapping at the top.

    Raises:
        UntrustedFileError: a ``!!python`` tag; too many nodes.
        ReceivedFileError: not UTF-8 text, not YAML, or not a mapping.
    """
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            loader = yaml.SafeLoader(handle)
            try:
                node = loader.get_single_node()
                _count_yaml_nodes(node)
                config = loader.construct_document(node) if node is not None else {}
            finally:
                loader.dispose()
    except yaml.constructor.ConstructorError as err:
        raise UntrustedFileError(path, f"it holds a Python object tag ({err.problem}); "
                                 + _advice("run folder")) from None
    except Refusal as err:
        raise _refused(path, err, "run folder") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ReceivedFileError(path, f"not a YAML text file ({type(err).__name__}); pass "
                                "--config and --data options yourself.") from None
    except IsADirectoryError:
        raise ReceivedFileError(path, "it is a folder, not a run's config.yaml.") from None
    if not isinstance(config, dict):
        raise ReceivedFileError(path, f"not a run configuration (a mapping, found "
                                f"{type(config).__name__}); pass --config and --data options "
                                "yourself, or leave this run out.")
    return config


def _count_yaml_nodes(root: Any) -> None:
    """Refuse a YAML node graph with more than MAX_NODES nodes, aliases expanded."""
    import yaml

    count, stack = 0, [root]
    while stack:
        node = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise Refusal(f"it holds more than {MAX_NODES:,} values once its YAML aliases are "
                          "expanded (a run's config.yaml holds a few hundred)")
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.extend((key, value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def read_run_data(path: str) -> dict | None:
    r"""The canonical ``data`` section of a run folder's ``config.yaml`` (:func:`read_run_config`),
    checked against the registry (:func:`graph_urpe.received.check_class`, role ``"data"``);
    :obj:`None` if the file has no data section.

    Raises:
        UntrustedFileError: a ``!!python`` tag, a class outside the registry, a value of another
            type than the class declares.
        ReceivedFileError: the file is not YAML or not a mapping.
    """
    data = read_run_config(path).get("data")
    if data is None:
        return None
    try:
        return check_class(data, "data", "data")
    except Refusal as err:
        raise _refused(path, err, "run folder") from None


class TrustedLoadMixin:
    r"""Mixin for Lightning modules: :meth:`load_from_checkpoint` reads the checkpoint with
    :func:`read_checkpoint` and builds the module itself from the checked values (Lightning's
    instantiator, which resolves class paths with jsonargparse, is never called). Put it before
    ``LightningModule`` in the bases.
    """

    @classmethod
    def load_from_checkpoint(cls, checkpoint_path: Any, map_location: Any = None,
                             hparams_file: Any = None, strict: bool | None = None,
                             weights_only: bool | None = None, **kwargs: Any) -> Any:
        r"""Build the module a checked checkpoint describes and load its weights.

        Args:
            checkpoint_path (str or file-like): the checkpoint.
            map_location (optional): as for :func:`torch.load` (default: :obj:`None`: CPU).
            hparams_file: not supported (must be :obj:`None`): a checkpoint carries its own.
            strict (bool, optional): :meth:`torch.nn.Module.load_state_dict`'s ``strict``
                (default: :obj:`None`: :obj:`True`).
            weights_only: ignored: checkpoints are always read with ``weights_only=True``.
            **kwargs: arguments that replace the checkpoint's (e.g. ``model=net`` for a module
                built in Python from a network instance).

        Raises:
            UntrustedFileError, ReceivedFileError: as :func:`read_checkpoint`; a checkpoint of
                another module class; tensors that do not fit the module built with
                :obj:`kwargs`.
        """
        from lightning.pytorch.core.mixins.hparams_mixin import _given_hyperparameters_context

        from graph_urpe.registry import CLASSES

        if hparams_file is not None:
            raise ValueError("hparams_file is not supported: a graph-urpe checkpoint carries its "
                             "own hyperparameters (pass changed arguments as keywords).")
        ckpt = read_checkpoint(checkpoint_path, map_location or "cpu")
        name = _name(checkpoint_path)
        config = ckpt.module_config
        if config is None:  # no class named: the hyperparameters of ``cls``, checked as such
            key = next((k for k, e in CLASSES.items() if e.role == "module" and e.load() is cls),
                       None)
            hparams = {k: v for k, v in (ckpt.get("hyper_parameters") or {}).items()
                       if not k.startswith("_")}
            if "model" in inspect.signature(cls.__init__).parameters and "model" not in {
                    **hparams, **kwargs}:
                raise ReceivedFileError(name, "it does not record its network (a module built "
                                        "in Python, not by `graph-urpe fit`): load it with "
                                        "load_from_checkpoint(path, model=network).")
            _upgrade_state(cls, ckpt)
            try:
                if key is None:
                    raise Refusal(f"{cls.__name__} is not in graph-urpe's registry of classes")
                config = check_class({"class_path": key, "init_args": hparams}, "module",
                                     "hyper_parameters")
                if not kwargs:
                    check_sizes(config, ckpt["state_dict"])
            except SizeRefusal as err:
                raise ReceivedFileError(name, str(err)) from None
            except Refusal as err:
                raise _refused(name, err, "checkpoint") from None
        klass = lookup(config["class_path"]).load()
        if not issubclass(klass, cls):
            raise ReceivedFileError(name, f"it holds a {klass.__name__}, not a {cls.__name__}; "
                                    f"load it with {klass.__name__}.")
        built = module_kwargs({"init_args": {k: v for k, v in config["init_args"].items()
                                             if k not in kwargs}})
        saved = {"_class_path": config["class_path"], **config["init_args"]}
        try:
            if kwargs:
                module = klass(**built, **kwargs)
            else:
                with _given_hyperparameters_context(
                        hparams=saved, instantiator="lightning.pytorch.cli.instantiate_module"):
                    module = klass(**built)
        except (TypeError, ValueError) as err:  # arguments the caller gave
            first = (str(err).strip().splitlines() or [""])[0][:300]
            raise ReceivedFileError(name, f"its hyperparameters and the arguments given do not "
                                    f"build a {klass.__name__} ({first}).") from None
        problem = shape_mismatch(module.state_dict(), ckpt["state_dict"])
        if problem and strict is not False:
            raise ReceivedFileError(name, f"its state dict does not fit the module built: "
                                    f"{problem}; pass arguments that build the trained sizes.")
        module.on_load_checkpoint(ckpt)
        module.load_state_dict(ckpt["state_dict"], strict=strict is not False)
        if isinstance(map_location, (str, torch.device)):
            module = module.to(map_location)
        return module
