"""graph-urpe's registry of classes: the only classes a received file may name.

A checkpoint's hyperparameters and a run folder's ``config.yaml`` (files a user receives) name
their Lightning module, network, data module, optimizer and scheduler by a **key** of
:data:`CLASSES` (e.g. ``"Graphormer"``) or by one of the key's **aliases**: the exact
``class_path`` strings that checkpoints and configurations written by graph-urpe contain (the
layout's paths, e.g. ``graph_urpe.models.GraphPropertyModule``, and the older
``graph_urpe.tasks.*`` ones). A name is looked up as an exact string in this fixed table: it is
never split, imported or resolved, so a received file can reach no other class.
:mod:`graph_urpe.received` checks each class's arguments against its signature and builds it.

Adding a class is one line in :data:`CLASSES`, e.g. ::

    _entry("MyNet", "graph_urpe.nn:MyNet", "network", homes=("graph_urpe.nn.my_net",))

Roles say where a class may stand: ``"module"`` (a Lightning module: the checkpoint's top
level), ``"network"`` (an :class:`torch.nn.Module` argument), ``"data"`` (a run folder's data
module), ``"optimizer"`` and ``"scheduler"`` (the Lightning module's optimizer / scheduler
callables).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

__all__ = ["CLASSES", "COUNTS", "ROLES", "RegisteredClass", "lookup"]

ROLES = ("module", "network", "data", "optimizer", "scheduler")

COUNTS = frozenset({"num_layers", "ensemble_size"})
"""Arguments that count repeated parts of a model (each part has tensors): in a received
checkpoint each must be at most the number of tensors in its state dict, checked before anything
is built (:func:`graph_urpe.received_sizes.check_sizes`). Add an argument that copies parts
without registering modules one by one (as ``copy.deepcopy`` does) here."""


@dataclass(frozen=True)
class RegisteredClass:
    r"""One class a received file may name.

    Args:
        key (str): the registry key (e.g. ``"Graphormer"``).
        target (str): where the class lives, ``"module:attribute"``; imported only from this
            table, never from a file's text.
        role (str): one of :data:`ROLES`.
        aliases (tuple[str, ...]): exact ``class_path`` strings naming it (default: none).
        kwargs_to (str, optional): ``"module:attribute"`` of the class that receives the
            ``**kwargs`` of :attr:`target`'s ``__init__`` (its arguments with defaults are
            accepted too); :obj:`None`: the next ``__init__`` in the class's MRO.
            (default: :obj:`None`)
    """

    key: str
    target: str
    role: str
    aliases: tuple[str, ...] = ()
    kwargs_to: str | None = None

    @property
    def class_path(self) -> str:
        """The dotted path of :attr:`target` (what a configuration written today names)."""
        return self.target.replace(":", ".")

    def load(self) -> type:
        """The class (imports :attr:`target`'s module: graph-urpe's own or ``torch.optim``)."""
        return _load(self.target)

    def load_kwargs_target(self) -> type | None:
        """The class of :attr:`kwargs_to`, or :obj:`None`."""
        return _load(self.kwargs_to) if self.kwargs_to else None


def _load(target: str) -> type:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _entry(key: str, target: str, role: str, homes: tuple[str, ...] = (),
           kwargs_to: str | None = None) -> RegisteredClass:
    """A :class:`RegisteredClass` whose aliases are ``HOME.<class name>`` for each of ``homes``
    and the dotted target itself."""
    name = target.rsplit(":", 1)[1]
    aliases = tuple(dict.fromkeys([target.replace(":", "."), *(f"{h}.{name}" for h in homes)]))
    return RegisteredClass(key, target, role, aliases, kwargs_to)


# Targets are the public import paths (stable when a file inside a package moves); aliases are
# every path a checkpoint or config written by graph-urpe may hold (the class's own module too:
# tests/test_trust.py checks that each class's __module__ path is one).
_MODELS = ("graph_urpe.models", "graph_urpe.tasks")  # the layout's package, and the old one
_GRAPH_DATA = ("graph_urpe.data.modules.molecule", "graph_urpe.tasks",
               "graph_urpe.tasks.molecule_data")
_SEQ_DATA = ("graph_urpe.data.modules", "graph_urpe.tasks.sequence_data")
_NN = ("graph_urpe.nn.graphormer", "graph_urpe.nn.graphormer_model")
_OPTIM = "torch.optim"
_SCHED = "torch.optim.lr_scheduler"

_TABLE = [
    # Lightning modules
    _entry("GraphPropertyModule", "graph_urpe.models:GraphPropertyModule", "module",
           ("graph_urpe.models.graph", "graph_urpe.tasks", "graph_urpe.tasks.graph")),
    _entry("SyntheticTaskModule", "graph_urpe.models.sequence:SyntheticTaskModule", "module",
           (*_MODELS, "graph_urpe.tasks.sequence")),
    _entry("LanguageModelModule", "graph_urpe.models.sequence:LanguageModelModule", "module",
           (*_MODELS, "graph_urpe.tasks.sequence")),
    # networks
    _entry("Graphormer", "graph_urpe.nn:Graphormer", "network", _NN,
           kwargs_to="graph_urpe.nn:GraphormerEncoder"),
    _entry("SequenceTransformer", "graph_urpe.nn:SequenceTransformer", "network",
           ("graph_urpe.nn.transformer",)),
    _entry("TransformerLM", "graph_urpe.nn:TransformerLM", "network",
           ("graph_urpe.nn.transformer",), kwargs_to="graph_urpe.nn:SequenceTransformer"),
    # data modules
    *(_entry(name, f"graph_urpe.data.modules:{name}", "data", _GRAPH_DATA)
      for name in ("CSVDataModule", "OGBDataModule", "PCQM4Mv2DataModule", "ZINCDataModule",
                   "ZincLikeDataModule")),
    _entry("SyntheticGraphDataModule", "graph_urpe.data.modules:SyntheticGraphDataModule", "data",
           ("graph_urpe.data.modules.synthetic_graph", "graph_urpe.tasks",
            "graph_urpe.tasks.synthetic_graph_data")),
    *(_entry(name, f"graph_urpe.data.modules.sequence:{name}", "data", _SEQ_DATA)
      for name in ("SyntheticDataModule", "WikiTextDataModule")),
    # optimizers and schedulers
    *(_entry(name, f"{_OPTIM}:{name}", "optimizer", (f"{_OPTIM}.{name.lower()}",))
      for name in ("Adam", "AdamW", "SGD", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam",
                   "Adadelta")),
    _entry("PolynomialDecayLR", "graph_urpe.models.optim:PolynomialDecayLR", "scheduler",
           ("graph_urpe.models", "graph_urpe.tasks.optim")),
    *(_entry(name, f"{_SCHED}:{name}", "scheduler")
      for name in ("CosineAnnealingLR", "CosineAnnealingWarmRestarts", "ReduceLROnPlateau",
                   "OneCycleLR", "StepLR", "ExponentialLR", "LinearLR", "ConstantLR",
                   "PolynomialLR")),
]

CLASSES: dict[str, RegisteredClass] = {entry.key: entry for entry in _TABLE}
"""Registry key -> :class:`RegisteredClass`."""

_NAMES: dict[str, RegisteredClass] = {
    name: entry for entry in _TABLE for name in (entry.key, *entry.aliases)}


def lookup(name: object) -> RegisteredClass | None:
    r"""The registered class a received file's ``name`` means: an exact key or alias, else
    :obj:`None` (nothing is imported to answer).

    Args:
        name: a registry key or alias (any other value gives :obj:`None`).
    """
    return _NAMES.get(name) if isinstance(name, str) else None
