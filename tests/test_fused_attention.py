"""The fused and chunked URPE paths: gradients against an independent float64 formula, float64
gradcheck, low-precision inputs, double backward and ``torch.compile(fullgraph=True)``."""

import pytest
import torch

from graph_urpe.nn.functional import urpe_attention

B, H, N, D = 2, 3, 6, 4


def reference(q, k, v, bias, mult, pad, causal):
    """Float64 ``(softmax(QK^T/sqrt(D) + B) ⊙ C) V`` with ``-inf`` masks, written independently of
    the library (hidden keys -inf, rows with no visible key set to 0)."""
    q, k, v = q.double(), k.double(), v.double()
    s = torch.einsum("bhid,bhjd->bhij", q, k) / q.shape[-1] ** 0.5
    if bias is not None:
        s = s + bias.double()
    hidden = torch.zeros(s.shape, dtype=torch.bool)
    if pad is not None:
        hidden = hidden | pad[:, None, None, :]
    if causal:
        hidden = hidden | torch.ones(s.shape[-2:], dtype=torch.bool).triu(1)
    s = s.masked_fill(hidden, float("-inf"))
    empty = hidden.all(-1, keepdim=True)
    p = torch.softmax(s.masked_fill(empty, 0.0), -1).masked_fill(empty, 0.0)
    if mult is not None:
        p = p * mult.double()
    return torch.einsum("bhij,bhjd->bhid", p, v)


def _inputs(seed, bc_shape=(1, H, N, N), dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, N, D, generator=g, dtype=dtype) for _ in range(3))
    bias = torch.randn(bc_shape, generator=g, dtype=dtype)
    mult = torch.randn(bc_shape, generator=g, dtype=dtype)
    pad = torch.rand(B, N, generator=g) < 0.3
    pad[1, :] = True  # one sequence entirely padding: zero rows
    pad[0, 0] = False
    return q, k, v, bias, mult, pad


PATHS = [("eager", None), ("fused", None), ("eager", 4), ("fused", 4), ("fused", 1)]


@pytest.mark.parametrize("backend, chunk", PATHS)
@pytest.mark.parametrize("bc_shape", [(H, N, N), (B, H, N, N), (1, H, N, N)])
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_match_float64_reference(backend, chunk, bc_shape, causal):
    q, k, v, bias, mult, pad = _inputs(0, bc_shape)
    ins = [t.clone().requires_grad_(True) for t in (q, k, v, bias, mult)]
    ref_ins = [t.double().requires_grad_(True) for t in (q, k, v, bias, mult)]
    out = urpe_attention(*ins[:3], attn_bias=ins[3], multiplier=ins[4], key_padding_mask=pad,
                         is_causal=causal, chunk_size=chunk, backend=backend)
    ref = reference(*ref_ins, pad, causal)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    (out * w).sum().backward()
    (ref * w.double()).sum().backward()
    for name, a, r in zip("qkvBC", ins, ref_ins):
        assert a.grad.shape == a.shape, name
        torch.testing.assert_close(a.grad.double(), r.grad, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("d, dv", [(10, 10), (10, 6), (16, 10), (20, 24)])
@pytest.mark.parametrize("chunk", [None, 3])
def test_fused_head_dims_padded_on_cpu_match_reference(d, dv, chunk):
    # Head dims below CPU_MIN_HEAD_DIM are zero-padded inside the fused block on CPU; q, k, v
    # arrive as the permuted (non-contiguous) head-split views MultiheadURPEAttention passes.
    g = torch.Generator().manual_seed(5)
    qk = torch.randn(B, N, 2, H, d, generator=g).permute(2, 0, 3, 1, 4)
    v = torch.randn(B, N, H, dv, generator=g).transpose(1, 2)
    bias, mult = torch.randn(2, 1, H, N, N, generator=g)
    pad = torch.zeros(B, N, dtype=torch.bool)
    pad[1, -2:] = True
    ins = [t.clone().requires_grad_(True) for t in (qk[0], qk[1], v, bias, mult)]
    ref_ins = [t.detach().double().requires_grad_(True) for t in ins]
    out = urpe_attention(*ins[:3], attn_bias=ins[3], multiplier=ins[4], key_padding_mask=pad,
                         chunk_size=chunk, backend="fused")
    ref = reference(*ref_ins, pad, False)
    assert out.shape == (B, H, N, dv)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    w = torch.randn(out.shape, generator=g)
    (out * w).sum().backward()
    (ref * w.double()).sum().backward()
    for name, a, r in zip("qkvBC", ins, ref_ins):
        assert a.grad.shape == a.shape, name
        torch.testing.assert_close(a.grad.double(), r.grad, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 9, 15, 16, 17, 24])
@pytest.mark.parametrize("causal", [False, True])
def test_fused_short_and_long_rows_match_reference(n, causal):
    # On CPU, rows shorter than one of ATen's vectors (8 or 16 float32) take the element-wise
    # softmax and softmax backward; longer rows ATen's kernels. Both against the float64 formula.
    g = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(4, H, n, D, generator=g) for _ in range(3))
    bias, mult = torch.randn(2, 1, H, n, n, generator=g)
    pad = torch.rand(4, n, generator=g) < 0.3
    pad[:, 0] = False
    pad[3, :] = True  # one graph entirely padding: zero rows
    ins = [t.clone().requires_grad_(True) for t in (q, k, v, bias, mult)]
    ref_ins = [t.double().requires_grad_(True) for t in (q, k, v, bias, mult)]
    out = urpe_attention(*ins[:3], attn_bias=ins[3], multiplier=ins[4], key_padding_mask=pad,
                         is_causal=causal, backend="fused")
    ref = reference(*ref_ins, pad, causal)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    w = torch.randn(out.shape, generator=g)
    (out * w).sum().backward()
    (ref * w.double()).sum().backward()
    for name, a, r in zip("qkvBC", ins, ref_ins):
        torch.testing.assert_close(a.grad.double(), r.grad, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("chunk", [None, 2])
@pytest.mark.parametrize("bc_shape", [(H, N, N), (B, H, N, N), (1, H, N, N)])
def test_fused_gradcheck(chunk, bc_shape):
    q, k, v, bias, mult, pad = _inputs(2, bc_shape, torch.float64)
    pad[1, :] = False
    pad[1, 2:] = True
    ins = [t.requires_grad_(True) for t in (q, k, v, bias, mult)]

    def fn(q, k, v, b, c):
        return urpe_attention(q, k, v, attn_bias=b, multiplier=c, key_padding_mask=pad,
                              is_causal=True, chunk_size=chunk, backend="fused")

    # fast mode: the Jacobian checked along random directions (seconds instead of minutes)
    assert torch.autograd.gradcheck(fn, ins, fast_mode=True)


def test_rpe_fused_without_multiplier_or_bias_gradients():
    q, k, v, bias, _, pad = _inputs(3)
    for b in (bias, None):
        ins = [t.clone().requires_grad_(True) for t in (q, k, v)]
        ref_ins = [t.double().requires_grad_(True) for t in (q, k, v)]
        out = urpe_attention(*ins, attn_bias=b, key_padding_mask=pad, backend="fused")
        ref = reference(*ref_ins, b, None, pad, False)
        out.sum().backward()
        ref.sum().backward()
        for a, r in zip(ins, ref_ins):
            torch.testing.assert_close(a.grad.double(), r.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs(dtype):
    q, k, v, bias, mult, pad = _inputs(4)
    ins = [t.to(dtype).requires_grad_(True) for t in (q, k, v)] + [
        t.clone().requires_grad_(True) for t in (bias, mult)
    ]
    ref_ins = [t.detach().double().requires_grad_(True) for t in ins]
    out, probs = urpe_attention(*ins[:3], attn_bias=ins[3], multiplier=ins[4],
                                key_padding_mask=pad, need_weights=True, backend="fused")
    assert out.dtype == dtype and probs.dtype == torch.float32  # softmax in float32
    ref = reference(*ref_ins, pad, False)
    torch.testing.assert_close(out.double(), ref, rtol=0.05, atol=0.05)
    out.float().sum().backward()
    ref.sum().backward()
    for a, r in zip(ins, ref_ins):
        assert a.grad.dtype == a.dtype
        torch.testing.assert_close(a.grad.double(), r.grad, rtol=0.05, atol=0.1)


def test_double_backward_eager_only():
    q, k, v, bias, mult, _ = _inputs(5, dtype=torch.float64)
    ins = [t[:1, :1, :3, :].clone().requires_grad_(True) for t in (q, k, v)]
    bc = [t[:1, :1, :3, :3].clone().requires_grad_(True) for t in (bias, mult)]

    def fn(backend):
        return lambda q, k, v, b, c: urpe_attention(q, k, v, attn_bias=b, multiplier=c,
                                                    backend=backend)

    assert torch.autograd.gradgradcheck(fn("eager"), ins + bc)
    out = fn("fused")(*ins, *bc)
    (g,) = torch.autograd.grad(out.sum(), ins[0], create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|doesn't require grad|not"):
        g.sum().backward()


@pytest.mark.parametrize("backend", ["fused", "eager"])
def test_compiles_fullgraph_with_multiplier(backend):
    """torch.compile(fullgraph=True) traces the whole core (no graph break, no host sync) and
    gives the eager values and gradients (Inductor crashed here with the old in-place op)."""
    torch._dynamo.reset()
    q, k, v, bias, mult, pad = _inputs(6)

    def fn(q, k, v, b, c, pad):
        return urpe_attention(q, k, v, attn_bias=b, multiplier=c, key_padding_mask=pad,
                              backend=backend)

    compiled = torch.compile(fn, fullgraph=True)
    results = []
    for f in (compiled, fn):
        ins = [t.clone().requires_grad_(True) for t in (q, k, v, bias, mult)]
        out = f(*ins, pad)
        out.sum().backward()
        results.append([out, *(t.grad for t in ins)])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("with_mult", [True, False])
def test_fused_dropout_uses_the_keep_mask(with_mult):
    """The fused block's dropout is the next :func:`keep_mask` of the global generator with its
    scale: output and every gradient equal the float64 reference with that mask applied by hand."""
    from graph_urpe.nn._dropout import keep_mask

    q, k, v, bias, mult, _ = _inputs(3)
    mult = mult if with_mult else None
    p = 0.3
    ins = [t.clone().requires_grad_(True) for t in (q, k, v, bias)]
    ins.append(None if mult is None else mult.clone().requires_grad_(True))
    torch.manual_seed(11)
    out = urpe_attention(*ins[:3], attn_bias=ins[3], multiplier=ins[4], dropout_p=p,
                         training=True, backend="fused")
    torch.manual_seed(11)
    keep, scale = keep_mask(torch.empty(B, H, N, N), p)
    assert 0 < int(keep.sum()) < keep.numel() and scale == pytest.approx(1 / (1 - p), rel=1e-4)
    ref_ins = [None if t is None else t.double().requires_grad_(True)
               for t in (q, k, v, bias, mult)]
    drop = keep.double() * scale
    ref = reference(ref_ins[0], ref_ins[1], torch.eye(N, dtype=torch.float64).expand(B, H, N, N),
                    ref_ins[3], ref_ins[4], None, False)  # the weights themselves
    ref = torch.einsum("bhij,bhjd->bhid", ref * drop, ref_ins[2])
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    (out * w).sum().backward()
    (ref * w.double()).sum().backward()
    for name, a, r in zip("qkvBC", ins, ref_ins):
        if a is not None:
            torch.testing.assert_close(a.grad.double(), r.grad, rtol=1e-4, atol=1e-5, msg=name)
