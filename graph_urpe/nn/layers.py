"""The PyG-native graph layer with URPE attention (:class:`URPEGraphConv`) and the densification
prologue it shares with :class:`~graph_urpe.nn.GraphormerEncoder` (:func:`densify_graphs`).

:class:`URPEGraphConv` is Graphormer's layer (:class:`~graph_urpe.nn.GraphormerLayer`, dense) in
PyG's conventions (like :class:`torch_geometric.nn.GPSConv`): node features in
the sparse ``[num_nodes, C]`` layout with a ``batch`` vector, the shortest-path distances as stored
by :class:`~graph_urpe.transforms.AddShortestPathDistance`, its own ``B`` and ``C`` tables indexed
by the SPD, and the densification done inside. The name follows PyG's ``*Conv`` convention for
layers that map node features to node features of a (batch of) graph(s).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import torch
from torch import Tensor, nn
from torch_geometric.utils import to_dense_batch

from graph_urpe.choices import check_choice
from graph_urpe.dense import batch_vector, from_dense_batch, node_counts, to_dense_spd
from graph_urpe.nn.block import GraphormerLayer
from graph_urpe.nn.relations import (
    RelationEmbedding,
    graph_relation_ids,
    num_graph_relations,
    token_padding_mask,
)

__all__ = ["Attention", "DenseGraphs", "URPEGraphConv", "densify_graphs"]

#: The relative-position switch of every model: none, RPE (``B``), URPE (``B`` and ``C``).
Attention = Literal["none", "rpe", "urpe"]


class DenseGraphs(NamedTuple):
    """A PyG batch densified for attention (:func:`densify_graphs`).

    Attributes:
        h (Tensor): node features ``[B, N', C]``, the graph token in slot 0 if one was given
            (``N' = N + 1``), else ``N' = N``; padded slots hold 0.
        key_padding_mask (BoolTensor): ``[B, N']``, True at padded slots.
        ids (LongTensor): relation ids ``[B, N', N']`` of
            :func:`~graph_urpe.nn.graph_relation_ids` (SPD, unreachable, graph token, padding).
        batch (LongTensor): graph of each node ``[num_nodes]``.
        counts (LongTensor): nodes per graph ``[B]``.
        max_num_nodes (int): ``N``.
    """

    h: Tensor
    key_padding_mask: Tensor
    ids: Tensor
    batch: Tensor
    counts: Tensor
    max_num_nodes: int


def densify_graphs(
    x: Tensor,
    spd: Tensor,
    batch: Tensor | None,
    ptr: Tensor | None,
    token: Tensor | None,
    max_distance: int,
    num_graphs: int | None = None,
    max_num_nodes: int | None = None,
    validate: bool = False,
) -> DenseGraphs:
    """Densify a batch once: node features, the graph token, key padding and relation ids.

    The one host read is the largest graph size ``N`` (skipped when ``max_num_nodes`` is given).

    Args:
        x (Tensor): node features ``[num_nodes, C]``.
        spd (Tensor): the collated ``spd`` of
            :class:`~graph_urpe.transforms.AddShortestPathDistance`, ``[sum_b n_b^2]``.
        batch (LongTensor, optional): graph of each node ``[num_nodes]``.
        ptr (LongTensor, optional): node offsets ``[B + 1]`` (preferred to ``batch``).
        token (Tensor, optional): graph-token state ``[B, C]`` or ``[1, C]``, prepended to every
            graph; :obj:`None`: no token.
        max_distance (int): largest distinguished SPD of the relation ids.
        num_graphs (int, optional): ``B``. (default: :obj:`None`, from ``ptr`` / ``batch``)
        max_num_nodes (int, optional): ``N``. (default: :obj:`None`, the largest graph)
        validate (bool, optional): check the SPD length (a host read). (default: :obj:`False`)

    Raises:
        ValueError: if ``spd`` is missing, or (see :func:`~graph_urpe.dense.to_dense_spd`) not
            integer or not ``sum_b n_b^2`` long.
    """
    if spd is None:
        raise ValueError("spd is missing: pass the batch's `spd` (build the dataset with "
                         "pre_transform=graph_urpe.transforms.AddShortestPathDistance()).")
    counts = node_counts(spd, batch, ptr, num_graphs)
    if max_num_nodes is None:
        max_num_nodes = int(counts.max()) if counts.numel() else 0  # the one host read
    spd_dense, padding_mask = to_dense_spd(spd, batch, ptr, num_graphs=num_graphs,
                                           max_num_nodes=max_num_nodes, validate=validate)
    b, n = padding_mask.shape
    vec = batch_vector(x.shape[0], counts, batch)
    h, _ = to_dense_batch(x, vec, batch_size=b, max_num_nodes=n)
    key_padding_mask = padding_mask
    if token is not None:
        h = torch.cat([token.expand(b, -1).unsqueeze(1).to(h.dtype), h], dim=1)
        key_padding_mask = token_padding_mask(padding_mask)  # [B, N + 1]
    ids = graph_relation_ids(spd_dense, padding_mask, max_distance, graph_token=token is not None)
    return DenseGraphs(h, key_padding_mask, ids, vec, counts, max_num_nodes)


class URPEGraphConv(nn.Module):
    r"""Graphormer layer with URPE attention in PyG's sparse node layout (PyG-native).

    For each graph of the batch, self-attention over its nodes (and optionally a graph token) with
    the spatial bias ``B[i, j] = b_{SPD(i, j)}`` (Ying et al., NeurIPS 2021, Eq. (6)) and the URPE
    multiplier ``C[i, j] = c_{SPD(i, j)}`` (Luo et al., NeurIPS 2022, Eq. (4)), inside a pre-LN
    Transformer layer (:class:`GraphormerLayer`):
    ``Attn = (softmax(QK^T / sqrt(d) + B) ⊙ C) V``. Nodes attend only within their own graph.

    The layer owns its ``B`` and ``C`` tables (per-head scalars over the relation ids of
    :func:`~graph_urpe.nn.graph_relation_ids`: SPD ``0..max_distance``, unreachable, graph token,
    padding; ``C`` starts at ones, so URPE starts as RPE). Extra per-pair terms computed by the
    caller (e.g. an edge encoding) can be passed as ``attn_bias`` (added to ``B``) and
    ``multiplier`` (multiplied into ``C``), dense ``[B, H, N', N']`` with ``N' = N (+ 1)``.

    With identical node features and no graph token, ``attention="rpe"`` gives every node of a
    graph the same output (the rows of ``softmax(B)`` sum to 1 and all values are equal), while
    ``"urpe"`` does not (the rows of ``softmax(B) ⊙ C`` need not): Luo et al., 2022, Sec. 3.

    Args:
        channels (int): node width ``C``.
        heads (int): attention heads ``H``.
        attention (str, optional): ``"none"``, ``"rpe"`` (``B``) or ``"urpe"`` (``B`` and ``C``).
            (default: :obj:`"urpe"`)
        max_distance (int, optional): largest distinguished SPD. (default: :obj:`20`)
        ffn_channels (int, optional): FFN hidden width. (default: :obj:`None`, ``2 * channels``)
        graph_token (bool, optional): prepend a learned graph token to each graph; its updated
            state is returned too. (default: :obj:`False`)
        dropout (float, optional): residual dropout. (default: :obj:`0.0`)
        attention_dropout (float, optional): attention-weight dropout. (default: :obj:`0.0`)
        activation_dropout (float, optional): FFN activation dropout. (default: :obj:`0.0`)

    Shapes:
        - **x**: ``[num_nodes, channels]`` float
        - **batch**: ``[num_nodes]`` long, graph of each node (:obj:`None`: one graph)
        - **spd**: ``[sum_b n_b^2]`` int, the collated ``spd`` of
          :class:`~graph_urpe.transforms.AddShortestPathDistance`
        - **ptr**: ``[B + 1]`` long (optional; PyG batches have it)
        - **token**: ``[B, channels]`` (optional; default: the learned token)
        - **output**: ``[num_nodes, channels]``; with ``graph_token=True`` the pair
          ``(nodes, token [B, channels])``; with ``return_attention=True`` one more element, the
          ``(P, P ⊙ C)`` maps ``[B, H, N', N']`` (padded)

    Raises:
        ValueError: for an unknown ``attention``, a negative ``max_distance``, an ``spd`` that
            is missing, not integer, or shorter than the batch's ``sum_b n_b^2`` pairs, an
            ``edge_index`` passed where ``batch`` goes (PyG's ``conv(x, edge_index, batch)``),
            or ``x`` not ``[num_nodes, channels]``.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from torch_geometric.loader import DataLoader
        >>> from graph_urpe.nn import URPEGraphConv
        >>> from graph_urpe.transforms import AddShortestPathDistance
        >>> _ = torch.manual_seed(0)
        >>> x = torch.randn(16).repeat(4, 1)  # four nodes with identical features
        >>> path = Data(x=x, edge_index=torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]]))
        >>> star = Data(x=x, edge_index=torch.tensor([[0, 1, 0, 2, 0, 3], [1, 0, 2, 0, 3, 0]]))
        >>> to_spd = AddShortestPathDistance(paths=False)
        >>> batch = next(iter(DataLoader([to_spd(path), to_spd(star)], batch_size=2)))
        >>> rpe = URPEGraphConv(16, heads=4, attention="rpe", max_distance=5)
        >>> urpe = URPEGraphConv(16, heads=4, attention="urpe", max_distance=5)
        >>> with torch.no_grad():
        ...     _ = urpe.multiplier.weight[:-1].uniform_(0.0, 2.0)  # a trained C (padding row 0)
        ...     out_rpe = rpe(batch.x, batch.batch, batch.spd, ptr=batch.ptr)
        ...     out_urpe = urpe(batch.x, batch.batch, batch.spd, ptr=batch.ptr)
        >>> out_urpe.shape
        torch.Size([8, 16])
        >>> bool(out_rpe[0].allclose(out_rpe[1], atol=1e-6))  # RPE: end and inner node alike
        True
        >>> bool(out_urpe[0].allclose(out_urpe[1], atol=1e-6))  # URPE tells them apart
        False
    """

    def __init__(
        self,
        channels: int,
        heads: int,
        attention: Attention = "urpe",
        max_distance: int = 20,
        ffn_channels: int | None = None,
        graph_token: bool = False,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        check_choice("attention", attention, Attention)
        num_rel = num_graph_relations(max_distance)
        self.channels = channels
        self.heads = heads
        self.attention = attention
        self.max_distance = max_distance
        self.layer = GraphormerLayer(
            channels, heads, 2 * channels if ffn_channels is None else ffn_channels,
            dropout, attention_dropout, activation_dropout,
        )
        self.spatial_bias = None
        self.multiplier = None
        if attention != "none":
            self.spatial_bias = RelationEmbedding(num_rel, heads, init="normal", padding_idx=num_rel - 1)
        if attention == "urpe":
            self.multiplier = RelationEmbedding(num_rel, heads, init="ones", padding_idx=num_rel - 1)
        self.graph_token = nn.Parameter(torch.empty(1, channels)) if graph_token else None
        self.reset_parameters()

    def no_weight_decay(self) -> set[str]:
        """The graph token is an embedding: no weight decay (timm convention)."""
        return {"graph_token"} if self.graph_token is not None else set()

    def reset_parameters(self) -> None:
        """Reset the layer, the tables (``B`` ``N(0, 0.02)``, ``C`` ones) and the token
        (``N(0, 0.02)``)."""
        self.layer.reset_parameters()
        for table in (self.spatial_bias, self.multiplier):
            if table is not None:
                table.reset_parameters()
        if self.graph_token is not None:
            nn.init.normal_(self.graph_token, 0.0, 0.02)

    def forward(
        self,
        x: Tensor,
        batch: Tensor | None,
        spd: Tensor,
        ptr: Tensor | None = None,
        token: Tensor | None = None,
        attn_bias: Tensor | None = None,
        multiplier: Tensor | None = None,
        num_graphs: int | None = None,
        max_num_nodes: int | None = None,
        return_attention: bool = False,
    ):
        """Update node features (and the graph token); see the class docstring."""
        self._check_call(x, batch)
        use_token = self.graph_token is not None
        token = (self.graph_token if token is None else token) if use_token else None
        h, key_padding_mask, ids, batch, counts, _ = densify_graphs(
            x, spd, batch, ptr, token, self.max_distance,
            num_graphs=num_graphs, max_num_nodes=max_num_nodes,
        )
        bias = None if self.spatial_bias is None else self.spatial_bias(ids)
        if attn_bias is not None:
            bias = attn_bias if bias is None else bias + attn_bias
        mult = None if self.multiplier is None else self.multiplier(ids)
        if multiplier is not None:
            mult = multiplier if mult is None else mult * multiplier
        res = self.layer(h, bias, mult, key_padding_mask, need_weights=return_attention)
        h, weights = res if return_attention else (res, None)
        out = [from_dense_batch(h, batch, counts, offset=int(use_token))]
        if use_token:
            out.append(h[:, 0])
        if return_attention:
            out.append(weights)
        return out[0] if len(out) == 1 else tuple(out)

    def _check_call(self, x: Tensor, batch: Tensor | None) -> None:
        """Refuse PyG's ``(x, edge_index, batch)`` call and a node width other than ``channels``,
        each with the call that works."""
        right = ("conv(data.x, data.batch, data.spd, ptr=data.ptr), with the dataset built with "
                 "pre_transform=graph_urpe.transforms.AddShortestPathDistance()")
        if isinstance(batch, Tensor) and (batch.dim() != 1 or batch.shape[0] != x.shape[0]):
            if batch.dim() == 2 and batch.shape[0] == 2:
                raise ValueError(
                    f"{type(self).__name__} got an edge_index [2, {batch.shape[1]}] where it takes "
                    "the batch vector: it reads the graph from shortest-path distances, not "
                    f"edges, so call it as {right}."
                )
            raise ValueError(
                f"batch must be the graph index of each node, shape [{x.shape[0]}], got "
                f"{tuple(batch.shape)}: call {right}."
            )
        if x.dim() != 2 or x.shape[-1] != self.channels:
            raise ValueError(
                f"x must have shape [num_nodes, {self.channels}] for "
                f"{type(self).__name__}({self.channels}, ...), got {tuple(x.shape)}: project the "
                f"node features to {self.channels} channels first (e.g. torch.nn.Linear("
                f"{x.shape[-1]}, {self.channels})) or build {type(self).__name__}("
                f"{x.shape[-1]}, ...)."
            )

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.channels}, heads={self.heads}, "
            f"attention={self.attention!r}, graph_token={self.graph_token is not None})"
        )
