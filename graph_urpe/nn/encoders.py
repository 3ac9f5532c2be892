"""Categorical feature encoders for graph Transformers: atoms, bonds and node degrees.

Molecular datasets store node and edge features as small integer categories (ZINC: one column, the
atom type out of 28; OGB: 9 atom and 3 bond columns, see ``ogb.utils.features``). Graphormer
(Ying et al., NeurIPS 2021, Sec. 3.1 and its reference code) embeds each column and sums the
embeddings, and adds a learned embedding of the node degree (its *centrality encoding*, Eq. (5)).
Its *edge encoding* (Eq. (7)) turns the bond features along shortest paths into a per-head
attention bias (:class:`MultiHopEdgeEncoder`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from graph_urpe.choices import check_at_least

__all__ = ["CategoricalEncoder", "DegreeEncoder", "MultiHopEdgeEncoder"]


def _as_sizes(num_categories: int | Sequence[int]) -> list[int]:
    sizes = [num_categories] if isinstance(num_categories, int) else [int(s) for s in num_categories]
    if not sizes or any(s <= 0 for s in sizes):
        raise ValueError(
            f"num_categories must be a positive int or a non-empty list of positive ints "
            f"(one vocabulary size per feature column), got {num_categories!r}."
        )
    return sizes


class CategoricalEncoder(nn.Module):
    r"""Sum of per-column embeddings of integer categorical features.

    .. math::
        \mathbf{h}_v = \sum_{f=1}^{F} \mathbf{E}\left[x_{v,f} + o_f\right], \qquad
        o_f = \sum_{g<f} K_g

    with one table ``E`` of ``sum(K_f)`` rows and per-column offsets ``o_f`` (the layout of
    Graphormer's ``atom_encoder``; Ying et al., NeurIPS 2021, reference code).

    Args:
        num_categories (int or list[int]): the vocabulary size ``K_f`` of each feature column.
            A single int means *one* column (e.g. ZINC's atom type: 28); pass a list for several
            columns (e.g. ``ogb.utils.features.get_atom_feature_dims()``).
        embed_dim (int): output width.
        std (float, optional): embeddings are initialised from ``N(0, std)``.
            (default: :obj:`0.02`, Graphormer's init)
        validate (bool, optional): check the value range and raise a :class:`ValueError` naming
            the column (a host read per call). Without it an out-of-range value is mapped to an
            index past the table, so the embedding lookup raises (:class:`IndexError` on CPU, a
            device-side assert on CUDA) instead of silently reading another column's row; no host
            read, compile-friendly. (default: :obj:`True`)

    Shapes:
        - **input**: ``[*, F]`` or ``[*]`` (for ``F == 1``), int64, values in ``[0, K_f)``
        - **output**: ``[*, embed_dim]`` float32

    Raises:
        ValueError: if sizes are not positive, the input has the wrong number of columns, is not
            an integer tensor, or (``validate=True``) holds a value outside ``[0, K_f)`` (the
            message names the column).
        IndexError: (``validate=False``, CPU) for a value outside ``[0, K_f)``.
    """

    def __init__(
        self,
        num_categories: int | Sequence[int],
        embed_dim: int,
        std: float = 0.02,
        validate: bool = True,
    ):
        super().__init__()
        self.num_categories = _as_sizes(num_categories)
        self.embed_dim = embed_dim
        self.std = std
        self.validate = validate
        sizes = torch.tensor(self.num_categories)
        self.register_buffer("offsets", torch.cumsum(sizes, 0) - sizes, persistent=False)
        self.register_buffer("sizes", sizes, persistent=False)
        self.embedding = nn.Embedding(int(sizes.sum()), embed_dim)
        self.reset_parameters()

    @property
    def num_columns(self) -> int:
        """Number of feature columns ``F``."""
        return len(self.num_categories)

    def reset_parameters(self) -> None:
        """Draw the table from ``N(0, std)``."""
        nn.init.normal_(self.embedding.weight, 0.0, self.std)

    def forward(self, x: Tensor) -> Tensor:
        """Embed ``x`` ``[*, F]`` (or ``[*]`` when ``F == 1``) -> ``[*, embed_dim]``."""
        if x.dtype.is_floating_point or x.dtype == torch.bool:
            raise ValueError(f"Categorical features must be an integer tensor, got {x.dtype}.")
        if x.dim() == 1 and self.num_columns == 1:
            x = x.unsqueeze(-1)
        if x.dim() < 2 or x.shape[-1] != self.num_columns:
            raise ValueError(
                f"Expected categorical features of shape [*, {self.num_columns}], got "
                f"{tuple(x.shape)}; the encoder was built with num_categories="
                f"{self.num_categories} (one vocabulary size per column)."
            )
        x = x.long()
        bad = (x < 0) | (x >= self.sizes)
        if self.validate and not torch.compiler.is_compiling() and bool(bad.any()):
            col = int(bad.reshape(-1, self.num_columns).any(0).nonzero()[0])
            vals = x[..., col][bad[..., col]]
            raise ValueError(
                f"Feature column {col} holds value(s) {vals.unique()[:5].tolist()} outside "
                f"[0, {self.num_categories[col]}); build the encoder with a larger "
                f"num_categories for that column."
            )
        # Out-of-range values point past the table: the lookup fails rather than reading a row
        # of the next column.
        index = torch.where(bad, self.embedding.num_embeddings, x + self.offsets)
        return self.embedding(index).sum(dim=-2)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.num_categories}, {self.embed_dim})"


class DegreeEncoder(nn.Module):
    r"""Graphormer's centrality encoding: a learned embedding of the node degree.

    .. math::
        \mathbf{h}_v \mathrel{+}= \mathbf{z}^-_{\deg^-(v)} + \mathbf{z}^+_{\deg^+(v)}

    Source: Ying et al., "Do Transformers Really Perform Bad for Graph Representation?",
    NeurIPS 2021, Eq. (5). Degrees above ``max_degree`` share the last row. For undirected graphs
    (edges stored in both directions, as in PyG) in- and out-degree are equal, so by default one
    table is used; ``directed=True`` adds the separate out-degree table of Eq. (5).

    Args:
        max_degree (int): largest distinguished degree (the table has ``max_degree + 1`` rows).
        embed_dim (int): output width.
        directed (bool, optional): separate in- and out-degree tables. (default: :obj:`False`)
        std (float, optional): init ``N(0, std)``. (default: :obj:`0.02`)

    Shapes:
        - **edge_index**: ``[2, E]`` int64 (source, target)
        - **output**: ``[num_nodes, embed_dim]`` float32

    Raises:
        ValueError: if ``max_degree`` is negative.
    """

    def __init__(self, max_degree: int, embed_dim: int, directed: bool = False, std: float = 0.02):
        super().__init__()
        check_at_least(0, max_degree=max_degree)
        self.max_degree = max_degree
        self.embed_dim = embed_dim
        self.directed = directed
        self.std = std
        self.in_degree = nn.Embedding(max_degree + 1, embed_dim)
        self.out_degree = nn.Embedding(max_degree + 1, embed_dim) if directed else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the tables from ``N(0, std)``."""
        nn.init.normal_(self.in_degree.weight, 0.0, self.std)
        if self.out_degree is not None:
            nn.init.normal_(self.out_degree.weight, 0.0, self.std)

    def forward(self, edge_index: Tensor, num_nodes: int) -> Tensor:
        """Degree embedding of each of the ``num_nodes`` nodes -> ``[num_nodes, embed_dim]``."""
        ones = torch.ones(edge_index.shape[1], dtype=torch.long, device=edge_index.device)
        deg_in = torch.zeros(num_nodes, dtype=torch.long, device=edge_index.device)
        deg_in = deg_in.scatter_add(0, edge_index[1], ones).clamp(max=self.max_degree)
        out = self.in_degree(deg_in)
        if self.out_degree is not None:
            deg_out = torch.zeros_like(deg_in).scatter_add(0, edge_index[0], ones)
            out = out + self.out_degree(deg_out.clamp(max=self.max_degree))
        return out

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(max_degree={self.max_degree}, {self.embed_dim}, "
            f"directed={self.directed})"
        )


class MultiHopEdgeEncoder(nn.Module):
    r"""Graphormer's multi-hop edge encoding: a per-head attention bias from the edges on a path.

    .. math::
        c_{ij} = \frac{1}{K_{ij}} \sum_{k=1}^{K_{ij}} \mathbf{x}_{e_k}^\top \mathbf{W}_k,
        \qquad K_{ij} = \min(\mathrm{SPD}(i, j), \text{max\_hops})

    where :math:`e_1, \dots` are the edges on one shortest path from ``i`` to ``j``,
    :math:`\mathbf{x}_e` the per-head edge embedding (a :class:`CategoricalEncoder` of width
    ``H``) and :math:`\mathbf{W}_k \in \mathbb{R}^{H \times H}` the weight of hop ``k``; 0 for
    ``i == j``, unreachable pairs and padding. Source: Ying et al., NeurIPS 2021, Eq. (7).

    Two exact evaluations of the same sum: on CPU in eager mode the real (pair, hop) entries are
    gathered sparsely (one ``nonzero``, about 2x faster there); when compiling or on an
    accelerator a dense gather per hop, with no host synchronisation.

    Args:
        num_categories (int or list[int]): vocabulary size of each edge feature column.
        num_heads (int): heads ``H``.
        max_hops (int): hops ``K`` with their own weight (Graphormer's ``multi_hop_max_dist``).
        validate (bool, optional): range check of the edge features (see
            :class:`CategoricalEncoder`). (default: :obj:`True`)

    Shapes:
        - **edge_attr**: ``[E, Fe]`` (or ``[E]``) long
        - **path**: ``[B, N, N, max_hops]`` long, edge ids or ``-1``, from
          :func:`graph_urpe.dense.to_dense_path_edges`
        - **output**: ``[B, H, N, N]`` float

    Raises:
        ValueError: if ``max_hops`` is not positive or ``path`` has the wrong last dimension.
    """

    def __init__(
        self,
        num_categories: int | Sequence[int],
        num_heads: int,
        max_hops: int,
        validate: bool = True,
    ) -> None:
        super().__init__()
        check_at_least(1, max_hops=max_hops)
        self.num_heads = num_heads
        self.max_hops = max_hops
        self.edge_encoder = CategoricalEncoder(num_categories, num_heads, validate=validate)
        self.hop_weight = nn.Parameter(torch.empty(max_hops, num_heads, num_heads))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Edge embeddings and hop weights from ``N(0, 0.02)`` (Graphormer's init)."""
        self.edge_encoder.reset_parameters()
        nn.init.normal_(self.hop_weight, 0.0, 0.02)

    def forward(self, edge_attr: Tensor, path: Tensor) -> Tensor:
        """Edge bias ``[B, H, N, N]`` of the ``path`` edge ids; see the class docstring."""
        if path.dim() != 4 or path.shape[-1] != self.max_hops:
            raise ValueError(
                f"path must be [B, N, N, {self.max_hops}] (to_dense_path_edges with "
                f"max_hops={self.max_hops}), got {tuple(path.shape)}."
            )
        b, n, _, k = path.shape
        edge_emb = self.edge_encoder(edge_attr)  # [E, H]
        num_edges, h = edge_emb.shape
        # Row k * E + e of `table` is edge e seen as hop k: e(edge) @ W_k.
        table = torch.einsum("eh,khg->keg", edge_emb, self.hop_weight)
        # Hop-major [K, cells] (free for to_dense_path_edges' output, a copy otherwise).
        by_hop = path.movedim(-1, 0).reshape(k, -1)
        cells = by_hop.shape[1]
        valid = by_hop >= 0
        count = valid.sum(0).clamp(min=1).to(table.dtype).unsqueeze(-1)  # [cells, 1]
        if path.device.type == "cpu" and not torch.compiler.is_compiling():
            # Only the real (hop, pair) entries: about 1/5 of the dense grid on molecules.
            entry = valid.reshape(-1).nonzero().squeeze(-1)  # hop * cells + cell
            hop, cell = entry.div(cells, rounding_mode="floor"), entry.remainder(cells)
            edge = by_hop.reshape(-1).index_select(0, entry)
            values = table.reshape(-1, h).index_select(0, hop * num_edges + edge)
            out = values.new_zeros(cells, h).index_add_(0, cell, values)
        else:
            table = F.pad(table, (0, 0, 0, 1))  # row E of each hop: no edge, zeros
            index = torch.where(valid, by_hop, num_edges)
            out = sum(table[hop].index_select(0, index[hop]) for hop in range(k))
        return (out / count).view(b, n, n, h).permute(0, 3, 1, 2)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.edge_encoder.num_categories}, "
            f"num_heads={self.num_heads}, max_hops={self.max_hops})"
        )
