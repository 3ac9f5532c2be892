"""The PyG-native graph layer with URPE attention (:class:`URPEGraphConv`); its densification
prologue, shared with :class:`~graph_urpe.nn.GraphormerEncoder`, is
:func:`~graph_urpe.nn.densify.densify_graphs`.

:class:`URPEGraphConv` is Graphormer's layer (:class:`~graph_urpe.nn.GraphormerLayer`, dense) with
PyG's ``*Conv`` contract (as :class:`torch_geometric.nn.GPSConv`): ``conv(x, edge_index, batch)``
on node features in the sparse ``[num_nodes, C]`` layout, returning node features of the same
layout. It owns its ``B`` and ``C`` (from the SPD, the resistance distance, or both), reads the
pairwise relations stored by :mod:`graph_urpe.transforms` when given and otherwise computes them
from ``edge_index`` (:func:`~graph_urpe.dense_relations.dense_relations_from_edges`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor, nn
from torch_geometric.utils import is_sparse, to_edge_index

from graph_urpe.batch_checks import check_node_features
from graph_urpe.choices import check_choice
from graph_urpe.dense import from_dense_batch
from graph_urpe.nn.densify import densify_graphs
from graph_urpe.nn.relation_terms import relation_modules, relation_term
from graph_urpe.nn.relations import (
    GraphRelation,
    check_relations,
    num_graph_relations,
    relation_table_distance,
)
from graph_urpe.nn.transformer_layer import GraphormerLayer

__all__ = ["Attention", "URPEGraphConv"]

#: The relative-position switch of every model: none, RPE (``B``), URPE (``B`` and ``C``).
Attention = Literal["none", "rpe", "urpe"]


class URPEGraphConv(nn.Module):
    r"""The Graphormer layer with URPE attention from `"Your Transformer May Not be as Powerful
    as You Expect" <https://arxiv.org/abs/2205.13401>`_ (Luo et al., NeurIPS 2022), in PyG's
    sparse node layout, with the relative encodings of Graphormer (`Ying et al., NeurIPS 2021
    <https://arxiv.org/abs/2106.05234>`_) and Graphormer-GD (`Zhang et al., ICLR 2023
    <https://arxiv.org/abs/2301.09505>`_):

    .. math::
        \mathbf{X}' = \mathbf{X} + \mathrm{MHA}(\mathrm{LN}(\mathbf{X})), \qquad
        \mathbf{X}'' = \mathbf{X}' + \mathrm{FFN}(\mathrm{LN}(\mathbf{X}')),

    where each head of :math:`\mathrm{MHA}` attends only within the node's own graph as

    .. math::
        \mathrm{Attn}(\mathbf{X}) = \Big(\mathrm{softmax}\Big(\frac{\mathbf{Q}\mathbf{K}^{\top}}
        {\sqrt{d}} + \mathbf{B}\Big) \odot \mathbf{C}\Big) \mathbf{V},

        B_{ij} = \sum_{r} b_r(\psi_r(i, j)), \qquad C_{ij} = \sum_{r} c_r(\psi_r(i, j)),

    over the selected relations :math:`\psi_r`: the shortest-path distance (``"spd"``, a learned
    per-head table :math:`b_{\mathrm{SPD}(i,j)}`, :math:`c_{\mathrm{SPD}(i,j)}`) and the
    resistance distance (``"resistance"``, Gaussian basis functions and a per-head projection,
    :class:`~graph_urpe.nn.continuous.GaussianBasisEmbedding`). :math:`\mathbf{C}` starts at ones
    (URPE starts as RPE); ``attention="rpe"`` drops :math:`\mathbf{C}`, ``"none"`` both terms.

    With identical node features, ``attention="rpe"`` gives every node of a graph the same output
    (the rows of :math:`\mathrm{softmax}(\mathbf{B})` sum to 1 and all values are equal), while
    ``"urpe"`` need not (the rows of :math:`\mathrm{softmax}(\mathbf{B}) \odot \mathbf{C}` need
    not sum to 1): Luo et al., 2022, Sec. 3.

    The relations are read from the batch when ``pair_index`` and the values are given (stored
    once by :class:`~graph_urpe.transforms.AddShortestPathDistance` /
    :class:`~graph_urpe.transforms.AddResistanceDistance`), else computed from ``edge_index`` on
    the fly (:func:`~graph_urpe.dense_relations.dense_relations_from_edges`; :math:`O(N^4)` per
    graph, for small graphs). Stored values are aligned with ``pair_index``, so they are refused without it;
    a stored relation the layer does not read (not in :obj:`relations`) is not used, as
    :class:`~torch_geometric.nn.conv.GATConv` does not use ``edge_attr`` without ``edge_dim``.
    Distances above :obj:`max_distance` share its table entry; a stored SPD is read as stored, so
    one clipped by the transform (``AddShortestPathDistance(max_distance=k)``) gives, for
    ``k < max_distance``, distances ``>= k`` the entry of ``k`` (not the on-the-fly result):
    store it unclipped (the default) or with ``k >= max_distance``. ``edge_index`` may also be a sparse adjacency (:class:`torch_sparse.SparseTensor` or a
    :obj:`torch.sparse` COO / CSR / CSC matrix), as for PyG's other convolutions: its stored
    entries are the edges (values ignored; edges are undirected, so ``adj`` and ``adj_t`` alike).

    By default the inputs are checked first (:mod:`graph_urpe.batch_checks`: ``batch`` sorted and
    consistent with ``x`` and ``ptr``, ``max_num_nodes`` large enough, edges within their graph,
    a stored ``pair_index`` holding every node pair of every graph once, which fails for
    relations computed before :func:`~torch_geometric.utils.subgraph`, and a stored ``spd`` of
    integers ``>= -1`` whose pairs at distance 1 are the edges of ``edge_index``, which fails
    after ``Data.edge_subgraph``, DropEdge or a node reordering), with a one-line error naming
    the fix. The checks read values back to the host; ``validate_inputs=False`` skips them for data
    known to be consistent, and they are skipped under :func:`torch.compile`.

    Args:
        channels (int): node width :math:`C`.
        heads (int): attention heads :math:`H`.
        attention (str, optional): ``"none"``, ``"rpe"`` (:math:`\mathbf{B}`) or ``"urpe"``
            (:math:`\mathbf{B}` and :math:`\mathbf{C}`). (default: :obj:`"urpe"`)
        relations (list[str], optional): the pairwise relations, among ``"spd"`` and
            ``"resistance"``. (default: :obj:`("spd",)`)
        max_distance (int, optional): largest distinguished SPD (larger distances share the last
            table entry), as :class:`~graph_urpe.nn.Graphormer`'s. (default: :obj:`36`)
        num_kernels (int, optional): Gaussian basis functions per continuous relation.
            (default: :obj:`128`)
        ffn_channels (int, optional): FFN hidden width. (default: :obj:`None`, ``2 * channels``)
        dropout (float, optional): residual dropout. (default: :obj:`0.0`)
        attention_dropout (float, optional): attention-weight dropout. (default: :obj:`0.0`)
        activation_dropout (float, optional): FFN activation dropout. (default: :obj:`0.0`)
        validate_inputs (bool, optional): check the inputs (see above). (default: :obj:`True`)

    Shapes:
        - **input:**
          node features :math:`(|\mathcal{V}|, C)`,
          edge indices :math:`(2, |\mathcal{E}|)` or sparse adjacency
          :math:`(|\mathcal{V}|, |\mathcal{V}|)`,
          batch vector :math:`(|\mathcal{V}|)` *(optional)*,
          pair indices :math:`(2, P)` with :math:`P = \sum_b n_b^2` *(optional)*,
          ``spd`` / ``resistance`` :math:`(P)` *(optional)*,
          ``ptr`` :math:`(B + 1)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, C)`

    Raises:
        ValueError: for ``channels`` not a positive multiple of ``heads``, an unknown
            ``attention`` or relation, ``max_distance < 1`` with
            ``"spd"`` (as :class:`~graph_urpe.transforms.AddShortestPathDistance`), ``x`` not
            ``[num_nodes, channels]`` (:func:`~graph_urpe.batch_checks.check_node_features`),
            a sparse adjacency not ``[num_nodes, num_nodes]``, a
            stored relation that is missing, given without ``pair_index`` or malformed (an
            ``spd`` below ``-1``: ``validate_inputs``), or (``validate_inputs``) inconsistent
            input, stored relations that no longer match ``edge_index`` included.
        TypeError: for ``x`` not a floating-point tensor of the parameters' dtype (outside
            :func:`torch.autocast`; under it, only float64 against another dtype), a non-integer
            ``spd``, ``batch`` or ``ptr``, or
            (``validate_inputs``) a non-integer ``edge_index``.

    Example:
        >>> import torch
        >>> from graph_urpe.nn import URPEGraphConv
        >>> _ = torch.manual_seed(0)
        >>> x = torch.randn(16).repeat(4, 1)  # four nodes with identical features
        >>> path = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
        >>> rpe = URPEGraphConv(16, heads=4, attention="rpe", max_distance=5)
        >>> urpe = URPEGraphConv(16, heads=4, attention="urpe", max_distance=5)
        >>> with torch.no_grad():
        ...     _ = urpe.multiplier.weight[:-1].uniform_(0.0, 2.0)  # a trained C (padding row 0)
        ...     out_rpe, out_urpe = rpe(x, path), urpe(x, path)
        >>> out_urpe.shape
        torch.Size([4, 16])
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
        relations: Sequence[GraphRelation] = ("spd",),
        max_distance: int = 36,
        num_kernels: int = 128,
        ffn_channels: int | None = None,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        validate_inputs: bool = True,
    ) -> None:
        super().__init__()
        check_choice("attention", attention, Attention)
        if heads <= 0 or channels % heads:
            raise ValueError(f"channels ({channels}) must be a positive multiple of heads ({heads}): "
                             f"each head attends over channels / heads features")
        self.validate_inputs = bool(validate_inputs)
        self.relations = check_relations(relations)
        self.channels = channels
        self.heads = heads
        self.attention = attention
        self.max_distance = relation_table_distance(self.relations, max_distance)
        num_graph_relations(max_distance)  # refuses a negative one
        self.layer = GraphormerLayer(
            channels, heads, 2 * channels if ffn_channels is None else ffn_channels,
            dropout, attention_dropout, activation_dropout,
        )
        (self.spatial_bias, self.continuous_bias, self.multiplier,
         self.continuous_multiplier) = relation_modules(attention, self.relations,
                                                        self.max_distance, heads, heads,
                                                        num_kernels)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r"""Reset the layer and the relation terms (the table of :math:`\mathbf{B}`
        ``N(0, 0.02)``, of :math:`\mathbf{C}` ones; the continuous :math:`\mathbf{C}` terms 0)."""
        self.layer.reset_parameters()
        for part in (self.spatial_bias, self.multiplier, self.continuous_bias,
                     self.continuous_multiplier):
            if part is not None:
                part.reset_parameters()

    def forward(
        self,
        x: Tensor,
        edge_index: Tensor,
        batch: Tensor | None = None,
        pair_index: Tensor | None = None,
        spd: Tensor | None = None,
        resistance: Tensor | None = None,
        ptr: Tensor | None = None,
        num_graphs: int | None = None,
        max_num_nodes: int | None = None,
    ) -> Tensor:
        r"""Update node features; see the class docstring.

        Args:
            x (Tensor): node features :math:`(|\mathcal{V}|, C)`.
            edge_index (LongTensor or SparseTensor): edges :math:`(2, |\mathcal{E}|)` (global
                indices), or a sparse adjacency :math:`(|\mathcal{V}|, |\mathcal{V}|)`.
            batch (LongTensor, optional): graph of each node. (default: :obj:`None`, one graph)
            pair_index (Tensor, optional): the stored pair index (with ``spd`` /
                ``resistance``); :obj:`None` computes the relations from ``edge_index``.
                (default: :obj:`None`)
            spd, resistance (Tensor, optional): the stored relation values, aligned with
                ``pair_index``. (default: :obj:`None`)
            ptr (LongTensor, optional): node offsets (preferred to ``batch``; both must agree).
                (default: :obj:`None`)
            num_graphs (int, optional): number of graphs (with ``batch``; saves a host read).
                (default: :obj:`None`)
            max_num_nodes (int, optional): largest graph (saves a host read when
                ``validate_inputs=False``). (default: :obj:`None`)
        """
        check_node_features(x, self.channels, type(self).__name__,
                            next(self.parameters()).dtype)
        if is_sparse(edge_index):  # SparseTensor or torch.sparse, as PyG's convolutions take
            if tuple(edge_index.shape) != (x.shape[0], x.shape[0]):
                raise ValueError(
                    f"the sparse adjacency must be [num_nodes, num_nodes] = [{x.shape[0]}, "
                    f"{x.shape[0]}], got {list(edge_index.shape)}: build it with "
                    "sparse_sizes=(num_nodes, num_nodes)"
                )
            edge_index = to_edge_index(edge_index)[0]
        stored = {"spd": spd, "resistance": resistance}
        given = [name for name, value in stored.items() if value is not None]
        if pair_index is None and given:
            raise ValueError(
                f"{' and '.join(given)} given without pair_index, whose columns the values are "
                f"aligned with: pass pair_index=data.pair_index too, or leave out "
                f"{' and '.join(given)} to compute the relations from edge_index"
            )
        validate = self.validate_inputs and not torch.compiler.is_compiling()
        h, key_padding_mask, ids, values, vec, counts, _ = densify_graphs(
            x, {name: stored[name] for name in self.relations}, pair_index, batch, ptr, None,
            self.max_distance, num_graphs=num_graphs, max_num_nodes=max_num_nodes,
            validate=validate, edge_index=edge_index,
        )
        bias = relation_term(self.spatial_bias, self.continuous_bias, ids, values)
        mult = relation_term(self.multiplier, self.continuous_multiplier, ids, values)
        h = self.layer(h, bias, mult, key_padding_mask)
        return from_dense_batch(h, vec, counts)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.channels}, heads={self.heads}, "
                f"attention={self.attention!r}, relations={self.relations})")
