"""The Triton URPE flash kernel (``backend="triton"``): outputs and the gradients of q, k, v, B and
C against the independent float64 formula, with key padding, all-padded rows, causal masks and
per-batch vs shared B and C.

On a CUDA machine the tests run the compiled kernels on the GPU. Without CUDA they run in Triton's
interpreter on CPU tensors, which needs ``TRITON_INTERPRET=1`` before triton is first imported:
:func:`test_cases_in_triton_interpreter` reruns this file in a child pytest with it set (the cases
skip in the parent). Sizes are small (the interpreter is slow) but span several 16-row tiles and
ragged tails.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_fused_attention import reference

from graph_urpe.nn.functional import urpe_attention

pytest.importorskip("triton", reason="the optional triton package is not installed "
                                     "(pip install 'graph-urpe[triton]')")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
RUN_HERE = DEVICE == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"
here = pytest.mark.skipif(not RUN_HERE, reason="runs in the child process of "
                                               "test_cases_in_triton_interpreter")


@pytest.mark.skipif(RUN_HERE, reason="the cases run in this process")
def test_cases_in_triton_interpreter():
    """This file's cases in a child pytest under ``TRITON_INTERPRET=1`` (CPU interpreter)."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(Path(__file__).resolve())],
        check=False, env=env, capture_output=True, text=True, timeout=300,
        cwd=Path(__file__).parents[1])
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
    passed = re.search(r"(\d+) passed", res.stdout)
    assert passed and int(passed.group(1)) >= len(CASES) + 4, res.stdout[-2000:]


B, H, N, D, DV = 2, 2, 37, 10, 6  # N: two 16-row tiles and a tail of 5


def _inputs(seed, shape, dtype=torch.float32):
    """q, k [B, H, N, D], v [B, H, N, DV] (q, v as strided head-split views), B, C of ``shape``,
    a padding mask with one all-padded sequence."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, N, H, D, generator=g).transpose(1, 2)  # non-contiguous, as in the models
    k = torch.randn(B, H, N, D, generator=g)
    v = torch.randn(B, N, H, DV, generator=g).transpose(1, 2)
    bias = torch.randn(shape, generator=g)
    mult = torch.randn(shape, generator=g) + 1.0
    pad = torch.rand(B, N, generator=g) < 0.3
    pad[0, 0] = False
    pad[1, :] = True  # all-padded rows: output and gradients 0
    return [t.to(DEVICE, dtype) for t in (q, k, v, bias, mult)] + [pad.to(DEVICE)]


CASES = [  # (shape of B and C, use B, use C, padding, causal)
    ((B, H, N, N), True, True, True, False),  # per-batch B and C
    ((H, N, N), True, True, True, False),  # shared over the batch, 3-d
    ((1, H, N, N), True, True, False, True),  # shared, 4-d, causal
    ((B, 1, N, N), True, True, True, True),  # shared over heads
    ((1, H, N, N), True, False, True, False),  # RPE: no C
    ((1, H, N, N), False, False, False, False),  # plain attention
]


@here
@pytest.mark.parametrize("shape, use_b, use_c, use_pad, causal", CASES)
def test_triton_matches_reference(shape, use_b, use_c, use_pad, causal):
    q, k, v, bias, mult, pad = _inputs(0, shape)
    bias, mult, pad = (bias if use_b else None), (mult if use_c else None), (pad if use_pad
                                                                             else None)
    ins = [None if t is None else t.clone().requires_grad_(True) for t in (q, k, v, bias, mult)]
    ref_ins = [None if t is None else t.detach().cpu().double().requires_grad_(True)
               for t in (q, k, v, bias, mult)]
    out = urpe_attention(*ins[:3], attn_bias=ins[3], multiplier=ins[4], key_padding_mask=pad,
                         is_causal=causal, backend="triton")
    ref = reference(*ref_ins, None if pad is None else pad.cpu(), causal)
    assert out.shape == (B, H, N, DV) and out.dtype == torch.float32
    torch.testing.assert_close(out.cpu().double(), ref, rtol=1e-4, atol=1e-5)
    if use_pad:
        assert (out[1] == 0).all()
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    (out * w.to(out)).sum().backward()
    (ref * w).sum().backward()
    for name, a, r in zip("qkvBC", ins, ref_ins):
        if a is None:
            continue
        assert a.grad.shape == a.shape, name
        torch.testing.assert_close(a.grad.cpu().double(), r.grad, rtol=1e-4, atol=1e-5,
                                   msg=lambda m, name=name: f"d{name}: {m}")


@here
def test_triton_only_requested_gradients_and_auto_choice():
    """B and C without requires_grad get none (their kernels' writes are skipped), q alone still
    matches; ``backend="auto"`` picks the kernel on CUDA only."""
    q, k, v, bias, mult, pad = _inputs(2, (H, N, N))
    q.requires_grad_(True)
    out = urpe_attention(q, k, v, attn_bias=bias, multiplier=mult, key_padding_mask=pad,
                         backend="triton")
    out.sum().backward()
    ref_q = q.detach().cpu().double().requires_grad_(True)
    reference(ref_q, k.cpu(), v.cpu(), bias.cpu(), mult.cpu(), pad.cpu(), False).sum().backward()
    torch.testing.assert_close(q.grad.cpu().double(), ref_q.grad, rtol=1e-4, atol=1e-5)
    assert bias.grad is None and mult.grad is None
    auto = urpe_attention(q, k, v, attn_bias=bias, multiplier=mult, key_padding_mask=pad)
    torch.testing.assert_close(auto, out, rtol=1e-5, atol=1e-6)


@here
@pytest.mark.parametrize(
    "kwargs, match",
    [({"dropout_p": 0.1}, "backend='triton' does not support dropout_p=0.1 in training"),
     ({"need_weights": True}, "backend='triton' does not support need_weights"),
     ({"chunk_size": 2}, "backend='triton' does not support chunk_size=2")],
)
def test_triton_unsupported_options_raise(kwargs, match):
    q, k, v, bias, mult, _ = _inputs(3, (H, N, N))
    with pytest.raises(ValueError, match=match):
        urpe_attention(q, k, v, attn_bias=bias, multiplier=mult, backend="triton", **kwargs)


@pytest.mark.skipif(DEVICE != "cuda", reason="bfloat16 kernels need CUDA (compiled Triton)")
def test_triton_bf16_close_to_float32_on_cuda():
    q, k, v, bias, mult, pad = _inputs(4, (1, H, N, N))
    ref = urpe_attention(q, k, v, attn_bias=bias, multiplier=mult, key_padding_mask=pad,
                         backend="triton")
    low = urpe_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), attn_bias=bias,
                         multiplier=mult, key_padding_mask=pad, backend="triton")
    assert low.dtype == torch.bfloat16
    torch.testing.assert_close(low.float(), ref, rtol=2e-2, atol=2e-2)
