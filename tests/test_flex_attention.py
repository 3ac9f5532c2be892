"""The FlexAttention path: exact against the float64 reference (CPU: forward, FlexAttention's own
unfused implementation), the log-sum-exp combination's algebra and gradients on an emulation of the
two calls, and its clear errors."""

import pytest
import torch
from test_fused_attention import B, D, H, N, _inputs, reference

from graph_urpe.nn._flex import combine
from graph_urpe.nn.functional import urpe_attention

CASES = [  # (use_bias, use_mult, use_pad, causal, bc_shape)
    *[(b, c, p, s, (1, H, N, N)) for b, c in [(False, False), (True, False), (True, True),
                                              (False, True)]
      for p in (False, True) for s in (False, True)],
    (True, True, True, True, (H, N, N)),
    (True, True, True, False, (B, H, N, N)),
]


@pytest.mark.parametrize("use_bias, use_mult, use_pad, causal, bc_shape", CASES)
def test_flex_matches_reference(use_bias, use_mult, use_pad, causal, bc_shape):
    q, k, v, bias, mult, pad = _inputs(7, bc_shape)
    bias, mult, pad = (bias if use_bias else None), (mult * 3 if use_mult else None), (
        pad if use_pad else None)
    with torch.no_grad():
        out = urpe_attention(q, k, v, attn_bias=bias, multiplier=mult, key_padding_mask=pad,
                             is_causal=causal, backend="flex")
    torch.testing.assert_close(out.double(), reference(q, k, v, bias, mult, pad, causal),
                               rtol=1e-5, atol=2e-5)


def _emulated_flex(q, k, v, score):
    """What one FlexAttention call returns: softmax(score) V and the row log-sum-exp, with
    fully hidden rows (score all -inf) giving output 0 and lse -inf, as FlexAttention does."""
    empty = torch.isneginf(score).all(-1)
    safe = score.masked_fill(empty[..., None], 0.0)  # no NaN from logsumexp's backward
    lse = torch.logsumexp(safe, -1)
    p = torch.exp(safe - lse[..., None]).masked_fill(empty[..., None], 0.0)
    return p @ v, lse.masked_fill(empty, float("-inf"))


@pytest.mark.parametrize("shift", [0.0, 5.0, -4.0])
def test_combine_algebra_and_gradients_on_emulated_calls(shift):
    """exp(L_A - L_B) o_A - m o_B = (P ⊙ C) V, values and gradients, C of any sign (float64)."""
    q, k, v, bias, mult, pad = _inputs(8, (B, H, N, N), torch.float64)
    mult = mult * 2 + shift
    ins = [t.clone().requires_grad_(True) for t in (q, k, v, bias, mult)]
    ref_ins = [t.clone().requires_grad_(True) for t in (q, k, v, bias, mult)]
    q1, k1, v1, b1, c1 = ins
    hidden = pad[:, None, None, :].expand(B, H, N, N)
    s = (q1 @ k1.transpose(-1, -2)) / D ** 0.5 + b1
    s = s.masked_fill(hidden, float("-inf"))
    m = 1.0 - c1.detach().min()
    out_b, lse_b = _emulated_flex(q1, k1, v1, s)
    out_a, lse_a = _emulated_flex(q1, k1, v1, s + torch.log(c1 + m))
    out = combine(out_a, lse_a, out_b, lse_b, m)
    ref = reference(*ref_ins, pad, False)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    w = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    (out * w).sum().backward()
    (ref * w).sum().backward()
    for a, r in zip(ins, ref_ins):
        assert torch.isfinite(a.grad).all()
        torch.testing.assert_close(a.grad, r.grad, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"dropout_p": 0.1}, "does not support dropout_p=0.1 in training"),
        ({"need_weights": True}, "does not support need_weights"),
        ({"chunk_size": 2}, "does not support chunk_size=2"),
    ],
)
def test_flex_unsupported_options_raise(kwargs, match):
    q, k, v, bias, mult, _ = _inputs(9)
    with pytest.raises(ValueError, match=match):
        urpe_attention(q, k, v, attn_bias=bias, multiplier=mult, backend="flex", **kwargs)


def test_flex_dropout_allowed_outside_training():
    q, k, v, bias, mult, _ = _inputs(10)
    with torch.no_grad():
        out = urpe_attention(q, k, v, attn_bias=bias, multiplier=mult, dropout_p=0.5,
                             training=False, backend="flex")
    torch.testing.assert_close(out.double(), reference(q, k, v, bias, mult, None, False),
                               rtol=1e-5, atol=2e-5)


# On CUDA the flex path has a backward (tested below); only the CPU refuses gradients.
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_flex_gradients_on_cpu_raise_clearly():
    q, k, v, bias, mult, _ = _inputs(11)
    with pytest.raises(RuntimeError, match="backend='flex' cannot compute gradients on CPU"):
        urpe_attention(q.requires_grad_(True), k, v, attn_bias=bias, multiplier=mult,
                       backend="flex")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="FlexAttention backward needs CUDA")
def test_flex_gradients_on_cuda_match_fused():
    q, k, v, bias, mult, pad = (t.cuda() for t in _inputs(12, (1, H, N, N)))
    grads = []
    for backend in ("flex", "fused"):
        ins = [t.clone().requires_grad_(True) for t in (q, k, v, bias, mult)]
        out = urpe_attention(*ins[:3], attn_bias=ins[3], multiplier=ins[4], key_padding_mask=pad,
                             is_causal=True, backend=backend)
        out.sum().backward()
        grads.append([out, *(t.grad for t in ins)])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
