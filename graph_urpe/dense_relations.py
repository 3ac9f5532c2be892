"""Pairwise relations of a PyG batch computed on the fly, on the device, from its ``edge_index``
(shortest-path distance, resistance distance), in the padded ``[B, N, N]`` layout of
:mod:`graph_urpe.dense`: what the layers use when the graphs did not go through the transforms of
:mod:`graph_urpe.transforms`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from graph_urpe.batch_checks import check_edges, check_nodes
from graph_urpe.constants import UNREACHABLE
from graph_urpe.dense import dense_layout

__all__ = ["dense_relations_from_edges"]


def dense_relations_from_edges(
    edge_index: Tensor,
    counts: Tensor,
    max_num_nodes: int,
    relations: tuple[str, ...] | list[str] = ("spd",),
    *,
    validate: bool = False,
) -> dict[str, Tensor]:
    r"""Pairwise relations of a batch computed on the fly, on the device of ``edge_index``, in the
    padded ``[B, N, N]`` layout of :func:`~graph_urpe.dense.to_dense_pair`: what a layer uses when the graphs did
    not go through :mod:`graph_urpe.transforms` (which compute the same values once, on the CPU,
    and are the cheaper choice for a dataset read many times).

    * ``"spd"``: breadth-first search by ``N - 1`` batched boolean matrix products
      (:math:`O(N^4)` per graph: meant for small graphs), long, :data:`UNREACHABLE` between
      components;
    * ``"resistance"``: :math:`R(i, j) = L^+_{ii} + L^+_{jj} - 2 L^+_{ij}` from the batched
      pseudo-inverse (:func:`torch.linalg.pinv`, float64) of each padded graph Laplacian; the
      pseudo-inverse of a block-diagonal Laplacian is the block-diagonal of the components'
      pseudo-inverses, so this is the per-component resistance; float32, :data:`UNREACHABLE`
      between components.

    Edges are unweighted and undirected, self-loops and duplicates ignored (as the transforms).
    Padded cells hold :data:`UNREACHABLE`.

    This and :func:`graph_urpe.transforms.shortest_path_arrays` /
    :func:`~graph_urpe.transforms.resistance_distance_matrix` are two routines on purpose, with the
    same conventions and equal values (``tests/test_dense.py``): the transforms run once per graph
    on the CPU with SciPy (Floyd-Warshall or Dijkstra, graphs up to 32,767 nodes, predecessors
    for the edge encoding), this runs every step on the model's device, batched, without host
    reads and under :func:`torch.compile`; neither could serve the other's caller.

    Args:
        edge_index (LongTensor): the batch's ``[2, E]`` (global node indices).
        counts (LongTensor): nodes per graph ``[B]``.
        max_num_nodes (int): ``N``, at least the largest graph.
        relations (list[str], optional): which relations. (default: :obj:`("spd",)`)
        validate (bool, optional): check that every edge joins two nodes of the same graph and
            that :obj:`max_num_nodes` holds the largest graph (:mod:`graph_urpe.batch_checks`;
            host reads). Without it such input gives an ``IndexError`` or a wrong result.
            (default: :obj:`False`)

    Returns:
        dict[str, Tensor]: relation name -> ``[B, N, N]``.

    Raises:
        TypeError, ValueError: (``validate=True``) for a non-integer ``edge_index``, an edge
            between graphs or outside the batch, or a too small :obj:`max_num_nodes`.
    """
    if validate:
        check_edges(edge_index, counts)
        check_nodes(int(counts.sum()), counts, max_num_nodes=max_num_nodes)
    edge_index = edge_index.contiguous()  # rows for bucketize
    device = edge_index.device
    b, n = counts.numel(), max_num_nodes
    counts = counts.to(device)
    pair_mask, _ = dense_layout(counts, n)
    starts = torch.cumsum(counts, 0) - counts
    graph = torch.bucketize(edge_index[0], starts, right=True) - 1
    src, dst = edge_index[0] - starts[graph], edge_index[1] - starts[graph]
    adj = torch.zeros(b, n, n, device=device)
    adj[graph, src, dst] = 1.0
    adj[graph, dst, src] = 1.0
    eye = torch.eye(n, dtype=torch.bool, device=device).expand(b, n, n) & pair_mask
    adj = adj.masked_fill(eye, 0.0)
    dist = torch.full((b, n, n), UNREACHABLE, dtype=torch.long, device=device)
    dist = dist.masked_fill(eye, 0)
    reached = eye.clone()
    frontier = eye.float()
    for k in range(1, n):
        step = (frontier @ adj > 0) & ~reached
        dist = dist.masked_fill(step, k)
        reached |= step
        frontier = step.float()
    out = {}
    if "spd" in relations:
        out["spd"] = dist
    if "resistance" in relations:
        lap = torch.diag_embed(adj.sum(-1)) - adj
        pinv = torch.linalg.pinv(lap.double(), hermitian=True)
        diag = pinv.diagonal(dim1=-2, dim2=-1)
        res = (diag.unsqueeze(-1) + diag.unsqueeze(-2) - 2.0 * pinv).clamp(min=0.0)
        out["resistance"] = torch.where(dist >= 0, res, float(UNREACHABLE)).float()
    return out
