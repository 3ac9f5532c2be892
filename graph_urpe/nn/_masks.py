"""Key masks shared by every URPE attention path (padding and causality).

Hidden keys are *added* a large negative number, not ``masked_fill``-ed with ``-inf``: half the
most negative finite value of the softmax dtype makes ``exp(fill + s - rowmax)`` underflow to
exactly 0 next to any visible key, and keeps rows whose keys are all hidden finite (no NaN in values
or gradients); those rows' outputs are set to 0 by :func:`empty_rows`. (A broadcast ``masked_fill_``
is also several times slower than an add on CPU.)
"""

from __future__ import annotations

import torch
from torch import Tensor


def hidden_mask(
    key_padding_mask: Tensor | None, is_causal: bool, q_start: int, nq: int, nk: int, device
) -> Tensor | None:
    """Bool mask broadcastable to ``[B, 1, nq, nk]``, True where a key is hidden from a query.

    Query row ``r`` of the block is at position ``q_start + r``; with ``is_causal`` it sees keys
    ``0 .. q_start + r``.
    """
    mask = None
    if key_padding_mask is not None:
        mask = key_padding_mask[:, None, None, :]
    if is_causal:
        q_pos = torch.arange(q_start, q_start + nq, device=device)
        causal = torch.arange(nk, device=device)[None, :] > q_pos[:, None]
        mask = causal if mask is None else (mask | causal)
    return mask


def additive_mask(hidden: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """``hidden`` as an additive float mask: 0 where visible, ``finfo(dtype).min / 2`` where hidden."""
    if hidden is None:
        return None
    fill = torch.zeros(hidden.shape, dtype=dtype, device=hidden.device)
    return fill.masked_fill_(hidden, torch.finfo(dtype).min / 2)


def empty_rows(
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
