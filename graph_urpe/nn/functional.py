"""The URPE attention core shared by the graph and sequence models.

Universal RPE-based attention (Luo et al., "Your Transformer May Not be as Powerful as You
Expect", NeurIPS 2022, arXiv 2205.13401, Eq. (4))::

    Attn_U(X) = (softmax(Q K^T / sqrt(d) + B) ⊙ C) V

``B`` is the additive relative positional encoding (RPE) bias, ``C`` the URPE multiplier applied
element-wise *after* the softmax (no renormalisation, no sign constraint). With ``C`` omitted this
is plain RPE attention (Eq. (2)); with ``B`` omitted too, plain scaled dot-product attention.

:func:`eager_attention` below is the readable reference: the equation in plain PyTorch ops,
differentiable (also twice) by autograd. :func:`urpe_attention`, the public entry point, validates
its inputs and dispatches to one of the paths, all giving the same values to float32 round-off:

* ``backend="eager"``: :func:`eager_attention`;
* ``backend="fused"`` (``"auto"`` on CPU): one autograd node with a hand-written backward
  and fewer full-size passes (``graph_urpe/nn/_fused.py``; first-order gradients only);
* ``backend="flex"``: :func:`torch.nn.attention.flex_attention` (the ``[B, H, Nq, Nk]`` scores are
  never materialised on CUDA), ``graph_urpe/nn/_flex.py``;
* ``backend="triton"`` (``"auto"`` on CUDA when the optional ``triton`` package is installed): one
  flash-style Triton kernel for URPE, forward and backward, ``graph_urpe/nn/_triton.py``;
* with ``chunk_size`` (or automatically above :data:`AUTO_CHUNK_ELEMENTS` score elements), the
  eager or fused block runs ``chunk_size`` query rows at a time and is recomputed in backward,
  bounding peak memory (``graph_urpe/nn/_chunked.py``).
"""

from __future__ import annotations

import importlib.util
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from graph_urpe.nn._chunked import chunked_attention
from graph_urpe.nn._flex import flex_attention_urpe
from graph_urpe.nn._fused import fused_attention
from graph_urpe.nn._inputs import AttentionInputs
from graph_urpe.nn._masks import additive_mask, empty_rows, hidden_mask

__all__ = ["AUTO_CHUNK_ELEMENTS", "BACKENDS", "eager_attention", "urpe_attention"]

#: Score tensors with more than this many elements (``B * H * Nq * Nk``; 2**28 is 1 GiB in float32)
#: are computed with the chunked path when ``chunk_size`` is not given.
AUTO_CHUNK_ELEMENTS: int = 2**28

#: Values accepted by ``urpe_attention(..., backend=...)``.
BACKENDS = ("auto", "eager", "fused", "flex", "triton")


def eager_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_bias: Tensor | None = None,
    multiplier: Tensor | None = None,
    key_padding_mask: Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    training: bool = True,
    q_start: int = 0,
) -> tuple[Tensor, Tensor]:
    r"""The reference URPE attention ``(softmax(Q K^T / sqrt(D) + B) ⊙ C) V`` in plain ops.

    Source: Luo et al. 2022, Eq. (4). Inputs are not validated (see :func:`urpe_attention`).

    Args:
        q, k, v (Tensor): queries, keys, values; ``q`` holds query rows ``q_start ..
            q_start + Nq`` (only the causal mask uses ``q_start``).
        attn_bias, multiplier (Tensor, optional): ``B`` and ``C``, broadcastable to
            ``[B, H, Nq, Nk]``.
        key_padding_mask (BoolTensor, optional): ``[B, Nk]``, True = padding.
        is_causal (bool): hide keys ``j > q_start + i``.
        dropout_p (float), training (bool): dropout on ``P ⊙ C`` when ``training``.
        q_start (int): position of the first query row. (default: :obj:`0`)

    Returns:
        ``(out [B, H, Nq, Dv], probs [B, H, Nq, Nk])``: ``probs`` is ``P`` (float32 or wider),
        with zero rows where every key is hidden.
    """
    acc = torch.promote_types(q.dtype, torch.float32)  # softmax in >= float32, also for bf16
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # S: [B, H, Nq, Nk]
    scores = scores.to(acc)
    if attn_bias is not None:
        scores = scores + attn_bias.to(acc)  # S + B
    hidden = hidden_mask(key_padding_mask, is_causal, q_start, q.shape[-2], k.shape[-2], q.device)
    if hidden is not None:
        scores = scores + additive_mask(hidden, acc)  # hidden keys -> probability exactly 0
    probs = torch.softmax(scores, dim=-1)  # P = softmax(S + B): [B, H, Nq, Nk]
    weights = probs if multiplier is None else probs * multiplier.to(acc)  # P ⊙ C, no renorm
    if dropout_p > 0.0 and training:
        weights = F.dropout(weights, p=dropout_p)
    out = torch.matmul(weights.to(v.dtype), v)  # (P ⊙ C) V: [B, H, Nq, Dv]
    empty = empty_rows(key_padding_mask, is_causal, q_start, q.shape[-2])  # [B, 1, Nq, 1]
    if empty is not None:  # rows with no visible key: 0, not softmax's uniform average
        out = out.masked_fill(empty, 0.0)
        probs = probs.masked_fill(empty, 0.0)
    return out, probs


def _check_broadcast(name: str, t: Tensor | None, target: tuple[int, ...]) -> None:
    if t is None:
        return
    # broadcasts to exactly ``target``: each trailing size is 1 or the target's (what
    # torch.broadcast_shapes(t.shape, target) == target says, without its 70 us per call)
    shape = t.shape
    ok = len(shape) <= len(target) and all(
        s == 1 or s == want for s, want in zip(reversed(shape), reversed(target)))
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
    backend: str = "auto",
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
        backend (str, optional): ``"eager"`` (:func:`eager_attention`, twice differentiable),
            ``"fused"`` (one autograd node, fewer full-size passes, first-order gradients only),
            ``"flex"`` (two :func:`~torch.nn.attention.flex_attention` calls combined through
            their log-sum-exp, exact; no ``[B, H, Nq, Nk]`` scores on CUDA; no dropout, no
            ``need_weights``, no ``chunk_size``; on CPU inference only), ``"triton"`` (one
            flash-style Triton kernel, forward and backward, no ``[B, H, Nq, Nk]`` tensor kept;
            CUDA, with the optional ``triton`` package; the same refusals as ``"flex"``) or
            ``"auto"`` (``"triton"`` on CUDA when ``triton`` is installed, no refused option is
            set and not inside ``torch.compile``; else ``"fused"``). ``"eager"`` and ``"fused"`` compile with
            ``torch.compile(fullgraph=True)`` on the dense path. (default: :obj:`"auto"`)

    Shapes:
        - **query**: ``[B, H, Nq, D]``; **key**: ``[B, H, Nk, D]``; **value**: ``[B, H, Nk, Dv]``
        - **attn_bias**, **multiplier**: broadcastable to ``[B, H, Nq, Nk]``, e.g.
          ``[H, Nq, Nk]`` or ``[1, H, Nq, Nk]``
        - **key_padding_mask**: ``[B, Nk]``
        - **output**: ``[B, H, Nq, Dv]``; with ``need_weights`` also ``[B, H, Nq, Nk]`` (float32)

    Raises:
        ValueError: if a tensor does not have the shape above (the message names the tensor and
            the expected shape), ``chunk_size`` is not positive, ``dropout_p`` is outside
            ``[0, 1]``, ``backend`` is not one of :data:`BACKENDS`, or ``backend="flex"`` /
            ``"triton"`` is combined with dropout in training, ``need_weights`` or ``chunk_size``.
        RuntimeError: ``backend="flex"`` on CPU with inputs that require grad;
            ``backend="triton"`` without the ``triton`` package, or on CPU tensors (unless
            ``TRITON_INTERPRET=1``, Triton's interpreter, for tests).
    """
    _validate(query, key, value, attn_bias, multiplier, key_padding_mask)
    b, h, nq, _ = query.shape
    nk = key.shape[2]
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout_p must lie in [0, 1], got {dropout_p}.")
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError(f"chunk_size must be a positive int or None, got {chunk_size}.")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
    refusals = ((dropout_p > 0.0 and training, f"dropout_p={dropout_p} in training"),
                (need_weights, "need_weights=True"),
                (chunk_size is not None, f"chunk_size={chunk_size}"))
    # Inside torch.compile "auto" keeps the fused block, which compiles with fullgraph=True.
    if (backend == "auto" and query.is_cuda and not torch.compiler.is_compiling()
            and not any(bad for bad, _ in refusals)):
        backend = "triton" if importlib.util.find_spec("triton") is not None else "fused"
    if backend in ("flex", "triton"):
        for bad, what in refusals:
            if bad:
                raise ValueError(
                    f"backend={backend!r} does not support {what}: it never forms the "
                    "attention weights (so they cannot be dropped, returned or chunked); use "
                    "backend='fused' for this call."
                )
        inputs = AttentionInputs(query, key, value, attn_bias, multiplier, key_padding_mask,
                                 is_causal)
        if backend == "flex":
            return flex_attention_urpe(inputs)
        if importlib.util.find_spec("triton") is None:
            raise RuntimeError("backend='triton' needs the optional triton package; install it "
                               "with pip install 'graph-urpe[triton]', or use backend='fused'.")
        from graph_urpe.nn._triton import triton_attention  # imports triton: only when used

        return triton_attention(inputs)
    if chunk_size is None and b * h * nq * nk > AUTO_CHUNK_ELEMENTS:
        chunk_size = max(1, AUTO_CHUNK_ELEMENTS // (b * h * nk))
    # dropout_p = 1 zeroes every weight; the fused backward's 1 / (1 - p) would be inf.
    drops_all = dropout_p == 1.0 and training
    block = eager_attention if backend == "eager" or drops_all else fused_attention
    args = (multiplier, key_padding_mask, is_causal, dropout_p, training)
    if need_weights or chunk_size is None or chunk_size >= nq:
        # The fused block builds the probabilities' zeroed rows only when asked.
        kw = {} if block is eager_attention else {"need_weights": need_weights}
        out, probs = block(query, key, value, attn_bias, *args, 0, **kw)
        return (out, probs) if need_weights else out
    return chunked_attention(block, query, key, value, attn_bias, *args, chunk_size)
