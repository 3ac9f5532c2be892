"""All-pairs distances of one undirected, unweighted graph as NumPy matrices, computed on the CPU
with SciPy's compiled routines (:mod:`scipy.sparse.csgraph`) and NumPy's LAPACK inverse: the
shortest-path distances and predecessors (:func:`shortest_path_arrays`) and the resistance
distances (:func:`resistance_distance_matrix`) that the transforms of :mod:`graph_urpe.transforms`
store, and the graph sizes they accept (:data:`MAX_NODES`).
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from scipy.sparse import csr_array
from scipy.sparse.csgraph import connected_components, dijkstra, floyd_warshall

from graph_urpe.constants import UNREACHABLE

__all__ = ["FLOYD_WARSHALL_MAX_NODES", "MAX_NODES", "resistance_distance_matrix",
           "shortest_path_arrays"]

FLOYD_WARSHALL_MAX_NODES: int = 256
"""Graphs with at most this many nodes use SciPy's compiled Floyd-Warshall, larger ones its
Dijkstra: for small graphs the O(n^3) triple loop in C costs less than Dijkstra's per-call overhead
(about 2.5x faster at 8-128 nodes, measured with SciPy 1.17; Dijkstra wins from about 300-500)."""

MAX_NODES: int = int(torch.iinfo(torch.int16).max)
"""Largest graph (in nodes) whose distances fit the ``int16`` storage (and whose ``n * n`` pairs
are stored at all: 32,767 nodes are already 1.07 G pairs)."""


def _edge_arrays(edge_index: torch.Tensor | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(row, col)`` NumPy arrays of a checked ``[2, E]`` edge list with nodes in ``[0, n)``."""
    if edge_index is None or edge_index.numel() == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must have shape [2, E], got {list(edge_index.shape)}")
    if edge_index.is_floating_point() or edge_index.is_complex() or edge_index.dtype == torch.bool:
        raise TypeError(f"edge_index must be an integer tensor, got {edge_index.dtype}: set "
                        "data.edge_index = data.edge_index.long() before the transform")
    ei = edge_index.detach().cpu().numpy()
    lo, hi = ei.min(), ei.max()
    if lo < 0 or hi >= n:
        raise ValueError(
            f"edge_index refers to node {lo if lo < 0 else hi}, outside [0, {n}) for a graph "
            f"with num_nodes={n}: fix the edge list or num_nodes"
        )
    return ei[0], ei[1]


def resistance_distance_matrix(edge_index: torch.Tensor | None, num_nodes: int) -> np.ndarray:
    r"""All-pairs resistance distances of one undirected, unweighted graph, as a ``float32``
    ``[n, n]`` NumPy matrix: the routine behind
    :class:`~graph_urpe.transforms.AddResistanceDistance` (same conventions, :data:`UNREACHABLE`
    between components; see there for the formula).

    Args:
        edge_index (torch.Tensor, optional): ``[2, E]`` local edge list; :obj:`None` or ``E = 0``
            means no edges.
        num_nodes (int): number of nodes ``n``.

    Raises:
        ValueError: for a malformed ``edge_index``.
    """
    n = int(num_nodes)
    row, col = _edge_arrays(edge_index, n)
    adj = np.zeros((n, n))
    adj[row, col] = 1.0
    adj[col, row] = 1.0
    np.fill_diagonal(adj, 0.0)
    out = np.full((n, n), float(UNREACHABLE))
    _, labels = connected_components(csr_array(adj), directed=False)
    for comp in np.unique(labels):
        nodes = np.flatnonzero(labels == comp)
        sub = adj[np.ix_(nodes, nodes)]
        lap = np.diag(sub.sum(1)) - sub
        # (L + J/m)^{-1} = L^+ + J/m for a connected component; J/m cancels in R.
        inv = np.linalg.inv(lap + 1.0 / nodes.size)
        diag = np.diag(inv)
        res = diag[:, None] + diag[None, :] - 2.0 * inv
        np.fill_diagonal(res, 0.0)
        out[np.ix_(nodes, nodes)] = np.maximum(res, 0.0)  # round-off below 0 on tiny values
    return out.astype(np.float32)


def shortest_path_arrays(
    edge_index: torch.Tensor | None,
    num_nodes: int | None,
    max_distance: int | None = None,
    paths: bool = True,
) -> tuple[np.ndarray, np.ndarray | None]:
    r"""All-pairs unweighted shortest paths of one undirected graph, as NumPy matrices.

    The routine behind :class:`~graph_urpe.transforms.AddShortestPathDistance` (same conventions;
    see there).

    Args:
        edge_index (torch.Tensor, optional): ``[2, E]`` integer edge list with local node indices;
            :obj:`None` or ``E = 0`` means no edges.
        num_nodes (int): number of nodes ``n``.
        max_distance (int, optional): clip distances at this value. (default: :obj:`None`)
        paths (bool, optional): also return the predecessor matrix. (default: :obj:`True`)

    Returns:
        ``(spd, pred)``: ``spd`` ``np.int16`` ``[n, n]`` and ``pred`` ``np.int32`` ``[n, n]``,
        ``pred[i, j]`` the local node before ``j`` on the path from ``i``, ``-1`` if none
        (:obj:`None` if not :obj:`paths`).

    Raises:
        ValueError: see :class:`~graph_urpe.transforms.AddShortestPathDistance`.
    """
    if num_nodes is None:
        raise ValueError(
            "graph has an unknown number of nodes: give it node features `x` or set `num_nodes`"
        )
    n = int(num_nodes)
    if n > MAX_NODES:
        raise ValueError(
            f"graph with {n} nodes is too large for AddShortestPathDistance (at most {MAX_NODES} "
            "nodes fit the int16 storage): filter such graphs out of the dataset"
        )
    row, col = _edge_arrays(edge_index, n)
    if n == 0:
        spd = np.empty((0, 0), dtype=np.int16)
        return spd, (np.empty((0, 0), dtype=np.int32) if paths else None)

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
        pred = np.maximum(pred, -1).astype(np.int32)
    else:
        dist = routine(adj, directed=True)
    unreachable = np.isinf(dist)
    if max_distance is not None:
        np.minimum(dist, max_distance, out=dist)
    dist[unreachable] = UNREACHABLE
    return dist.astype(np.int16), pred
