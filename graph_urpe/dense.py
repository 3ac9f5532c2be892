"""Padded dense pair tensors from PyG's sparse layout: relation matrices (SPD, resistance distance)
and the edges along shortest paths.

The transforms of :mod:`graph_urpe.transforms` store, per graph of ``n`` nodes, the all-pairs index
``pair_index`` ``[2, n * n]`` and one value vector ``[n * n]`` per relation (``spd``,
``resistance``, the predecessors ``spd_pred_index``); PyG's collate concatenates them and
increments the index. The functions here take those tensors (plus the batch's ``ptr`` or ``batch``
vector and, for paths, its ``edge_index``) and scatter them into padded ``[B, N, N]`` tensors (``N`` = largest graph in the
batch), the layout of the attention maps (``[batch, query, key]``), with the same node order and
padding as :func:`torch_geometric.utils.to_dense_batch`. Everything is vectorised over the batch (no
Python loop over graphs) and runs on the device of the input tensors; they are meant to run every
training step, from any user's model.

Host synchronisation: none, except reading the largest graph size ``N`` (one host read, as
:func:`~torch_geometric.utils.to_dense_batch` does) when ``max_num_nodes`` is not given, and the
number of graphs when only a ``batch`` vector is given without ``num_graphs``. Consistency checks of
the inputs (:mod:`graph_urpe.batch_checks`: the pair layout, edges within their graph,
``max_num_nodes``) need host reads too and run only with ``validate=True``; the data side
(:class:`~graph_urpe.transforms.AddShortestPathDistance` on the final graphs) guarantees them.
The stored pairs may come in any order (a PyG transform that reorders edges on a graph with as many
edges as node pairs reorders them too): they are scattered by ``pair_index``. Relations computed
on the device from ``edge_index`` instead, in the same layout: :mod:`graph_urpe.dense_relations`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from graph_urpe.batch_checks import RECOMPUTE_PAIRS, check_nodes, check_pairs
from graph_urpe.constants import UNREACHABLE

__all__ = [
    "batch_vector",
    "dense_layout",
    "from_dense_batch",
    "node_counts",
    "to_dense_pair",
    "to_dense_path_edges",
]


def node_counts(
    spd: Tensor, batch: Tensor | None = None, ptr: Tensor | None = None, num_graphs: int | None = None
) -> Tensor:
    """Nodes per graph, long ``[B]``, from ``ptr`` (preferred), else ``batch``, else one graph.

    Args:
        spd (Tensor): a collated pair-level vector (``spd``, ``resistance``, ...: ``n * n`` entries
            per graph; only its length and device are used, for the single-graph case
            ``n = sqrt(spd.numel())``).
        batch (LongTensor, optional): graph of each node ``[num_nodes]``. (default: :obj:`None`)
        ptr (LongTensor, optional): node offsets ``[B + 1]`` (PyG's ``Batch.ptr``).
            (default: :obj:`None`)
        num_graphs (int, optional): ``B``, needed with ``batch`` to count trailing empty graphs
            (and to avoid a host read). (default: :obj:`None`)

    Raises:
        TypeError: if ``ptr`` or ``batch`` is not an integer tensor.
    """
    for name, t in (("ptr", ptr), ("batch", batch)):
        if t is not None and (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool):
            raise TypeError(f"{name} must be an integer tensor (data.{name}), got {t.dtype}: "
                            f"pass {name}.long()")
    if ptr is not None:
        return (ptr[1:] - ptr[:-1]).to(spd.device)
    if batch is not None:
        return torch.bincount(batch, minlength=num_graphs or 0).to(spd.device)
    return torch.tensor([math.isqrt(spd.numel())], dtype=torch.long, device=spd.device)


def batch_vector(num_nodes: int, counts: Tensor, batch: Tensor | None = None) -> Tensor:
    """The graph of each node, long ``[num_nodes]``: ``batch`` if given, else from ``counts``
    (nodes per graph, ``[B]``; PyG's node order, graph by graph), with no host read."""
    if batch is not None:
        return batch
    graphs = torch.arange(counts.numel(), device=counts.device)
    return torch.repeat_interleave(graphs, counts, output_size=num_nodes)


def from_dense_batch(dense: Tensor, batch: Tensor, counts: Tensor, offset: int = 0) -> Tensor:
    """Inverse of :func:`torch_geometric.utils.to_dense_batch`: the real node rows of a padded
    ``[B, N, *]`` tensor, in PyG's sparse layout ``[num_nodes, *]``, by one gather (no host read).

    Args:
        dense (Tensor): ``[B, N, *]``.
        batch (LongTensor): graph of each node ``[num_nodes]``.
        counts (LongTensor): nodes per graph ``[B]``.
        offset (int, optional): slots before the first node of each graph (1 with a graph token
            in slot 0). (default: :obj:`0`)
    """
    starts = torch.cumsum(counts, 0) - counts
    position = torch.arange(batch.numel(), device=batch.device) - starts[batch]
    index = batch * dense.shape[1] + position + offset
    return dense.flatten(0, 1).index_select(0, index)


def dense_layout(
    counts: Tensor, max_num_nodes: int | None = None
) -> tuple[Tensor, Tensor]:
    """Which cells of the padded ``[B, N, N]`` tensor hold real node pairs.

    Args:
        counts (LongTensor): nodes per graph ``[B]``.
        max_num_nodes (int, optional): ``N``; at least ``counts.max()``. (default: :obj:`None`,
            read from ``counts``: one host read)

    Returns:
        ``(pair_mask, padding_mask)``: bool ``[B, N, N]`` (True where both nodes exist) and bool
        ``[B, N]`` (True at padded node slots).
    """
    if max_num_nodes is None:
        max_num_nodes = int(counts.max()) if counts.numel() else 0
    valid = torch.arange(max_num_nodes, device=counts.device) < counts.unsqueeze(1)
    return valid.unsqueeze(2) & valid.unsqueeze(1), ~valid


def _require(name: str, t: Tensor | None, fix: str) -> Tensor:
    if t is None:
        raise ValueError(f"`{name}` is missing: build the dataset with pre_transform={fix}")
    return t


def _pair_cells(pair_index: Tensor, counts: Tensor, max_n: int) -> tuple[Tensor, Tensor, Tensor]:
    """For each pair (column of a collated ``pair_index``): its flat cell in ``[B, N, N]``, the
    first node of its graph, and the local index of its key node (no host read)."""
    index = pair_index.to(counts.device, torch.long)
    starts = torch.cumsum(counts, 0) - counts
    graph = torch.bucketize(index[0], starts, right=True) - 1
    start = starts[graph]
    local = index - start
    return graph * (max_n * max_n) + local[0] * max_n + local[1], start, local[1]


def to_dense_pair(
    value: Tensor,
    pair_index: Tensor,
    batch: Tensor | None = None,
    ptr: Tensor | None = None,
    *,
    num_graphs: int | None = None,
    max_num_nodes: int | None = None,
    fill: float = UNREACHABLE,
    validate: bool = False,
    name: str = "value",
) -> tuple[Tensor, Tensor]:
    r"""Padded ``[B, N, N]`` matrix of a pairwise relation stored in the pair layout of
    :mod:`graph_urpe.transforms` (values aligned with the collated ``pair_index``): the SPD for
    Graphormer's spatial encoding and URPE's SPD-indexed ``C`` (Luo et al., NeurIPS 2022, Eq. (4)
    with ``j - i`` replaced by ``SPD(i, j)``), the resistance distance of Graphormer-GD, ...

    Args:
        value (Tensor): the collated values ``[P]`` (``spd``, ``resistance``; any dtype, kept).
        pair_index (Tensor): the collated ``pair_index`` ``[2, P]`` (global node indices, as PyG
            increments it).
        batch (LongTensor, optional): graph of each node ``[num_nodes]``. (default: :obj:`None`)
        ptr (LongTensor, optional): node offsets ``[B + 1]``, used in preference to ``batch``;
            with neither, the pairs are one graph. (default: :obj:`None`)
        num_graphs (int, optional): ``B`` (with ``batch``). (default: :obj:`None`)
        max_num_nodes (int, optional): ``N``, at least the largest graph (pad to a fixed size, and
            avoid the host read of the largest size). (default: :obj:`None`)
        fill (float, optional): value of the cells no pair fills (padding).
            (default: :data:`~graph_urpe.constants.UNREACHABLE`)
        validate (bool, optional): check that ``pair_index`` holds every node pair of every graph
            exactly once and that :obj:`max_num_nodes` holds the largest graph
            (:mod:`graph_urpe.batch_checks`; host reads). Without it, pairs that do not fit the
            batch give an ``IndexError`` or a wrong result. (default: :obj:`False`)
        name (str, optional): what ``value`` is, for error messages. (default: :obj:`"value"`)

    Returns:
        ``(dense, padding_mask)``: ``dense`` ``[B, N, N]`` of ``value``'s dtype, the values at
        their pairs and :obj:`fill` in padded cells; ``padding_mask`` bool ``[B, N]``,
        :obj:`True` at padded node slots. Node order as in
        :func:`torch_geometric.utils.to_dense_batch`; same device as ``value``.

    Raises:
        ValueError: if ``value`` or ``pair_index`` is :obj:`None`, they disagree in length, or
            (``validate=True``) the pairs do not fit the batch (e.g. computed before a subgraph)
            or :obj:`max_num_nodes` is too small.
    """
    fix = "graph_urpe.transforms.AddShortestPathDistance() (or AddResistanceDistance())"
    value = _require("relation values", value, fix)
    pair_index = _require("pair_index", pair_index, fix)
    if pair_index.dim() != 2 or pair_index.shape[0] != 2 or pair_index.shape[1] != value.numel():
        raise ValueError(
            f"{name} has {value.numel()} values but pair_index has shape "
            f"{list(pair_index.shape)}, one column per value expected: {RECOMPUTE_PAIRS}"
        )
    counts = node_counts(value, batch, ptr, num_graphs)
    if validate:
        check_pairs(pair_index, counts)
        check_nodes(int(counts.sum()), counts, max_num_nodes=max_num_nodes)
    pair_mask, padding_mask = dense_layout(counts, max_num_nodes)
    n = padding_mask.shape[1]
    cell, _, _ = _pair_cells(pair_index, counts, n)
    out = torch.full((pair_mask.numel(),), fill, dtype=value.dtype, device=value.device)
    out.index_put_((cell,), value.reshape(-1))
    return out.view(pair_mask.shape), padding_mask


def to_dense_path_edges(
    spd_pred_index: Tensor,
    pair_index: Tensor,
    edge_index: Tensor,
    batch: Tensor | None = None,
    ptr: Tensor | None = None,
    *,
    max_hops: int,
    num_graphs: int | None = None,
    max_num_nodes: int | None = None,
    validate: bool = False,
) -> Tensor:
    r"""Edge ids along one shortest path per node pair, for Graphormer's multi-hop edge encoding
    (Ying et al., NeurIPS 2021, Eq. 7: the mean over the path's edges of edge feature times a
    per-hop weight).

    The path from ``i`` to ``j`` is read off the predecessors of the pairs ``(j, *)`` stored by
    :class:`~graph_urpe.transforms.AddShortestPathDistance` (``spd_pred_index``): since the graph
    is undirected, the node after ``u`` on a shortest path from ``u`` to ``j`` is ``pred[j, u]``.
    The walk runs for ``min(max_hops, N - 1)`` steps, each two 1-D gathers over all ``[B, N, N]``
    pairs (no Python loop over graphs, no host read; on CPU in eager mode it stops early, after a
    host read every 4 hops, once every path has ended).

    Args:
        spd_pred_index (Tensor): the collated ``spd_pred_index`` ``[P]`` (global node indices;
            a pair's own key node where it has no predecessor).
        pair_index (Tensor): the collated ``pair_index`` ``[2, P]``.
        edge_index (LongTensor): the batch's ``[2, E]`` (global node indices, as collated by PyG).
        batch, ptr, num_graphs, max_num_nodes: as for :func:`to_dense_pair`.
        max_hops (int): number of edges kept per path (Graphormer's ``multi_hop_max_dist``).
        validate (bool, optional): check the pair layout as :func:`to_dense_pair` does and that
            every path edge is in ``edge_index`` (host reads). Without it a path edge missing from
            ``edge_index`` counts as absent (-1). (default: :obj:`False`)

    Returns:
        long ``[B, N, N, max_hops]`` (a view of hop-major ``[max_hops, B, N, N]`` storage:
        ``.movedim(-1, 0)`` is contiguous): entry ``[b, i, j, k]`` is the column of ``edge_index``
        (equivalently the row of ``edge_attr``) of the ``k``-th edge on the path from node ``i`` to
        node ``j`` of graph ``b`` (``k = 0`` is the edge leaving ``i``); ``-1`` where the path has
        fewer than ``k + 1`` edges, ``i == j``, ``j`` is unreachable, or the cell is padding. Edge
        ``(u, v)`` is the first column with that source and target; if the graph lists only
        ``(v, u)``, that column is used. Same device as ``spd_pred_index``.

    Raises:
        ValueError: if ``max_hops < 1``, ``spd_pred_index`` or ``pair_index`` is :obj:`None`, or
            (``validate=True``) the pairs do not fit the batch or a shortest path uses an edge
            absent from ``edge_index``.
    """
    if not isinstance(max_hops, int) or max_hops < 1:
        raise ValueError(f"max_hops must be a positive integer, got {max_hops!r}")
    fix = "graph_urpe.transforms.AddShortestPathDistance(paths=True)"
    pred_flat = _require("spd_pred_index", spd_pred_index, fix)
    pair_index = _require("pair_index", pair_index, fix)
    device = pred_flat.device
    counts = node_counts(pred_flat, batch, ptr, num_graphs)
    if validate:
        if pair_index.dim() != 2 or pair_index.shape[0] != 2 or \
                pair_index.shape[1] != pred_flat.numel():
            raise ValueError(
                f"spd_pred_index has {pred_flat.numel()} values but pair_index has shape "
                f"{list(pair_index.shape)}, one column per value expected: {RECOMPUTE_PAIRS}"
            )
        check_pairs(pair_index, counts)
        check_nodes(int(counts.sum()), counts, max_num_nodes=max_num_nodes)
    pair_mask, padding_mask = dense_layout(counts, max_num_nodes)
    num_graphs, max_n = padding_mask.shape
    cells = num_graphs * max_n * max_n
    walk = min(max_hops, max_n - 1)
    if walk < 1:
        return torch.full((num_graphs, max_n, max_n, max_hops), -1, dtype=torch.long, device=device)

    # pred[b, i, j]: local predecessor of j on the path from i, -1 if none (stored as j itself).
    # step[b, u, j]: the node after u on the path from u to j, i.e. pred[b, j, u].
    cell, start, key = _pair_cells(pair_index, counts, max_n)
    local_pred = pred_flat.long() - start
    pred = torch.full((cells,), -1, dtype=torch.long, device=device)
    pred.index_put_((cell,), torch.where(local_pred == key, -1, local_pred))
    pred = pred.view(pair_mask.shape)
    step = pred.transpose(1, 2)
    has_step = step >= 0
    step = step.clamp(min=0)

    # lookup[b * N * N + u * N + v]: column of edge (u, v) in edge_index, the first listed; else
    # num_edges + the column of (v, u); 2 * num_edges if neither is listed.
    starts = torch.cumsum(counts, 0) - counts
    edge_index = edge_index.to(device)
    num_edges = edge_index.size(1)
    graph = torch.bucketize(edge_index[0], starts, right=True) - 1
    base = graph * (max_n * max_n)
    src = edge_index[0] - starts[graph]
    dst = edge_index[1] - starts[graph]
    ids = torch.arange(num_edges, device=device)
    lookup = torch.full((cells,), 2 * num_edges, dtype=torch.long, device=device)
    lookup = lookup.scatter_reduce(
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
    missing = has_step & (edge == 2 * num_edges)
    if validate and bool(missing.any()):
        raise ValueError(
            "a shortest path in spd_pred_index uses an edge missing from edge_index: it must be "
            "computed from this batch's edge_index"
        )
    edge = torch.where(edge >= num_edges, edge - num_edges, edge)
    dead = torch.full((1,), -1, dtype=torch.long, device=device)
    edge_table = torch.cat([torch.where(has_step & ~missing, edge, -1).reshape(-1), dead])
    next_state = graph_base + step * max_n + nodes.view(1, 1, -1)
    next_state = torch.cat([torch.where(has_step, next_state, cells).reshape(-1), dead + 1 + cells])

    # Walk all pairs (i, j) one hop at a time from i towards j: the walk of pair (b, i, j) starts
    # in state (b, i, j), i.e. at flat index = its own cell. Two 1-D gathers per hop
    # (index_select: about 4x faster on CPU than advanced indexing). On CPU in eager mode, where
    # a host read costs nothing, the walk stops once every path has ended (the batch's largest
    # SPD, 12-17 hops on ZINC batches instead of 20; benchmarks/README.md section 11).
    early_exit = device.type == "cpu" and not torch.compiler.is_compiling()
    hops = [edge_table[:cells]]
    state = next_state[:cells]
    for k in range(1, walk):
        if early_exit and k % 4 == 0 and bool((state == cells).all()):
            break
        hops.append(edge_table.index_select(0, state))
        state = next_state.index_select(0, state)
    hops += [dead.expand(cells)] * (max_hops - len(hops))
    # Hop-major storage ([max_hops, cells], one contiguous row per hop), returned as a
    # [B, N, N, max_hops] view: MultiHopEdgeEncoder reads it hop by hop.
    return torch.stack(hops).view(max_hops, num_graphs, max_n, max_n).permute(1, 2, 3, 0)
