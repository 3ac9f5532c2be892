"""Consistency checks of a PyG batch before it is densified (:mod:`graph_urpe.dense`,
:class:`~graph_urpe.nn.URPEGraphConv`): the node features (a floating-point
``[num_nodes, channels]`` tensor of the layer's dtype), the node layout (``batch`` / ``ptr``
against the node features, ``max_num_nodes``), the edges (within their graph), the stored pair
layout of :mod:`graph_urpe.transforms` (every node pair of every graph exactly once) and a stored
SPD against the edges (its pairs at distance 1 are the edges).

Each check raises a one-line :class:`ValueError` (:class:`TypeError` for a wrong dtype) that says
what is wrong and how to fix it, instead of an ``IndexError`` deep in a scatter, or a silently wrong
result. All but :func:`check_node_features` (shapes and dtypes only, always run) read values back
to the host (one synchronisation each), so the dense builders run them only with
``validate=True``; :class:`~graph_urpe.nn.URPEGraphConv` runs them by default.
"""

from __future__ import annotations

import torch
from torch import Tensor

from graph_urpe.constants import UNREACHABLE

__all__ = ["RECOMPUTE_PAIRS", "check_edges", "check_node_features", "check_nodes", "check_pairs",
           "check_spd"]

#: The fix named by every error about a stored pair layout that does not fit the batch.
RECOMPUTE_PAIRS: str = (
    "the pair relations must be computed on these very graphs (and a batch of several graphs "
    "needs batch=data.batch or ptr=data.ptr, else it is taken as one graph): apply "
    "AddShortestPathDistance / "
    "AddResistanceDistance again after a subgraph (torch_geometric.utils.subgraph, "
    "Data.subgraph) or any transform that changes the nodes (or, on a graph with as many edges as "
    "node pairs, the edges: PyG then takes the pairs for edges), or pass no pair_index (nor spd "
    "/ resistance) to URPEGraphConv to compute the relations from edge_index"
)


def check_node_features(x: object, channels: int, layer: str, param_dtype: torch.dtype) -> None:
    """Check the node features given to a layer of width ``channels``: a floating-point tensor
    ``[num_nodes, channels]`` of the layer's parameters' dtype.

    The dtype is compared only where it would fail in the layer: outside :func:`torch.autocast`
    any difference (e.g. numpy's float64 against float32 parameters, which fails deep in
    ``LayerNorm``); under autocast for ``x``'s device, which casts float16 / bfloat16 / float32
    itself but never float64, only a difference where one side is float64.

    Args:
        x (object): the node features.
        channels (int): the layer's width ``C``.
        layer (str): the layer's class name, for the message.
        param_dtype (torch.dtype): the dtype of the layer's parameters.

    Raises:
        TypeError: ``x`` not a tensor, not floating point, or (see above) not of the parameters'
            dtype.
        ValueError: ``x`` not 2-D, or its width not ``channels``.
    """
    if not isinstance(x, Tensor):
        raise TypeError(
            f"x must be a tensor of node features [num_nodes, {channels}], got "
            f"{type(x).__name__}: for graphs without node features pass e.g. "
            f"torch.ones(num_nodes, {channels}) or an embedding of the node degrees"
        )
    if not x.is_floating_point():
        raise TypeError(
            f"x must hold floating-point node features [num_nodes, {channels}], got "
            f"{x.dtype}: integer features (e.g. torch_geometric.utils.from_smiles's atom "
            "categories) must be embedded first, e.g. graph_urpe.nn.CategoricalEncoder or "
            f"torch.nn.Embedding(num_categories, {channels}) per column, summed"
        )
    if x.dim() != 2:
        raise ValueError(
            f"x must be 2-D [num_nodes, channels] = [num_nodes, {channels}], got shape "
            f"{tuple(x.shape)}: for one feature per node use x.unsqueeze(-1) and project it "
            f"to {channels} channels (e.g. torch.nn.Linear(1, {channels}))"
        )
    if x.shape[-1] != channels:
        width = x.shape[-1]
        raise ValueError(
            f"x must have shape [num_nodes, {channels}] for {layer}(channels={channels}, ...), "
            f"got {tuple(x.shape)} (x.size(-1) = {width}, channels = {channels}): project the "
            f"node features to {channels} channels first (e.g. torch.nn.Linear({width}, "
            f"{channels})) or build {layer}({width}, ...)."
        )
    if x.dtype != param_dtype and (
        not torch.is_autocast_enabled(x.device.type) or torch.float64 in (x.dtype, param_dtype)
    ):
        numpy_hint = ", e.g. x.float() for numpy's float64" if x.dtype == torch.float64 else ""
        autocast_hint = (", or run the layer under torch.autocast"
                         if x.dtype in (torch.bfloat16, torch.float16) else "")
        raise TypeError(
            f"x is {x.dtype} but the {layer}'s parameters are {param_dtype}: cast x "
            f"(x.to({param_dtype}){numpy_hint}) or the layer (layer.to({x.dtype})){autocast_hint}"
        )


def check_nodes(
    num_nodes: int,
    counts: Tensor,
    batch: Tensor | None = None,
    num_graphs: int | None = None,
    max_num_nodes: int | None = None,
    ptr: Tensor | None = None,
) -> None:
    """Check the node layout: ``counts`` (from ``ptr`` / ``batch``) covers the ``num_nodes`` rows
    of the node features, ``batch`` is sorted (nodes graph by graph, the contract of
    :func:`torch_geometric.utils.to_dense_batch` and what PyG's collate produces), ``num_graphs``
    covers every graph ``batch`` refers to, ``batch`` and ``ptr`` agree when both are given, and
    ``max_num_nodes`` holds the largest graph.

    Args:
        num_nodes (int): rows of the node features.
        counts (LongTensor): nodes per graph ``[B]``.
        batch (LongTensor, optional): graph of each node. (default: :obj:`None`)
        num_graphs (int, optional): ``B`` as given by the caller. (default: :obj:`None`)
        max_num_nodes (int, optional): ``N`` as given by the caller. (default: :obj:`None`)
        ptr (LongTensor, optional): node offsets ``[B + 1]`` that ``counts`` was read from, to
            check against ``batch``. (default: :obj:`None`)

    Raises:
        ValueError: naming the inconsistent input and the fix.
    """
    if (batch is None or ptr is not None) and counts.numel() and bool((counts < 0).any()):
        raise ValueError("ptr must be non-decreasing (node offsets of the graphs, data.ptr)")
    if batch is not None:
        if batch.dim() != 1 or batch.numel() != num_nodes:
            raise ValueError(
                f"batch must hold one graph id per node, [{num_nodes}], got "
                f"{list(batch.shape)}: pass this batch's batch vector (data.batch)"
            )
        if batch.numel() > 1 and bool((batch[1:] < batch[:-1]).any()):
            raise ValueError(
                "batch is not sorted: the nodes must come graph by graph (batch non-decreasing, "
                "as torch_geometric.utils.to_dense_batch requires and Batch.from_data_list / "
                "PyG's DataLoader produce): reorder the nodes, e.g. perm = batch.argsort(stable="
                "True) applied to x and batch, with edge_index relabelled accordingly"
            )
        if num_graphs is not None and counts.numel() != num_graphs:
            raise ValueError(
                f"batch refers to graph {counts.numel() - 1} but num_graphs={num_graphs}: pass "
                "this batch's number of graphs (data.num_graphs) or leave num_graphs=None"
            )
    total = int(counts.sum())
    if total != num_nodes:
        raise ValueError(
            f"ptr / batch describe {total} nodes but the node features have {num_nodes} rows: "
            "pass this batch's ptr / batch (data.ptr, data.batch)"
        )
    if batch is not None and ptr is not None:
        graphs = torch.arange(counts.numel(), device=counts.device)
        wanted = torch.repeat_interleave(graphs, counts).to(batch.device)
        if not torch.equal(batch, wanted.to(batch.dtype)):
            k = _first(batch != wanted)
            raise ValueError(
                f"batch and ptr disagree: batch puts node {k} in graph {int(batch[k])}, ptr in "
                f"graph {int(wanted[k])}: pass the batch's own batch and ptr (data.batch, "
                "data.ptr), or only one of them"
            )
    largest = int(counts.max()) if counts.numel() else 0
    if max_num_nodes is not None and max_num_nodes < largest:
        raise ValueError(
            f"max_num_nodes={max_num_nodes} is smaller than the largest graph of the batch "
            f"({largest} nodes): pass at least {largest}, or None to use the largest graph"
        )


def _first(mask: Tensor) -> int:
    return int(mask.nonzero()[0, 0])


def _check_within_graphs(index: Tensor, counts: Tensor, name: str, out_of_range: str,
                         across: str) -> tuple[Tensor, Tensor]:
    """Every node of ``index`` ``[2, K]`` in the batch (``counts`` nodes per graph) and both
    nodes of a column in one graph; else a ValueError naming the first offending column, ending
    in ``out_of_range`` / ``across`` (how to fix it). Returns the graphs' first nodes ``[B]`` and
    the graph of every entry ``[2, K]``."""
    counts = counts.to(index.device)
    num_nodes = int(counts.sum())
    lo, hi = int(index.min()), int(index.max())
    if lo < 0 or hi >= num_nodes:
        raise ValueError(f"{name} refers to node {lo if lo < 0 else hi}, outside the batch's "
                         f"[0, {num_nodes}): {out_of_range}")
    starts = torch.cumsum(counts, 0) - counts
    graph = torch.bucketize(index.contiguous(), starts, right=True) - 1
    cross = graph[0] != graph[1]
    if bool(cross.any()):
        k = _first(cross)
        raise ValueError(
            f"{name} column {k}, ({int(index[0, k])}, {int(index[1, k])}), joins "
            f"{'nodes of ' if name == 'pair_index' else ''}graph {int(graph[0, k])} and graph "
            f"{int(graph[1, k])}: {across}")
    return starts, graph


def check_edges(edge_index: Tensor, counts: Tensor) -> None:
    """Check that ``edge_index`` is an integer ``[2, E]`` edge list of the batch's nodes whose
    every edge joins two nodes of the same graph (PyG's collate offsets each graph's edges by the
    graph's first node).

    Args:
        edge_index (LongTensor): ``[2, E]``, global node indices.
        counts (LongTensor): nodes per graph ``[B]``.

    Raises:
        TypeError: if ``edge_index`` is not an integer tensor.
        ValueError: for a wrong shape, a node outside the batch, or an edge between graphs.
    """
    if edge_index.is_floating_point() or edge_index.is_complex() or edge_index.dtype == torch.bool:
        raise TypeError(f"edge_index must be an integer tensor, got {edge_index.dtype}: pass "
                        "edge_index.long()")
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must have shape [2, E], got {list(edge_index.shape)}: "
                         "pass a COO edge list (torch_geometric.utils.to_edge_index converts a "
                         "sparse adjacency)")
    if edge_index.numel() == 0:
        return
    _check_within_graphs(edge_index, counts, "edge_index",
                         "pass this batch's edge_index, batch and ptr together",
                         "every edge must stay within its graph; check edge_index against batch "
                         "/ ptr (PyG's collate offsets each graph's edges by its first node)")


def check_pairs(pair_index: Tensor, counts: Tensor) -> None:
    """Check that a collated ``pair_index`` holds every ordered node pair of every graph exactly
    once (any order), as :mod:`graph_urpe.transforms` store it on the final graphs: ``sum_b
    n_b^2`` columns, nodes in the batch, both nodes of a pair in the same graph, no pair twice.

    Args:
        pair_index (Tensor): ``[2, P]``, global node indices.
        counts (LongTensor): nodes per graph ``[B]``.

    Raises:
        ValueError: naming what is wrong and :data:`RECOMPUTE_PAIRS`.
    """
    counts = counts.to(pair_index.device)
    total = int((counts * counts).sum())
    if pair_index.shape[-1] != total:
        raise ValueError(
            f"pair_index has {pair_index.shape[-1]} pairs but the graphs' node counts need "
            f"sum(n^2) = {total}: {RECOMPUTE_PAIRS}"
        )
    if total == 0:
        return
    index = pair_index.long()
    starts, graph = _check_within_graphs(index, counts, "pair_index", RECOMPUTE_PAIRS,
                                         RECOMPUTE_PAIRS)
    n = int(counts.max())
    local = index - starts[graph]
    cell = graph[0] * (n * n) + local[0] * n + local[1]
    if torch.unique(cell).numel() != total:
        raise ValueError(
            f"pair_index lists some node pair twice (and so misses another): {RECOMPUTE_PAIRS}"
        )


def check_spd(spd: Tensor, pair_index: Tensor, counts: Tensor,
              edge_index: Tensor | None = None) -> None:
    """Check a stored SPD (of a ``pair_index`` that :func:`check_pairs` accepted): values at least
    :data:`~graph_urpe.constants.UNREACHABLE` and, with ``edge_index``, its pairs at distance 1
    exactly the batch's edges (both directions, self-loops and duplicates ignored, as
    :class:`~graph_urpe.transforms.AddShortestPathDistance` reads them), in :math:`O(E + P)`.
    This fails when the edges changed after the transforms (``Data.edge_subgraph``, DropEdge,
    edges added) or the nodes were reordered (``Data.subgraph(perm)`` keeping every node). An SPD
    clipped at 1 by the transform (no stored value above 1) holds every reachable pair at 1; then
    only the edges are checked to be among them.

    Args:
        spd (Tensor): the collated integer ``spd`` ``[P]``.
        pair_index (Tensor): the collated ``pair_index`` ``[2, P]``.
        counts (LongTensor): nodes per graph ``[B]``.
        edge_index (LongTensor, optional): ``[2, E]``, checked by :func:`check_edges` first.
            (default: :obj:`None`, the values only)

    Raises:
        ValueError: for a value below ``-1``, or an SPD that does not match ``edge_index``.
    """
    if spd.numel() == 0:
        return
    low = int(spd.min())
    if low < UNREACHABLE:
        raise ValueError(f"spd holds {low}: shortest-path distances are >= 0, or {UNREACHABLE} "
                         "for unreachable pairs; pass the spd stored by AddShortestPathDistance")
    if edge_index is None:
        return
    counts = counts.to(pair_index.device)
    sizes = counts * counts
    starts, offsets = torch.cumsum(counts, 0) - counts, torch.cumsum(sizes, 0) - sizes

    def slot(index: Tensor) -> Tensor:  # position of each pair (u, v) among the batch's P pairs
        graph = torch.bucketize(index[0], starts, right=True) - 1
        local = index - starts[graph]
        return offsets[graph] + local[0] * counts[graph] + local[1]

    near = torch.zeros(spd.numel(), dtype=torch.bool, device=pair_index.device)
    near[slot(pair_index.long())] = spd.reshape(-1).to(near.device) == 1
    edges = edge_index.long().to(near.device)
    edges = edges[:, edges[0] != edges[1]]
    linked = torch.zeros_like(near)
    linked[torch.cat([slot(edges), slot(edges.flip(0))])] = True
    clipped_at_1 = int(spd.max()) <= 1
    wrong = linked & ~near if clipped_at_1 else linked != near
    if bool(wrong.any()):
        k = _first(wrong)
        graph = int(torch.bucketize(torch.tensor(k), offsets.cpu(), right=True)) - 1
        n, start, local = int(counts[graph]), int(starts[graph]), k - int(offsets[graph])
        u, v = start + local // n, start + local % n
        what = "an edge of edge_index but its stored spd is not 1" if linked[k] else \
            "stored at spd 1 but is no edge of edge_index"
        raise ValueError(
            f"the stored relations do not match edge_index: node pair ({u}, {v}) is {what} "
            "(edges changed or nodes reordered after the transforms, e.g. Data.edge_subgraph, "
            "DropEdge, Data.subgraph(perm)): apply AddShortestPathDistance / "
            "AddResistanceDistance again after them, or pass no pair_index (nor spd / "
            "resistance) to URPEGraphConv to compute the relations from edge_index"
        )
