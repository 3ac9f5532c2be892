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

The model is split into :class:`GraphormerEncoder` (node embeddings in PyG's sparse layout, plus
the graph token's) and a head: :class:`GraphHead` (graph token, mean or sum readout) or a linear
node-level head; :class:`Graphormer` composes them. Each structural encoding can be turned off on
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
from torch_geometric.data import Data

from graph_urpe.choices import check_at_least, check_choice
from graph_urpe.dense import batch_vector, from_dense_batch, node_counts, to_dense_path_edges
from graph_urpe.nn.block import GraphormerLayer
from graph_urpe.nn.encoders import CategoricalEncoder, DegreeEncoder, MultiHopEdgeEncoder
from graph_urpe.nn.heads import GraphHead, Readout
from graph_urpe.nn.layers import Attention, densify_graphs
from graph_urpe.nn.relations import RelationEmbedding, num_graph_relations

__all__ = ["GraphHead", "Graphormer", "GraphormerEncoder"]

EdgeEncoding = Literal["none", "multi_hop"]
Level = Literal["graph", "node"]
EmbedLayer = Literal["encoder", "hidden"]

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
    :class:`~graph_urpe.transforms.AddShortestPathDistance` (``spd``, and ``spd_pred`` when
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
        - **x**: ``[num_nodes, F]`` long; **edge_index**: ``[2, E]``; **edge_attr**: ``[E, Fe]``
          long; **spd** (and **spd_pred**): ``[sum_b n_b^2]``; **batch**: ``[num_nodes]``;
          **ptr**: ``[B + 1]``
        - **output**: ``(nodes [num_nodes, embed_dim], token [B, embed_dim] or None)`` (after the
          final LayerNorm); with ``return_attention=True`` also a list with, per layer, the
          attention maps before and after ``C``, ``[B, H, N', N']`` each (padded,
          ``N' = N + 1`` with the graph token in slot 0)

    Raises:
        ValueError: for an unknown ``attention`` / ``edge_encoding``, a missing
            ``bond_categories`` with the edge encoding on, or missing inputs (``spd``,
            ``spd_pred``, ``edge_attr``).
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
        self.max_distance = max_distance
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
        self.input_dropout = nn.Dropout(input_dropout)

        num_rel = num_graph_relations(max_distance)
        self.spatial_bias = None
        self.multiplier = None
        if attention != "none":
            heads = num_heads * (num_layers if bias_per_layer else 1)
            self.spatial_bias = RelationEmbedding(
                num_rel, heads, init="normal", padding_idx=num_rel - 1
            )
        if attention == "urpe":
            heads = num_heads * (num_layers if multiplier_per_layer else 1)
            self.multiplier = RelationEmbedding(num_rel, heads, init="ones", padding_idx=num_rel - 1)
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
        ones, the hop weights ``N(0, 0.02)``, LayerNorms to identity."""
        _init_linear(self, 0.02 / math.sqrt(self.num_layers))
        for module in self.modules():
            if isinstance(module, nn.LayerNorm):
                module.reset_parameters()
        for part in (self.atom_encoder, self.degree_encoder, self.spatial_bias, self.multiplier,
                     self.edge_encoder):
            if part is not None:
                part.reset_parameters()
        if self.graph_token is not None:
            nn.init.normal_(self.graph_token, 0.0, 0.02)

    def _per_layer(self, table: RelationEmbedding | None, ids: Tensor, per_layer: bool):
        """Gather a relation table once: ``[B, L, H, N', N']`` (per layer) or ``[B, H, N', N']``."""
        if table is None:
            return None
        values = table(ids)  # [B, heads, N', N']
        return values.unflatten(1, (self.num_layers, self.num_heads)) if per_layer else values

    def forward(
        self,
        x: Tensor,
        edge_index: Tensor,
        spd: Tensor,
        batch: Tensor | None = None,
        ptr: Tensor | None = None,
        edge_attr: Tensor | None = None,
        spd_pred: Tensor | None = None,
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
        h, key_padding_mask, ids, vec, counts, max_num_nodes = densify_graphs(
            h, spd, batch, ptr, token, self.max_distance, num_graphs=num_graphs,
            max_num_nodes=max_num_nodes, validate=self.validate_inputs,
        )
        h = self.input_dropout(h)
        dense = {"num_graphs": num_graphs, "max_num_nodes": max_num_nodes,
                 "validate": self.validate_inputs}
        bias = self._per_layer(self.spatial_bias, ids, self.bias_per_layer)
        mult = self._per_layer(self.multiplier, ids, self.multiplier_per_layer)
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
                spd_pred, edge_index, batch, ptr, max_hops=self.max_hops, **dense
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
            f"heads={self.num_heads}, attention={self.attention!r}, "
            f"edge_encoding={self.edge_encoding!r}, graph_token={self.graph_token is not None}, "
            f"centrality_encoding={self.degree_encoder is not None})"
        )


class Graphormer(nn.Module):
    r"""Graphormer (``none`` / ``rpe`` / ``urpe`` attention) for graph- or node-level prediction:
    a :class:`GraphormerEncoder` and a head.

    ``level="graph"``: a :class:`GraphHead` with the chosen ``readout``; ``level="node"``: a linear
    layer on every node embedding. Sources: Ying et al., NeurIPS 2021; Luo et al., NeurIPS 2022
    (see the module docstring).

    Weight decay: apply it to the weight matrices of the linear layers and to :attr:`hop_weight`
    only (not to biases, norms, embeddings or the ``B`` / ``C`` tables; decay would pull ``C``
    from its initial ones towards 0).

    Args:
        num_tasks (int): outputs per graph (or per node).
        atom_categories (int or list[int]): vocabulary size of each node feature column.
        bond_categories (int or list[int], optional): vocabulary size of each edge feature
            column; required for ``edge_encoding="multi_hop"``. (default: :obj:`None`)
        level (str, optional): ``"graph"`` or ``"node"``. (default: :obj:`"graph"`)
        readout (str, optional): graph-level readout, ``"graph_token"``, ``"mean"`` or ``"sum"``.
            (default: :obj:`None`: ``"graph_token"`` when the encoder has it, else ``"mean"``)
        head_hidden_dim (int, optional): graph level: width of the head's hidden layer
            (:class:`GraphHead`'s ``hidden_dim``, an MLP head as Chemprop's); :obj:`None` for
            Graphormer's linear head. (default: :obj:`None`)
        head_dropout (float, optional): dropout in that hidden layer. (default: :obj:`0.0`)
        outputs_per_task (int, optional): outputs per task: ``2`` for a mean-variance head
            (``loss="mve"``: ``num_tasks`` means, then ``num_tasks`` variances before softplus,
            as Chemprop's ``MveFFN``). (default: :obj:`1`)
        **kwargs: the architecture, passed to :class:`GraphormerEncoder` (``num_layers``,
            ``embed_dim``, ``num_heads``, ``ffn_dim``, ``attention``, ``max_distance``,
            ``max_degree``, ``max_hops``, ``edge_encoding``, ``bias_per_layer``,
            ``multiplier_per_layer``, ``directed_degree``, ``centrality_encoding``,
            ``graph_token``, ``dropout``, ``attention_dropout``, ``activation_dropout``,
            ``input_dropout``, ``validate_inputs``).

    Shapes:
        - **input**: a :class:`~torch_geometric.data.Batch` (or one
          :class:`~torch_geometric.data.Data`) with ``x`` ``[n, F]`` long, ``edge_index``
          ``[2, E]``, ``edge_attr`` ``[E, Fe]`` long, ``spd`` (and ``spd_pred``), ``batch``,
          ``ptr``.
        - **output**: ``[num_graphs, num_tasks * outputs_per_task]`` (graph level) or
          ``[num_nodes, num_tasks * outputs_per_task]`` (node level); with ``return_attention=True`` also the per-layer attention maps of
          :class:`GraphormerEncoder`.

    Raises:
        ValueError: for a non-positive ``num_tasks``, an unknown ``level`` / ``readout``,
            ``head_hidden_dim`` at node level or any error of :class:`GraphHead`,
            ``readout="graph_token"`` with ``graph_token=False``, or any error of
            :class:`GraphormerEncoder`.
    """

    def __init__(
        self,
        num_tasks: int,
        atom_categories: int | Sequence[int],
        bond_categories: int | Sequence[int] | None = None,
        level: Level = "graph",
        readout: Readout | None = None,
        head_hidden_dim: int | None = None,
        head_dropout: float = 0.0,
        outputs_per_task: int = 1,
        **kwargs,
    ) -> None:
        super().__init__()
        check_at_least(1, num_tasks=num_tasks, outputs_per_task=outputs_per_task)
        check_choice("level", level, Level)
        self.encoder = GraphormerEncoder(atom_categories, bond_categories, **kwargs)
        has_token = self.encoder.graph_token is not None
        if readout is None:
            readout = "graph_token" if has_token else "mean"
        if readout == "graph_token" and not has_token:
            raise ValueError(
                "readout='graph_token' needs graph_token=True; set graph_token=True or choose "
                "readout='mean' or 'sum'."
            )
        self.num_tasks = num_tasks
        self.outputs_per_task = outputs_per_task
        self.level = level
        self.readout = readout
        embed_dim = self.encoder.embed_dim
        if level == "node" and head_hidden_dim is not None:
            raise ValueError("head_hidden_dim is for level='graph'; the node-level head is "
                             "linear: leave it unset.")
        width = num_tasks * outputs_per_task
        self.head = (GraphHead(embed_dim, width, readout, head_hidden_dim, head_dropout)
                     if level == "graph" else nn.Linear(embed_dim, width))
        self.reset_parameters()

    @property
    def hop_weight(self) -> nn.Parameter | None:
        """The edge encoding's hop weights (:obj:`None` without it): with the linear weight
        matrices, the only parameters that get weight decay."""
        return self.encoder.hop_weight

    @classmethod
    def slim(cls, num_tasks: int = 1, atom_categories=28, bond_categories=4, **kwargs) -> Graphormer:
        """Graphormer-slim, the paper's ZINC model: 12 layers, width 80, 8 heads, FFN 80.

        Defaults are ZINC's (28 atom types, 4 bond types, one regression target); dropout 0.1,
        attention dropout 0.1, multi-hop edge encoding over 20 hops (Ying et al., NeurIPS 2021,
        ZINC script). With ``attention="rpe"`` this has 479,713 parameters against the paper's
        489,321: the Transformer body (470,400) is identical; Graphormer's reference code sizes
        its ZINC tables generously (64 atom rows for 28 types, 64 bond rows for 4 types, a separate
        out-degree table that receives the same input as the in-degree table on undirected graphs,
        40 hop matrices of which 20 are used), which accounts for 9,760 parameters; its public
        code instantiates 489,481, 160 more than the paper states. ``attention="urpe"`` adds one
        ``C`` table: ``(max_distance + 4) * heads`` = 320 parameters (3,840 with
        ``multiplier_per_layer=True``; the paper reports +2,416).

        Any keyword overrides a default (e.g. ``attention="rpe"``).
        """
        cfg = {"num_layers": 12, "embed_dim": 80, "num_heads": 8, "ffn_dim": 80}
        cfg.update(kwargs)
        return cls(num_tasks, atom_categories, bond_categories, **cfg)

    @classmethod
    def base(cls, num_tasks: int, atom_categories, bond_categories, **kwargs) -> Graphormer:
        """Graphormer-base for PCQM4Mv2 / OGB: 12 layers, width 768, 32 heads, FFN 768.

        Dropout 0.0, attention dropout 0.1, activation dropout 0.1, as Graphormer's PCQM4M
        recipe (Ying et al., NeurIPS 2021; the fairseq ``graphormer_base`` architecture).
        About 43M parameters with OGB features (Graphormer-base: 47M; its tables have 512 rows
        per feature column). Keywords override the defaults.
        """
        cfg = {
            "num_layers": 12, "embed_dim": 768, "num_heads": 32, "ffn_dim": 768, "dropout": 0.0,
            "attention_dropout": 0.1, "activation_dropout": 0.1, "max_distance": 64, "max_degree": 511,
        }
        cfg.update(kwargs)
        return cls(num_tasks, atom_categories, bond_categories, **cfg)

    def reset_parameters(self) -> None:
        """The encoder's initialisation, and the head's linear layers as Graphormer's
        (``N(0, 0.02 / sqrt(L))``, zero bias)."""
        self.encoder.reset_parameters()
        _init_linear(self.head, 0.02 / math.sqrt(self.encoder.num_layers))

    def _encode(self, batch: Data, return_attention: bool = False):
        vec, ptr = batch.get("batch"), batch.get("ptr")
        num_graphs = batch.num_graphs if ptr is not None or vec is not None else 1
        res = self.encoder(batch.x, batch.edge_index, batch.get("spd"), batch=vec, ptr=ptr,
                           edge_attr=batch.get("edge_attr"), spd_pred=batch.get("spd_pred"),
                           num_graphs=num_graphs, return_attention=return_attention)
        if vec is None and self.level == "graph":
            vec = batch_vector(res[0].shape[0], node_counts(batch.spd, None, ptr, num_graphs))
        return res, vec, num_graphs

    def forward(
        self, batch: Data, return_attention: bool = False
    ) -> Tensor | tuple[Tensor, AttentionMaps]:
        """Predict for a PyG batch; see the class docstring."""
        res, vec, num_graphs = self._encode(batch, return_attention)
        nodes, token = res[0], res[1]
        out = self.head(nodes) if self.level == "node" else \
            self.head(nodes, token, vec, num_graphs)
        return (out, res[2]) if return_attention else out

    def embed(self, batch: Data, layer: EmbedLayer = "encoder") -> Tensor:
        r"""Learned fingerprints ``[num_graphs, D]`` (as Chemprop's ``fingerprint``): the head's
        readout of the encoder (``"encoder"``, ``D = embed_dim``) or the head's hidden layer after
        its ReLU (``"hidden"``, ``D = head_hidden_dim``; call ``eval()`` first to skip dropout).

        Raises:
            ValueError: at node level, an unknown layer, or ``"hidden"`` for a linear head.
        """
        check_choice("layer", layer, EmbedLayer)
        if self.level != "graph" or (layer == "hidden" and self.head.hidden is None):
            raise ValueError(f"layer={layer!r} needs a graph-level network"
                             + (" with a hidden head layer (head_hidden_dim)" * (layer == "hidden"))
                             + ": use layer='encoder' with a graph-level network.")
        res, vec, num_graphs = self._encode(batch)
        pooled = self.head.pool(res[0], res[1], vec, num_graphs)
        return self.head.hidden(pooled) if layer == "hidden" else pooled

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}(num_tasks={self.num_tasks}, level={self.level!r}, "
            f"readout={self.readout!r}, encoder={self.encoder!r})"
        )
