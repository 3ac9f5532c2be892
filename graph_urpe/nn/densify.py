"""Densify a PyG batch once for graph attention: node features, the graph token, key padding,
relation ids and the continuous relations (:func:`densify_graphs`), the prologue shared by
:class:`~graph_urpe.nn.URPEGraphConv` and :class:`~graph_urpe.nn.GraphormerEncoder`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.utils import to_dense_batch

from graph_urpe.batch_checks import check_edges, check_nodes, check_spd
from graph_urpe.constants import UNREACHABLE
from graph_urpe.dense import (
    batch_vector,
    dense_layout,
    node_counts,
    to_dense_pair,
)
from graph_urpe.dense_relations import dense_relations_from_edges
from graph_urpe.nn.continuous import DistinctValues, distinct_values
from graph_urpe.nn.relations import CONTINUOUS_RELATIONS, graph_relation_ids, token_padding_mask

__all__ = ["DenseGraphs", "densify_graphs"]

#: The transform that stores each relation (named in the error for a missing one).
_STORED_BY = {"spd": "AddShortestPathDistance()", "resistance": "AddResistanceDistance()"}


class DenseGraphs(NamedTuple):
    """A PyG batch densified for attention (:func:`densify_graphs`).

    Attributes:
        h (Tensor): node features ``[B, N', C]``, the graph token in slot 0 if one was given
            (``N' = N + 1``), else ``N' = N``; padded slots hold 0.
        key_padding_mask (BoolTensor): ``[B, N']``, True at padded slots.
        ids (LongTensor): relation ids ``[B, N', N']`` of
            :func:`~graph_urpe.nn.graph_relation_ids` (SPD or reachability, unreachable, graph
            token, padding).
        values (dict[str, DistinctValues]): each continuous relation's padded values
            ``[B, N', N']`` (:data:`~graph_urpe.constants.UNREACHABLE` at the token, padding
            and unreachable pairs) as its :func:`~graph_urpe.nn.continuous.distinct_values`,
            computed once and read by ``B`` and ``C``.
        batch (LongTensor): graph of each node ``[num_nodes]``.
        counts (LongTensor): nodes per graph ``[B]``.
        max_num_nodes (int): ``N``.
    """

    h: Tensor
    key_padding_mask: Tensor
    ids: Tensor
    values: dict[str, DistinctValues]
    batch: Tensor
    counts: Tensor
    max_num_nodes: int


def densify_graphs(
    x: Tensor,
    relations: Mapping[str, Tensor | None],
    pair_index: Tensor | None,
    batch: Tensor | None,
    ptr: Tensor | None,
    token: Tensor | None,
    max_distance: int,
    num_graphs: int | None = None,
    max_num_nodes: int | None = None,
    validate: bool = False,
    edge_index: Tensor | None = None,
) -> DenseGraphs:
    """Densify a batch once: node features, the graph token, key padding, relation ids and the
    continuous relations.

    The relations are read from their stored values (pair layout of :mod:`graph_urpe.transforms`)
    when ``pair_index`` is given, else computed from ``edge_index``
    (:func:`~graph_urpe.dense_relations.dense_relations_from_edges`). The one host read is the
    largest graph size ``N`` (skipped when ``max_num_nodes`` is given).

    Args:
        x (Tensor): node features ``[num_nodes, C]``.
        relations (Mapping[str, Tensor]): the relations to use (keys, ``"spd"`` and / or
            ``"resistance"``; the first key decides the order only) and their collated values
            ``[P]`` (:obj:`None` when computed from ``edge_index``).
        pair_index (LongTensor, optional): the collated ``pair_index`` ``[2, P]``.
        batch (LongTensor, optional): graph of each node ``[num_nodes]``.
        ptr (LongTensor, optional): node offsets ``[B + 1]`` (preferred to ``batch``).
        token (Tensor, optional): graph-token state ``[B, C]`` or ``[1, C]``, prepended to every
            graph; :obj:`None`: no token.
        max_distance (int): largest distinguished SPD of the relation ids (0 without ``"spd"``).
        num_graphs (int, optional): ``B``. (default: :obj:`None`, from ``ptr`` / ``batch``)
        max_num_nodes (int, optional): ``N``. (default: :obj:`None`, the largest graph)
        validate (bool, optional): check the node layout (``batch`` sorted, consistent with
            ``ptr``, sizes consistent, :obj:`max_num_nodes` large enough), the edges (within
            their graph), the stored pair layout and a stored SPD (values, and against
            ``edge_index`` when given) (:mod:`graph_urpe.batch_checks`; host reads).
            (default: :obj:`False`)
        edge_index (LongTensor, optional): ``[2, E]``, to compute the relations, or to check
            stored ones against.

    Raises:
        ValueError: if a relation is missing (neither stored nor computable), or (see
            :func:`~graph_urpe.dense.to_dense_pair`) malformed; with :obj:`validate`, for
            anything :mod:`graph_urpe.batch_checks` refuses.
    """
    names = list(relations)
    computed = pair_index is None
    if computed and edge_index is None:
        raise ValueError("pair_index is missing: pass the batch's stored relations (build the "
                         "dataset with pre_transform=graph_urpe.transforms."
                         "AddShortestPathDistance()) or its edge_index to compute them.")
    if batch is None and ptr is None:  # one graph: all rows of x
        ptr = torch.tensor([0, x.shape[0]], device=x.device)
    counts = node_counts(x, batch, ptr, num_graphs)
    if validate:
        check_nodes(x.shape[0], counts, batch, num_graphs, max_num_nodes, ptr=ptr)
    if max_num_nodes is None:
        max_num_nodes = int(counts.max()) if counts.numel() else 0  # the one host read
    _, padding_mask = dense_layout(counts, max_num_nodes)
    if computed:
        dense = dense_relations_from_edges(edge_index, counts, max_num_nodes, names,
                                           validate=validate)
    else:
        dense = {}
        for name in names:
            value = relations[name]
            if value is None:
                raise ValueError(f"relation {name!r} is missing: pass {name}=data.{name} (stored "
                                 f"by graph_urpe.transforms.{_STORED_BY.get(name, 'the transforms')}"
                                 "; build the dataset with it if the graphs lack it)")
            if name in CONTINUOUS_RELATIONS and (value.dim() != 1 or value.dtype == torch.bool
                                                 or value.is_complex()):
                raise TypeError(f"{name} must be a real vector aligned with pair_index ([P], "
                                f"float32 from the transforms), got {value.dtype} of shape "
                                f"{list(value.shape)}: pass data.{name}")
            if name == "spd" and (value.is_floating_point() or value.is_complex()
                                  or value.dtype == torch.bool):
                raise TypeError(f"spd must hold integer shortest-path distances (int16 from "
                                f"AddShortestPathDistance), got {value.dtype}: pass data.spd (a "
                                "resistance distance goes to resistance=)")
            dense[name] = to_dense_pair(value, pair_index, batch, ptr, num_graphs=num_graphs,
                                        max_num_nodes=max_num_nodes, validate=validate,
                                        name=name)[0]
        if validate and edge_index is not None:  # the stored relations must be edge_index's
            check_edges(edge_index, counts)
        if validate and "spd" in dense:
            check_spd(relations["spd"], pair_index, counts, edge_index)
    b, n = padding_mask.shape
    vec = batch_vector(x.shape[0], counts, batch)
    h, _ = to_dense_batch(x, vec, batch_size=b, max_num_nodes=n)
    key_padding_mask = padding_mask
    pad = (1, 0, 1, 0)
    if token is not None:
        h = torch.cat([token.expand(b, -1).unsqueeze(1).to(h.dtype), h], dim=1)
        key_padding_mask = token_padding_mask(padding_mask)  # [B, N + 1]
    if "spd" in dense:
        source = dense["spd"].long()
    else:  # reachability only: distance 0 for every reachable pair
        source = torch.where(dense[names[0]] >= 0, 0, UNREACHABLE)
        max_distance = 0
    ids = graph_relation_ids(source, padding_mask, max_distance, graph_token=token is not None)
    values = {}
    for name in names:
        if name in CONTINUOUS_RELATIONS:  # real values keep their dtype (float64 stays float64)
            value = dense[name] if dense[name].is_floating_point() else dense[name].float()
            if token is not None:
                value = F.pad(value, pad, value=float(UNREACHABLE))
            values[name] = distinct_values(value)
    return DenseGraphs(h, key_padding_mask, ids, values, vec, counts, max_num_nodes)
