"""Graphormer with URPE attention: SPD-indexed bias ``B`` and SPD-indexed multiplier ``C``.

Graphormer (Ying et al., "Do Transformers Really Perform Bad for Graph Representation?", NeurIPS
2021) is a pre-LayerNorm Transformer over the nodes of a graph plus a virtual *graph token*, with
three structural encodings:

* **centrality**: a learned embedding of each node's degree added to its features (Eq. (5));
* **spatial**: a per-head attention bias ``b_{SPD(i, j)}`` indexed by the shortest-path distance
  (Eq. (6)); the graph token gets its own learned "virtual distance" to every node;
* **edge**: a per-head bias, the mean over the edges on a shortest path from ``i`` to ``j`` of
  the edge embedding times a per-hop weight (Eq. (7), the "multi-hop" edge encoding).

URPE (Luo et al., "Your Transformer May Not be as Powerful as You Expect", NeurIPS 2022,
arXiv 2205.13401, Sec. 4 and Eq. (4)) multiplies the softmax attention matrix element-wise by a
learnable ``C[i, j] = c_{SPD(i, j)}`` per head, initialised to ones, so training starts from the
plain Graphormer.

The model is split into :class:`GraphormerEncoder` (here: node embeddings in PyG's sparse layout,
plus the graph token's) and a head: :class:`~graph_urpe.nn.GraphHead` (graph token, mean or sum
readout) or a linear node-level head; :class:`~graph_urpe.nn.Graphormer`
(:mod:`graph_urpe.nn.graphormer_model`) composes them. Each structural encoding can be turned off on
its own (``centrality_encoding``, ``edge_encoding``, ``graph_token``, and ``attention="none"`` for
``B`` and ``C``), so ablations need no code.

Relation ids (:func:`~graph_urpe.nn.graph_relation_ids`) name every (query, key) cell of the ``[N + 1, N + 1]``
attention map (graph token first): distances ``0 .. max_distance`` (larger distances share the
last), then *unreachable* (other connected component), *graph token* (any pair involving the
token, Graphormer's virtual distance) and *padding*. ``B`` and ``C`` are per-head tables over these
ids; the padding row is fixed at 0, so padded cells get ``C = 0``.

Choices (documented here, as the paper does not fix them):

* ``B`` and ``C`` are shared by all layers by default (as Graphormer's spatial bias and the
  official URPE code); ``bias_per_layer`` / ``multiplier_per_layer`` give one table per layer,
  gathered for all layers with a single embedding lookup.
* ``attention="none"`` removes everything indexed by the relation ids (spatial bias, the graph
  token's virtual distance, ``C``): a Transformer without relative positional encoding. The
  centrality encoding and the edge encoding are kept as Graphormer's feature encodings; note that
  the multi-hop edge encoding still follows shortest paths, so set ``edge_encoding="none"`` too for
  a model that sees no pair structure at all.
* Identical node features give every node the same output (so no node-level structural function
  can be learned) with ``attention="rpe"`` only where nothing else breaks the symmetry: no graph
  token, no centrality encoding, no edge encoding (Luo et al., 2022, Sec. 3, carried to graphs).
  URPE's ``C`` breaks it.
* Unreachable pairs get their own learned id; they are not masked out of attention (Graphormer's
  reference collator masks pairs with ``SPD >= 20``, which also hides other components).
* The multi-hop edge encoding follows *one* shortest path per pair (the one stored by
  :class:`~graph_urpe.transforms.AddShortestPathDistance`). Where several shortest paths exist
  (e.g. opposite atoms of a benzene ring), which one is used depends on the node numbering, as in
  Graphormer, so the model is exactly permutation invariant when shortest paths are unique or with
  ``edge_encoding="none"``; everything else (centrality, ``B``, ``C``, readout) is invariant.

Host synchronisation (issue 13): a forward pass reads one number on the host, the largest graph
size of the batch (as :func:`~torch_geometric.utils.to_dense_batch`; pass ``max_num_nodes`` to
avoid it), plus, on CPU in eager mode only, the sparse gather of the edge encoding (see
:class:`~graph_urpe.nn.MultiHopEdgeEncoder`). Input checks that need more (feature ranges, SPD
lengths, path edges) run only with ``validate_inputs=True``; without them feature values out of
range still raise (from the embedding lookup), and the SPD tensors are consistent by construction
when :class:`~graph_urpe.transforms.AddShortestPathDistance` is the last transform.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from graph_urpe.choices import check_at_least, check_choice
from graph_urpe.dense import from_dense_batch, to_dense_path_edges
from graph_urpe.nn._dropout import Dropout
from graph_urpe.nn.continuous import ContinuousRelations
from graph_urpe.nn.conv import Attention
from graph_urpe.nn.densify import densify_graphs
from graph_urpe.nn.encoders import CategoricalEncoder, DegreeEncoder, MultiHopEdgeEncoder
from graph_urpe.nn.relation_terms import relation_modules, relation_term
from graph_urpe.nn.relations import (
    GraphRelation,
    RelationEmbedding,
    check_relations,
    num_graph_relations,
    relation_table_distance,
)
from graph_urpe.nn.transformer_layer import GraphormerLayer

__all__ = ["GraphormerEncoder"]

EdgeEncoding = Literal["none", "multi_hop"]

AttentionMaps = list[tuple[Tensor, Tensor]]


def _init_linear(module: nn.Module, std: float) -> None:
    """Graphormer's init of every linear layer in ``module``: ``N(0, std)`` weights, zero bias."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


class GraphormerEncoder(nn.Module):
    r"""Graphormer's encoder with ``none`` / ``rpe`` / ``urpe`` attention: node embeddings in PyG's
    sparse layout, and the graph token's.

    Consumes the tensors of a PyG batch whose graphs went through
    :class:`~graph_urpe.transforms.AddShortestPathDistance` (``pair_index``, ``spd``, and ``spd_pred_index`` when
    ``edge_encoding="multi_hop"``), with integer node features ``x`` and edge features
    ``edge_attr``. See the module docstring for the encodings and the relation ids. Per forward
    pass the batch is densified once, the relation ids are built once, ``B`` and ``C`` for all
    layers are gathered with one embedding lookup each, and the edge encoding is computed once and
    added to every layer's bias.

    Sources: Ying et al., NeurIPS 2021, Eqs. (5)-(9) (Graphormer); Luo et al., NeurIPS 2022,
    Eq. (4) and Sec. 4.2 (URPE-based Graphormer).

    Args:
        atom_categories (int or list[int]): vocabulary size of each node feature column
            (see :class:`~graph_urpe.nn.CategoricalEncoder`).
        bond_categories (int or list[int], optional): vocabulary size of each edge feature
            column; required for ``edge_encoding="multi_hop"``. (default: :obj:`None`)
        num_layers (int, optional): number of layers ``L``. (default: :obj:`12`)
        embed_dim (int, optional): width. (default: :obj:`80`)
        num_heads (int, optional): heads ``H``. (default: :obj:`8`)
        ffn_dim (int, optional): FFN hidden width. (default: :obj:`80`)
        attention (str, optional): ``"none"`` (no relation-indexed terms), ``"rpe"`` (spatial bias
            ``B``, Graphormer) or ``"urpe"`` (``B`` and multiplier ``C``). (default: :obj:`"urpe"`)
        max_distance (int, optional): largest distinguished SPD. (default: :obj:`36`)
        relations (list[str], optional): the pairwise relations ``B`` and ``C`` are built from,
            among ``"spd"`` (integer table) and ``"resistance"`` (Gaussian basis functions and a
            per-head projection, Graphormer-GD: Zhang et al., ICLR 2023); the batch must hold
            them (:mod:`graph_urpe.transforms`). Without ``"spd"`` the table distinguishes only
            reachable / unreachable pairs, the graph token and padding. (default:
            :obj:`("spd",)`)
        num_kernels (int, optional): Gaussian basis functions per continuous relation.
            (default: :obj:`128`)
        max_degree (int, optional): largest distinguished degree. (default: :obj:`63`)
        max_hops (int, optional): edges per path in the edge encoding (Graphormer's
            ``multi_hop_max_dist``). (default: :obj:`20`)
        edge_encoding (str, optional): ``"multi_hop"`` or ``"none"``. (default: :obj:`"multi_hop"`)
        bias_per_layer (bool, optional): one ``B`` table per layer. (default: :obj:`False`)
        multiplier_per_layer (bool, optional): one ``C`` table per layer. (default: :obj:`False`)
        directed_degree (bool, optional): separate in/out-degree tables. (default: :obj:`False`)
        centrality_encoding (bool, optional): add the degree embedding (Eq. (5)).
            (default: :obj:`True`)
        graph_token (bool, optional): prepend the virtual graph token. (default: :obj:`True`)
        dropout (float, optional): residual dropout. (default: :obj:`0.1`)
        attention_dropout (float, optional): attention-weight dropout. (default: :obj:`0.1`)
        activation_dropout (float, optional): FFN activation dropout. (default: :obj:`0.0`)
        input_dropout (float, optional): dropout on the input embeddings. (default: :obj:`0.0`)
        validate_inputs (bool, optional): check feature ranges, SPD lengths and path edges with
            clear messages (host reads in every forward). (default: :obj:`False`)

    Shapes:
        - **x**: ``[num_nodes, F]`` long; **edge_index**: ``[2, E]``; **pair_index**: ``[2, P]``
          with ``P = sum_b n_b^2``; **edge_attr**: ``[E, Fe]`` long; **spd**, **resistance**
          and **spd_pred_index**: ``[P]``; **batch**: ``[num_nodes]``; **ptr**: ``[B + 1]``
        - **output**: ``(nodes [num_nodes, embed_dim], token [B, embed_dim] or None)`` (after the
          final LayerNorm); with ``return_attention=True`` also a list with, per layer, the
          attention maps before and after ``C``, ``[B, H, N', N']`` each (padded,
          ``N' = N + 1`` with the graph token in slot 0)

    Raises:
        ValueError: for an unknown ``attention`` / ``edge_encoding``, a missing
            ``bond_categories`` with the edge encoding on, an unknown or repeated relation, or
            missing inputs (``pair_index``, a relation, ``spd_pred_index``, ``edge_attr``).
    """

    def __init__(
        self,
        atom_categories: int | Sequence[int],
        bond_categories: int | Sequence[int] | None = None,
        num_layers: int = 12,
        embed_dim: int = 80,
        num_heads: int = 8,
        ffn_dim: int = 80,
        attention: Attention = "urpe",
        max_distance: int = 36,
        relations: Sequence[GraphRelation] = ("spd",),
        num_kernels: int = 128,
        max_degree: int = 63,
        max_hops: int = 20,
        edge_encoding: EdgeEncoding = "multi_hop",
        bias_per_layer: bool = False,
        multiplier_per_layer: bool = False,
        directed_degree: bool = False,
        centrality_encoding: bool = True,
        graph_token: bool = True,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        activation_dropout: float = 0.0,
        input_dropout: float = 0.0,
        validate_inputs: bool = False,
    ) -> None:
        super().__init__()
        check_choice("attention", attention, Attention)
        check_choice("edge_encoding", edge_encoding, EdgeEncoding)
        if edge_encoding == "multi_hop" and bond_categories is None:
            raise ValueError(
                "edge_encoding='multi_hop' needs bond_categories (vocabulary size of each edge "
                "feature column); pass it or set edge_encoding='none'."
            )
        check_at_least(1, num_layers=num_layers, max_hops=max_hops)
        self.num_layers = num_layers
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.attention = attention
        self.relations = check_relations(relations)
        self.max_distance = relation_table_distance(self.relations, max_distance)
        self.max_hops = max_hops
        self.edge_encoding = edge_encoding
        self.bias_per_layer = bias_per_layer
        self.multiplier_per_layer = multiplier_per_layer
        self.validate_inputs = validate_inputs

        self.atom_encoder = CategoricalEncoder(atom_categories, embed_dim, validate=validate_inputs)
        self.degree_encoder = (
            DegreeEncoder(max_degree, embed_dim, directed=directed_degree)
            if centrality_encoding else None
        )
        self.graph_token = nn.Parameter(torch.empty(1, 1, embed_dim)) if graph_token else None
        self.input_dropout = Dropout(input_dropout)

        num_graph_relations(max_distance)  # refuses a negative one
        (self.spatial_bias, self.continuous_bias, self.multiplier,
         self.continuous_multiplier) = relation_modules(
            attention, self.relations, self.max_distance,
            num_heads * (num_layers if bias_per_layer else 1),
            num_heads * (num_layers if multiplier_per_layer else 1), num_kernels)
        self.edge_encoder = (
            MultiHopEdgeEncoder(bond_categories, num_heads, max_hops, validate=validate_inputs)
            if edge_encoding == "multi_hop" else None
        )
        self.layers = nn.ModuleList(
            GraphormerLayer(
                embed_dim, num_heads, ffn_dim, dropout, attention_dropout, activation_dropout
            )
            for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(embed_dim)
        self.reset_parameters()

    @property
    def hop_weight(self) -> nn.Parameter | None:
        """The ``[max_hops, H, H]`` hop weights of the edge encoding (:obj:`None` without it)."""
        return None if self.edge_encoder is None else self.edge_encoder.hop_weight

    def no_weight_decay(self) -> set[str]:
        """Parameters that are embeddings although they are not in an embedding table (the timm
        convention, read by :func:`graph_urpe.models.optim.parameter_groups`): the graph token."""
        return {"graph_token"} if self.graph_token is not None else set()

    def reset_parameters(self) -> None:
        """Graphormer's initialisation: linear weights ``N(0, 0.02 / sqrt(L))`` with zero biases,
        embeddings and the graph token ``N(0, 0.02)``, the spatial bias ``N(0, 0.02)``, ``C``
        ones, the continuous relations' own init (their ``C`` terms 0), the hop weights
        ``N(0, 0.02)``, LayerNorms to identity."""
        _init_linear(self, 0.02 / math.sqrt(self.num_layers))
        for module in self.modules():
            if isinstance(module, nn.LayerNorm):
                module.reset_parameters()
        for part in (self.atom_encoder, self.degree_encoder, self.spatial_bias, self.multiplier,
                     self.continuous_bias, self.continuous_multiplier, self.edge_encoder):
            if part is not None:
                part.reset_parameters()
        if self.graph_token is not None:
            nn.init.normal_(self.graph_token, 0.0, 0.02)

    def _per_layer(self, table: RelationEmbedding | None, ids: Tensor, per_layer: bool,
                   continuous: ContinuousRelations | None = None,
                   values: dict[str, Tensor] | None = None):
        """``B`` or ``C`` for all layers at once, the table gathered once plus the continuous
        terms: ``[B, L, H, N', N']`` (per layer) or ``[B, H, N', N']``."""
        out = relation_term(table, continuous, ids, values)  # [B, heads, N', N']
        if out is None or not per_layer:
            return out
        return out.unflatten(1, (self.num_layers, self.num_heads))

    def forward(
        self,
        x: Tensor,
        edge_index: Tensor,
        pair_index: Tensor,
        batch: Tensor | None = None,
        ptr: Tensor | None = None,
        edge_attr: Tensor | None = None,
        spd: Tensor | None = None,
        spd_pred_index: Tensor | None = None,
        resistance: Tensor | None = None,
        num_graphs: int | None = None,
        max_num_nodes: int | None = None,
        return_attention: bool = False,
    ) -> tuple[Tensor, Tensor | None] | tuple[Tensor, Tensor | None, AttentionMaps]:
        """Encode a batch; see the class docstring. ``num_graphs`` / ``max_num_nodes`` (``B`` and
        ``N``) are read from ``ptr`` / ``batch`` when not given (one host read for ``N``)."""
        h = self.atom_encoder(x)
        if self.degree_encoder is not None:
            h = h + self.degree_encoder(edge_index, x.shape[0])
        use_token = self.graph_token is not None
        token = self.graph_token[0] if use_token else None
        if pair_index is None:
            raise ValueError("pair_index is missing: build the dataset with pre_transform="
                             "graph_urpe.transforms.AddShortestPathDistance() (and "
                             "AddResistanceDistance() for relations with 'resistance').")
        stored = {"spd": spd, "resistance": resistance}
        h, key_padding_mask, ids, values, vec, counts, max_num_nodes = densify_graphs(
            h, {name: stored[name] for name in self.relations}, pair_index, batch, ptr, token,
            self.max_distance, num_graphs=num_graphs, max_num_nodes=max_num_nodes,
            validate=self.validate_inputs,
        )
        h = self.input_dropout(h)
        dense = {"num_graphs": num_graphs, "max_num_nodes": max_num_nodes,
                 "validate": self.validate_inputs}
        bias = self._per_layer(self.spatial_bias, ids, self.bias_per_layer,
                               self.continuous_bias, values)
        mult = self._per_layer(self.multiplier, ids, self.multiplier_per_layer,
                               self.continuous_multiplier, values)
        # The bias has a layer axis only when it holds per-layer spatial tables (with
        # attention="none" it is the edge encoding alone, shared by all layers).
        bias_layered = bias is not None and self.bias_per_layer
        mult_layered = mult is not None and self.multiplier_per_layer
        if self.edge_encoder is not None:
            if edge_attr is None:
                raise ValueError(
                    "edge_attr is missing (integer bond features [E, Fe]), which "
                    "edge_encoding='multi_hop' needs: add bond features to the graphs or build "
                    "the model with edge_encoding='none'."
                )
            path = to_dense_path_edges(
                spd_pred_index, pair_index, edge_index, batch, ptr, max_hops=self.max_hops,
                **dense
            )
            edge = self.edge_encoder(edge_attr, path)  # [B, H, N, N]
            if use_token:
                edge = F.pad(edge, (1, 0, 1, 0))  # token row / column: 0
            if bias is None:
                bias = edge
            else:
                bias = bias + (edge.unsqueeze(1) if bias_layered else edge)

        maps: AttentionMaps = []
        for i, layer in enumerate(self.layers):
            res = layer(
                h,
                attn_bias=bias[:, i] if bias_layered else bias,
                multiplier=mult[:, i] if mult_layered else mult,
                key_padding_mask=key_padding_mask,
                need_weights=return_attention,
            )
            if return_attention:
                h, weights = res
                maps.append(weights)
            else:
                h = res
        h = self.final_norm(h)
        nodes = from_dense_batch(h, vec, counts, offset=int(use_token))
        token = h[:, 0] if use_token else None
        return (nodes, token, maps) if return_attention else (nodes, token)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(layers={self.num_layers}, embed_dim={self.embed_dim}, "
            f"heads={self.num_heads}, attention={self.attention!r}, relations={self.relations}, "
            f"edge_encoding={self.edge_encoding!r}, graph_token={self.graph_token is not None}, "
            f"centrality_encoding={self.degree_encoder is not None})"
        )
