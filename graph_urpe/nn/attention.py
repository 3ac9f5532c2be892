"""Multi-head URPE attention: the query/key/value projections around :func:`urpe_attention`."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from graph_urpe.nn.functional import urpe_attention

__all__ = ["MultiheadURPEAttention"]


class MultiheadURPEAttention(nn.Module):
    r"""Multi-head self-attention with an optional RPE bias ``B`` and URPE multiplier ``C``.

    .. math::
        \mathrm{head}_h = \left(\mathrm{softmax}\left(\frac{Q_h K_h^\top}{\sqrt{d}} + B_h\right)
        \odot C_h\right) V_h, \qquad
        \mathrm{out} = [\mathrm{head}_1, \dots, \mathrm{head}_H] W^O

    Source: Luo et al., NeurIPS 2022 (arXiv 2205.13401), Eq. (4). ``B`` and ``C`` are passed in
    (built by :class:`~graph_urpe.nn.RelationEmbedding` from relative positions or shortest-path
    distances), so one module serves sequences and graphs.

    Args:
        embed_dim (int): model width ``E``; must be divisible by ``num_heads``.
        num_heads (int): number of heads ``H``.
        dropout (float, optional): dropout on the attention weights (after ``C``).
            (default: :obj:`0.0`)
        bias (bool, optional): learn additive biases in the projections. (default: :obj:`True`)

    Shapes:
        - **x**: ``[B, N, E]``
        - **attn_bias**, **multiplier**: broadcastable to ``[B, H, N, N]``
        - **key_padding_mask**: ``[B, N]`` bool, ``True`` = padded
        - **output**: ``[B, N, E]``; with ``need_weights=True`` the pair
          ``(output, (weights, weights_c))``: the attention probabilities before ``C``,
          ``softmax(QK^T / sqrt(d) + B)``, and after it, ``softmax(...) ⊙ C``, each
          ``[B, H, N, N]`` float32 (before attention dropout; padded keys get 0)

    Raises:
        ValueError: if ``embed_dim`` is not divisible by ``num_heads``, ``x`` is not
            ``[B, N, embed_dim]``, or a mask/bias has the wrong shape.
    """

    def __init__(
        self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True
    ) -> None:
        super().__init__()
        if num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(
                f"embed_dim ({embed_dim}) must be a positive multiple of num_heads ({num_heads})."
            )
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.qkv_proj = nn.Linear(embed_dim, 3 * embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform projections (as :class:`torch.nn.MultiheadAttention`), zero biases."""
        nn.init.xavier_uniform_(self.qkv_proj.weight)
        nn.init.xavier_uniform_(self.out_proj.weight)
        for lin in (self.qkv_proj, self.out_proj):
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)

    def forward(
        self,
        x: Tensor,
        attn_bias: Tensor | None = None,
        multiplier: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        chunk_size: int | None = None,
    ) -> Tensor | tuple[Tensor, tuple[Tensor, Tensor]]:
        """Self-attention over ``x``; see the class docstring for shapes.

        With ``need_weights=True`` the output is computed by the plain eager equation
        (:meth:`_eager_with_weights`, for analysis: it materialises both maps and ignores
        ``chunk_size``); otherwise by :func:`~graph_urpe.nn.functional.urpe_attention`.
        """
        if x.dim() != 3 or x.shape[-1] != self.embed_dim:
            raise ValueError(
                f"x must have shape [B, N, {self.embed_dim}], got {tuple(x.shape)}."
            )
        b, n, _ = x.shape
        qkv = self.qkv_proj(x).view(b, n, 3, self.num_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            out, weights = self._eager_with_weights(
                q, k, v, attn_bias, multiplier, key_padding_mask, is_causal, dropout_p
            )
        else:
            out = urpe_attention(
                q, k, v,
                attn_bias=attn_bias,
                multiplier=multiplier,
                key_padding_mask=key_padding_mask,
                is_causal=is_causal,
                dropout_p=dropout_p,
                chunk_size=chunk_size,
            )
        out = self.out_proj(out.transpose(1, 2).reshape(b, n, self.embed_dim))
        return (out, weights) if need_weights else out

    @staticmethod
    def _eager_with_weights(q, k, v, attn_bias, multiplier, key_padding_mask, is_causal, dropout_p):
        """``(softmax(QK^T/sqrt(d) + B) ⊙ C) V`` written out (Luo et al., 2022, Eq. (4)), float32
        softmax; returns the output ``[B, H, N, D]`` and ``(P, P ⊙ C)``."""
        scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
        if attn_bias is not None:
            scores = scores + attn_bias.float()
        hidden = torch.zeros(scores.shape[-2:], dtype=torch.bool, device=scores.device)
        if is_causal:
            hidden = torch.ones_like(hidden).triu(1)
        if key_padding_mask is not None:
            hidden = hidden | key_padding_mask[:, None, None, :]
        scores = scores.masked_fill(hidden, float("-inf"))
        # A row with every key hidden gives zeros (as urpe_attention), not NaN.
        probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        weighted = probs if multiplier is None else probs * multiplier.float()
        out = F.dropout(weighted, dropout_p) @ v.float()
        return out.to(v.dtype), (probs, weighted)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.embed_dim}, num_heads={self.num_heads}, "
            f"dropout={self.dropout})"
        )
