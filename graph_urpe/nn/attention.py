"""Multi-head URPE attention: the query/key/value projections around :func:`urpe_attention`."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from graph_urpe.nn.functional import urpe_attention

__all__ = ["MultiheadURPEAttention"]


class _SplitHeads(torch.autograd.Function):
    """``qkv [B, N, 3, H, d]`` -> the views ``q, k, v [B, H, N, d]``, with a backward that writes
    ``dQ, dK, dV`` straight into one ``[B, N, 3, H, d]`` gradient (one strided copy each).

    Autograd's backward of ``permute(2, 0, 3, 1, 4).unbind(0)`` stacks the three gradients into a
    ``[3, B, H, N, d]`` tensor and then copies it again into the projection's ``[B, N, 3E]``
    layout: two full copies where one does (``benchmarks/README.md`` section 17).
    """

    @staticmethod
    def forward(ctx, qkv: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        ctx.set_materialize_grads(False)
        return qkv.permute(2, 0, 3, 1, 4).unbind(0)

    @staticmethod
    def backward(ctx, *grads: Tensor | None) -> Tensor | None:
        ref = next((g for g in grads if g is not None), None)
        if ref is None:
            return None
        b, h, n, d = ref.shape
        out = ref.new_empty(b, n, 3, h, d)
        for i, g in enumerate(grads):
            if g is None:
                out[:, :, i].zero_()
            else:
                out[:, :, i].copy_(g.transpose(1, 2))
        return out


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

        The core is :func:`~graph_urpe.nn.functional.urpe_attention`; with ``need_weights=True``
        it runs dense (``chunk_size`` is ignored) and also returns ``P``, from which
        ``P ⊙ C`` is formed (both ``[B, H, N, N]``, for analysis).
        """
        if x.dim() != 3 or x.shape[-1] != self.embed_dim:
            raise ValueError(
                f"x must have shape [B, N, {self.embed_dim}], got {tuple(x.shape)}."
            )
        b, n, _ = x.shape
        qkv = self.qkv_proj(x).view(b, n, 3, self.num_heads, self.head_dim)
        q, k, v = _SplitHeads.apply(qkv)
        res = urpe_attention(
            q, k, v,
            attn_bias=attn_bias,
            multiplier=multiplier,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            dropout_p=self.dropout if self.training else 0.0,
            chunk_size=chunk_size,
            need_weights=need_weights,
        )
        out, probs = res if need_weights else (res, None)
        out = self.out_proj(out.transpose(1, 2).reshape(b, n, self.embed_dim))
        if not need_weights:
            return out
        weighted = probs if multiplier is None else probs * multiplier.to(probs.dtype)
        return out, (probs, weighted)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.embed_dim}, num_heads={self.num_heads}, "
            f"dropout={self.dropout})"
        )
