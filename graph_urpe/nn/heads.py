"""Graph-level readout heads: the graph token's embedding, or mean / sum pooling over nodes, then a
linear layer or a one-hidden-layer MLP (Chemprop's feed-forward head)."""

from __future__ import annotations

from typing import Literal

from torch import Tensor, nn
from torch_geometric.nn import global_add_pool, global_mean_pool

from graph_urpe.choices import check_at_least, check_choice
from graph_urpe.nn._dropout import Dropout

__all__ = ["GraphHead", "Readout"]

#: Graph-level readouts of :class:`GraphHead`.
Readout = Literal["graph_token", "mean", "sum"]


class GraphHead(nn.Module):
    r"""Graph-level head: a readout of the encoder's output, then a linear layer or an MLP.

    Readouts: ``"graph_token"`` (the token's embedding, Graphormer), ``"mean"`` or ``"sum"`` over
    each graph's nodes (:func:`torch_geometric.nn.global_mean_pool` / ``global_add_pool``). With
    :obj:`hidden_dim`, the pooled embedding goes through one hidden layer first,
    :math:`\mathbf{W}_2\,\mathrm{Dropout}(\mathrm{ReLU}(\mathbf{W}_1 \mathbf{h} + \mathbf{b}_1)) +
    \mathbf{b}_2`, as Chemprop's feed-forward head (Yang et al., J. Chem. Inf. Model. 2019); without
    it Graphormer's single linear layer.

    Args:
        embed_dim (int): input width.
        num_tasks (int): outputs per graph.
        readout (str, optional): ``"graph_token"``, ``"mean"`` or ``"sum"``.
            (default: :obj:`"graph_token"`)
        hidden_dim (int, optional): width of the hidden layer; :obj:`None` for a linear head.
            (default: :obj:`None`)
        dropout (float, optional): dropout after the hidden layer's ReLU (only with
            :obj:`hidden_dim`). (default: :obj:`0.0`)

    Shapes:
        - **nodes**: ``[num_nodes, embed_dim]``; **token**: ``[B, embed_dim]`` (for
          ``"graph_token"``); **batch**: ``[num_nodes]``
        - **output**: ``[B, num_tasks]``

    Raises:
        ValueError: for an unknown ``readout``, a non-positive ``hidden_dim``, a ``dropout``
            outside ``[0, 1)``, or ``token=None`` with ``"graph_token"``.
    """

    def __init__(self, embed_dim: int, num_tasks: int, readout: Readout = "graph_token",
                 hidden_dim: int | None = None, dropout: float = 0.0) -> None:
        super().__init__()
        check_choice("readout", readout, Readout)
        if hidden_dim is not None:
            check_at_least(1, hidden_dim=hidden_dim)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}.")
        self.readout = readout
        self.hidden = None if hidden_dim is None else nn.Sequential(
            nn.Linear(embed_dim, hidden_dim), nn.ReLU(), Dropout(dropout))
        self.linear = nn.Linear(embed_dim if hidden_dim is None else hidden_dim, num_tasks)

    def reset_parameters(self) -> None:
        """Reset the linear layers."""
        if self.hidden is not None:
            self.hidden[0].reset_parameters()
        self.linear.reset_parameters()

    def pool(self, nodes: Tensor, token: Tensor | None, batch: Tensor, num_graphs: int) -> Tensor:
        """The readout alone: the molecule embedding ``[num_graphs, embed_dim]`` the head reads
        (the graph token's embedding, or the mean / sum of each graph's node embeddings)."""
        if self.readout == "graph_token":
            if token is None:
                raise ValueError("readout='graph_token' needs the graph token; build the encoder "
                                 "with graph_token=True or use readout='mean' / 'sum'.")
            return token
        if self.readout == "mean":
            return global_mean_pool(nodes, batch, size=num_graphs)
        return global_add_pool(nodes, batch, size=num_graphs)

    def forward(self, nodes: Tensor, token: Tensor | None, batch: Tensor, num_graphs: int) -> Tensor:
        """Predict ``[num_graphs, num_tasks]``; see the class docstring."""
        pooled = self.pool(nodes, token, batch, num_graphs)
        if self.hidden is not None:
            pooled = self.hidden(pooled)
        return self.linear(pooled)

    def __repr__(self) -> str:
        embed_dim = self.linear.in_features if self.hidden is None else \
            self.hidden[0].in_features
        hidden = "" if self.hidden is None else \
            f", hidden_dim={self.hidden[0].out_features}, dropout={self.hidden[2].p}"
        return (f"{self.__class__.__name__}({embed_dim}, {self.linear.out_features}, "
                f"readout={self.readout!r}{hidden})")
