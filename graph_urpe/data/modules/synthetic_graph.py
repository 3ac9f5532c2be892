"""Data module of the synthetic structural graph tasks (the graph analogue of the paper's test).

:class:`SyntheticGraphDataModule` serves :class:`~graph_urpe.data.synthetic_graphs.SyntheticGraphDataset`
(seeded random trees and connected Erdős–Rényi graphs with identical node and edge features,
structural class labels per node or per graph) through the size-bucketed loaders of
:class:`~graph_urpe.data.modules.graph.BatchedGraphDataModule`, with the static facts
(:attr:`SyntheticGraphDataModule.facts`) that ``graph-urpe`` links into
:class:`~graph_urpe.models.graph.GraphPropertyModule` and its :class:`~graph_urpe.nn.Graphormer`:
multiclass, accuracy, the number of classes (:func:`structural_num_classes`), one atom and one
bond category, and the level (``"node"`` or ``"graph"``). Run it with ``graph-urpe fit --config
configs/graph-synthetic/degree-urpe.yaml``.
"""

from __future__ import annotations

from typing import Any

from graph_urpe.choices import check_choice
from graph_urpe.data.facts import DatasetFacts
from graph_urpe.data.modules.graph import BatchedGraphDataModule
from graph_urpe.data.synthetic_graphs import (
    DEFAULT_KINDS,
    SYNTHETIC_TASKS,
    SyntheticGraphDataset,
    SyntheticGraphTask,
    check_graph_options,
)

__all__ = ["SyntheticGraphDataModule", "structural_num_classes"]


def structural_num_classes(task: str, max_nodes: int) -> int:
    r"""Number of classes of a synthetic structural task on connected graphs of at most
    ``max_nodes`` nodes: one more than the largest value the target can take.

    * ``degree``, ``eccentricity``, ``diameter``: at most ``n - 1`` (a star's centre; a path's
      ends), so ``max_nodes`` classes;
    * ``distance2``: at most ``n - 2`` nodes at distance 2 (the node itself and at least one
      neighbour are closer), so ``max_nodes - 1`` classes;
    * ``pairs_distance2``: a connected graph has at least ``n - 1`` pairs at distance 1, so at
      most ``(n - 1)(n - 2) / 2`` at distance 2 (reached by a star), so that plus one classes.

    The bound depends on the configuration only, so the network's size is known before any graph
    is drawn, and it is the same for every split and seed.

    Args:
        task (str): a task of :data:`~graph_urpe.data.synthetic_graphs.SYNTHETIC_TASKS`.
        max_nodes (int): the largest graph (at least 2).

    Returns:
        int: the number of classes.

    Raises:
        ValueError: for an unknown task or ``max_nodes < 2``.
    """
    check_choice("task", task, SyntheticGraphTask)
    if max_nodes < 2:
        raise ValueError(f"max_nodes must be at least 2, got {max_nodes}.")
    if task == "distance2":
        return max_nodes - 1
    if task == "pairs_distance2":
        return (max_nodes - 1) * (max_nodes - 2) // 2 + 1
    return max_nodes


class SyntheticGraphDataModule(BatchedGraphDataModule):
    r"""Synthetic structural classification on random graphs with identical features, in memory.

    The three splits are drawn independently, from the seeds ``3 * data_seed``,
    ``3 * data_seed + 1`` and ``3 * data_seed + 2`` (train, validation, test), so different
    ``data_seed`` values never share a split. Nothing is written to disk; every DDP rank draws the
    same graphs.

    Args:
        task (str, optional): ``"degree"``, ``"distance2"``, ``"eccentricity"`` (node level),
            ``"diameter"`` or ``"pairs_distance2"`` (graph level); see
            :data:`~graph_urpe.data.synthetic_graphs.SYNTHETIC_TASKS`. (default: ``"degree"``)
        train_size (int, optional): training graphs. (default: :obj:`1000`)
        val_size (int, optional): validation graphs. (default: :obj:`200`)
        test_size (int, optional): test graphs. (default: :obj:`200`)
        min_nodes (int, optional): smallest graph. (default: :obj:`8`)
        max_nodes (int, optional): largest graph. (default: :obj:`20`)
        kinds (tuple[str], optional): graph families, from
            :data:`~graph_urpe.data.synthetic_graphs.GRAPH_KINDS`.
            (default: :obj:`("tree", "erdos_renyi")`)
        mean_degree (float, optional): expected degree of the Erdős–Rényi graphs.
            (default: :obj:`3.0`)
        data_seed (int, optional): seed of the graphs (see above). (default: :obj:`0`)
        **kwargs: the loader options of :class:`~graph_urpe.data.modules.graph.BatchedGraphDataModule`
            (``batch_size``, ``max_nodes_per_batch``, ``max_cells_per_batch``, ``num_workers``,
            ``seed`` of the batch shuffling).

    Raises:
        ValueError: for an unknown task or kind, sizes outside ``2 <= min_nodes <= max_nodes``,
            or a split size below 1.
    """

    def __init__(
        self,
        task: SyntheticGraphTask = "degree",
        train_size: int = 1000,
        val_size: int = 200,
        test_size: int = 200,
        min_nodes: int = 8,
        max_nodes: int = 20,
        kinds: tuple[str, ...] = DEFAULT_KINDS,
        mean_degree: float = 3.0,
        data_seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_graph_options(task, min_nodes, max_nodes, tuple(kinds))
        sizes = {"train_size": train_size, "val_size": val_size, "test_size": test_size}
        for name, value in sizes.items():
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}.")
        self.task = task
        self.level = SYNTHETIC_TASKS[task]
        self.sizes = {"train": train_size, "val": val_size, "test": test_size}
        self.min_nodes = min_nodes
        self.max_nodes = max_nodes
        self.kinds = tuple(kinds)
        self.mean_degree = mean_degree
        self.data_seed = data_seed

    @property
    def facts(self) -> DatasetFacts:
        """Linked into the model (:data:`graph_urpe.cli.links.GRAPH_LINKS`): multiclass,
        one output per class (:func:`structural_num_classes`), accuracy, one node and one
        edge feature column with one category (every node looks the same), the task's level, the
        task's name as the one label column, ``max_nodes`` as the node limit."""
        # The class count is a fact only (num_tasks), not an attribute: an attribute named
        # num_classes would take the sequence modules' link (graph_urpe.data.modules.sequence).
        classes = structural_num_classes(self.task, self.max_nodes)
        return DatasetFacts(self.task, "multiclass", classes, None, "accuracy",
                            target_names=(self.task,), level=self.level,
                            max_graph_nodes=self.max_nodes, atom_categories=(1,),
                            bond_categories=(1,))

    def source(self) -> str:
        """``synthetic-graphs/<task>/seed<data_seed>`` (recorded in the checkpoint)."""
        return f"synthetic-graphs/{self.task}/seed{self.data_seed}"

    def setup(self, stage: str) -> None:
        """Draw the three splits (once)."""
        if self.splits:
            return
        for offset, (split, size) in enumerate(self.sizes.items()):
            self.splits[split] = SyntheticGraphDataset(
                self.task, num_graphs=size, min_nodes=self.min_nodes, max_nodes=self.max_nodes,
                kinds=self.kinds, mean_degree=self.mean_degree, seed=3 * self.data_seed + offset,
            )

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}(task={self.task!r}, level={self.level!r}, "
                f"sizes={self.sizes}, nodes={self.min_nodes}..{self.max_nodes}, "
                f"data_seed={self.data_seed})")
