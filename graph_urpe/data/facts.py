"""What a model needs to know of its data, and how it flows: one way, from the data to the model.

* :class:`DatasetFacts`: the static facts (task, label columns, featurization, metric, level, node
  limit, ...), known before any graph is read. A dataset family states them once
  (:mod:`graph_urpe.data.families`); a graph data module's ``facts`` is that object with the
  module's own options; ``graph-urpe`` links its fields into the model at instantiation
  (:data:`graph_urpe.cli.links.GRAPH_LINKS`).
* :class:`TrainingStatistics`: what is known only once the training split is loaded (label mean
  and std, the feature values seen, where the data came from): the data module computes it and
  hands it to the model when fitting starts
  (:meth:`~graph_urpe.models.graph.GraphPropertyModule.use_training_statistics`).
* :class:`GraphData`: the small protocol through which a model reads a data module, instead of
  probing its attributes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

from graph_urpe.data.featurize import feature_dims

__all__ = ["DatasetFacts", "GraphData", "TrainingStatistics", "default_metric",
           "default_target_names", "label_columns"]


def label_columns(task: str, num_tasks: int) -> int:
    """Label columns of a task: one class index per row for ``"multiclass"`` (``num_tasks`` is
    then the number of classes), else ``num_tasks`` (one column per regression target or binary
    task).

    Args:
        task (str): ``"regression"``, ``"classification"`` or ``"multiclass"``.
        num_tasks (int): outputs of the task (classes for ``"multiclass"``).
    """
    return 1 if task == "multiclass" else num_tasks


def default_target_names(num_labels: int) -> tuple[str, ...]:
    """The label columns' names when none are given: ``("y",)`` for one, else ``y0, y1, ...``
    (the prediction columns are ``<name>_pred``)."""
    return ("y",) if num_labels == 1 else tuple(f"y{i}" for i in range(num_labels))


def default_metric(task: str) -> str:
    """The metric a task monitors when none is given: ``"rocauc"`` (classification),
    ``"accuracy"`` (multi-class), else ``"mae"``."""
    return {"classification": "rocauc", "multiclass": "accuracy"}.get(task, "mae")


@dataclasses.dataclass(frozen=True)
class DatasetFacts:
    r"""What a model and its metric need to know of a dataset, known without reading any graph.

    Args:
        name (str): the family name (:mod:`graph_urpe.data.families`) or the synthetic task.
        task (str): ``"regression"``, ``"classification"`` (binary, labels 0./1.) or
            ``"multiclass"`` (one class label per graph / node).
        num_tasks (int): outputs of the network: label columns ``T`` (``y`` is ``[1, T]`` per
            graph), or classes for ``"multiclass"``.
        featurization (str, optional): ``"zinc"`` (``x`` ``[n, 1]`` with 28 atom types,
            ``edge_attr`` ``[E, 1]`` with bond types 1-3) or ``"ogb"`` (``x`` ``[n, 9]``,
            ``edge_attr`` ``[E, 3]``, see :func:`ogb.utils.features.get_atom_feature_dims`);
            :obj:`None` for graphs that are not molecules.
        metric (str): the benchmark's metric, monitored as ``val/<metric>``: ``"mae"``,
            ``"rocauc"``, ``"ap"``, ``"rmse"``, ``"accuracy"``, ...
        evaluator (str, optional): the official evaluator (OGB dataset name or ``"pcqm4mv2"``).
            (default: :obj:`None`)
        target_names (tuple[str, ...], optional): names of the label columns, used for the
            prediction columns. (default: ``("y",)`` for one label, else ``y0, y1, ...``)
        level (str, optional): ``"graph"`` (labels per graph) or ``"node"`` (labels per node):
            the network's level. (default: ``"graph"``)
        max_graph_nodes (int, optional): the node-count limit of the data (``predict`` refuses
            larger molecules). (default: :obj:`None`)
        atom_categories (tuple[int, ...], optional): vocabulary size of each atom feature
            column. (default: :obj:`None`: those of :attr:`featurization`)
        bond_categories (tuple[int, ...], optional): the same for bond features.
            (default: :obj:`None`: those of :attr:`featurization`)
        smiles_column (str, optional): the SMILES column of the training file (your CSV):
            ``predict``, ``fingerprint`` and ``explain`` read that column by default.
            (default: :obj:`None`: ``smiles``)

    Raises:
        ValueError: for an unknown featurization, or neither a featurization nor categories.
    """

    name: str
    task: str
    num_tasks: int
    featurization: str | None
    metric: str
    evaluator: str | None = None
    target_names: tuple[str, ...] = ()
    level: str = "graph"
    max_graph_nodes: int | None = None
    atom_categories: tuple[int, ...] | None = None
    bond_categories: tuple[int, ...] | None = None
    smiles_column: str | None = None

    def __post_init__(self) -> None:
        if not self.target_names:
            names = default_target_names(label_columns(self.task, self.num_tasks))
            object.__setattr__(self, "target_names", names)
        else:
            object.__setattr__(self, "target_names", tuple(self.target_names))
        if self.atom_categories is None or self.bond_categories is None:
            if self.featurization is None:
                raise ValueError(
                    f"dataset {self.name!r}: give a featurization or atom_categories and "
                    "bond_categories.")
            atoms, bonds = feature_dims(self.featurization)
            object.__setattr__(self, "atom_categories", tuple(self.atom_categories or atoms))
            object.__setattr__(self, "bond_categories", tuple(self.bond_categories or bonds))


@dataclasses.dataclass(frozen=True)
class TrainingStatistics:
    r"""What the model takes from the loaded training split when fitting starts.

    Args:
        target_mean (list[float]): NaN-aware mean of each label column ``T`` (for 0/1 labels:
            the positive fraction), in the labels' units.
        target_std (list[float]): population std of each label column (1 where a column has
            fewer than two labels or no spread).
        vocabulary (dict, optional): the atom / bond feature values of the training split
            (:func:`~graph_urpe.data.predict_inputs.training_vocabulary`), for ``predict``'s
            ``warning`` column; :obj:`None` for graphs that are not molecules.
        source (str): where the data came from, one line (a file path, a release, an offline
            stand-in): recorded in the checkpoint as ``dataset_source``.
    """

    target_mean: list[float]
    target_std: list[float]
    vocabulary: dict[str, Any] | None
    source: str


@runtime_checkable
class GraphData(Protocol):
    """What a model reads of a graph data module while training and testing
    (:class:`~graph_urpe.data.modules.graph.BatchedGraphDataModule` and its subclasses): methods
    only, so ``isinstance(datamodule, GraphData)`` computes nothing. The static facts are not read
    here: the CLI links them into the model at instantiation."""

    def training_statistics(self) -> TrainingStatistics:
        """Statistics of the training split (loading it if needed)."""

    def test_callbacks(self) -> list[Any]:
        """Lightning callbacks to run while testing (e.g. OGB's submission writer)."""
