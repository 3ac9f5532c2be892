"""Pairwise relations -> per-head attention bias ``B`` and multiplier ``C``.

*Integer* relations (:class:`RelationEmbedding`): a *relation id* names the relation between a
query ``i`` and a key ``j``: the relative position ``j - i`` (possibly bucketed, T5-style) for
sequences, or the shortest-path distance (SPD) for graphs. Each id gets one learnable scalar per
head, which gives the Toeplitz matrices ``B[i, j] = b_{j-i}`` and ``C[i, j] = c_{j-i}`` of URPE
(Luo et al., NeurIPS 2022, arXiv 2205.13401, Eq. (4)) or Graphormer's spatial encoding
``b_{SPD(i, j)}`` (Ying et al., NeurIPS 2021, Eq. (6)).

*Continuous* relations, such as the resistance distance of Graphormer-GD (Zhang, Luo, Wang, He,
ICLR 2023), are embedded by :mod:`graph_urpe.nn.continuous`; this module names them
(:data:`CONTINUOUS_RELATIONS`).

A graph model selects its relations by name (:data:`GraphRelation`: ``"spd"``, ``"resistance"``;
the name is also the attribute the transforms store). ``B`` and ``C`` of a graph are the integer
table over the relation ids (:func:`graph_relation_ids`; from the SPD when ``"spd"`` is selected,
else reachable / unreachable only) plus the continuous terms; the continuous ``C`` terms start at
0, so ``C`` starts at the table's ones and URPE starts as RPE.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from graph_urpe.choices import check_at_least, check_choice
from graph_urpe.constants import UNREACHABLE

__all__ = [
    "CONTINUOUS_RELATIONS",
    "GraphRelation",
    "RelationEmbedding",
    "check_relations",
    "graph_relation_ids",
    "num_graph_relations",
    "num_relative_positions",
    "relation_table_distance",
    "relative_position_ids",
    "token_padding_mask",
]

Init = Literal["ones", "normal", "zeros"]

#: Pairwise relations a graph model can read, by the attribute name the transforms store:
#: ``"spd"`` (:class:`~graph_urpe.transforms.AddShortestPathDistance`, integer) and
#: ``"resistance"`` (:class:`~graph_urpe.transforms.AddResistanceDistance`, continuous).
GraphRelation = Literal["spd", "resistance"]

#: The continuous relations among :data:`GraphRelation` (Gaussian basis functions).
CONTINUOUS_RELATIONS: tuple[str, ...] = ("resistance",)


def check_relations(relations: Sequence[str]) -> list[str]:
    """The relations as a list of names, checked: non-empty, no repeats, each a
    :data:`GraphRelation`.

    Raises:
        ValueError: naming the offending entry and the choices.
    """
    names = [relations] if isinstance(relations, str) else list(relations)
    if not names or len(set(names)) != len(names):
        raise ValueError(f"relations must be a non-empty list without repeats, e.g. ['spd', "
                         f"'resistance'], got {relations!r}.")
    for name in names:
        check_choice("relations entry", name, GraphRelation)
    return names


class RelationEmbedding(nn.Module):
    r"""Per-head scalar table indexed by relation ids.

    Maps ids of shape ``[..., Nq, Nk]`` to ``[..., H, Nq, Nk]``. With ``init="ones"`` it is the URPE
    multiplier ``C`` (so URPE starts as plain RPE, as in the official code); with
    ``init="normal"`` (``N(0, std)``) or ``"zeros"`` it is the RPE bias ``B``. The row
    ``padding_idx`` is fixed at 0 and receives no gradient, so padded relations get ``C = 0``.

    Source: Luo et al., NeurIPS 2022 (arXiv 2205.13401), Eq. (4) (``B`` and ``C`` as functions
    of the relation between ``i`` and ``j``).

    Args:
        num_relations (int): number of distinct ids (ids lie in ``[0, num_relations)``).
        num_heads (int): number of attention heads ``H``.
        init (str, optional): ``"ones"``, ``"normal"`` or ``"zeros"``. (default: :obj:`"ones"`)
        padding_idx (int, optional): id whose value is fixed to 0. (default: :obj:`None`)
        std (float, optional): standard deviation for ``init="normal"``. (default: :obj:`0.02`)

    Shapes:
        - **input**: ``[..., Nq, Nk]`` (int64)
        - **output**: ``[..., H, Nq, Nk]`` (the table's dtype, float32 by default)

    Raises:
        ValueError: for an unknown ``init``, non-positive sizes, or a ``padding_idx`` out of range.
        IndexError: (from :func:`torch.nn.functional.embedding`) for ids out of range.
    """

    def __init__(
        self,
        num_relations: int,
        num_heads: int,
        init: Init = "ones",
        padding_idx: int | None = None,
        std: float = 0.02,
    ) -> None:
        super().__init__()
        check_choice("init", init, Init)
        check_at_least(1, num_relations=num_relations, num_heads=num_heads)
        if padding_idx is not None and not 0 <= padding_idx < num_relations:
            raise ValueError(
                f"padding_idx must lie in [0, {num_relations}), got {padding_idx}."
            )
        self.num_relations = num_relations
        self.num_heads = num_heads
        self.init = init
        self.padding_idx = padding_idx
        self.std = std
        self.weight = nn.Parameter(torch.empty(num_relations, num_heads))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-initialise the table (ones, N(0, std) or zeros; the padding row to 0)."""
        with torch.no_grad():
            if self.init == "ones":
                self.weight.fill_(1.0)
            elif self.init == "normal":
                self.weight.normal_(0.0, self.std)
            else:
                self.weight.zero_()
            if self.padding_idx is not None:
                self.weight[self.padding_idx].zero_()

    def forward(self, ids: Tensor) -> Tensor:
        """Gather the per-head values for ``ids`` ``[..., Nq, Nk]`` -> ``[..., H, Nq, Nk]``."""
        out = nn.functional.embedding(ids, self.weight, padding_idx=self.padding_idx)
        # One copy into the attention layout here saves a strided read in every layer that uses it.
        return out.movedim(-1, -3).contiguous()

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.num_relations}, num_heads={self.num_heads}, "
            f"init={self.init!r}, padding_idx={self.padding_idx})"
        )


def num_relative_positions(
    max_distance: int, causal: bool = False, num_buckets: int | None = None
) -> int:
    """Number of distinct ids produced by :func:`relative_position_ids`.

    Args:
        max_distance (int): distances beyond this share one id (clipping, or the last T5 bucket).
        causal (bool, optional): one-sided distances ``i - j >= 0``. (default: :obj:`False`)
        num_buckets (int, optional): T5 bucket count; :obj:`None` gives one id per distance.
            (default: :obj:`None`)

    Returns:
        int: ``2 * max_distance + 1`` (bidirectional) or ``max_distance + 1`` (causal) in unique
        mode; ``num_buckets`` in T5 mode.

    Raises:
        ValueError: for a negative ``max_distance`` or too few buckets.
    """
    _check_args(max_distance, causal, num_buckets)
    if num_buckets is not None:
        return num_buckets
    return max_distance + 1 if causal else 2 * max_distance + 1


def _check_args(max_distance: int, causal: bool, num_buckets: int | None) -> None:
    check_at_least(0, max_distance=max_distance)
    if num_buckets is not None:
        min_buckets = 2 if causal else 4
        if num_buckets < min_buckets or (not causal and num_buckets % 2):
            raise ValueError(
                f"num_buckets must be >= {min_buckets}"
                + ("" if causal else " and even (half per direction)")
                + f", got {num_buckets}."
            )


def _t5_bucket(distance: Tensor, num_buckets: int, max_distance: int) -> Tensor:
    """T5 bucket of non-negative distances: exact below ``num_buckets // 2``, log-spaced above."""
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    d = distance.clamp(min=1).float()
    span = max(max_distance, max_exact + 1) / max_exact
    large = max_exact + (
        torch.log(d / max_exact) / math.log(span) * (num_buckets - max_exact)
    ).long()
    large = large.clamp(max=num_buckets - 1)
    return torch.where(is_small, distance, large)


def relative_position_ids(
    q_len: int,
    k_len: int | None = None,
    *,
    max_distance: int,
    causal: bool = False,
    num_buckets: int | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    r"""Toeplitz relation ids for sequences: a function of ``j - i`` only.

    Unique mode (``num_buckets=None``): bidirectional id ``clamp(j - i, -M, M) + M``; causal id
    ``clamp(i - j, 0, M)`` (future keys ``j > i`` get id 0; the causal mask hides them).
    T5 mode: Raffel et al., JMLR 2020 (T5), relative position buckets; bidirectional uses half of
    the buckets per direction (keys after the query in the upper half).

    Source: Luo et al., NeurIPS 2022 (arXiv 2205.13401), Sec. 3 (``b_{j-i}``, ``c_{j-i}``).

    Args:
        q_len (int): number of queries ``Nq``.
        k_len (int, optional): number of keys ``Nk``. (default: :obj:`None`, same as ``q_len``)
        max_distance (int): ``M``, the largest distinguished distance.
        causal (bool, optional): one-sided distances. (default: :obj:`False`)
        num_buckets (int, optional): T5 buckets. (default: :obj:`None`)
        device (torch.device, optional): device of the result. (default: :obj:`None`)

    Shapes:
        - **output**: ``[Nq, Nk]`` int64 with values in
          ``[0, num_relative_positions(max_distance, causal, num_buckets))``

    Raises:
        ValueError: for a negative ``max_distance`` or invalid ``num_buckets``.
    """
    _check_args(max_distance, causal, num_buckets)
    k_len = q_len if k_len is None else k_len
    i = torch.arange(q_len, device=device)[:, None]
    j = torch.arange(k_len, device=device)[None, :]
    rel = j - i
    if num_buckets is None:
        if causal:
            return (-rel).clamp(0, max_distance)
        return rel.clamp(-max_distance, max_distance) + max_distance
    if causal:
        return _t5_bucket((-rel).clamp(min=0), num_buckets, max_distance)
    half = num_buckets // 2
    return _t5_bucket(rel.abs(), half, max_distance) + half * (rel > 0).long()


def token_padding_mask(padding_mask: Tensor) -> Tensor:
    """Prepend a never-padded slot (the graph token) to a ``[B, N]`` bool mask -> ``[B, N + 1]``.

    Padded as integers: Inductor's CPU code generation (torch 2.13) fails to compile a padded
    boolean mask that is reduced later (mixed ``VecMask`` types)."""
    return F.pad(padding_mask.to(torch.uint8), (1, 0)).bool()


def num_graph_relations(max_distance: int) -> int:
    """Number of relation ids made by :func:`graph_relation_ids`: ``max_distance + 4``.

    Ids: ``0 .. max_distance`` (distance), ``max_distance + 1`` (unreachable), ``max_distance + 2``
    (graph token), ``max_distance + 3`` (padding). Size a :class:`RelationEmbedding` with it and
    ``padding_idx=max_distance + 3``.

    Raises:
        ValueError: if ``max_distance`` is negative.
    """
    check_at_least(0, max_distance=max_distance)
    return max_distance + 4


def graph_relation_ids(
    spd: Tensor, padding_mask: Tensor, max_distance: int, graph_token: bool = True
) -> Tensor:
    r"""Relation ids of all (query, key) pairs of a graph attention map, from the padded SPD.

    With ``graph_token=True`` position 0 is the graph token and positions ``1..N`` the (padded)
    nodes; without it positions ``0..N-1`` are the nodes. The id of a cell is, in order of
    precedence: padding (``max_distance + 3``) if either node is a padded slot; graph token
    (``max_distance + 2``) if either position is the token; unreachable (``max_distance + 1``) if
    ``SPD = UNREACHABLE``; else ``min(SPD, max_distance)``.

    Source: Ying et al., NeurIPS 2021, Eq. (6) (spatial encoding with a virtual distance for the
    graph token); Luo et al., NeurIPS 2022, Eq. (4) (``C`` indexed by the same relation).

    Args:
        spd (LongTensor): padded SPD ``[B, N, N]``, from :func:`graph_urpe.dense.to_dense_pair`.
        padding_mask (BoolTensor): ``[B, N]``, ``True`` at padded node slots.
        max_distance (int): largest distinguished distance.
        graph_token (bool, optional): prepend the graph token's row and column.
            (default: :obj:`True`)

    Shapes:
        - **output**: long ``[B, N + 1, N + 1]`` (``[B, N, N]`` without the token), values in
          ``[0, num_graph_relations(max_distance))``

    Raises:
        ValueError: if shapes disagree or ``max_distance`` is negative.
    """
    num_graph_relations(max_distance)
    if spd.dim() != 3 or padding_mask.shape != spd.shape[:2] or spd.shape[1] != spd.shape[2]:
        raise ValueError(
            f"spd must be [B, N, N] and padding_mask [B, N]; got {tuple(spd.shape)} and "
            f"{tuple(padding_mask.shape)}."
        )
    unreachable, token, pad = max_distance + 1, max_distance + 2, max_distance + 3
    ids = torch.where(spd == UNREACHABLE, unreachable, spd.clamp(min=0, max=max_distance))
    if graph_token:
        ids = F.pad(ids, (1, 0, 1, 0), value=token)
        padding_mask = token_padding_mask(padding_mask)
    return ids.masked_fill(padding_mask[:, :, None] | padding_mask[:, None, :], pad)


def relation_table_distance(relations: Sequence[str], max_distance: int) -> int:
    """The ``max_distance`` of the relation ids (:func:`graph_relation_ids`) of a model reading
    ``relations``: ``max_distance`` when ``"spd"`` is among them; else ``0`` (the ids then tell
    only reachable from unreachable pairs, read off the first continuous relation).

    Raises:
        ValueError: if ``max_distance < 1`` with ``"spd"``: as for
            :class:`~graph_urpe.transforms.AddShortestPathDistance`, clipping at 0 would put every
            reachable pair, a node and itself included, at one distance (no SPD read at all).
    """
    if "spd" not in relations:
        return 0
    if max_distance < 1:
        raise ValueError(
            f"max_distance must be >= 1 with the 'spd' relation (as AddShortestPathDistance's), "
            f"got {max_distance!r}: at 0 every reachable pair, a node and itself included, would "
            "share one table entry; to read no distance use relations=['resistance'] or "
            "attention='none'"
        )
    return max_distance

