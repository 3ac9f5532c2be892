"""The Transformer layer every model here is built from: URPE self-attention and a feed-forward
network, pre- or post-LayerNorm, on dense ``[B, N, E]`` tensors.

:class:`TransformerLayer` is the one block; :class:`GraphormerLayer` is the same block with
Graphormer's defaults (pre-LN, FFN as wide as the model, dropout 0.1). Both take any per-head
``B`` and ``C`` (sequences: relative positions; graphs: shortest-path distances), so users who
batch themselves can use them directly. Names follow :class:`torch.nn.TransformerEncoderLayer`
(``embed_dim``, ``num_heads``, ``ffn_dim``, ``need_weights``); the PyG-layout layer
:class:`~graph_urpe.nn.URPEGraphConv` uses PyG's.
"""

from __future__ import annotations

from typing import Literal

from torch import Tensor, nn

from graph_urpe.choices import check_choice
from graph_urpe.nn._dropout import Dropout
from graph_urpe.nn.attention import MultiheadURPEAttention

__all__ = ["Activation", "GraphormerLayer", "TransformerLayer"]

#: Feed-forward activations.
Activation = Literal["gelu", "relu"]
_ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU}


class TransformerLayer(nn.Module):
    r"""One Transformer layer: URPE self-attention and a position-wise feed-forward network.

    Pre-LN (``norm_first=True``; Graphormer, Ying et al., NeurIPS 2021, Eqs. (8)-(9)):

    .. math::
        \mathbf{h}' = \mathbf{h} + \mathrm{Dropout}(\mathrm{Attn}_U(\mathrm{LN}(\mathbf{h}); B, C)),
        \qquad \mathbf{h}'' = \mathbf{h}' + \mathrm{Dropout}(\mathrm{FFN}(\mathrm{LN}(\mathbf{h}')))

    Post-LN (``norm_first=False``; the official URPE / RoBERTa code):
    ``h' = LN(h + Dropout(Attn_U(h)))``, ``h'' = LN(h' + Dropout(FFN(h')))``. Here
    ``FFN(x) = W_2 Dropout_act(act(W_1 x))`` and :math:`\mathrm{Attn}_U` is
    :class:`~graph_urpe.nn.MultiheadURPEAttention`, ``(softmax(QK^T / sqrt(d) + B) ⊙ C) V``
    (Luo et al., NeurIPS 2022, Eq. (4)).

    Args:
        embed_dim (int): model width ``E``.
        num_heads (int): attention heads ``H`` (must divide ``E``).
        ffn_dim (int, optional): hidden width of the feed-forward network.
            (default: :obj:`None`, ``4 * embed_dim``)
        dropout (float, optional): dropout on the attention and FFN outputs. (default: :obj:`0.0`)
        attention_dropout (float, optional): dropout on the attention weights.
            (default: :obj:`0.0`)
        activation_dropout (float, optional): dropout after the activation. (default: :obj:`0.0`)
        activation (str, optional): ``"gelu"`` or ``"relu"``. (default: :obj:`"gelu"`)
        norm_first (bool, optional): pre-LN instead of post-LN. (default: :obj:`False`)

    Shapes:
        - **x**: ``[B, N, E]`` float
        - **attn_bias**, **multiplier**: broadcastable to ``[B, H, N, N]`` (optional)
        - **key_padding_mask**: ``[B, N]`` bool, ``True`` = padded (optional)
        - **output**: ``[B, N, E]``; with ``need_weights=True`` the pair ``(output, (P, P ⊙ C))``
          of :class:`~graph_urpe.nn.MultiheadURPEAttention`

    Raises:
        ValueError: if ``E`` is not divisible by ``H`` or for an unknown ``activation``.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        ffn_dim: int | None = None,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        activation: Activation = "gelu",
        norm_first: bool = False,
    ) -> None:
        super().__init__()
        check_choice("activation", activation, Activation)
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.ffn_dim = 4 * embed_dim if ffn_dim is None else ffn_dim
        self.activation = activation
        self.norm_first = norm_first
        self.attn_norm = nn.LayerNorm(embed_dim)
        self.attn = MultiheadURPEAttention(embed_dim, num_heads, dropout=attention_dropout)
        self.ffn_norm = nn.LayerNorm(embed_dim)
        self.ffn = nn.Sequential(
            nn.Linear(embed_dim, self.ffn_dim),
            _ACTIVATIONS[activation](),
            Dropout(activation_dropout),
            nn.Linear(self.ffn_dim, embed_dim),
        )
        self.dropout = Dropout(dropout)

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
        is_causal: bool = False,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, tuple[Tensor, Tensor]]:
        """One layer; see the class docstring for shapes."""
        res = self.attn(
            self.attn_norm(x) if self.norm_first else x,
            attn_bias=attn_bias,
            multiplier=multiplier,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            need_weights=need_weights,
        )
        h, weights = res if need_weights else (res, None)
        if self.norm_first:
            x = x + self.dropout(h)
            x = x + self.dropout(self.ffn(self.ffn_norm(x)))
        else:
            x = self.attn_norm(x + self.dropout(h))
            x = self.ffn_norm(x + self.dropout(self.ffn(x)))
        return (x, weights) if need_weights else x

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.embed_dim}, num_heads={self.num_heads}, "
            f"ffn_dim={self.ffn_dim}, norm_first={self.norm_first})"
        )


class GraphormerLayer(TransformerLayer):
    r"""Graphormer's encoder layer (Ying et al., NeurIPS 2021, Eqs. (8)-(9)) with URPE attention:
    a pre-LN :class:`TransformerLayer` with GELU, the FFN as wide as the model by default
    (Graphormer-slim) and dropout 0.1. Usable on its own in any dense graph model: pass any
    per-head bias and multiplier.

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
        See :class:`TransformerLayer`.

    Raises:
        ValueError: if ``embed_dim`` is not divisible by ``num_heads``.
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
        super().__init__(
            embed_dim, num_heads, embed_dim if ffn_dim is None else ffn_dim, dropout,
            attention_dropout, activation_dropout, activation="gelu", norm_first=True,
        )

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.embed_dim}, num_heads={self.num_heads}, "
            f"ffn_dim={self.ffn_dim})"
        )
