"""Query-chunked attention: bounded peak memory, each block recomputed in backward.

Queries are processed ``chunk_size`` rows at a time by a block function (the eager reference or the
fused block), so nothing of size ``[B, H, Nq, Nk]`` is alive at once: peak memory is
``O(B * H * chunk_size * Nk)`` (plus the gradients of ``B`` and ``C`` when they require grad, which
are as large as ``B`` and ``C``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable
from torch.utils.checkpoint import get_device_states, set_device_states

__all__ = ["chunked_attention"]

#: ``block(q, k, v, attn_bias, multiplier, key_padding_mask, is_causal, dropout_p, training,
#: q_start) -> (out, probs)``, see :func:`graph_urpe.nn.functional.eager_attention`.
Block = Callable[..., tuple[Tensor, Tensor | None]]


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


def _has_rows(t: Tensor | None) -> bool:
    """Whether ``t`` (broadcastable to ``[B, H, Nq, Nk]``) has a query dimension of size Nq."""
    return t is not None and t.dim() >= 2 and t.shape[-2] != 1


def _slice_rows(t: Tensor | None, start: int, stop: int) -> Tensor | None:
    return t[..., start:stop, :] if _has_rows(t) else t


def _chunked_forward(block, query, key, value, attn_bias, multiplier, key_padding_mask,
                     is_causal, dropout_p, training, chunk_size) -> Tensor:
    outs = [
        block(
            query[:, :, start:start + chunk_size], key, value,
            _slice_rows(attn_bias, start, start + chunk_size),
            _slice_rows(multiplier, start, start + chunk_size),
            key_padding_mask, is_causal, dropout_p, training, start,
        )[0]
        for start in range(0, query.shape[2], chunk_size)
    ]
    return torch.cat(outs, dim=2)


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
    def forward(ctx, block, query, key, value, attn_bias, multiplier, key_padding_mask,
                is_causal, dropout_p, training, chunk_size):
        ctx.save_for_backward(query, key, value, attn_bias, multiplier, key_padding_mask)
        ctx.options = (block, is_causal, dropout_p, training, chunk_size)
        ctx.autocast = _autocast_state(query.device.type)
        ctx.rng = None
        if dropout_p > 0.0 and training:
            ctx.rng = (query.device.type, torch.get_rng_state(), get_device_states(query))
        return _chunked_forward(block, query, key, value, attn_bias, multiplier,
                                key_padding_mask, is_causal, dropout_p, training, chunk_size)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        query, key, value, attn_bias, multiplier, key_padding_mask = ctx.saved_tensors
        block_fn, is_causal, dropout_p, training, chunk_size = ctx.options
        inputs = (query, key, value, attn_bias, multiplier)
        needs = ctx.needs_input_grad[1:6]
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
                out = block_fn(*block, key_padding_mask, is_causal, dropout_p, training, start)[0]
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
        return (None, *grads, None, None, None, None, None)


def chunked_attention(
    block: Block, query: Tensor, key: Tensor, value: Tensor, attn_bias: Tensor | None,
    multiplier: Tensor | None, key_padding_mask: Tensor | None, is_causal: bool,
    dropout_p: float, training: bool, chunk_size: int,
) -> Tensor:
    """``block``'s output ``[B, H, Nq, Dv]`` computed ``chunk_size`` query rows at a time.

    With gradients needed, each block is recomputed in backward (:class:`_ChunkedAttention`);
    otherwise the blocks are simply concatenated.
    """
    args = (query, key, value, attn_bias, multiplier, key_padding_mask, is_causal, dropout_p,
            training, chunk_size)
    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (query, key, value, attn_bias, multiplier)
    )
    if needs_grad:
        return _ChunkedAttention.apply(block, *args)
    return _chunked_forward(block, *args)
