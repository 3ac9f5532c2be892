"""Graphormer for graph- or node-level prediction: :class:`~graph_urpe.nn.GraphormerEncoder`
(:mod:`graph_urpe.nn.graphormer`, where the encodings and choices are described) and a head."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor, nn
from torch_geometric.data import Data

from graph_urpe.choices import check_at_least, check_choice
from graph_urpe.constants import PAIR_INDEX
from graph_urpe.dense import batch_vector, node_counts
from graph_urpe.nn.graphormer import AttentionMaps, GraphormerEncoder, _init_linear
from graph_urpe.nn.heads import GraphHead, Readout

__all__ = ["Graphormer"]

Level = Literal["graph", "node"]
EmbedLayer = Literal["encoder", "hidden"]


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
            ``relations``, ``num_kernels``, ``max_degree``, ``max_hops``, ``edge_encoding``, ``bias_per_layer``,
            ``multiplier_per_layer``, ``directed_degree``, ``centrality_encoding``,
            ``graph_token``, ``dropout``, ``attention_dropout``, ``activation_dropout``,
            ``input_dropout``, ``validate_inputs``).

    Shapes:
        - **input**: a :class:`~torch_geometric.data.Batch` (or one
          :class:`~torch_geometric.data.Data`) with ``x`` ``[n, F]`` long, ``edge_index``
          ``[2, E]``, ``edge_attr`` ``[E, Fe]`` long, ``pair_index`` and the relations
          (``spd``, ``spd_pred_index``, ``resistance``) of :mod:`graph_urpe.transforms`,
          ``batch``, ``ptr``.
        - **output**: ``[num_graphs, num_tasks * outputs_per_task]`` (graph level) or
          ``[num_nodes, num_tasks * outputs_per_task]`` (node level); with
          ``return_attention=True`` also the per-layer attention maps of
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
    def relations(self) -> list[str]:
        """The pairwise relations the network reads (``"spd"``, ``"resistance"``): what a
        molecule's graph must hold (:func:`~graph_urpe.transforms.pair_pre_transform`)."""
        return self.encoder.relations

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
        res = self.encoder(
            batch.x, batch.edge_index, batch.get(PAIR_INDEX), batch=vec, ptr=ptr,
            edge_attr=batch.get("edge_attr"), spd=batch.get("spd"),
            spd_pred_index=batch.get("spd_pred_index"), resistance=batch.get("resistance"),
            num_graphs=num_graphs, return_attention=return_attention,
        )
        if vec is None and self.level == "graph":
            nodes = res[0]
            vec = (batch_vector(nodes.shape[0], node_counts(nodes, None, ptr, num_graphs))
                   if ptr is not None else
                   torch.zeros(nodes.shape[0], dtype=torch.long, device=nodes.device))
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
