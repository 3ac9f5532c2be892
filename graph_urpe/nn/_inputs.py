"""The operands of one URPE attention call, as one record.

:func:`~graph_urpe.nn.functional.urpe_attention` validates them once and hands the record to the
backends that never form the attention weights (``_flex.py``, ``_triton.py``). The eager and fused
blocks keep the positional form of :func:`~graph_urpe.nn.functional.eager_attention`, which the
chunked path (``_chunked.py``) calls once per block of query rows with sliced ``B`` and ``C``.
"""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor

__all__ = ["AttentionInputs"]


class AttentionInputs(NamedTuple):
    """What one URPE attention call ``(softmax(Q K^T / sqrt(D) + B) ⊙ C) V`` attends with
    (Luo et al. 2022, Eq. (4)), already validated by
    :func:`~graph_urpe.nn.functional.urpe_attention`.

    Attributes:
        q (Tensor): queries ``[B, H, Nq, D]``.
        k (Tensor): keys ``[B, H, Nk, D]``.
        v (Tensor): values ``[B, H, Nk, Dv]``.
        attn_bias (Tensor or None): the additive bias ``B``, broadcastable to
            ``[B, H, Nq, Nk]``; :obj:`None`: no bias.
        multiplier (Tensor or None): the URPE multiplier ``C``, broadcastable to
            ``[B, H, Nq, Nk]``; :obj:`None`: plain RPE attention.
        key_padding_mask (BoolTensor or None): ``[B, Nk]``, True = padding.
        is_causal (bool): hide keys ``j > i``.
    """

    q: Tensor
    k: Tensor
    v: Tensor
    attn_bias: Tensor | None
    multiplier: Tensor | None
    key_padding_mask: Tensor | None
    is_causal: bool
