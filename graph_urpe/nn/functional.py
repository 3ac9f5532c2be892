"""The URPE attention core shared by the graph and sequence models.

Implements Universal RPE-based attention (Luo et al., "Your Transformer May Not be as Powerful as
You Expect", NeurIPS 2022, arXiv 2205.13401, Eq. (4))::

    Attn_U(X) = (softmax(Q K^T / sqrt(d) + B) ⊙ C) V

``B`` is the additive relative positional encoding (RPE) bias, ``C`` the URPE multiplier applied
element-wise *after* the softmax (no renormalisation, no sign constraint). With ``C`` omitted this
is plain RPE attention (Eq. (2)); with ``B`` omitted too, plain scaled dot-product attention.

Two execution paths give the same values to float32 round-off:

* **dense**: the full ``[B, H, Nq, Nk]`` score tensor is materialised;
* **chunked**: queries are processed in blocks of ``chunk_size`` rows, each block recomputed in the
  backward pass (activation checkpointing), so peak memory is ``O(B * H * chunk_size * Nk)`` instead
  of ``O(B * H * Nq * Nk)``. It is chosen automatically when the score tensor would exceed
  :data:`AUTO_CHUNK_ELEMENTS` elements.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint

__all__ = ["urpe_attention", "AUTO_CHUNK_ELEMENTS"]

#: Score tensors with more than this many elements (``B * H * Nq * Nk``; 2**28 is 1 GiB in float32)
#: are computed with the chunked path when ``chunk_size`` is not given.
AUTO_CHUNK_ELEMENTS: int = 2**28


def _check_broadcast(name: str, t: Tensor | None, target: tuple[int, ...]) -> None:
    if t is None:
        return
    ok = t.dim() <= 4
    if ok:
        try:
            ok = torch.broadcast_shapes(t.shape, target) == torch.Size(target)
        except RuntimeError:
            ok = False
    if not ok:
        b, h, nq, nk = target
        raise ValueError(
            f"{name} has shape {tuple(t.shape)}, which does not broadcast to [B, H, Nq, Nk] = "
            f"{list(target)}; pass a tensor of shape [{b}, {h}, {nq}, {nk}], [{h}, {nq}, {nk}] "
            f"or [1, {h}, {nq}, {nk}]."
        )


def _validate(query, key, value, attn_bias, multiplier, key_padding_mask) -> None:
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dim() != 4:
            raise ValueError(
                f"{name} must have shape [B, H, N, D] (4 dimensions), got {tuple(t.shape)}; "
                f"reshape [B, N, H*D] inputs with .view(B, N, H, D).transpose(1, 2)."
            )
    b, h, nq, d = query.shape
    if key.shape[:2] != (b, h) or key.shape[-1] != d:
        raise ValueError(
            f"key has shape {tuple(key.shape)}; expected [{b}, {h}, Nk, {d}] to match query "
            f"{tuple(query.shape)}."
        )
    nk = key.shape[2]
    if value.shape[:3] != (b, h, nk):
        raise ValueError(
            f"value has shape {tuple(value.shape)}; expected [{b}, {h}, {nk}, Dv] to match key "
            f"{tuple(key.shape)}."
        )
    target = (b, h, nq, nk)
    _check_broadcast("attn_bias", attn_bias, target)
    _check_broadcast("multiplier", multiplier, target)
    if key_padding_mask is not None:
        if key_padding_mask.dtype != torch.bool or tuple(key_padding_mask.shape) != (b, nk):
            raise ValueError(
                f"key_padding_mask must be a bool tensor of shape [B, Nk] = [{b}, {nk}] "
                f"(True = padded), got dtype {key_padding_mask.dtype} and shape "
                f"{tuple(key_padding_mask.shape)}."
            )


def _hidden_mask(
    key_padding_mask: Tensor | None, is_causal: bool, q_start: int, nq: int, nk: int, device
) -> Tensor | None:
    """Bool mask broadcastable to ``[B, 1, nq, nk]``, True where a key is hidden from a query."""
    mask = None
    if key_padding_mask is not None:
        mask = key_padding_mask[:, None, None, :]
    if is_causal:
        q_pos = torch.arange(q_start, q_start + nq, device=device)
        causal = torch.arange(nk, device=device)[None, :] > q_pos[:, None]
        mask = causal if mask is None else (mask | causal)
    return mask


def _empty_rows(
    key_padding_mask: Tensor | None, is_causal: bool, q_start: int, nq: int
) -> Tensor | None:
    """Bool ``[B, 1, nq, 1]``: True for query rows whose keys are all hidden (output must be 0)."""
    if key_padding_mask is None:
        return None
    if is_causal:
        # Row i sees keys 0..i; it is empty iff all of them are padded.
        all_padded_prefix = key_padding_mask.long().cumprod(dim=1).bool()
        nk = key_padding_mask.shape[1]
        last_key = torch.arange(q_start, q_start + nq, device=key_padding_mask.device).clamp(
            max=nk - 1
        )
        rows = all_padded_prefix[:, last_key]
    else:
        rows = key_padding_mask.all(dim=1, keepdim=True).expand(-1, nq)
    return rows[:, None, :, None]


def _attention_block(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_bias: Tensor | None,
    multiplier: Tensor | None,
    key_padding_mask: Tensor | None,
    is_causal: bool,
    dropout_p: float,
    training: bool,
    q_start: int,
) -> tuple[Tensor, Tensor]:
    nq, nk = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    # Softmax in at least float32 (float64 stays float64), also for bf16/fp16 inputs.
    acc = torch.promote_types(q.dtype, torch.float32)
    scores = torch.matmul(q * scale, k.transpose(-2, -1)).to(acc)
    if attn_bias is not None:
        scores = scores + attn_bias.to(acc)
    hidden = _hidden_mask(key_padding_mask, is_causal, q_start, nq, nk, q.device)
    if hidden is not None:
        # A finite fill keeps fully hidden rows NaN-free (in values and gradients); their
        # probabilities are zeroed below. Elsewhere exp(min - rowmax) underflows to exactly 0.
        scores = scores.masked_fill(hidden, torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores, dim=-1)
    empty = _empty_rows(key_padding_mask, is_causal, q_start, nq)
    if empty is not None:
        probs = probs.masked_fill(empty, 0.0)
    weights = probs if multiplier is None else probs * multiplier.to(probs.dtype)
    if dropout_p > 0.0 and training:
        weights = F.dropout(weights, p=dropout_p)
    out = torch.matmul(weights.to(v.dtype), v)
    return out, probs


def _slice_rows(t: Tensor | None, start: int, stop: int) -> Tensor | None:
    if t is None or t.shape[-2] == 1:
        return t
    return t[..., start:stop, :]


def urpe_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_bias: Tensor | None = None,
    multiplier: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    chunk_size: int | None = None,
    need_weights: bool = False,
    training: bool = True,
) -> Tensor | tuple[Tensor, Tensor]:
    r"""URPE attention ``(softmax(Q K^T / sqrt(D) + B) ⊙ C) V``.

    Source: Luo et al., NeurIPS 2022 (arXiv 2205.13401), Eq. (4); with ``multiplier=None`` it is
    RPE attention, Eq. (2). Padded keys (and, with ``is_causal``, keys ``j > i``) get probability
    0; a query row whose keys are all hidden returns zeros (never NaN). The softmax is always
    computed in float32, also under bf16/fp16 autocast; the output has ``value``'s dtype.

    Args:
        query (Tensor): queries, float.
        key (Tensor): keys, same dtype as ``query``.
        value (Tensor): values.
        attn_bias (Tensor, optional): additive bias ``B`` (e.g. spatial encoding), broadcastable
            to ``[B, H, Nq, Nk]``. (default: :obj:`None`, no bias)
        multiplier (Tensor, optional): URPE multiplier ``C``, broadcastable to
            ``[B, H, Nq, Nk]``, applied after the softmax. (default: :obj:`None`, plain RPE)
        key_padding_mask (BoolTensor, optional): ``True`` where a key is padding.
            (default: :obj:`None`)
        is_causal (bool, optional): hide keys ``j > i`` (query ``i`` at position ``i``).
            (default: :obj:`False`)
        dropout_p (float, optional): dropout on the final attention weights (after ``C``),
            applied only when ``training`` is true. (default: :obj:`0.0`)
        chunk_size (int, optional): process queries in blocks of this many rows with
            recomputation in backward, bounding peak memory to ``O(B*H*chunk_size*Nk)``.
            (default: :obj:`None`: dense, unless ``B*H*Nq*Nk > AUTO_CHUNK_ELEMENTS``)
        need_weights (bool, optional): also return the softmax probabilities (before ``C``, as
            the official URPE code does). (default: :obj:`False`)
        training (bool, optional): whether dropout is active. (default: :obj:`True`)

    Shapes:
        - **query**: ``[B, H, Nq, D]``; **key**: ``[B, H, Nk, D]``; **value**: ``[B, H, Nk, Dv]``
        - **attn_bias**, **multiplier**: broadcastable to ``[B, H, Nq, Nk]``, e.g.
          ``[H, Nq, Nk]`` or ``[1, H, Nq, Nk]``
        - **key_padding_mask**: ``[B, Nk]``
        - **output**: ``[B, H, Nq, Dv]``; with ``need_weights`` also ``[B, H, Nq, Nk]`` (float32)

    Raises:
        ValueError: if a tensor does not have the shape above (the message names the tensor and
            the expected shape) or ``chunk_size`` is not positive.
    """
    _validate(query, key, value, attn_bias, multiplier, key_padding_mask)
    b, h, nq, _ = query.shape
    nk = key.shape[2]
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError(f"chunk_size must be a positive int or None, got {chunk_size}.")
    if chunk_size is None and b * h * nq * nk > AUTO_CHUNK_ELEMENTS:
        chunk_size = max(1, AUTO_CHUNK_ELEMENTS // (b * h * nk))
    if need_weights or chunk_size is None or chunk_size >= nq:
        out, probs = _attention_block(
            query, key, value, attn_bias, multiplier, key_padding_mask, is_causal,
            dropout_p, training, 0,
        )
        return (out, probs) if need_weights else out

    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad
        for t in (query, key, value, attn_bias, multiplier)
    )
    outs = []
    for start in range(0, nq, chunk_size):
        stop = min(start + chunk_size, nq)
        args = (
            query[:, :, start:stop], key, value,
            _slice_rows(attn_bias, start, stop), _slice_rows(multiplier, start, stop),
            key_padding_mask, is_causal, dropout_p, training, start,
        )
        if needs_grad:
            out = checkpoint(_attention_block, *args, use_reentrant=False)[0]
        else:
            out = _attention_block(*args)[0]
        outs.append(out)
    return torch.cat(outs, dim=2)
