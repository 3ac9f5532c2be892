"""The batch budgets a prediction runs under, and the largest molecule they let it predict.

* :class:`BatchBudgets`: ``batch_size``, ``max_nodes_per_batch``, ``max_cells_per_batch`` (and
  a node limit asked at prediction), with :meth:`BatchBudgets.node_limit` (one graph must fit a
  batch) and :meth:`BatchBudgets.loader` (size-bucketed batches under them);
* :data:`DEFAULT_BUDGETS`: the graph data modules' default budgets, so those of ``graph-urpe
  predict`` without ``--data`` budget options, and those :class:`~graph_urpe.Predictor`,
  ``graph-urpe fingerprint`` and ``graph-urpe explain`` predict under.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from torch_geometric.loader import DataLoader

from graph_urpe.data.sampler import DEFAULT_MAX_CELLS, SizeBucketBatchSampler

__all__ = ["DEFAULT_BUDGETS", "BatchBudgets"]


@dataclasses.dataclass(frozen=True)
class BatchBudgets:
    r"""The budgets of size-bucketed batches
    (:class:`~graph_urpe.data.sampler.SizeBucketBatchSampler`) and a node limit asked beside
    them.

    Args:
        batch_size (int, optional): at most this many graphs per batch. (default: :obj:`128`)
        max_nodes_per_batch (int, optional): budget of padded nodes per batch
            (``graphs x largest graph``). (default: :obj:`None`)
        max_cells_per_batch (int, optional): budget of padded attention cells per batch
            (``graphs x largest graph^2``).
            (default: :data:`~graph_urpe.data.sampler.DEFAULT_MAX_CELLS`)
        max_graph_nodes (int, optional): a node limit asked at prediction (a data module's
            ``--data.init_args.max_graph_nodes``); it can lower the model's, never raise it.
            (default: :obj:`None`)
    """

    batch_size: int | None = 128
    max_nodes_per_batch: int | None = None
    max_cells_per_batch: int | None = DEFAULT_MAX_CELLS
    max_graph_nodes: int | None = None

    @classmethod
    def of(cls, datamodule: Any) -> BatchBudgets:
        """The budgets of a graph data module
        (:class:`~graph_urpe.data.modules.graph.BatchedGraphDataModule`: its ``batch_size``,
        ``max_nodes_per_batch``, ``max_cells_per_batch`` and, where it has one,
        ``max_graph_nodes``)."""
        return cls(datamodule.batch_size, datamodule.max_nodes_per_batch,
                   datamodule.max_cells_per_batch, getattr(datamodule, "max_graph_nodes", None))

    def node_limit(self, trained_limit: int | None) -> int | None:
        """The largest molecule predicted (nodes): the smallest of the model's training limit,
        :attr:`max_graph_nodes`, :attr:`max_nodes_per_batch` and
        :math:`\\lfloor\\sqrt{\\text{max\\_cells\\_per\\_batch}}\\rfloor` (a graph of ``n`` nodes
        takes ``n^2`` cells; one graph must fit a batch).

        Args:
            trained_limit (int, optional): the model's ``max_graph_nodes`` (its training's).

        Returns:
            int or None: the limit, :obj:`None` when nothing limits it.
        """
        limits = [trained_limit, self.max_graph_nodes, self.max_nodes_per_batch]
        if self.max_cells_per_batch is not None:
            limits.append(math.isqrt(self.max_cells_per_batch))
        limits = [v for v in limits if v is not None]
        return min(limits) if limits else None

    def loader(self, graphs: list, num_replicas: int = 1, rank: int = 0,
               num_workers: int = 0) -> DataLoader:
        """Size-bucketed batches of ``graphs`` (each within :meth:`node_limit`) under the
        budgets, in a fixed order, split across ``num_replicas`` DDP ranks (this one: ``rank``).

        Args:
            graphs (list): PyG ``Data`` graphs.
            num_replicas (int, optional): DDP ranks. (default: :obj:`1`)
            rank (int, optional): this process's rank. (default: :obj:`0`)
            num_workers (int, optional): DataLoader worker processes. (default: :obj:`0`)
        """
        sampler = SizeBucketBatchSampler(
            [g.num_nodes for g in graphs], max_nodes_per_batch=self.max_nodes_per_batch,
            max_cells_per_batch=self.max_cells_per_batch, max_batch_size=self.batch_size,
            shuffle=False, num_replicas=num_replicas, rank=rank)
        return DataLoader(graphs, batch_sampler=sampler, num_workers=num_workers)


DEFAULT_BUDGETS = BatchBudgets()
"""The default budgets of the graph data modules
(:class:`~graph_urpe.data.modules.graph.BatchedGraphDataModule`'s arguments), so of
``graph-urpe predict`` given no ``--data`` budget options (``configs/default.yaml`` states only
``batch_size: 128``), and those of :class:`~graph_urpe.Predictor`, ``graph-urpe fingerprint`` and
``graph-urpe explain``: 128 graphs, no node budget,
:data:`~graph_urpe.data.sampler.DEFAULT_MAX_CELLS` cells, so molecules of at most
``isqrt(2**21) = 1448`` atoms (and at most the model's own limit)."""
