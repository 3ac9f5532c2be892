"""The relation terms of a graph attention model: ``B`` and ``C`` from the integer relation table
(SPD or reachability, :class:`~graph_urpe.nn.RelationEmbedding`) plus the continuous relations
(:class:`~graph_urpe.nn.ContinuousRelations`), built and evaluated the same way by
:class:`~graph_urpe.nn.URPEGraphConv` and :class:`~graph_urpe.nn.GraphormerEncoder`.

``B`` (RPE and URPE): the table ``N(0, 0.02)`` plus the continuous terms (``N(0, 0.02)`` output
layer). ``C`` (URPE only): the table at ones plus continuous terms starting at 0, so URPE starts
as RPE (Luo et al., NeurIPS 2022, arXiv 2205.13401, Eq. (4); Graphormer-GD's two-kernel form,
Zhang et al., ICLR 2023, for the continuous terms).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from torch import Tensor

from graph_urpe.nn.continuous import ContinuousRelations, DistinctValues
from graph_urpe.nn.relations import CONTINUOUS_RELATIONS, RelationEmbedding, num_graph_relations

__all__ = ["RelationModules", "relation_modules", "relation_term"]


class RelationModules(NamedTuple):
    """The four modules of a graph model's ``B`` and ``C`` (:obj:`None` where the attention or
    the relations have none); a model keeps them under these attribute names, the names of its
    checkpoints' parameters.

    Attributes:
        spatial_bias (RelationEmbedding, optional): ``B``'s table over the relation ids.
        continuous_bias (ContinuousRelations, optional): ``B``'s continuous terms.
        multiplier (RelationEmbedding, optional): ``C``'s table (URPE).
        continuous_multiplier (ContinuousRelations, optional): ``C``'s continuous terms (URPE).
    """

    spatial_bias: RelationEmbedding | None
    continuous_bias: ContinuousRelations | None
    multiplier: RelationEmbedding | None
    continuous_multiplier: ContinuousRelations | None


def relation_modules(attention: str, relations: Sequence[str], max_distance: int,
                     bias_heads: int, multiplier_heads: int,
                     num_kernels: int) -> RelationModules:
    """Build the modules of ``B`` (``attention`` ``"rpe"`` or ``"urpe"``) and ``C`` (``"urpe"``).

    Args:
        attention (str): ``"none"``, ``"rpe"`` or ``"urpe"``.
        relations (list[str]): the checked relation names (``"spd"``, ``"resistance"``).
        max_distance (int): the relation table's distance
            (:func:`~graph_urpe.nn.relations.relation_table_distance`).
        bias_heads (int): outputs of ``B`` per pair (heads, or layers x heads).
        multiplier_heads (int): outputs of ``C`` per pair.
        num_kernels (int): Gaussian basis functions per continuous relation.

    Returns:
        RelationModules: the four modules, :obj:`None` where not used.

    Raises:
        ValueError: for a negative ``max_distance`` or non-positive sizes.
    """
    num_rel = num_graph_relations(max_distance)
    continuous = [r for r in relations if r in CONTINUOUS_RELATIONS]
    parts: list = [None, None, None, None]
    if attention != "none":
        parts[0] = RelationEmbedding(num_rel, bias_heads, init="normal", padding_idx=num_rel - 1)
        if continuous:
            parts[1] = ContinuousRelations(continuous, bias_heads, num_kernels)
    if attention == "urpe":
        parts[2] = RelationEmbedding(num_rel, multiplier_heads, init="ones",
                                     padding_idx=num_rel - 1)
        if continuous:
            parts[3] = ContinuousRelations(continuous, multiplier_heads, num_kernels,
                                           init="zeros")
    return RelationModules(*parts)


def relation_term(table: RelationEmbedding | None, continuous: ContinuousRelations | None,
                  ids: Tensor, values: Mapping[str, Tensor | DistinctValues]) -> Tensor | None:
    """``B`` or ``C`` of a batch: the table gathered at the relation ids plus the continuous
    terms.

    Args:
        table (RelationEmbedding, optional): the table (:obj:`None`: no term).
        continuous (ContinuousRelations, optional): the continuous terms.
        ids (LongTensor): relation ids ``[B, N', N']``.
        values (dict): each continuous relation's :class:`~graph_urpe.nn.DistinctValues`.

    Shapes:
        - **output**: ``[B, heads, N', N']``, or :obj:`None` without a table
    """
    if table is None:
        return None
    out = table(ids)
    if continuous is not None:
        out = out + continuous(values)
    return out
