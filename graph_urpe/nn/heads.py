"""Graph-level readout heads: the graph token's embedding, or mean / sum pooling over nodes."""

from __future__ import annotations

from typing import Literal

from torch import Tensor, nn
from torch_geometric.nn import global_add_pool, global_mean_pool

from graph_urpe.choices import check_choice

__all__ = ["GraphHead", "Readout"]

#: Graph-level readouts of :class:`GraphHead`.
Readout = Literal["graph_token", "mean", "sum"]


class GraphHead(nn.Module):
    r"""Graph-level head: a readout of the encoder's output, then a linear layer.

    Readouts: ``"graph_token"`` (the token's embedding, Graphormer), ``"mean"`` or ``"sum"`` over
    each graph's nodes (:func:`torch_geometric.nn.global_mean_pool` / ``global_add_pool``).

    Args:
        embed_dim (int): input width.
        num_tasks (int): outputs per graph.
        readout (str, optional): ``"graph_token"``, ``"mean"`` or ``"sum"``.
            (default: :obj:`"graph_token"`)

    Shapes:
        - **nodes**: ``[num_nodes, embed_dim]``; **token**: ``[B, embed_dim]`` (for
          ``"graph_token"``); **batch**: ``[num_nodes]``
        - **output**: ``[B, num_tasks]``

    Raises:
        ValueError: for an unknown ``readout``, or ``token=None`` with ``"graph_token"``.
    """

    def __init__(self, embed_dim: int, num_tasks: int, readout: Readout = "graph_token") -> None:
        super().__init__()
        check_choice("readout", readout, Readout)
        self.readout = readout
        self.linear = nn.Linear(embed_dim, num_tasks)

    def reset_parameters(self) -> None:
        """Reset the linear layer."""
        self.linear.reset_parameters()

    def forward(self, nodes: Tensor, token: Tensor | None, batch: Tensor, num_graphs: int) -> Tensor:
        """Predict ``[num_graphs, num_tasks]``; see the class docstring."""
        if self.readout == "graph_token":
            if token is None:
                raise ValueError("readout='graph_token' needs the graph token; build the encoder "
                                 "with graph_token=True or use readout='mean' / 'sum'.")
            pooled = token
        elif self.readout == "mean":
            pooled = global_mean_pool(nodes, batch, size=num_graphs)
        else:
            pooled = global_add_pool(nodes, batch, size=num_graphs)
        return self.linear(pooled)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.linear.in_features}, "
                f"{self.linear.out_features}, readout={self.readout!r})")
