"""Size-bucketed batching: graphs of similar size together, under a padded-size budget.

Dense attention over a batch pads every graph to the largest one, so its cost (time and memory of
the ``[B, H, N, N]`` maps) is ``B * N_max^2``, not ``sum_b n_b^2``. Sorting graphs by size before
cutting batches keeps ``N_max`` close to every member's size; a budget on padded nodes
(``B * N_max``) or padded pair cells (``B * N_max^2``) keeps the memory of every batch bounded,
so small graphs get larger batches. The same idea as fairseq's ``batch_by_size``. The training
loader that resumes mid-epoch over these batches: :mod:`graph_urpe.data.resumable_loader`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import Sampler
from torch_geometric.data import InMemoryDataset

__all__ = ["DEFAULT_MAX_CELLS", "SizeBucketBatchSampler", "graph_sizes"]

DEFAULT_MAX_CELLS: int = 2**21
"""Default budget of padded pair cells per batch (``graphs x largest graph^2``, about 2.1 M),
sized so that the documented 24 GiB machine never runs out with the slim Graphormer
(``configs/zinc/graphormer-slim-*``: 12 layers, width 80, 8 heads, URPE, multi-hop edges).

Measured (CPU, float32, PyTorch 2.13, one forward + backward of
:class:`graph_urpe.nn.Graphormer` with that configuration on random molecule-like graphs, peak RSS
increase from :func:`resource.getrusage`, ``python benchmarks/sampler_memory.py CELLS NODES``): 64 x 32-node graphs (65,536 cells) 0.25 GiB; 256 x 32 (262,144)
0.99 GiB; 1024 x 32 (1,048,576) 3.39 GiB; 64 x 128 (1,048,576) 2.21 GiB. Memory is linear in
the cells, at most about 3.4 KiB per cell, so this budget takes about 7 GiB, leaving two thirds
of the machine to the process, the data, DataLoader workers and the optimizer state. It binds only
for large graphs (ZINC batches of 128 take at most 128 x 38^2 = 184,832 cells); a 300-atom
molecule still gets batches of 23.
"""


class SizeBucketBatchSampler(Sampler[list[int]]):
    r"""Batch sampler that groups graphs of similar size under a padded-size budget.

    Every epoch the buckets are drawn again: graphs are sorted by a jittered size,
    ``size * (1 + u)`` with ``u ~ U(-size_jitter, size_jitter)`` per graph and epoch (ties broken
    at random), so graphs of neighbouring sizes meet in different batches each epoch; the order is
    cut greedily into contiguous batches, each as large as the budgets allow (on the true sizes);
    and the batches are shuffled. The number of batches is the same every epoch (:obj:`len` is
    fixed): it is the count of the exact size-sorted cut plus :obj:`batch_slack` of it (only when
    a padded budget, :obj:`max_nodes_per_batch` or :obj:`max_cells_per_batch`, is set; with a batch-size budget alone
    the count does not depend on the order). An epoch whose cut needs more batches is drawn again
    with half the jitter (down to none, which always fits), and one that needs fewer gets its
    largest batches halved, so every graph appears exactly once per epoch. With
    ``shuffle=False`` (or ``size_jitter=0``) the order is the exact size sort, batches come in
    increasing size order, their members in index order, the same every epoch.

    Measured on the 10,000 training molecules of the embedded ZINC-like set (4 epochs, seed 0):
    with ``max_batch_size=128`` the padding fraction is 0.8% for the exact sort (86-89% of
    batches then hold a single node count), 2.8% / 6.2% / 13.6% with ``size_jitter`` 0.03 / 0.05
    / 0.1 (1% single-size batches), against 29% for random batches of 128; with
    ``max_cells_per_batch=2**16``, 0.7% exact and 6.2% with jitter 0.05 (78 batches instead of 74). Every
    batch changes members between epochs either way (ties are reshuffled). The spread of the
    per-batch target mean falls only a little (std 0.142 exact, 0.138 at 0.05, 0.113 at 0.3,
    0.093 for random batches): size-homogeneous batches are what makes it larger, whatever
    the boundaries.

    With ``bucketing=False`` the sizes are ignored for grouping: every epoch the graphs are
    permuted at random (``shuffle=False``: index order) and cut into batches of
    :obj:`max_batch_size`, the plain random batches of ``DataLoader(shuffle=True)``, kept for
    comparisons; the padded budgets must then admit a full batch of the largest graphs.

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
        max_nodes_per_batch (int, optional): budget of padded nodes per batch: ``len(batch) * max size in
            batch <= max_nodes_per_batch``. (default: :obj:`None`)
        shuffle (bool, optional): shuffle ties and batch order each epoch. (default: :obj:`True`)
        seed (int, optional): base seed; epoch ``e`` uses ``seed + e``. (default: :obj:`0`)
        num_replicas (int, optional): number of DDP ranks. (default: the world size of
            :mod:`torch.distributed` when initialised, else ``1``)
        rank (int, optional): this rank. (default: :mod:`torch.distributed`'s rank, else ``0``)
        drop_last (bool, optional): under DDP, drop the last ``num_batches % num_replicas``
            batches (shuffled, so different ones each epoch) instead of repeating some.
            No effect with one replica. (default: :obj:`False`)
        max_cells_per_batch (int, optional): budget of padded pair cells per batch: ``len(batch) *
            (max size in batch)^2 <= max_cells_per_batch``, proportional to attention memory.
            (default: :obj:`None`)
        max_batch_size (int, optional): at most this many graphs per batch. (default: :obj:`None`)
        size_jitter (float, optional): relative jitter of the sort key (see above); 0 keeps the
            exact size order (only ties reshuffled). (default: :obj:`0.05`)
        batch_slack (float, optional): extra fraction of batches per epoch that leaves room for
            the jittered cuts. (default: :obj:`0.05`)
        bucketing (bool, optional): group graphs by size (above); :obj:`False` gives random
            batches of :obj:`max_batch_size` (see above). (default: :obj:`True`)

    At least one of :obj:`max_nodes_per_batch`, :obj:`max_cells_per_batch`, :obj:`max_batch_size` must be given.

    Raises:
        ValueError: if no budget is given, a budget or size is invalid, ``rank`` is not in
            ``[0, num_replicas)``, or a single graph exceeds a budget (its index and size are
            named: raise the budget or filter the dataset; graphs are never dropped silently);
            with ``bucketing=False``, if :obj:`max_batch_size` is missing or a batch of that many
            of the largest graphs exceeds a padded budget.

    Example:
        >>> sampler = SizeBucketBatchSampler(graph_sizes(ds), max_nodes_per_batch=4096)  # doctest: +SKIP
        >>> loader = torch_geometric.loader.DataLoader(ds, batch_sampler=sampler)  # doctest: +SKIP
    """

    def __init__(
        self,
        sizes: Sequence[int] | np.ndarray | torch.Tensor,
        max_nodes_per_batch: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
        drop_last: bool = False,
        *,
        max_cells_per_batch: int | None = None,
        max_batch_size: int | None = None,
        size_jitter: float = 0.05,
        batch_slack: float = 0.05,
        bucketing: bool = True,
    ) -> None:
        sizes = np.asarray(sizes.cpu() if isinstance(sizes, torch.Tensor) else sizes)
        if sizes.size == 0:  # an empty dataset: no batches
            sizes = sizes.reshape(-1).astype(np.int64)
        if sizes.ndim != 1 or not np.issubdtype(sizes.dtype, np.integer) or (sizes < 0).any():
            raise ValueError("sizes must be a 1-D sequence of non-negative integer node counts")
        if max_nodes_per_batch is None and max_cells_per_batch is None and max_batch_size is None:
            raise ValueError("give at least one budget: max_nodes_per_batch, max_cells_per_batch or max_batch_size")
        for name, value in (
            ("max_nodes_per_batch", max_nodes_per_batch),
            ("max_cells_per_batch", max_cells_per_batch),
            ("max_batch_size", max_batch_size),
        ):
            if value is not None and not (isinstance(value, (int, np.integer)) and value >= 1):
                raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
        if not 0 <= size_jitter < 1:
            raise ValueError(f"size_jitter must be in [0, 1), got {size_jitter!r}")
        if not batch_slack >= 0:
            raise ValueError(f"batch_slack must be >= 0, got {batch_slack!r}")
        if num_replicas is None:
            initialised = dist.is_available() and dist.is_initialized()
            num_replicas = dist.get_world_size() if initialised else 1
        if rank is None:
            initialised = dist.is_available() and dist.is_initialized()
            rank = dist.get_rank() if initialised else 0
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"need 0 <= rank < num_replicas, got rank={rank}, {num_replicas=}")

        self.sizes = sizes.astype(np.int64)
        self.max_nodes_per_batch, self.max_cells_per_batch, self.max_batch_size = max_nodes_per_batch, max_cells_per_batch, max_batch_size
        self.shuffle, self.seed, self.drop_last = bool(shuffle), int(seed), bool(drop_last)
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.size_jitter, self.batch_slack = float(size_jitter), float(batch_slack)
        self.epoch = 0
        self._resume: tuple[int, int] | None = None  # (epoch, batches to skip), see resume_at
        self.bucketing = bool(bucketing)
        self._check_fits()
        self._cache: tuple[int, list[np.ndarray]] | None = None
        if not self.bucketing:
            self._check_random_batches_fit()
            self._num_batches = -(-len(self.sizes) // max_batch_size)
            return
        self._min_batches = len(self._cut(np.sort(self.sizes, kind="stable"))) - 1
        padded_budget = max_nodes_per_batch is not None or max_cells_per_batch is not None
        jittered = self.shuffle and self.size_jitter > 0 and padded_budget
        extra = int(np.ceil(self.batch_slack * self._min_batches)) if jittered else 0
        self._num_batches = min(self._min_batches + extra, len(self.sizes))

    def _check_random_batches_fit(self) -> None:
        if self.max_batch_size is None:
            raise ValueError("bucketing=False cuts random batches of max_batch_size graphs: give "
                             "max_batch_size (batch_size on the data module).")
        largest = int(self.sizes.max()) if len(self.sizes) else 0
        full = self.max_batch_size
        if (self.max_nodes_per_batch is not None and full * largest > self.max_nodes_per_batch) or (
            self.max_cells_per_batch is not None and full * largest * largest > self.max_cells_per_batch
        ):
            raise ValueError(
                f"bucketing=False needs room for {full} graphs of the largest size ({largest} "
                f"nodes) in one batch, beyond max_nodes_per_batch={self.max_nodes_per_batch} / "
                f"max_cells_per_batch={self.max_cells_per_batch}: lower the batch size, raise the budget, or keep "
                "bucketing on."
            )

    def _check_fits(self) -> None:
        too_big = np.zeros(len(self.sizes), dtype=bool)
        if self.max_nodes_per_batch is not None:
            too_big |= self.sizes > self.max_nodes_per_batch
        if self.max_cells_per_batch is not None:
            too_big |= self.sizes * self.sizes > self.max_cells_per_batch
        if too_big.any():
            first = int(np.flatnonzero(too_big)[0])
            size = int(self.sizes[first])
            raise ValueError(
                f"{int(too_big.sum())} graph(s) do not fit one batch; the first is graph {first} "
                f"with {size} nodes ({size * size} attention cells; max_nodes_per_batch={self.max_nodes_per_batch}, "
                f"max_cells_per_batch={self.max_cells_per_batch}): raise the budget or filter the dataset (e.g. "
                "max_graph_nodes on the data module)"
            )

    def _cut(self, ordered_sizes: np.ndarray) -> np.ndarray:
        """Greedy contiguous batches of the sizes in the given order, each as long as the budgets
        allow; ``[num_batches + 1]`` boundaries."""
        total = len(ordered_sizes)
        bounds = [0]
        start = 0
        while start < total:
            first = max(int(ordered_sizes[start]), 1)
            limit = total - start
            if self.max_batch_size is not None:
                limit = min(limit, self.max_batch_size)
            if self.max_nodes_per_batch is not None:
                limit = min(limit, self.max_nodes_per_batch // first)
            if self.max_cells_per_batch is not None:
                limit = min(limit, self.max_cells_per_batch // (first * first))
            # Padded cost of the first c graphs is c * (largest of them), which grows with c, so
            # the allowed counts are a prefix 1..c.
            window = np.maximum.accumulate(ordered_sizes[start : start + limit])
            count = np.arange(1, limit + 1)
            ok = np.ones(limit, dtype=bool)
            if self.max_nodes_per_batch is not None:
                ok &= count * window <= self.max_nodes_per_batch
            if self.max_cells_per_batch is not None:
                ok &= count * window * window <= self.max_cells_per_batch
            start += int(ok.sum())
            bounds.append(start)
        return np.asarray(bounds, dtype=np.int64)

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch; the next iteration uses seed ``seed + epoch``."""
        self.epoch = int(epoch)

    def resume_at(self, epoch: int, batches: int) -> None:
        """Make the next iteration of epoch ``epoch`` start after its first ``batches`` batches
        of this rank (they were trained before an interruption); an iteration of any other epoch
        drops the request and yields the whole epoch. The epoch's batches are a function of
        ``seed`` and the epoch only, so the rest of the epoch is exactly that of an uninterrupted
        run.

        Raises:
            ValueError: if ``batches`` is negative or more than :obj:`len(self)`.
        """
        if not 0 <= int(batches) <= len(self):
            raise ValueError(f"resume_at: batches must be in [0, {len(self)}], got {batches}")
        self._resume = (int(epoch), int(batches))

    @property
    def resume_offset(self) -> int:
        """Batches of this rank the next iteration skips (from :meth:`resume_at`; 0 if none or
        for another epoch)."""
        resume = self._resume
        return resume[1] if resume is not None and resume[0] == self.epoch else 0

    @property
    def sampler(self) -> SizeBucketBatchSampler:
        """This batch sampler itself; Lightning calls ``set_epoch`` on a loader's
        ``batch_sampler.sampler`` before it creates the epoch's iterator (also right after a
        resume), so the epoch's batches follow the epoch number exactly."""
        return self

    @property
    def num_batches(self) -> int:
        """Number of batches of one epoch over all ranks (before DDP padding or dropping), the
        same every epoch."""
        return self._num_batches

    def __len__(self) -> int:
        """Number of batches this rank yields per epoch."""
        if self.drop_last:
            return self.num_batches // self.num_replicas
        return (self.num_batches + self.num_replicas - 1) // self.num_replicas

    def epoch_batches(self) -> list[np.ndarray]:
        """All batches of the current epoch, in order, before the split across ranks.

        Returns:
            list of ``np.int64`` index arrays, one per batch (:attr:`num_batches` of them).
        """
        if self._cache is not None and self._cache[0] == self.epoch:
            return [b.copy() for b in self._cache[1]]
        rng = np.random.default_rng(self.seed + self.epoch)
        if not self.bucketing:
            order = rng.permutation(len(self.sizes)) if self.shuffle else np.arange(len(self.sizes))
            return [order[i : i + self.max_batch_size]
                    for i in range(0, len(order), self.max_batch_size)]
        if not self.shuffle:
            order = np.argsort(self.sizes, kind="stable")
            bounds = self._cut(self.sizes[order])
            return [order[a:b] for a, b in itertools.pairwise(bounds)]
        jitter = self.size_jitter
        while True:
            perm = rng.permutation(len(self.sizes))
            key = self.sizes[perm] * (1.0 + rng.uniform(-jitter, jitter, len(perm)))
            order = perm[np.argsort(key, kind="stable")]
            bounds = self._cut(self.sizes[order])
            if len(bounds) - 1 <= self._num_batches:
                break
            jitter = jitter / 2 if jitter > 1e-3 else 0.0  # zero jitter gives _min_batches
        batches = [order[a:b] for a, b in itertools.pairwise(bounds)]
        while len(batches) < self._num_batches:  # halve the largest batch (stays in budget)
            k = max(range(len(batches)), key=lambda i: len(batches[i]))
            half = (len(batches[k]) + 1) // 2
            batches[k : k + 1] = [batches[k][:half], batches[k][half:]]
        batches = [batches[i] for i in rng.permutation(len(batches))]
        self._cache = (self.epoch, batches)
        return [b.copy() for b in batches]

    def __iter__(self) -> Iterator[list[int]]:
        skip, self._resume = self.resume_offset, None
        batches = self.epoch_batches()
        per_rank = len(self)
        wanted = per_rank * self.num_replicas
        if wanted > len(batches):  # pad by repeating from the start (cycling if very few)
            batches = [batches[i % len(batches)] for i in range(wanted)]
        for batch in batches[self.rank : wanted : self.num_replicas][skip:]:
            yield batch.tolist()

    @property
    def padding_fraction(self) -> float:
        r"""Fraction of the padded ``N^2`` pair cells of the current epoch's batches that are
        padding: ``1 - sum_g n_g^2 / sum_batches len(batch) * (max n in batch)^2`` over all
        batches of the epoch (all ranks, before DDP padding). ``0.0`` if there are none."""
        batches = self.epoch_batches()
        padded = sum(len(b) * int(self.sizes[b].max()) ** 2 for b in batches if len(b))
        if padded == 0:
            return 0.0
        return float(1.0 - (self.sizes.astype(np.float64) ** 2).sum() / padded)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(num_graphs={len(self.sizes)}, max_nodes_per_batch={self.max_nodes_per_batch}, "
            f"max_cells_per_batch={self.max_cells_per_batch}, max_batch_size={self.max_batch_size}, "
            f"num_batches={self.num_batches}, shuffle={self.shuffle}, seed={self.seed}, "
            f"size_jitter={self.size_jitter}, batch_slack={self.batch_slack}, "
            f"bucketing={self.bucketing}, "
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
