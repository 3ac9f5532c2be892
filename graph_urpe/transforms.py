"""Graph transforms: all-pairs shortest-path distances and paths, computed once per graph
(:class:`AddShortestPathDistance`), and the package's tensor layout (:class:`StandardLayout`).

Graphormer (Ying et al., NeurIPS 2021, Sec. 3.1.2 "spatial encoding" and "edge encoding") needs the
shortest-path distance (SPD) between every pair of nodes and, for its edge encoding, the edges along
one shortest path per pair. The reference implementation recomputes both for every sample in every
epoch. Here they are computed once, as a ``pre_transform``, with SciPy's compiled routines
(:mod:`scipy.sparse.csgraph`), and stored as two row-major ``int16`` vectors of ``n * n`` entries per
graph; :mod:`graph_urpe.dense` turns a collated batch of them into padded ``[B, N, N]`` tensors on
the training device.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from scipy.sparse import csr_array
from scipy.sparse.csgraph import dijkstra, floyd_warshall
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform

from graph_urpe.constants import UNREACHABLE

__all__ = ["FLOYD_WARSHALL_MAX_NODES", "MAX_NODES", "UNREACHABLE", "AddShortestPathDistance",
           "StandardLayout", "shortest_path_arrays"]

FLOYD_WARSHALL_MAX_NODES: int = 256
"""Graphs with at most this many nodes use SciPy's compiled Floyd-Warshall, larger ones its
Dijkstra: for small graphs the O(n^3) triple loop in C costs less than Dijkstra's per-call overhead
(about 2.5x faster at 8-128 nodes, measured with SciPy 1.17; Dijkstra wins from about 300-500)."""

MAX_NODES: int = int(torch.iinfo(torch.int16).max)
"""Largest graph (in nodes) whose distances and predecessor indices fit the ``int16`` storage."""


class AddShortestPathDistance(BaseTransform):
    r"""Stores all-pairs shortest-path distances (and predecessors) of a graph on the
    :class:`~torch_geometric.data.Data` object, for Graphormer's spatial and edge encodings
    (Ying et al., NeurIPS 2021, Eqs. 6-7) and URPE's SPD-indexed multiplier (Luo et al., NeurIPS
    2022, Eq. 4 with the relative position replaced by the SPD).

    Edges are unweighted and treated as undirected (an edge listed in one direction only is used in
    both), as for molecules. Distances and predecessors come from SciPy's compiled
    :func:`~scipy.sparse.csgraph.floyd_warshall` for graphs of at most
    :data:`FLOYD_WARSHALL_MAX_NODES` nodes (cheapest there: about 0.1 ms for a 25-atom molecule,
    everything included) and from its :func:`~scipy.sparse.csgraph.dijkstra` with unit weights on
    a sparse adjacency (O(n (n + E) log n)) for larger graphs. Which shortest path is recorded when
    there are several is up to the routine; every recorded one is a shortest path.

    Sets two attributes (their names contain no ``"index"``, so PyG's collate concatenates them
    without offsets):

    * ``spd``: ``int16`` ``[n * n]``, row-major: ``spd[i * n + j]`` is the number of edges on a
      shortest path from node ``i`` to node ``j``; ``0`` on the diagonal; clipped at
      :obj:`max_distance` when given; :data:`UNREACHABLE` (``-1``) if ``j`` cannot be reached from
      ``i`` (never clipped).
    * ``spd_pred`` (only if :obj:`paths`): ``int16`` ``[n * n]``, row-major predecessor matrix:
      ``spd_pred[i * n + j]`` is the local index of the node just before ``j`` on the chosen
      shortest path from ``i`` to ``j``; ``-1`` if ``i == j`` or ``j`` is unreachable. The path is
      the full shortest path, not truncated by :obj:`max_distance`. Because the graph is undirected,
      ``spd_pred[j * n + i]`` is the node *after* ``i`` on a shortest path from ``i`` to ``j``, which
      is how :func:`graph_urpe.dense.to_dense_path_edges` walks paths. O(n^2) storage, never
      O(n^2 * hops * features).

    Args:
        max_distance (int, optional): if given, distances larger than this are stored as
            :obj:`max_distance` (Graphormer's ``max_dist``). Must be in ``[1, 32767]``.
            (default: :obj:`None`, no clipping)
        paths (bool, optional): also store the predecessor matrix ``spd_pred``, needed for the
            multi-hop edge encoding. (default: :obj:`True`)

    Shapes:
        - **input:** :obj:`Data` with ``edge_index`` ``[2, E]`` (local node indices in ``[0, n)``)
          and ``num_nodes`` ``n`` (from ``x`` or set explicitly).
        - **output:** the same object, with ``spd`` ``[n * n]`` and (if :obj:`paths`) ``spd_pred``
          ``[n * n]`` added, both ``torch.int16`` on the CPU.

    Raises:
        ValueError: if the graph has more than :data:`MAX_NODES` (32,767) nodes (the values would
            not fit ``int16``; the ``n * n`` storage would also be several GB), if its number of
            nodes is unknown, or if ``edge_index`` is malformed or points outside ``[0, n)``.

    Example:
        >>> from torch_geometric.datasets import ZINC
        >>> ds = ZINC(root, subset=True, pre_transform=AddShortestPathDistance())  # doctest: +SKIP
    """

    def __init__(self, max_distance: int | None = None, paths: bool = True) -> None:
        if max_distance is not None and not (
            isinstance(max_distance, (int, np.integer)) and 1 <= max_distance <= MAX_NODES
        ):
            raise ValueError(
                f"max_distance must be None or an integer in [1, {MAX_NODES}], got {max_distance!r}"
            )
        self.max_distance = None if max_distance is None else int(max_distance)
        self.paths = bool(paths)

    def forward(self, data: Data) -> Data:
        spd, pred = shortest_path_arrays(
            data.edge_index, data.num_nodes, max_distance=self.max_distance, paths=self.paths
        )
        data["spd"] = torch.from_numpy(spd.reshape(-1))
        if self.paths:
            data["spd_pred"] = torch.from_numpy(pred.reshape(-1))
        return data

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(max_distance={self.max_distance}, paths={self.paths})"


def shortest_path_arrays(
    edge_index: torch.Tensor | None,
    num_nodes: int | None,
    max_distance: int | None = None,
    paths: bool = True,
) -> tuple[np.ndarray, np.ndarray | None]:
    r"""All-pairs unweighted shortest paths of one undirected graph, as ``int16`` NumPy matrices.

    The routine behind :class:`AddShortestPathDistance` (same conventions; see there).

    Args:
        edge_index (torch.Tensor, optional): ``[2, E]`` integer edge list with local node indices;
            :obj:`None` or ``E = 0`` means no edges.
        num_nodes (int): number of nodes ``n``.
        max_distance (int, optional): clip distances at this value. (default: :obj:`None`)
        paths (bool, optional): also return the predecessor matrix. (default: :obj:`True`)

    Returns:
        ``(spd, pred)``: ``spd`` ``np.int16`` ``[n, n]`` and ``pred`` ``np.int16`` ``[n, n]``
        (:obj:`None` if not :obj:`paths`).

    Raises:
        ValueError: see :class:`AddShortestPathDistance`.
    """
    if num_nodes is None:
        raise ValueError(
            "graph has an unknown number of nodes: give it node features `x` or set `num_nodes`"
        )
    n = int(num_nodes)
    if n > MAX_NODES:
        raise ValueError(
            f"graph with {n} nodes is too large for AddShortestPathDistance (at most {MAX_NODES} "
            f"nodes fit the int16 storage, and n*n = {n * n} entries would be stored): filter such "
            "graphs out of the dataset or raise its maximum graph size deliberately"
        )
    if edge_index is None or edge_index.numel() == 0:
        row = col = np.empty(0, dtype=np.int64)
    else:
        if edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise ValueError(f"edge_index must have shape [2, E], got {list(edge_index.shape)}")
        ei = edge_index.detach().cpu().numpy()
        lo, hi = ei.min(), ei.max()
        if lo < 0 or hi >= n:
            raise ValueError(
                f"edge_index refers to node {lo if lo < 0 else hi}, outside [0, {n}) for a graph "
                f"with num_nodes={n}: fix the edge list or num_nodes"
            )
        row, col = ei[0], ei[1]
    if n == 0:
        spd = np.empty((0, 0), dtype=np.int16)
        return spd, (spd.copy() if paths else None)

    # Unit weights on both directions of every listed edge (the graph is undirected; duplicates
    # are harmless).
    if n <= FLOYD_WARSHALL_MAX_NODES:
        # Dense adjacency, masked where there is no edge (SciPy's cheapest input conversion).
        adj = np.zeros((n, n))
        adj[row, col] = 1.0
        adj[col, row] = 1.0
        adj = np.ma.masked_array(adj, mask=adj == 0.0)
        routine = functools.partial(floyd_warshall, overwrite=True)
    else:
        # CSR adjacency built directly, cheaper than SciPy's COO conversion.
        src = np.concatenate([row, col])
        dst = np.concatenate([col, row])
        indptr = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
        indices = dst[np.argsort(src, kind="stable")].astype(np.int32)
        adj = csr_array((np.ones(indices.shape[0]), indices, indptr), shape=(n, n))
        routine = dijkstra
    pred = None
    if paths:
        dist, pred = routine(adj, directed=True, return_predecessors=True)
        # SciPy marks "no predecessor" with -9999; store -1.
        pred = np.maximum(pred, -1).astype(np.int16)
    else:
        dist = routine(adj, directed=True)
    unreachable = np.isinf(dist)
    if max_distance is not None:
        np.minimum(dist, max_distance, out=dist)
    dist[unreachable] = UNREACHABLE
    return dist.astype(np.int16), pred


class StandardLayout(BaseTransform):
    r"""Reshapes a graph to the tensor layout every dataset of :mod:`graph_urpe.data` yields (PyG's
    ZINC has 1-D ``x``, ``edge_attr`` and ``y``; OGB integer ``y``), so that a collated batch has
    ``y`` ``[B, T]`` whatever the source: 1-D ``x`` -> ``[n, 1]``, 1-D ``edge_attr`` ->
    ``[E, 1]``, ``y`` -> ``torch.float32`` ``[1, T]``. Other attributes are untouched.

    Shapes:
        - **input:** ``x`` ``[n]`` or ``[n, F]``; ``edge_attr`` ``[E]`` or ``[E, F_e]``; ``y``
          scalar, ``[T]`` or ``[1, T]`` (any numeric dtype).
        - **output:** ``x`` ``[n, F]``, ``edge_attr`` ``[E, F_e]``, ``y`` ``float32`` ``[1, T]``.

    Raises:
        ValueError: if ``y`` has more than one row (node-level labels are not graph labels).
    """

    def forward(self, data: Data) -> Data:
        if data.x is not None and data.x.dim() == 1:
            data.x = data.x.view(-1, 1)
        if data.edge_attr is not None and data.edge_attr.dim() == 1:
            data.edge_attr = data.edge_attr.view(-1, 1)
        y = data.y
        if isinstance(y, torch.Tensor):
            if y.dim() == 2 and y.size(0) != 1:
                raise ValueError(
                    f"graph label y must hold one row per graph, got shape {list(y.shape)}"
                )
            data.y = y.reshape(1, -1).to(torch.float32)
        return data
