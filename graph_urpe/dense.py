"""Padded dense pair tensors from a collated batch: SPD ids and the edges along shortest paths.

:class:`~graph_urpe.transforms.AddShortestPathDistance` stores, per graph of ``n`` nodes, the
row-major ``n * n`` vectors ``spd`` and ``spd_pred``; PyG's collate concatenates them. The functions
here scatter them into padded ``[B, N, N]`` tensors (``N`` = largest graph in the batch), the layout
of the attention maps (``[batch, query, key]``), with the same node order and padding as
:func:`torch_geometric.utils.to_dense_batch`. Everything is vectorised over the batch (no Python loop
over graphs) and runs on the device of the input tensors; they are meant to run every training step.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.data import Data

from graph_urpe.constants import UNREACHABLE

__all__ = ["to_dense_path_edges", "to_dense_spd"]


def _node_counts(batch: Data) -> Tensor:
    """Nodes per graph, ``[B]`` long, from ``ptr``, else ``batch``, else a single graph."""
    ptr = getattr(batch, "ptr", None)
    if ptr is not None:
        return ptr[1:] - ptr[:-1]
    vector = getattr(batch, "batch", None)
    if vector is not None:
        return torch.bincount(vector)
    return torch.tensor([batch.num_nodes], dtype=torch.long)


def _pair_layout(batch: Data) -> tuple[Tensor, Tensor]:
    """Which cells of the padded ``[B, N, N]`` tensor hold real node pairs.

    Returns ``(pair_mask, padding_mask)``: ``pair_mask`` bool ``[B, N, N]`` (True where both nodes
    exist) and ``padding_mask`` bool ``[B, N]`` (True at padded node slots). The concatenated
    row-major ``n_b * n_b`` blocks of ``spd``/``spd_pred`` fill the True cells of ``pair_mask`` in
    its own row-major order, so :meth:`torch.Tensor.masked_scatter_` places them.
    """
    spd = batch.get("spd")
    if spd is None:
        raise ValueError(
            "batch has no `spd` tensor: build the dataset with "
            "pre_transform=graph_urpe.transforms.AddShortestPathDistance()"
        )
    counts = _node_counts(batch).to(spd.device)
    # One host sync for both sizes (to_dense_batch needs the same one for N).
    max_n, total = (
        torch.stack([counts.max(), (counts * counts).sum()]).tolist() if counts.numel() else (0, 0)
    )
    if total != spd.numel():
        raise ValueError(
            f"batch.spd has {spd.numel()} entries but its graphs' node counts need sum(n^2) = {total}: "
            "the SPD must be computed on the final graphs (apply AddShortestPathDistance after any "
            "transform that adds or removes nodes)"
        )
    valid = torch.arange(max_n, device=spd.device) < counts.unsqueeze(1)
    return valid.unsqueeze(2) & valid.unsqueeze(1), ~valid


def to_dense_spd(batch: Data) -> tuple[Tensor, Tensor]:
    r"""Padded shortest-path-distance matrix of a batch, for Graphormer's spatial encoding and
    URPE's SPD-indexed multiplier (Luo et al., NeurIPS 2022, Eq. 4 with ``j - i`` replaced by
    ``SPD(i, j)``).

    Args:
        batch (Data or Batch): a collated :class:`~torch_geometric.data.Batch` (with ``ptr`` or
            ``batch``) or a single :class:`~torch_geometric.data.Data` (a batch of one), carrying
            ``spd`` from :class:`~graph_urpe.transforms.AddShortestPathDistance`.

    Returns:
        ``(spd, padding_mask)``: ``spd`` long ``[B, N, N]`` with the distances (clipped as stored),
        :data:`~graph_urpe.transforms.UNREACHABLE` for unreachable pairs *and* for every padded
        cell; ``padding_mask`` bool ``[B, N]``, :obj:`True` at padded node slots (the model tells
        padding from unreachable pairs by this mask). ``N`` is the largest graph in the batch;
        node order as in :func:`torch_geometric.utils.to_dense_batch`. Same device as ``batch.spd``.

    Shapes:
        - **input:** ``batch.spd`` ``[sum_b n_b^2]`` (any integer dtype), ``batch.ptr`` ``[B + 1]``.
        - **output:** ``[B, N, N]`` long and ``[B, N]`` bool.

    Raises:
        ValueError: if ``batch.spd`` is missing or its length is not ``sum_b n_b^2``.
    """
    pair_mask, padding_mask = _pair_layout(batch)
    out = torch.full(pair_mask.shape, UNREACHABLE, dtype=torch.long, device=pair_mask.device)
    return out.masked_scatter_(pair_mask, batch.spd.long()), padding_mask


def to_dense_path_edges(batch: Data, max_hops: int) -> Tensor:
    r"""Edge ids along one shortest path per node pair, for Graphormer's multi-hop edge encoding
    (Ying et al., NeurIPS 2021, Eq. 7: the mean over the path's edges of edge feature times a
    per-hop weight).

    The path from ``i`` to ``j`` is read off the predecessor row of ``j`` stored by
    :class:`~graph_urpe.transforms.AddShortestPathDistance` (``spd_pred``): since the graph is
    undirected, the node after ``u`` on a shortest path from ``u`` to ``j`` is ``pred[j, u]``.
    The walk runs for ``min(max_hops, N - 1)`` steps, each two 1-D lookups over all ``[B, N, N]``
    pairs (no Python loop over graphs).

    Args:
        batch (Data or Batch): as for :func:`to_dense_spd`, also carrying ``spd_pred`` and
            ``edge_index`` (global node indices, as collated by PyG).
        max_hops (int): number of edges kept per path (Graphormer's ``multi_hop_max_dist``).

    Returns:
        long ``[B, N, N, max_hops]``: entry ``[b, i, j, k]`` is the column of ``batch.edge_index``
        (equivalently the row of ``batch.edge_attr``) of the ``k``-th edge on the path from node
        ``i`` to node ``j`` of graph ``b`` (``k = 0`` is the edge leaving ``i``); ``-1`` where the
        path has fewer than ``k + 1`` edges, ``i == j``, ``j`` is unreachable, or the cell is
        padding. Edge ``(u, v)`` is the first column with that source and target; if the graph
        lists only ``(v, u)``, that column is used. Same device as ``batch.spd_pred``. The result
        is a (non-contiguous) view of a hop-major ``[max_hops, B, N, N]`` buffer: index it, or call
        ``.contiguous()`` before ``.view()``.

    Shapes:
        - **input:** ``batch.spd_pred`` ``[sum_b n_b^2]``, ``batch.edge_index`` ``[2, E]``.
        - **output:** ``[B, N, N, max_hops]``.

    Raises:
        ValueError: if ``max_hops < 1``, ``spd``/``spd_pred`` is missing or of the wrong length,
            or a shortest path uses an edge absent from ``edge_index``.
    """
    if not isinstance(max_hops, int) or max_hops < 1:
        raise ValueError(f"max_hops must be a positive integer, got {max_hops!r}")
    pred_flat = batch.get("spd_pred")
    if pred_flat is None:
        raise ValueError(
            "batch has no `spd_pred` tensor: build the dataset with "
            "pre_transform=graph_urpe.transforms.AddShortestPathDistance(paths=True)"
        )
    pair_mask, padding_mask = _pair_layout(batch)
    if pred_flat.numel() != batch.spd.numel():
        raise ValueError(
            f"batch.spd_pred has {pred_flat.numel()} entries, expected {batch.spd.numel()} "
            "(= sum n^2, as batch.spd)"
        )
    num_graphs, max_n = padding_mask.shape
    device = pair_mask.device
    cells = num_graphs * max_n * max_n
    hops = torch.full((max_hops, cells), -1, dtype=torch.long, device=device)
    out = hops.view(max_hops, num_graphs, max_n, max_n).permute(1, 2, 3, 0)
    if max_n < 2:
        return out

    # step[b, u, j]: the node after u on the path from u to j, i.e. pred[b, j, u].
    pred = torch.full(pair_mask.shape, -1, dtype=torch.long, device=device)
    pred.masked_scatter_(pair_mask, pred_flat.long())
    step = pred.transpose(1, 2).contiguous()
    has_step = step >= 0
    step = step.clamp(min=0)

    # lookup[b * N * N + u * N + v]: column of edge (u, v) in edge_index, the first listed; else
    # num_edges + the column of (v, u); 2 * num_edges if neither is listed.
    counts = max_n - padding_mask.sum(1)
    starts = torch.cumsum(counts, 0) - counts
    edge_index = batch.edge_index.to(device)
    num_edges = edge_index.size(1)
    graph = torch.bucketize(edge_index[0], starts, right=True) - 1
    base = graph * (max_n * max_n)
    src = edge_index[0] - starts[graph]
    dst = edge_index[1] - starts[graph]
    ids = torch.arange(num_edges, device=device)
    lookup = torch.full((cells,), 2 * num_edges, dtype=torch.long, device=device)
    lookup.scatter_reduce_(
        0,
        torch.cat([base + src * max_n + dst, base + dst * max_n + src]),
        torch.cat([ids, ids + num_edges]),
        reduce="amin",
    )

    # Walk tables over the pair states s = (b, u, j), flattened, plus a dead state at index
    # `cells`: edge_table[s] is the edge from u to step[b, u, j] (-1 if none) and next_state[s]
    # the state (b, step[b, u, j], j) (dead if none; the dead state stays dead).
    graph_base = (torch.arange(num_graphs, device=device) * (max_n * max_n)).view(-1, 1, 1)
    nodes = torch.arange(max_n, device=device)
    edge = lookup[graph_base + nodes.view(1, -1, 1) * max_n + step]
    if bool((has_step & (edge == 2 * num_edges)).any()):
        raise ValueError(
            "a shortest path in spd_pred uses an edge missing from edge_index: spd_pred must be "
            "computed from this batch's edge_index"
        )
    edge = torch.where(edge >= num_edges, edge - num_edges, edge)
    dead = torch.tensor([-1], device=device)
    edge_table = torch.cat([torch.where(has_step, edge, -1).view(-1), dead])
    next_state = graph_base + step * max_n + nodes.view(1, 1, -1)
    next_state = torch.cat([torch.where(has_step, next_state, cells).view(-1), dead + 1 + cells])

    # Walk all pairs (i, j) one hop at a time from i towards j: the walk of pair (b, i, j) starts
    # in state (b, i, j), i.e. at flat index = its own cell. Two 1-D lookups per hop, written
    # straight into the hop-major output buffer.
    hops[0] = edge_table[:cells]
    state = next_state[:cells]
    for k in range(1, min(max_hops, max_n - 1)):
        torch.index_select(edge_table, 0, state, out=hops[k])
        state = next_state.index_select(0, state)
    return out
