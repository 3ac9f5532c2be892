"""URPE attention as two FlexAttention calls (:func:`torch.nn.attention.flex_attention`).

FlexAttention computes ``softmax(S + score_mod) V`` block by block without materialising the
``[B, H, Nq, Nk]`` scores (on CUDA), and returns the row log-sum-exp ``L``. URPE's multiplier acts
*after* the softmax, which no ``score_mod`` can express directly; it is exact with two calls. Let
``E_j = exp(s_j + b_j)`` for the keys ``j`` visible from a query row, ``P_j = E_j / sum E`` and
``m`` a constant with ``c_j + m > 0`` (here ``m = 1 - min C``, so ``c + m >= 1``):

* call B, ``score_mod = s + b``: ``o_B = sum_j P_j v_j``, ``L_B = log sum_j E_j``;
* call A, ``score_mod = s + b + log(c + m)``: ``o_A = sum_j E_j (c_j + m) v_j / sum_j E_j (c_j + m)``
  and ``L_A = log sum_j E_j (c_j + m)``;
* ``exp(L_A - L_B) o_A = sum_j P_j (c_j + m) v_j = (P ⊙ C) V + m o_B``, hence

    ``(P ⊙ C) V = exp(L_A - L_B) * o_A - m * o_B``     (:func:`combine`).

Rows whose keys are all hidden have ``L = -inf`` and output 0. The subtraction cancels
``m * o_B``: the absolute error is about ``(m + mean C) * eps * |V|`` with ``eps`` the precision of
FlexAttention's outputs (float32: negligible; bf16: use a ``C`` of moderate range). Dropout on the
attention weights and returning them are impossible here (they are never formed).

On CUDA the calls are compiled (fused kernels) and differentiable, also with respect to ``B`` and
``C`` (FlexAttention differentiates through captured tensors and through ``L``). torch 2.13's CPU
FlexAttention has no backward and its compiled CPU kernel does not return ``L``: on CPU this path
runs FlexAttention's unfused reference implementation, for inference only.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import Tensor

from graph_urpe.nn._inputs import AttentionInputs

__all__ = ["combine", "flex_attention_urpe"]

_COMPILED = None


def _flex(device_type: str):
    """FlexAttention: compiled (fused kernels) on accelerators; as-is on CPU (the unfused
    reference, see the module docstring) and inside an outer ``torch.compile``."""
    global _COMPILED
    from torch.nn.attention.flex_attention import flex_attention

    if device_type == "cpu" or torch.compiler.is_compiling():
        return flex_attention
    if _COMPILED is None:
        _COMPILED = torch.compile(flex_attention)
    return _COMPILED


def combine(out_a: Tensor, lse_a: Tensor, out_b: Tensor, lse_b: Tensor, m: Tensor) -> Tensor:
    """``(P ⊙ C) V = exp(L_A - L_B) * o_A - m * o_B`` (module docstring), 0 on rows with no key.

    Shapes: ``out_*`` ``[B, H, Nq, Dv]``, ``lse_*`` ``[B, H, Nq]``, ``m`` a 0-dim tensor.
    Returns float32 (or wider).
    """
    empty = torch.isneginf(lse_b)
    # where() before exp(): -inf - -inf is NaN, and a NaN in the unused branch would still
    # reach the gradient through exp's backward.
    ratio = torch.exp(torch.where(empty, torch.zeros_like(lse_a), lse_a - lse_b))[..., None]
    acc = torch.promote_types(out_a.dtype, torch.float32)
    out = ratio * out_a.to(acc) - m * out_b.to(acc)
    return out.masked_fill(empty[..., None], 0.0)


def flex_attention_urpe(inputs: AttentionInputs) -> Tensor:
    """``(softmax(Q K^T / sqrt(D) + B) ⊙ C) V`` ``[B, H, Nq, Dv]`` by FlexAttention (module doc).

    Args:
        inputs (AttentionInputs): ``q, k, v``, ``B``, ``C``, the padding mask and causality,
            validated by :func:`~graph_urpe.nn.functional.urpe_attention`.

    Raises:
        RuntimeError: on CPU when a gradient is needed (torch's CPU FlexAttention is
            inference-only); use ``backend="fused"`` there.
    """
    from torch.nn.attention.flex_attention import AuxRequest, create_block_mask

    q, k, v, attn_bias, multiplier, key_padding_mask, is_causal = inputs
    b, h, nq, d = q.shape
    nk = k.shape[2]
    on_cpu = q.device.type == "cpu"
    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (q, k, v, attn_bias, multiplier)
    )
    if on_cpu and needs_grad:
        raise RuntimeError(
            "backend='flex' cannot compute gradients on CPU (torch's CPU FlexAttention is "
            "inference-only); use backend='fused' (or 'auto') for training on CPU, or run on CUDA."
        )
    full = (b, h, nq, nk)
    bias = None if attn_bias is None else attn_bias.float().expand(full)

    block_mask = None
    if key_padding_mask is not None or is_causal:
        pad = key_padding_mask

        def mask_mod(bi, hi, qi, ki):
            visible = qi >= ki if is_causal else torch.ones_like(qi >= ki)
            if pad is not None:
                visible = visible & ~pad[bi, ki]
            return visible

        block_mask = create_block_mask(mask_mod, b, None, nq, nk, device=q.device)

    def mod_b(score, bi, hi, qi, ki):
        return score if bias is None else score + bias[bi, hi, qi, ki]

    run = _flex(q.device.type)
    kw = {"block_mask": block_mask, "scale": 1.0 / math.sqrt(d),
          "return_aux": AuxRequest(lse=True)}
    with warnings.catch_warnings():
        if on_cpu:  # the unfused reference implementation, knowingly (see module docstring)
            warnings.filterwarnings("ignore", message=".*flex_attention called without")
        out_b, aux_b = run(q, k, v, score_mod=mod_b, **kw)
        if multiplier is None:
            out = out_b
            if key_padding_mask is not None:
                out = out.masked_fill(torch.isneginf(aux_b.lse)[..., None], 0.0)
            return out
        mult = multiplier.float()
        m = (1.0 - mult.detach().min()).to(mult.dtype)
        log_c = torch.log(mult + m).expand(full)

        def mod_a(score, bi, hi, qi, ki):
            return mod_b(score, bi, hi, qi, ki) + log_c[bi, hi, qi, ki]

        out_a, aux_a = run(q, k, v, score_mod=mod_a, **kw)
    return combine(out_a, aux_a.lse, out_b, aux_b.lse, m).to(v.dtype)
