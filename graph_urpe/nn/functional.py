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
  of ``O(B * H * Nq * Nk)`` (plus the gradients of ``B`` and ``C`` when they require grad, which
  are as large as ``B`` and ``C``). It is chosen automatically when the score tensor would exceed
  :data:`AUTO_CHUNK_ELEMENTS` elements.

Two custom autograd functions keep the cost of ``C`` and of chunking low (measured in
``benchmarks/attention.py``): :class:`_SoftmaxMultiply` (softmax and ``⊙ C`` with fewer
``[B, H, Nq, Nk]`` allocations than autograd's version) and :class:`_ChunkedAttention` (per-block
recomputation writing the gradients of row-indexed inputs in place, instead of autograd summing a
zero-padded full-size gradient per block). Both give first-order gradients only: double backward
through a multiplier or through the chunked path raises an error.
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable
from torch.utils.checkpoint import get_device_states, set_device_states

__all__ = ["AUTO_CHUNK_ELEMENTS", "urpe_attention"]

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
    if key_padding_mask is not None and (
        key_padding_mask.dtype != torch.bool or tuple(key_padding_mask.shape) != (b, nk)
    ):
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


def _mul_sum_to(a: Tensor, b: Tensor, shape: torch.Size, out: Tensor | None) -> Tensor:
    """``(a * b).sum_to_size(shape)`` for ``a``, ``b`` of the full shape, with less memory traffic.

    ``out`` (full shape, or None) is a scratch buffer that may be overwritten. When ``shape``
    broadcasts over the leading (batch) dimension only, the sum is accumulated slice by slice
    (no full-size product is materialised).
    """
    full = tuple(a.shape)
    if tuple(shape) == full:
        return torch.mul(a, b, out=out) if out is not None else a * b
    padded = (1,) * (len(full) - len(shape)) + tuple(shape)
    if padded[0] == 1 and padded[1:] == full[1:]:
        acc = a[0] * b[0]
        for i in range(1, full[0]):
            acc.addcmul_(a[i], b[i])
        return acc.reshape(shape)
    prod = torch.mul(a, b, out=out) if out is not None else a * b
    return prod.sum_to_size(shape)


class _SoftmaxMultiply(torch.autograd.Function):
    """``(W, P) = (softmax(S) ⊙ C, softmax(S))`` along the last dim; ``S`` is overwritten by ``W``.

    ``P`` is returned for inspection only (not differentiable). Same values and gradients as
    autograd on ``softmax(S) * C`` (the multiplier's gradient up to summation order when ``C``
    is shared over the batch), with fewer ``[B, H, Nq, Nk]`` allocations: ``W`` takes
    the storage of ``S`` (consumed here), and the buffer of ``dP = dW ⊙ C`` is reused for
    ``dW ⊙ P``, the multiplier's gradient. On CPU a fresh large allocation costs about as much as
    an elementwise pass (its pages fault in one by one). Only ``P`` and ``C`` are saved.
    """

    @staticmethod
    def forward(ctx, scores, multiplier):
        probs = torch.softmax(scores, dim=-1)
        weights = torch.mul(probs, multiplier, out=scores)
        ctx.mark_dirty(scores)
        ctx.mark_non_differentiable(probs)
        ctx.set_materialize_grads(False)  # no [B, H, Nq, Nk] zeros for the unused dP input
        ctx.save_for_backward(probs, multiplier)
        return weights, probs

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_weights, _grad_probs):
        probs, multiplier = ctx.saved_tensors
        grad_scores = grad_multiplier = grad_probs = None
        if grad_weights is None:  # the output was not used in the loss
            return None, None
        if ctx.needs_input_grad[0]:
            grad_probs = grad_weights * multiplier
            # The softmax gradient autograd itself uses: P ⊙ (dP - rowsum(dP ⊙ P)).
            grad_scores = torch._softmax_backward_data(grad_probs, probs, -1, probs.dtype)
        if ctx.needs_input_grad[1]:
            grad_multiplier = _mul_sum_to(grad_weights, probs, multiplier.shape, grad_probs)
        return grad_scores, grad_multiplier


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
    need_weights: bool = False,
) -> tuple[Tensor, Tensor]:
    nq, nk = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    # Softmax in at least float32 (float64 stays float64), also for bf16/fp16 inputs.
    acc = torch.promote_types(q.dtype, torch.float32)
    scores = torch.matmul(q * scale, k.transpose(-2, -1)).to(acc)
    # In place on the fresh score tensor (no autograd node saves it): one [B, H, Nq, Nk]
    # allocation instead of three; on CPU each large allocation costs a page-faulting pass.
    if attn_bias is not None:
        scores.add_(attn_bias.to(acc))
    hidden = _hidden_mask(key_padding_mask, is_causal, q_start, nq, nk, q.device)
    if hidden is not None:
        # Added, not masked_fill_ed: a broadcast masked_fill_ is several times slower on CPU.
        # Half the most negative finite value: next to any visible key exp(fill + s - rowmax)
        # underflows to exactly 0, and rows with every key hidden stay finite (no NaN in values
        # or gradients); those rows' outputs are zeroed below.
        fill = torch.zeros(hidden.shape, dtype=acc, device=q.device)
        scores.add_(fill.masked_fill_(hidden, torch.finfo(acc).min / 2))
    if multiplier is None:
        probs = weights = torch.softmax(scores, dim=-1)
    else:
        weights, probs = _SoftmaxMultiply.apply(scores, multiplier.to(acc))
    if dropout_p > 0.0 and training:
        weights = F.dropout(weights, p=dropout_p)
    out = torch.matmul(weights.to(v.dtype), v)
    empty = _empty_rows(key_padding_mask, is_causal, q_start, nq)
    if empty is not None:
        # Rows whose keys are all hidden return 0 (their softmax is uniform over hidden keys).
        # Masking the [.., Nq, Dv] output instead of the [.., Nq, Nk] weights saves a pass; it
        # also zeroes those rows' gradients, exactly as zeroed weights would.
        out = out.masked_fill_(empty, 0.0)
        if need_weights:
            probs = probs.masked_fill(empty, 0.0)
    return out, probs


def _has_rows(t: Tensor | None) -> bool:
    """Whether ``t`` (broadcastable to ``[B, H, Nq, Nk]``) has a query dimension of size Nq."""
    return t is not None and t.dim() >= 2 and t.shape[-2] != 1


def _slice_rows(t: Tensor | None, start: int, stop: int) -> Tensor | None:
    return t[..., start:stop, :] if _has_rows(t) else t


def _chunked_forward(
    query, key, value, attn_bias, multiplier, key_padding_mask, is_causal, dropout_p, training,
    chunk_size,
) -> Tensor:
    """The output of :func:`_attention_block` computed ``chunk_size`` query rows at a time."""
    outs = [
        _attention_block(
            query[:, :, start:start + chunk_size], key, value,
            _slice_rows(attn_bias, start, start + chunk_size),
            _slice_rows(multiplier, start, start + chunk_size),
            key_padding_mask, is_causal, dropout_p, training, start,
        )[0]
        for start in range(0, query.shape[2], chunk_size)
    ]
    return torch.cat(outs, dim=2)


def _autocast_state(device_type: str) -> dict[str, dict]:
    """The autocast settings active now for ``device_type`` and CPU, to replay in backward."""
    state = {}
    for dev in {device_type, "cpu"}:
        if torch.amp.is_autocast_available(dev):
            state[dev] = {
                "enabled": torch.is_autocast_enabled(dev),
                "dtype": torch.get_autocast_dtype(dev),
                "cache_enabled": torch.is_autocast_cache_enabled(),
            }
    return state


class _ChunkedAttention(torch.autograd.Function):
    """Query-chunked attention whose backward recomputes one block of rows at a time.

    Like activation checkpointing per block, nothing of size ``[B, H, Nq, Nk]`` is saved. Unlike
    it, the gradients of ``query``, ``attn_bias`` and ``multiplier`` are written block by block
    into one preallocated tensor each: with per-block checkpointing, autograd's slicing backward
    materialises a zero-filled full-size gradient for every block and adds it up (at Nq = 2048,
    128-row blocks, that tripled the time of the pass and kept two full-size tensors alive).
    Dropout masks are reproduced by replaying the RNG state, autocast by replaying its
    settings. Not twice differentiable (``once_differentiable``).
    """

    @staticmethod
    def forward(
        ctx, query, key, value, attn_bias, multiplier, key_padding_mask, is_causal, dropout_p,
        training, chunk_size,
    ):
        ctx.save_for_backward(query, key, value, attn_bias, multiplier, key_padding_mask)
        ctx.options = (is_causal, dropout_p, training, chunk_size)
        ctx.autocast = _autocast_state(query.device.type)
        ctx.rng = None
        if dropout_p > 0.0 and training:
            ctx.rng = (query.device.type, torch.get_rng_state(), get_device_states(query))
        return _chunked_forward(
            query, key, value, attn_bias, multiplier, key_padding_mask, is_causal, dropout_p,
            training, chunk_size,
        )

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        query, key, value, attn_bias, multiplier, key_padding_mask = ctx.saved_tensors
        is_causal, dropout_p, training, chunk_size = ctx.options
        inputs = (query, key, value, attn_bias, multiplier)
        needs = ctx.needs_input_grad[:5]
        # Inputs indexed by query row are sliced per block and get their gradient block by block
        # (every row written once); the others (key, value, inputs broadcast over queries) are
        # used whole and accumulate their gradient over blocks.
        by_rows = [i == 0 or (i >= 3 and _has_rows(t)) for i, t in enumerate(inputs)]
        grads = [
            None if not need else (torch.empty_like(t) if rows else torch.zeros_like(t))
            for t, need, rows in zip(inputs, needs, by_rows)
        ]
        leaves = [
            None if t is None else t.detach().requires_grad_(need)
            for t, need in zip(inputs, needs)
        ]
        with contextlib.ExitStack() as stack:
            if ctx.rng is not None:
                device_type, cpu_state, (device_ids, device_states) = ctx.rng
                stack.enter_context(torch.random.fork_rng(device_ids, device_type=device_type))
                torch.set_rng_state(cpu_state)
                set_device_states(device_ids, device_states, device_type=device_type)
            for device_type, kwargs in ctx.autocast.items():
                stack.enter_context(torch.autocast(device_type, **kwargs))
            stack.enter_context(torch.enable_grad())
            for start in range(0, query.shape[2], chunk_size):
                stop = min(start + chunk_size, query.shape[2])
                block = [
                    _slice_rows(t, start, stop).detach().requires_grad_(t.requires_grad)
                    if rows else t
                    for t, rows in zip(leaves, by_rows)
                ]
                out = _attention_block(
                    *block, key_padding_mask, is_causal, dropout_p, training, start
                )[0]
                wrt = [i for i, t in enumerate(block) if t is not None and t.requires_grad]
                if not wrt:
                    continue
                got = torch.autograd.grad(
                    out, [block[i] for i in wrt], grad_out[:, :, start:stop]
                )
                for i, g in zip(wrt, got):
                    if by_rows[i]:
                        grads[i][..., start:stop, :] = g
                    else:
                        grads[i] += g
        return (*grads, None, None, None, None, None)


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
            to ``[B, H, Nq, Nk]``. ``-inf`` entries hide keys, but a row that is ``-inf``
            everywhere gives NaN: hide keys with ``key_padding_mask`` / ``is_causal`` instead,
            which give such rows zeros. (default: :obj:`None`, no bias)
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
            the expected shape), ``chunk_size`` is not positive or ``dropout_p`` is outside
            ``[0, 1]``.
    """
    _validate(query, key, value, attn_bias, multiplier, key_padding_mask)
    b, h, nq, _ = query.shape
    nk = key.shape[2]
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout_p must lie in [0, 1], got {dropout_p}.")
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError(f"chunk_size must be a positive int or None, got {chunk_size}.")
    if chunk_size is None and b * h * nq * nk > AUTO_CHUNK_ELEMENTS:
        chunk_size = max(1, AUTO_CHUNK_ELEMENTS // (b * h * nk))
    if need_weights or chunk_size is None or chunk_size >= nq:
        out, probs = _attention_block(
            query, key, value, attn_bias, multiplier, key_padding_mask, is_causal,
            dropout_p, training, 0, need_weights,
        )
        return (out, probs) if need_weights else out

    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad
        for t in (query, key, value, attn_bias, multiplier)
    )
    if needs_grad:
        return _ChunkedAttention.apply(
            query, key, value, attn_bias, multiplier, key_padding_mask, is_causal, dropout_p,
            training, chunk_size,
        )
    return _chunked_forward(
        query, key, value, attn_bias, multiplier, key_padding_mask, is_causal, dropout_p,
        training, chunk_size,
    )
