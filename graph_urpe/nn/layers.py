"""Graph Transformer layers with URPE attention: dense (:class:`GraphormerLayer`) and PyG-native
(:class:`URPEGraphConv`).

:class:`GraphormerLayer` is Graphormer's pre-LayerNorm encoder layer on padded ``[B, N, C]`` node
tensors, for users who batch themselves (pass any per-head ``B`` and ``C``). :class:`URPEGraphConv`
is the same layer in PyG's conventions (like :class:`torch_geometric.nn.GPSConv`): node features in
the sparse ``[num_nodes, C]`` layout with a ``batch`` vector, the shortest-path distances as stored
by :class:`~graph_urpe.transforms.AddShortestPathDistance`, its own ``B`` and ``C`` tables indexed
by the SPD, and the densification done inside. The name follows PyG's ``*Conv`` convention for
layers that map node features to node features of a (batch of) graph(s).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch_geometric.utils import to_dense_batch

from graph_urpe.dense import batch_vector, from_dense_batch, node_counts, to_dense_spd
from graph_urpe.nn.attention import MultiheadURPEAttention
from graph_urpe.nn.relations import (
    RelationEmbedding,
    graph_relation_ids,
    num_graph_relations,
    token_padding_mask,
)

__all__ = ["ATTENTION_KINDS", "GraphormerLayer", "URPEGraphConv"]

ATTENTION_KINDS = ("none", "rpe", "urpe")


class GraphormerLayer(nn.Module):
    r"""Pre-LayerNorm Transformer encoder layer with URPE attention (Graphormer's layer), dense.

    .. math::
        \mathbf{h}' &= \mathbf{h} + \mathrm{Dropout}\left(\mathrm{Attn}_U(\mathrm{LN}(\mathbf{h});
            B, C)\right) \\
        \mathbf{h}'' &= \mathbf{h}' + \mathrm{Dropout}\left(W_2\, \mathrm{Dropout}_{act}
            (\mathrm{GELU}(W_1 \mathrm{LN}(\mathbf{h}')))\right)

    with :math:`\mathrm{Attn}_U` = :class:`~graph_urpe.nn.MultiheadURPEAttention`
    (Luo et al., NeurIPS 2022, Eq. (4)); Ying et al., NeurIPS 2021, Eqs. (8)-(9). Usable on its own
    in any dense graph model: pass any per-head bias and multiplier.

    Args:
        embed_dim (int): width ``C``.
        num_heads (int): heads ``H`` (``embed_dim`` must be divisible by it).
        ffn_dim (int, optional): hidden width of the feed-forward block.
            (default: :obj:`None`, same as ``embed_dim`` as in Graphormer-slim)
        dropout (float, optional): dropout after attention and after the FFN. (default: :obj:`0.1`)
        attention_dropout (float, optional): dropout on the attention weights.
            (default: :obj:`0.1`)
        activation_dropout (float, optional): dropout after the GELU. (default: :obj:`0.0`)

    Shapes:
        - **x**: ``[B, N, C]`` float
        - **attn_bias**, **multiplier**: broadcastable to ``[B, H, N, N]`` (optional)
        - **key_padding_mask**: ``[B, N]`` bool, ``True`` = padded (optional)
        - **output**: ``[B, N, C]``; with ``need_weights=True`` the pair ``(output, (P, P ⊙ C))``
          of :class:`~graph_urpe.nn.MultiheadURPEAttention`
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        ffn_dim: int | None = None,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        activation_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.ffn_dim = embed_dim if ffn_dim is None else ffn_dim
        self.attn_norm = nn.LayerNorm(embed_dim)
        self.attn = MultiheadURPEAttention(embed_dim, num_heads, dropout=attention_dropout)
        self.ffn_norm = nn.LayerNorm(embed_dim)
        self.ffn = nn.Sequential(
            nn.Linear(embed_dim, self.ffn_dim),
            nn.GELU(),
            nn.Dropout(activation_dropout),
            nn.Linear(self.ffn_dim, embed_dim),
        )
        self.dropout = nn.Dropout(dropout)

    def reset_parameters(self) -> None:
        """Reset the norms, the attention projections and the FFN."""
        self.attn_norm.reset_parameters()
        self.ffn_norm.reset_parameters()
        self.attn.reset_parameters()
        self.ffn[0].reset_parameters()
        self.ffn[3].reset_parameters()

    def forward(
        self,
        x: Tensor,
        attn_bias: Tensor | None = None,
        multiplier: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, tuple[Tensor, Tensor]]:
        """One layer; see the class docstring for shapes."""
        res = self.attn(
            self.attn_norm(x),
            attn_bias=attn_bias,
            multiplier=multiplier,
            key_padding_mask=key_padding_mask,
            need_weights=need_weights,
        )
        h, weights = res if need_weights else (res, None)
        x = x + self.dropout(h)
        x = x + self.dropout(self.ffn(self.ffn_norm(x)))
        return (x, weights) if need_weights else x

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.embed_dim}, num_heads={self.num_heads}, "
            f"ffn_dim={self.ffn_dim})"
        )


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
        attention: str = "urpe",
        max_distance: int = 20,
        ffn_channels: int | None = None,
        graph_token: bool = False,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if attention not in ATTENTION_KINDS:
            raise ValueError(f"attention must be one of {ATTENTION_KINDS}, got {attention!r}.")
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
        if not isinstance(spd, Tensor):
            raise ValueError("spd is missing: pass the batch's `spd` (build the dataset with "
                             "pre_transform=graph_urpe.transforms.AddShortestPathDistance()).")
        counts = node_counts(spd, batch, ptr, num_graphs)
        spd_dense, padding_mask = to_dense_spd(
            spd, batch, ptr, num_graphs=num_graphs, max_num_nodes=max_num_nodes
        )
        b, n = padding_mask.shape
        batch = batch_vector(x.shape[0], counts, batch)
        h, _ = to_dense_batch(x, batch, batch_size=b, max_num_nodes=n)
        use_token = self.graph_token is not None
        if use_token:
            token = self.graph_token.expand(b, -1) if token is None else token
            h = torch.cat([token.unsqueeze(1).to(h.dtype), h], dim=1)
            key_padding_mask = token_padding_mask(padding_mask)
        else:
            key_padding_mask = padding_mask
        ids = graph_relation_ids(spd_dense, padding_mask, self.max_distance, graph_token=use_token)
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
