"""Size-bucketed batching: graphs of similar size together, under a padded-size budget.

Dense attention over a batch pads every graph to the largest one, so its cost (time and memory of
the ``[B, H, N, N]`` maps) is ``B * N_max^2``, not ``sum_b n_b^2``. Sorting graphs by size before
cutting batches keeps ``N_max`` close to every member's size; a budget on padded nodes
(``B * N_max``) or padded pair cells (``B * N_max^2``) keeps the memory of every batch bounded,
so small graphs get larger batches. The same idea as fairseq's ``batch_by_size``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import Sampler
from torch_geometric.data import InMemoryDataset

__all__ = ["SizeBucketBatchSampler", "graph_sizes"]


class SizeBucketBatchSampler(Sampler[list[int]]):
    r"""Batch sampler that groups graphs of similar size under a padded-size budget.

    Every epoch, graphs are sorted by size (ties broken at random), cut greedily into contiguous
    batches, each as large as the budgets allow, and the batches are shuffled. Because only ties
    are shuffled, the batch boundaries (and so :obj:`len` and :attr:`padding_fraction`) are the same
    every epoch; which graphs of equal size share a batch, and the batch order, change. With
    ``shuffle=False`` batches come in increasing size order, their members in index order.

    Distributed (DDP): every rank builds the same epoch (same seed and epoch) and takes every
    ``num_replicas``-th batch starting at ``rank``, so ranks get distinct batches; the list is
    first padded by repeating batches from its start (or, with :obj:`drop_last`, cut) so every rank
    gets the same number of batches. Call :meth:`set_epoch` before each epoch: Lightning only calls
    ``set_epoch`` on a loader's ``sampler``, not its ``batch_sampler``, so call it from the data
    module or ``on_train_epoch_start``; under DDP use ``Trainer(use_distributed_sampler=False)``
    (this class splits the data across ranks itself).

    Args:
        sizes (sequence of int): number of nodes of every graph of the dataset, ``[num_graphs]``
            (e.g. :func:`graph_sizes`).
        max_nodes (int, optional): budget of padded nodes per batch: ``len(batch) * max size in
            batch <= max_nodes``. (default: :obj:`None`)
        shuffle (bool, optional): shuffle ties and batch order each epoch. (default: :obj:`True`)
        seed (int, optional): base seed; epoch ``e`` uses ``seed + e``. (default: :obj:`0`)
        num_replicas (int, optional): number of DDP ranks. (default: the world size of
            :mod:`torch.distributed` when initialised, else ``1``)
        rank (int, optional): this rank. (default: :mod:`torch.distributed`'s rank, else ``0``)
        drop_last (bool, optional): under DDP, drop the last ``num_batches % num_replicas``
            batches (shuffled, so different ones each epoch) instead of repeating some.
            No effect with one replica. (default: :obj:`False`)
        max_cells (int, optional): budget of padded pair cells per batch: ``len(batch) *
            (max size in batch)^2 <= max_cells``, proportional to attention memory.
            (default: :obj:`None`)
        max_batch_size (int, optional): at most this many graphs per batch. (default: :obj:`None`)

    At least one of :obj:`max_nodes`, :obj:`max_cells`, :obj:`max_batch_size` must be given.

    Raises:
        ValueError: if no budget is given, a budget or size is invalid, ``rank`` is not in
            ``[0, num_replicas)``, or a single graph exceeds a budget (its index and size are
            named: raise the budget or filter the dataset; graphs are never dropped silently).

    Example:
        >>> sampler = SizeBucketBatchSampler(graph_sizes(ds), max_nodes=4096)  # doctest: +SKIP
        >>> loader = torch_geometric.loader.DataLoader(ds, batch_sampler=sampler)  # doctest: +SKIP
    """

    def __init__(
        self,
        sizes: Sequence[int] | np.ndarray | torch.Tensor,
        max_nodes: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
        drop_last: bool = False,
        *,
        max_cells: int | None = None,
        max_batch_size: int | None = None,
    ) -> None:
        sizes = np.asarray(sizes.cpu() if isinstance(sizes, torch.Tensor) else sizes)
        if sizes.size == 0:  # an empty dataset: no batches
            sizes = sizes.reshape(-1).astype(np.int64)
        if sizes.ndim != 1 or not np.issubdtype(sizes.dtype, np.integer) or (sizes < 0).any():
            raise ValueError("sizes must be a 1-D sequence of non-negative integer node counts")
        if max_nodes is None and max_cells is None and max_batch_size is None:
            raise ValueError("give at least one budget: max_nodes, max_cells or max_batch_size")
        for name, value in (
            ("max_nodes", max_nodes),
            ("max_cells", max_cells),
            ("max_batch_size", max_batch_size),
        ):
            if value is not None and not (isinstance(value, (int, np.integer)) and value >= 1):
                raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
        if num_replicas is None:
            initialised = dist.is_available() and dist.is_initialized()
            num_replicas = dist.get_world_size() if initialised else 1
        if rank is None:
            initialised = dist.is_available() and dist.is_initialized()
            rank = dist.get_rank() if initialised else 0
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"need 0 <= rank < num_replicas, got rank={rank}, {num_replicas=}")

        self.sizes = sizes.astype(np.int64)
        self.max_nodes, self.max_cells, self.max_batch_size = max_nodes, max_cells, max_batch_size
        self.shuffle, self.seed, self.drop_last = bool(shuffle), int(seed), bool(drop_last)
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.epoch = 0
        self._check_fits()
        self._bounds = self._cut(np.sort(self.sizes, kind="stable"))

    def _check_fits(self) -> None:
        too_big = np.zeros(len(self.sizes), dtype=bool)
        if self.max_nodes is not None:
            too_big |= self.sizes > self.max_nodes
        if self.max_cells is not None:
            too_big |= self.sizes * self.sizes > self.max_cells
        if too_big.any():
            first = int(np.flatnonzero(too_big)[0])
            raise ValueError(
                f"{int(too_big.sum())} graph(s) do not fit one batch; the first is graph {first} "
                f"with {self.sizes[first]} nodes (max_nodes={self.max_nodes}, "
                f"max_cells={self.max_cells}): raise the budget or filter the dataset"
            )

    def _cut(self, sorted_sizes: np.ndarray) -> np.ndarray:
        """Greedy contiguous batches of nondecreasing sizes; ``[num_batches + 1]`` boundaries."""
        total = len(sorted_sizes)
        bounds = [0]
        start = 0
        while start < total:
            first = max(int(sorted_sizes[start]), 1)
            limit = total - start
            if self.max_batch_size is not None:
                limit = min(limit, self.max_batch_size)
            if self.max_nodes is not None:
                limit = min(limit, self.max_nodes // first)
            if self.max_cells is not None:
                limit = min(limit, self.max_cells // (first * first))
            # Padded cost of the first c graphs is c * size[start + c - 1] (sizes ascend), which
            # grows with c, so the allowed counts are a prefix 1..c.
            window = sorted_sizes[start : start + limit]
            count = np.arange(1, limit + 1)
            ok = np.ones(limit, dtype=bool)
            if self.max_nodes is not None:
                ok &= count * window <= self.max_nodes
            if self.max_cells is not None:
                ok &= count * window * window <= self.max_cells
            start += int(ok.sum())
            bounds.append(start)
        return np.asarray(bounds, dtype=np.int64)

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch; the next iteration uses seed ``seed + epoch``."""
        self.epoch = int(epoch)

    @property
    def num_batches(self) -> int:
        """Number of batches of one epoch over all ranks (before DDP padding or dropping)."""
        return len(self._bounds) - 1

    def __len__(self) -> int:
        """Number of batches this rank yields per epoch."""
        if self.drop_last:
            return self.num_batches // self.num_replicas
        return (self.num_batches + self.num_replicas - 1) // self.num_replicas

    def epoch_batches(self) -> list[np.ndarray]:
        """All batches of the current epoch, in order, before the split across ranks.

        Returns:
            list of ``np.int64`` index arrays, one per batch.
        """
        rng = np.random.default_rng(self.seed + self.epoch)
        if self.shuffle:
            perm = rng.permutation(len(self.sizes))
            order = perm[np.argsort(self.sizes[perm], kind="stable")]
        else:
            order = np.argsort(self.sizes, kind="stable")
        batches = [order[a:b] for a, b in zip(self._bounds[:-1], self._bounds[1:])]
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.epoch_batches()
        per_rank = len(self)
        wanted = per_rank * self.num_replicas
        if wanted > len(batches):  # pad by repeating from the start (cycling if very few)
            batches = [batches[i % len(batches)] for i in range(wanted)]
        for batch in batches[self.rank : wanted : self.num_replicas]:
            yield batch.tolist()

    @property
    def padding_fraction(self) -> float:
        r"""Fraction of the padded ``N^2`` pair cells of an epoch's batches that are padding:
        ``1 - sum_g n_g^2 / sum_batches len(batch) * (max n in batch)^2`` over all batches of one
        epoch (all ranks, before DDP padding), the same every epoch. ``0.0`` if there are none."""
        sorted_sizes = np.sort(self.sizes, kind="stable")
        starts, ends = self._bounds[:-1], self._bounds[1:]
        padded = ((ends - starts) * sorted_sizes[np.maximum(ends - 1, 0)] ** 2).sum()
        if padded == 0:
            return 0.0
        return float(1.0 - (sorted_sizes**2).sum() / padded)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(num_graphs={len(self.sizes)}, max_nodes={self.max_nodes}, "
            f"max_cells={self.max_cells}, max_batch_size={self.max_batch_size}, "
            f"num_batches={self.num_batches}, shuffle={self.shuffle}, seed={self.seed}, "
            f"num_replicas={self.num_replicas}, rank={self.rank}, drop_last={self.drop_last})"
        )


def graph_sizes(dataset) -> np.ndarray:
    """Number of nodes of every graph of a PyG dataset, without building the graphs when it can.

    For an :class:`~torch_geometric.data.InMemoryDataset` (also an indexed subset of one) with node
    features ``x``, the counts are read from its collated ``slices``; otherwise each graph's
    ``num_nodes`` is read.

    Args:
        dataset: a PyG :class:`~torch_geometric.data.Dataset` (or any sequence of ``Data``).

    Returns:
        ``np.int64`` ``[len(dataset)]``.
    """
    slices = getattr(dataset, "slices", None)
    if isinstance(dataset, InMemoryDataset) and slices is not None and "x" in slices:
        counts = np.diff(slices["x"].numpy())
        return counts[np.asarray(dataset.indices(), dtype=np.int64)].astype(np.int64)
    return np.fromiter((data.num_nodes for data in dataset), dtype=np.int64, count=len(dataset))
