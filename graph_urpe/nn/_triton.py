"""URPE attention as one flash-style Triton kernel, forward and backward (CUDA).

Computes Luo et al. 2022, Eq. (4), ``out = (softmax(S + B) ⊙ C) V`` with ``S = Q K^T * scale``
(``scale = 1 / sqrt(D)``), key by key block with an online softmax: no ``[B, H, Nq, Nk]`` score or
probability tensor is ever stored (only the gradients of ``B`` and ``C`` have that size, when asked).

Forward, per query row ``i`` (one program per ``BLOCK_M`` query rows of one batch and head), over
key blocks, with ``m_i`` the running row maximum::

    numerator   a_i = sum_j exp(s_ij - m_i) c_ij v_j      (rescaled by exp(m_old - m_new))
    denominator l_i = sum_j exp(s_ij - m_i)                (without c: P is normalised before C)
    out_i = a_i / l_i,   L_i = m_i + log l_i               (row log-sum-exp, saved)

so URPE costs RPE plus one multiply per score. Hidden keys (padding, causal) have ``s = -inf``;
a row with no visible key has ``l_i = 0``: its output is 0 and ``L_i = +inf`` (so every
``P_ij = exp(s_ij - L_i)`` recomputed in backward is 0 and the row passes no gradient on), as in
:func:`graph_urpe.nn.functional.eager_attention`.

Backward (the flash backward with ``c`` where it appears), with ``P_ij = exp(s_ij - L_i)`` recomputed
from the saved ``L``, ``W = P ⊙ C`` and ``O = W V``::

    dW_ij = dO_i . v_j
    dV_j  = sum_i W_ij dO_i                       dC_ij = P_ij dW_ij
    dP_ij = c_ij dW_ij                            delta_i = sum_j P_ij dP_ij = dO_i . O_i
    dS_ij = P_ij (dP_ij - delta_i)                dB_ij = dS_ij
    dQ_i  = scale * sum_j dS_ij k_j               dK_j  = scale * sum_i dS_ij q_i

in two kernels: one program per key block accumulates ``dK, dV`` over query blocks; one per query
block accumulates ``dQ`` over key blocks and writes the ``dB`` and ``dC`` tiles. A ``B`` or ``C``
broadcast over some dimension (e.g. shared ``[H, Nq, Nk]`` over the batch) gets its gradient summed
over that dimension by float32 atomic adds (summation order, hence the last bits, may vary between
runs on CUDA).

Matmuls take the inputs' dtype (float32, bfloat16 or float16) and accumulate in float32; float32
inputs use IEEE float32 products unless ``torch.backends.cuda.matmul.allow_tf32`` is set, like
``torch.matmul``. The softmax statistics and ``B``, ``C`` are float32.

On CPU tensors the kernels run in Triton's interpreter, which needs ``TRITON_INTERPRET=1`` set when
this module is first imported (how the tests run; slow, for testing only).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.autograd.function import once_differentiable

from graph_urpe.nn._inputs import AttentionInputs

__all__ = ["INTERPRETED", "triton_attention"]

#: Whether the kernels were built for Triton's interpreter (``TRITON_INTERPRET=1`` at import).
INTERPRETED: bool = bool(triton.knobs.runtime.interpret)


@triton.jit
def _in_tile(rows, cols, n_rows, n_cols):
    """The ``[len(rows), len(cols)]`` bool mask of the entries inside ``n_rows x n_cols``."""
    return (rows[:, None] < n_rows) & (cols[None, :] < n_cols)


@triton.jit
def _tile(ptr, rows, cols, stride_r, stride_c, n_rows, n_cols):
    """Load the ``[len(rows), len(cols)]`` tile at ``ptr`` (row and column strides
    ``stride_r, stride_c``), 0 outside ``n_rows x n_cols``."""
    return tl.load(ptr + rows[:, None] * stride_r + cols[None, :] * stride_c,
                   mask=_in_tile(rows, cols, n_rows, n_cols), other=0.0)


@triton.jit
def _batch_head(H, K, V, Bias, Mult, skb, skh, svb, svh, sbb, sbh, scb, sch):
    """Batch and head of this program (``program_id(1)`` over ``B * H``, 64-bit: base offsets
    ``B*H*N*N`` may pass 2**31) and ``K, V, Bias, Mult`` pointed at that batch and head."""
    b = (tl.program_id(1) // H).to(tl.int64)
    h = (tl.program_id(1) % H).to(tl.int64)
    return (b, h, K + b * skb + h * skh, V + b * svb + h * svh, Bias + b * sbb + h * sbh,
            Mult + b * scb + h * sch)


@triton.jit
def _scores(q, K, Bias, pad_row, offs_m, offs_n, offs_d, stride_kn, stride_kd,
            stride_bm, stride_bn, NQ, NK, D, scale,
            HAS_BIAS: tl.constexpr, HAS_PAD: tl.constexpr, CAUSAL: tl.constexpr,
            PRECISION: tl.constexpr):
    """The ``[BLOCK_M, BLOCK_N]`` tile of ``S + B`` (float32), ``-inf`` where a key is hidden or
    out of range. ``K``, ``Bias`` and ``pad_row`` point at this batch and head."""
    kt = _tile(K, offs_d, offs_n, stride_kd, stride_kn, D, NK)
    s = tl.dot(q, kt, input_precision=PRECISION) * scale
    if HAS_BIAS:
        s += _tile(Bias, offs_m, offs_n, stride_bm, stride_bn, NQ, NK).to(tl.float32)
    visible = offs_n[None, :] < NK
    if HAS_PAD:
        visible = visible & (tl.load(pad_row + offs_n, mask=offs_n < NK, other=1) == 0)[None, :]
    if CAUSAL:
        visible = visible & (offs_n[None, :] <= offs_m[:, None])
    return tl.where(visible, s, float("-inf"))


@triton.jit
def _fwd_kernel(Q, K, V, Bias, Mult, Pad, Out, Lse,
                sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
                sbb, sbh, sbm, sbn, scb, sch, scm, scn, spb, sob, soh, som, sod, slb, slh,
                H, NQ, NK, D, DV, scale,
                HAS_BIAS: tl.constexpr, HAS_MULT: tl.constexpr, HAS_PAD: tl.constexpr,
                CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr):
    """One program: query rows ``BLOCK_M * program_id(0) + [0, BLOCK_M)`` of batch and head
    ``program_id(1)``; writes their output rows and log-sum-exp (module docstring)."""
    start_m = tl.program_id(0) * BLOCK_M
    b, h, K, V, Bias, Mult = _batch_head(H, K, V, Bias, Mult, skb, skh, svb, svh, sbb, sbh,
                                         scb, sch)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    q = _tile(Q + b * sqb + h * sqh, offs_m, offs_d, sqm, sqd, NQ, D)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    hi = NK
    if CAUSAL:  # keys after the block's last query row are all hidden
        hi = tl.minimum(NK, start_m + BLOCK_M)
    for start_n in range(0, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        s = _scores(q, K, Bias, Pad + b * spb, offs_m, offs_n, offs_d, skn, skd, sbm, sbn,
                    NQ, NK, D, scale, HAS_BIAS, HAS_PAD, CAUSAL, PRECISION)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # all hidden so far: p = 0
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        w = p
        if HAS_MULT:
            w = p * _tile(Mult, offs_m, offs_n, scm, scn, NQ, NK).to(tl.float32)
        v = _tile(V, offs_n, offs_dv, svn, svd, NK, DV)
        acc = acc * alpha[:, None] + tl.dot(w.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    empty = l_i == 0.0
    out = acc / tl.where(empty, 1.0, l_i)[:, None]
    tl.store(Out + b * sob + h * soh + offs_m[:, None] * som + offs_dv[None, :] * sod,
             out.to(Out.dtype.element_ty), mask=_in_tile(offs_m, offs_dv, NQ, DV))
    lse = tl.where(empty, float("inf"), m_i + tl.log(tl.where(empty, 1.0, l_i)))
    tl.store(Lse + b * slb + h * slh + offs_m, lse, mask=offs_m < NQ)


@triton.jit
def _bwd_kernel(Q, K, V, Bias, Mult, Pad, Lse, Delta, DO, DQ, DK, DV_, DB, DC,
                sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, som, sod,
                sbb, sbh, sbm, sbn, scb, sch, scm, scn, spb, slb, slh,
                sdbb, sdbh, sdbm, sdbn, sdcb, sdch, sdcm, sdcn,
                H, NQ, NK, D, DV, scale,
                HAS_BIAS: tl.constexpr, HAS_MULT: tl.constexpr, HAS_PAD: tl.constexpr,
                CAUSAL: tl.constexpr, KEY_MAJOR: tl.constexpr, NEED_DB: tl.constexpr,
                NEED_DC: tl.constexpr, ATOMIC_DB: tl.constexpr, ATOMIC_DC: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                BLOCK_DV: tl.constexpr, PRECISION: tl.constexpr):
    """Backward (module docstring). ``KEY_MAJOR``: one program per key block (``program_id(0)``)
    accumulates ``dK, dV`` over query blocks; else one per query block accumulates ``dQ`` over key
    blocks and writes ``dB``, ``dC`` tiles. ``dQ, dK, dV`` share ``Q, K, V``'s strides (``so..``:
    ``dO``'s); ``delta``
    and ``Lse`` are ``[B, H, NQ]`` float32 with strides ``slb, slh, 1``."""
    b, h, K, V, Bias, Mult = _batch_head(H, K, V, Bias, Mult, skb, skh, svb, svh, sbb, sbh,
                                         scb, sch)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    Q += b * sqb + h * sqh
    DO += b * sob + h * soh
    Lse += b * slb + h * slh
    Delta += b * slb + h * slh
    if KEY_MAJOR:
        start_n = tl.program_id(0) * BLOCK_N
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = _tile(K, offs_n, offs_d, skn, skd, NK, D)
        v = _tile(V, offs_n, offs_dv, svn, svd, NK, DV)
        dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
        dv = tl.zeros([BLOCK_N, BLOCK_DV], tl.float32)
        lo = 0
        if CAUSAL:  # query rows before the key block see none of its keys
            lo = (start_n // BLOCK_M) * BLOCK_M
        n_outer = tl.cdiv(NQ - lo, BLOCK_M)
    else:
        start_m = tl.program_id(0) * BLOCK_M
        offs_m = start_m + tl.arange(0, BLOCK_M)
        dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
        hi = NK
        if CAUSAL:
            hi = tl.minimum(NK, start_m + BLOCK_M)
        n_outer = tl.cdiv(hi, BLOCK_N)
    for it in range(n_outer):
        if KEY_MAJOR:
            offs_m = lo + it * BLOCK_M + tl.arange(0, BLOCK_M)
        else:
            offs_n = it * BLOCK_N + tl.arange(0, BLOCK_N)
            k = _tile(K, offs_n, offs_d, skn, skd, NK, D)
            v = _tile(V, offs_n, offs_dv, svn, svd, NK, DV)
        q = _tile(Q, offs_m, offs_d, sqm, sqd, NQ, D)
        do = _tile(DO, offs_m, offs_dv, som, sod, NQ, DV)
        lse = tl.load(Lse + offs_m, mask=offs_m < NQ, other=float("inf"))
        delta = tl.load(Delta + offs_m, mask=offs_m < NQ, other=0.0)
        s = _scores(q, K, Bias, Pad + b * spb, offs_m, offs_n, offs_d, skn, skd, sbm, sbn,
                    NQ, NK, D, scale, HAS_BIAS, HAS_PAD, CAUSAL, PRECISION)
        p = tl.exp(s - lse[:, None])  # P; 0 on hidden keys, empty and out-of-range rows
        in_range = _in_tile(offs_m, offs_n, NQ, NK)
        dw = tl.dot(do, tl.trans(v), input_precision=PRECISION)  # dW = dO V^T
        if HAS_MULT:
            c = _tile(Mult, offs_m, offs_n, scm, scn, NQ, NK).to(tl.float32)
            w = p * c
            ds = p * (c * dw - delta[:, None])
        else:
            w = p
            ds = p * (dw - delta[:, None])
        if KEY_MAJOR:
            dv += tl.dot(tl.trans(w.to(do.dtype)), do, input_precision=PRECISION)
            dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=PRECISION)
        else:
            dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
            if NEED_DB:
                ptr = DB + b * sdbb + h * sdbh + offs_m[:, None] * sdbm + offs_n[None, :] * sdbn
                if ATOMIC_DB:
                    tl.atomic_add(ptr, ds, mask=in_range)
                else:
                    tl.store(ptr, ds, mask=in_range)
            if NEED_DC:
                ptr = DC + b * sdcb + h * sdch + offs_m[:, None] * sdcm + offs_n[None, :] * sdcn
                if ATOMIC_DC:
                    tl.atomic_add(ptr, p * dw, mask=in_range)
                else:
                    tl.store(ptr, p * dw, mask=in_range)
    if KEY_MAJOR:
        tl.store(DK + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :] * skd,
                 (dk * scale).to(DK.dtype.element_ty),
                 mask=_in_tile(offs_n, offs_d, NK, D))
        tl.store(DV_ + b * svb + h * svh + offs_n[:, None] * svn + offs_dv[None, :] * svd,
                 dv.to(DV_.dtype.element_ty),
                 mask=_in_tile(offs_n, offs_dv, NK, DV))
    else:
        tl.store(DQ + b * sqb + h * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd,
                 (dq * scale).to(DQ.dtype.element_ty),
                 mask=_in_tile(offs_m, offs_d, NQ, D))


def _strides(t: Tensor | None, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of ``t`` broadcast to the 4-d ``shape`` (0 on broadcast dimensions); zeros if None."""
    return (0, 0, 0, 0) if t is None else t.expand(shape).stride()


def _precision(dtype: torch.dtype) -> str:
    """``tl.dot``'s float32 mode, as ``torch.matmul`` would do it (module docstring)."""
    return "tf32" if dtype != torch.float32 or torch.backends.cuda.matmul.allow_tf32 else "ieee"


def _blocks(q: Tensor, v: Tensor, block: int | None) -> dict:
    """Tile sizes: ``block`` query and key rows (64 on CUDA unless given) and the head dims
    rounded up to a power of two (at least 16, ``tl.dot``'s minimum)."""
    b = block or 64
    return {"BLOCK_M": b, "BLOCK_N": b,
            "BLOCK_D": max(16, triton.next_power_of_2(q.shape[-1])),
            "BLOCK_DV": max(16, triton.next_power_of_2(v.shape[-1]))}


class _TritonAttention(torch.autograd.Function):
    """``out = (softmax(Q K^T * scale + B) ⊙ C) V`` by the kernels above; ``bias``,
    ``multiplier``, ``pad`` (uint8 ``[B, Nk]``, 1 = padding) may be None."""

    @staticmethod
    def forward(ctx, q, k, v, bias, multiplier, pad, causal, block):
        b, h, nq, d = q.shape
        nk, dv = k.shape[2], v.shape[-1]
        full = (b, h, nq, nk)
        out = q.new_empty(b, h, nq, dv, dtype=v.dtype)
        lse = torch.empty(b, h, nq, device=q.device, dtype=torch.float32)
        meta = _blocks(q, v, block)
        flags = {"HAS_BIAS": bias is not None, "HAS_MULT": multiplier is not None,
                 "HAS_PAD": pad is not None, "CAUSAL": causal, "PRECISION": _precision(q.dtype)}
        dummy = q  # stands for absent bias / multiplier / padding (never read)
        grid = (triton.cdiv(nq, meta["BLOCK_M"]), b * h)
        _fwd_kernel[grid](
            q, k, v, dummy if bias is None else bias, dummy if multiplier is None else multiplier,
            dummy if pad is None else pad, out, lse,
            *q.stride(), *k.stride(), *v.stride(), *_strides(bias, full),
            *_strides(multiplier, full), 0 if pad is None else pad.stride(0), *out.stride(),
            *lse.stride()[:2], h, nq, nk, d, dv, 1.0 / math.sqrt(d), **flags, **meta)
        ctx.save_for_backward(q, k, v, bias, multiplier, pad, out, lse)
        ctx.flags, ctx.meta, ctx.full = flags, meta, full
        ctx.set_materialize_grads(False)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        q, k, v, bias, multiplier, pad, out, lse = ctx.saved_tensors
        if grad_out is None:
            return (None,) * 8
        b, h, nq, nk = full = ctx.full
        d, dv = q.shape[-1], v.shape[-1]
        need_db, need_dc = ctx.needs_input_grad[3], ctx.needs_input_grad[4]
        delta = (grad_out.float() * out.float()).sum(-1)  # dO_i . O_i: [B, H, Nq]
        dq, dk, dvv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        # dB, dC in float32, in the shape of B, C (4-d); atomic adds where they are broadcast.
        db = _grad_buffer(bias, full, ctx.flags["CAUSAL"]) if need_db else None
        dc = _grad_buffer(multiplier, full, ctx.flags["CAUSAL"]) if need_dc else None
        dummy = q
        args = (q, k, v, dummy if bias is None else bias,
                dummy if multiplier is None else multiplier, dummy if pad is None else pad,
                lse, delta, grad_out, dq, dk, dvv, dummy if db is None else db,
                dummy if dc is None else dc,
                *q.stride(), *k.stride(), *v.stride(), *grad_out.stride(),
                *_strides(bias, full), *_strides(multiplier, full),
                0 if pad is None else pad.stride(0), *lse.stride()[:2],
                *_strides(db, full), *_strides(dc, full), h, nq, nk, d, dv, 1.0 / math.sqrt(d))
        flags = {**ctx.flags, "NEED_DB": db is not None, "NEED_DC": dc is not None,
                 "ATOMIC_DB": db is not None and db.shape != full,
                 "ATOMIC_DC": dc is not None and dc.shape != full}
        meta = ctx.meta
        _bwd_kernel[(triton.cdiv(nk, meta["BLOCK_N"]), b * h)](
            *args, KEY_MAJOR=True, **flags, **meta)
        _bwd_kernel[(triton.cdiv(nq, meta["BLOCK_M"]), b * h)](
            *args, KEY_MAJOR=False, **flags, **meta)
        grad_b = None if db is None else db.reshape(bias.shape).to(bias.dtype)
        grad_c = None if dc is None else dc.reshape(multiplier.shape).to(multiplier.dtype)
        return dq, dk, dvv, grad_b, grad_c, None, None, None


def _grad_buffer(t: Tensor, full: tuple[int, ...], causal: bool) -> Tensor:
    """Float32 buffer for the gradient of ``t`` (``B`` or ``C``), 4-d: ``t``'s shape with leading
    ones. Zeroed when atomic adds accumulate into it or causal tiles are skipped."""
    shape = (1,) * (4 - t.dim()) + tuple(t.shape)
    if shape == full and not causal:
        return torch.empty(shape, device=t.device, dtype=torch.float32)
    return torch.zeros(shape, device=t.device, dtype=torch.float32)


def triton_attention(inputs: AttentionInputs, block: int | None = None) -> Tensor:
    """``(softmax(Q K^T / sqrt(D) + B) ⊙ C) V`` by the flash-style Triton kernels (module doc).

    Source: Luo et al. 2022, Eq. (4). Same arguments and values as
    :func:`graph_urpe.nn.functional.eager_attention` without dropout (inputs validated by
    :func:`~graph_urpe.nn.functional.urpe_attention`); differentiable once in ``q, k, v``,
    ``attn_bias`` and ``multiplier``.

    Args:
        inputs (AttentionInputs): ``q, k, v`` float32, bfloat16 or float16 (``q`` and ``k`` of
            one dtype); ``B`` and ``C`` broadcastable to ``[B, H, Nq, Nk]`` (per batch
            ``[B, H, Nq, Nk]`` or shared ``[H, Nq, Nk]``, ``[1, H, Nq, Nk]``, ...), read in
            float32; the padding mask ``[B, Nk]`` (True = padding) and causality (hide keys
            ``j > i``).
        block (int, optional): query and key rows per tile, a power of two >= 16.
            (default: :obj:`None`: 64)

    Shapes:
        ``q`` ``[B, H, Nq, D]``, ``k`` ``[B, H, Nk, D]``, ``v`` ``[B, H, Nk, Dv]``; output
        ``[B, H, Nq, Dv]`` in ``v``'s dtype.

    Raises:
        RuntimeError: on CPU tensors unless ``TRITON_INTERPRET=1`` was set when this module was
            imported, or on a device Triton cannot run on.
    """
    q, k, v, attn_bias, multiplier, key_padding_mask, is_causal = inputs
    if q.device.type == "cpu" and not INTERPRETED:
        raise RuntimeError(
            "backend='triton' needs CUDA tensors (got CPU tensors); use backend='fused' on CPU, "
            "or set TRITON_INTERPRET=1 before graph_urpe is imported to run Triton's interpreter."
        )
    if torch.is_autocast_enabled(q.device.type):  # the matmuls' dtype, as autocast would pick
        dtype = torch.get_autocast_dtype(q.device.type)
        q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    elif k.dtype != q.dtype:
        k = k.to(q.dtype)
    pad = None if key_padding_mask is None else key_padding_mask.to(torch.uint8).contiguous()
    return _TritonAttention.apply(q, k, v, attn_bias, multiplier, pad, is_causal, block)
