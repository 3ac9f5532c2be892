"""The fused URPE attention block: one autograd node with a hand-written backward.

Same values as the eager reference :func:`graph_urpe.nn.functional.eager_attention`
(``out = (softmax(S + B) ⊙ C) V`` with ``S = Q K^T / sqrt(D)``, Luo et al. 2022, Eq. (4)), computed
with fewer full-size ``[B, H, Nq, Nk]`` passes and allocations than autograd's graph of the same
ops (on CPU a fresh large allocation costs about as much as an element-wise pass: its pages fault
in one by one). With ``P = softmax(S + B)``, ``W = P ⊙ C`` (then dropout), ``out = W V``:

forward (full-size passes): ``S = Q K^T`` (matmul), ``S += B`` and ``S += mask`` (in place),
``P = softmax(S)`` (into ``S``'s storage on CPU), ``W = P ⊙ C`` (URPE only), ``out = W V`` (matmul).
Saved: ``Q, K, V, P, C`` and ``W`` (URPE only; RPE's ``W`` is ``P``) plus dropout's bool mask.
Dropout (training, ``p > 0``): ``W ⊙ mask`` in place, with the mask of
:func:`graph_urpe.nn._dropout.keep_mask` (16 random bits per weight on CPU) and the ``1 / (1 - p)``
factor applied to ``out`` (and ``dO``), which have ``D`` columns instead of ``Nk``.

backward, given ``dO``::

    dW = dO V^T                                  # matmul
    dV = W^T dO                                  # matmul
    dC = sum_to(dW ⊙ P, C.shape)                 # 1 pass (accumulated per batch slice)
    dP = dW ⊙ C                                  # 1 pass, in place on dW
    dS = P ⊙ (dP - rowsum(dP ⊙ P))               # 1 fused kernel, in place on dP (CPU)
    dB = sum_to(dS, B.shape)                     # 1 reduction (only when B is broadcast)
    dQ = dS K / sqrt(D),  dK = dS^T Q / sqrt(D)  # matmuls

so URPE costs RPE plus three element-wise passes (``P ⊙ C``, ``dW ⊙ P``, ``dW ⊙ C``) and no
extra allocation in backward. ``W = P ⊙ C`` is saved rather than recomputed (one pass for one
full-size buffer). First-order gradients only (``once_differentiable``); the eager reference is
twice differentiable.

Short rows (CPU): ATen's softmax and softmax-backward kernels take a slow path for rows shorter
than one CPU vector (``Nk`` < 16 float32 with AVX-512, < 8 with AVX2): 4-7x the time of
``amax``, ``sub_``, ``exp_``, ``sum``, ``div_`` (``[64, 8, 9, 9]``, one thread, 720 vs 130 us;
``benchmarks/README.md`` section 19), and batches of small molecules have such rows. There the
block computes ``P`` and ``dS`` with those element-wise ops, in place on the same buffers.

Head-dim padding (CPU): the per-head products whose output has ``D`` columns (``W V``, ``W^T dO``,
``dS K``, ``dS^T Q``) are far slower in MKL's batched GEMM for most ``D < 16`` than for ``D = 16``
(``[1024, 27, 27] x [1024, 27, 10]``: 3.0-5.4x the time of ``D = 16``, one thread;
``benchmarks/README.md`` section 11). On CPU, ``Q``, ``K``, ``V`` and ``dO`` with a head dim below
:data:`CPU_MIN_HEAD_DIM` are copied once into zero-padded buffers of that width (the copy that
makes the permuted head-split views contiguous for the matmuls anyway); the zero columns add
nothing to ``Q K^T`` and ``dO V^T`` and give zero columns in ``W V``, ``dQ``, ``dK``, ``dV``,
which are sliced off. The values are the unpadded ones up to float round-off.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from graph_urpe.nn._dropout import keep_mask
from graph_urpe.nn._masks import additive_mask, empty_rows, hidden_mask

__all__ = ["CPU_MIN_HEAD_DIM", "fused_attention"]

#: On CPU, head dims below this are zero-padded to it inside the fused block (see the module doc).
CPU_MIN_HEAD_DIM: int = 16


def _padded(t: Tensor, width: int) -> Tensor:
    """``t`` with its last dimension zero-padded to ``width`` (a contiguous copy), or ``t``.

    Only the padding columns are zero-filled (``F.pad`` fills the whole buffer first)."""
    d = t.shape[-1]
    if d >= width:
        return t
    out = t.new_empty(*t.shape[:-1], width)
    out[..., :d].copy_(t)
    out[..., d:].zero_()
    return out


#: Bytes in one of ATen's CPU vectors: 64 with its AVX-512 kernels, else 32 (read once: a
#: string from torch cannot be traced by ``torch.compile``).
_CPU_VECTOR_BYTES = 64 if torch.backends.cpu.get_cpu_capability().startswith("AVX512") else 32


def _short_rows(t: Tensor) -> bool:
    """True for a CPU tensor whose last dim is shorter than one of ATen's CPU vectors of its dtype
    (16 float32 with AVX-512, 8 with AVX2): the rows where ATen's softmax kernels are slow."""
    return t.device.type == "cpu" and t.shape[-1] * t.element_size() < _CPU_VECTOR_BYTES


def _pad_width(t: Tensor) -> int:
    """The head dim the fused block computes with: :data:`CPU_MIN_HEAD_DIM` on CPU, else as is."""
    d = t.shape[-1]
    return max(d, CPU_MIN_HEAD_DIM) if t.device.type == "cpu" else d


def _mul_sum_to(a: Tensor, b: Tensor, shape: torch.Size) -> Tensor:
    """``(a * b).sum_to_size(shape)`` for ``a``, ``b`` of the full shape, with less memory traffic.

    When ``shape`` broadcasts over the leading (batch) dimension only, the sum is accumulated
    slice by slice (no full-size product is materialised).
    """
    full = tuple(a.shape)
    if tuple(shape) == full:
        return a * b
    padded = (1,) * (len(full) - len(shape)) + tuple(shape)
    if padded[0] == 1 and padded[1:] == full[1:]:
        acc = a[0] * b[0]
        for i in range(1, full[0]):
            acc.addcmul_(a[i], b[i])
        return acc.reshape(shape)
    return (a * b).sum_to_size(shape)


class _FusedAttention(torch.autograd.Function):
    """``out = dropout(softmax(Q K^T * scale + B + M) ⊙ C) V`` with the backward of the module doc.

    ``M`` is an additive mask (0 / very negative, no gradient); ``empty`` marks query rows whose
    output (and gradient) is 0. ``bias``, ``multiplier``, ``fill``, ``empty`` may be None.
    """

    @staticmethod
    def forward(ctx, q, k, v, bias, multiplier, fill, empty, dropout_p, training, need_probs):
        scale = 1.0 / math.sqrt(q.shape[-1])
        acc = torch.promote_types(q.dtype, torch.float32)  # softmax dtype (>= float32)
        d, dv = q.shape[-1], v.shape[-1]
        width, width_v = _pad_width(q), _pad_width(v)
        if width > d:  # padded copies (module doc); scaled in place
            qs, k = _padded(q, width).mul_(scale), _padded(k, width)
        else:
            qs = q * scale
        v = _padded(v, width_v)
        scores = torch.matmul(qs, k.transpose(-2, -1))  # [B, H, Nq, Nk], fresh
        mm_qk = scores.dtype  # the matmuls' dtype (autocast's, if enabled), replayed in backward
        scores = scores.to(acc)
        if bias is not None:
            scores.add_(bias)
        if fill is not None:
            scores.add_(fill)
        if _short_rows(scores):  # in place, 4-7x faster than ATen's kernel here (module doc)
            probs = scores.sub_(scores.amax(-1, keepdim=True)).exp_()
            probs = probs.div_(probs.sum(-1, keepdim=True))
        elif scores.device.type == "cpu":  # in place: one page-faulting allocation less
            probs = torch._softmax(scores, -1, False, out=scores)
        else:
            probs = torch.softmax(scores, dim=-1)
        del scores
        weights = probs if multiplier is None else probs * multiplier
        keep, rescale = None, 1.0
        if dropout_p > 0.0 and training:
            # 16 random bits per weight on CPU (graph_urpe.nn._dropout: 2.7x cheaper than
            # bernoulli_'s 32). The mask is applied in place on P ⊙ C (a fresh buffer); the
            # 1 / (1 - p) rescaling goes to the [.., Nq, D] output (and to dO in backward)
            # instead of the [.., Nq, Nk] weights.
            keep, rescale = keep_mask(probs, dropout_p)
            weights = probs * keep if multiplier is None else weights.mul_(keep)
        out = torch.matmul(weights.to(v.dtype), v)
        if keep is not None:
            out.mul_(rescale)
        if width_v > dv:
            out = out[..., :dv]
        ctx.mm = (mm_qk, out.dtype)
        if empty is not None:
            out = out.masked_fill_(empty, 0.0)
        ctx.scale, ctx.rescale, ctx.acc = scale, rescale, acc
        ctx.dims = (d, dv)
        ctx.shapes = (
            None if bias is None else bias.shape, None if multiplier is None else multiplier.shape
        )
        ctx.dtypes = (q.dtype, k.dtype, v.dtype,
                      None if bias is None else bias.dtype,
                      None if multiplier is None else multiplier.dtype)
        ctx.save_for_backward(
            qs, k, v, probs, multiplier, None if weights is probs else weights, keep, empty
        )
        ctx.set_materialize_grads(False)
        if need_probs:
            ctx.mark_non_differentiable(probs)
            return out, probs
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out, *_):
        qs, k, v, probs, multiplier, weights, keep, empty = ctx.saved_tensors
        weights = probs if weights is None else weights
        need_q, need_k, need_v, need_b, need_c = ctx.needs_input_grad[:5]
        grads = [None] * 10
        if grad_out is None:
            return tuple(grads)
        mm_qk, mm_wv = ctx.mm  # explicit casts: no autocast context in backward
        d, dv = ctx.dims
        given = grad_out
        grad_out = _padded(grad_out.to(mm_wv), v.shape[-1])  # a copy we own, unless unchanged
        if empty is not None:  # in place on our copy: one [.., Nq, D] pass less
            grad_out = (grad_out.masked_fill(empty, 0.0) if grad_out is given
                        else grad_out.masked_fill_(empty, 0.0))
        if keep is not None:  # the dropout's 1 / (1 - p), on the [.., Nq, D] side
            grad_out = grad_out * ctx.rescale if grad_out is given else grad_out.mul_(ctx.rescale)
        if need_v:
            grads[2] = torch.matmul(weights.to(mm_wv).transpose(-2, -1), grad_out)[..., :dv]
        if not (need_q or need_k or need_b or need_c):
            return tuple(_cast(grads, ctx.dtypes))
        grad_w = torch.matmul(grad_out, v.to(mm_wv).transpose(-2, -1)).to(ctx.acc)
        if keep is not None:
            grad_w.mul_(keep)
        if multiplier is not None:
            if need_c:
                grads[4] = _mul_sum_to(grad_w, probs, ctx.shapes[1])
            grad_w.mul_(multiplier)  # now dP
        if need_q or need_k or need_b:
            # P ⊙ (dP - rowsum(dP ⊙ P)), the kernel autograd's softmax uses; in place on CPU,
            # where the kernel reduces each row before writing it (tested). Rows shorter than
            # ATen's CPU vector: the same formula in three passes (module doc).
            if _short_rows(grad_w):
                grad_s = grad_w.sub_((grad_w * probs).sum(-1, keepdim=True)).mul_(probs)
            else:
                grad_s = torch._softmax_backward_data(
                    grad_w, probs, -1, probs.dtype,
                    grad_input=grad_w if grad_w.device.type == "cpu" else torch.empty_like(grad_w),
                )
            if need_b:
                grads[3] = grad_s.sum_to_size(ctx.shapes[0])
            grad_s = grad_s.to(mm_qk)
            if need_q:
                grads[0] = torch.matmul(grad_s, k.to(mm_qk))[..., :d].mul_(ctx.scale)
            if need_k:
                grads[1] = torch.matmul(grad_s.transpose(-2, -1), qs.to(mm_qk))[..., :d]
        return tuple(_cast(grads, ctx.dtypes))


def _cast(grads: list, dtypes: tuple) -> list:
    return [g if g is None or i >= len(dtypes) or g.dtype == dtypes[i] else g.to(dtypes[i])
            for i, g in enumerate(grads)]


def fused_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_bias: Tensor | None,
    multiplier: Tensor | None,
    key_padding_mask: Tensor | None,
    is_causal: bool,
    dropout_p: float,
    training: bool,
    q_start: int = 0,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """The fused block: ``(out [B, H, nq, Dv], probs [B, H, nq, Nk] or None)``.

    Same arguments and values as :func:`graph_urpe.nn.functional.eager_attention`; ``q`` holds
    query rows ``q_start .. q_start + nq`` (for the causal mask of the chunked path).
    """
    nq, nk = q.shape[-2], k.shape[-2]
    acc = torch.promote_types(q.dtype, torch.float32)
    fill = additive_mask(hidden_mask(key_padding_mask, is_causal, q_start, nq, nk, q.device), acc)
    empty = empty_rows(key_padding_mask, is_causal, q_start, nq)
    bias = None if attn_bias is None else attn_bias.to(acc)
    mult = None if multiplier is None else multiplier.to(acc)
    res = _FusedAttention.apply(q, k, v, bias, mult, fill, empty, dropout_p, training,
                                need_weights)
    if not need_weights:
        return res, None
    out, probs = res
    if empty is not None:
        probs = probs.masked_fill(empty, 0.0)
    return out, probs
