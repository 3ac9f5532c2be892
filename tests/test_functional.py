"""urpe_attention against a naive float64 loop reference, gradients, chunking and the paper's point."""

import math

import pytest
import torch

from graph_urpe.nn import MultiheadURPEAttention, RelationEmbedding, relative_position_ids
from graph_urpe.nn.functional import urpe_attention


def naive_urpe(q, k, v, bias=None, mult=None, pad=None, causal=False):
    """Explicit loops in float64: out[b,h,i] = sum_j softmax_j(s_ij + b_ij) * c_ij * v[b,h,j]."""
    q, k, v = q.double(), k.double(), v.double()
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    bias = None if bias is None else bias.double().expand(B, H, Nq, Nk)
    mult = None if mult is None else mult.double().expand(B, H, Nq, Nk)
    out = torch.zeros(B, H, Nq, v.shape[-1], dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            for i in range(Nq):
                visible = [
                    j for j in range(Nk)
                    if not (pad is not None and pad[b, j]) and not (causal and j > i)
                ]
                if not visible:
                    continue
                logits = [
                    float((q[b, h, i] @ k[b, h, j]).detach()) / math.sqrt(D)
                    + (0.0 if bias is None else float(bias[b, h, i, j].detach()))
                    for j in visible
                ]
                m = max(logits)
                exps = [math.exp(x - m) for x in logits]
                z = sum(exps)
                for j, e in zip(visible, exps):
                    c = 1.0 if mult is None else float(mult[b, h, i, j].detach())
                    out[b, h, i] += e / z * c * v[b, h, j]
    return out


def _inputs(seed, B=2, H=3, Nq=5, Nk=5, D=4, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, Nq, D, generator=g, dtype=dtype)
    k = torch.randn(B, H, Nk, D, generator=g, dtype=dtype)
    v = torch.randn(B, H, Nk, D + 1, generator=g, dtype=dtype)
    bias = torch.randn(B, H, Nq, Nk, generator=g, dtype=dtype)
    mult = torch.randn(B, H, Nq, Nk, generator=g, dtype=dtype)
    pad = torch.rand(B, Nk, generator=g) < 0.3
    pad[:, 0] = False
    return q, k, v, bias, mult, pad


BACKENDS = ["eager", "fused"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("use_bias", [False, True])
@pytest.mark.parametrize("use_mult", [False, True])
@pytest.mark.parametrize("use_pad", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_naive_reference(backend, seed, use_bias, use_mult, use_pad, causal):
    B, H, D = 1 + seed % 2, 1 + seed % 3, 2 + seed
    N = 3 + seed
    q, k, v, bias, mult, pad = _inputs(seed, B, H, N, N, D)
    args = {
        "attn_bias": bias if use_bias else None,
        "multiplier": mult if use_mult else None,
        "key_padding_mask": pad if use_pad else None,
        "is_causal": causal,
        "backend": backend,
    }
    out = urpe_attention(q, k, v, **args)
    ref = naive_urpe(q, k, v, bias if use_bias else None, mult if use_mult else None,
                     pad if use_pad else None, causal)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(3, 4, 6), (1, 3, 4, 6), (1, 1, 4, 6), (2, 1, 1, 6), (6,)])
def test_broadcast_bias_and_multiplier(shape, backend):
    q, k, v, _, _, _ = _inputs(7, B=2, H=3, Nq=4, Nk=6)
    g = torch.Generator().manual_seed(1)
    bias = torch.randn(shape, generator=g)
    mult = torch.randn(shape, generator=g)
    out = urpe_attention(q, k, v, attn_bias=bias, multiplier=mult, backend=backend)
    torch.testing.assert_close(out.double(), naive_urpe(q, k, v, bias, mult), rtol=1e-5, atol=1e-5)


def test_ones_multiplier_equals_plain_attention_and_sdpa():
    q, k, v, bias, _, pad = _inputs(3)
    ones = torch.ones(q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    a = urpe_attention(q, k, v, attn_bias=bias, multiplier=ones, key_padding_mask=pad)
    b = urpe_attention(q, k, v, attn_bias=bias, key_padding_mask=pad)
    torch.testing.assert_close(a, b)
    mask = bias.masked_fill(pad[:, None, None, :], float("-inf"))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(b, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_padded_rows_give_zeros_not_nan(backend):
    q, k, v, bias, mult, _ = _inputs(4)
    pad = torch.zeros(2, 5, dtype=torch.bool)
    pad[1] = True  # the whole second sequence is padding
    for t in (q, k, v, bias, mult):
        t.requires_grad_(True)
    out = urpe_attention(
        q, k, v, attn_bias=bias, multiplier=mult, key_padding_mask=pad, backend=backend
    )
    assert torch.all(out[1] == 0)
    assert torch.isfinite(out).all()
    out.sum().backward()
    for t in (q, k, v, bias, mult):
        assert torch.isfinite(t.grad).all()
    # causal + leading padding: rows whose visible prefix is all padded are zero
    pad2 = torch.zeros(2, 5, dtype=torch.bool)
    pad2[0, :2] = True
    out2 = urpe_attention(q, k, v, key_padding_mask=pad2, is_causal=True, backend=backend)
    assert torch.all(out2[0, :, :2] == 0)
    torch.testing.assert_close(
        out2.double(), naive_urpe(q, k, v, pad=pad2, causal=True), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradcheck_all_inputs(backend):
    q, k, v, bias, mult, pad = _inputs(5, B=1, H=2, Nq=3, Nk=4, D=2, dtype=torch.float64)
    inputs = [t.clone().requires_grad_(True) for t in (q, k, v, bias, mult)]

    def fn(q, k, v, b, c):
        return urpe_attention(
            q, k, v, attn_bias=b, multiplier=c, key_padding_mask=pad[:1], backend=backend
        )

    assert torch.autograd.gradcheck(fn, inputs)

    def fn_chunked(q, k, v, b, c):
        return urpe_attention(
            q, k, v, attn_bias=b, multiplier=c, is_causal=True, chunk_size=2, backend=backend
        )

    assert torch.autograd.gradcheck(fn_chunked, inputs)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("chunk", [1, 3, 7])
def test_chunked_equals_dense_values_and_gradients(causal, chunk, backend):
    q, k, v, bias, mult, pad = _inputs(6, B=2, H=2, Nq=10, Nk=10, D=4)
    bias = bias[:1, :, :, :]  # broadcast over the batch
    dense_in = [t.clone().requires_grad_(True) for t in (q, k, v, bias, mult)]
    chunk_in = [t.clone().requires_grad_(True) for t in (q, k, v, bias, mult)]
    kw = {"key_padding_mask": pad, "is_causal": causal, "backend": backend}
    d = urpe_attention(*dense_in[:3], attn_bias=dense_in[3], multiplier=dense_in[4], **kw)
    c = urpe_attention(
        *chunk_in[:3], attn_bias=chunk_in[3], multiplier=chunk_in[4], chunk_size=chunk, **kw
    )
    torch.testing.assert_close(c, d, rtol=1e-6, atol=1e-6)
    w = torch.randn_like(d)
    (d * w).sum().backward()
    (c * w).sum().backward()
    for a, b in zip(dense_in, chunk_in):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-5, atol=1e-6)


def test_auto_chunking_kicks_in(monkeypatch):
    import graph_urpe.nn.functional as F_

    q, k, v, bias, mult, _pad = _inputs(8, B=1, H=2, Nq=9, Nk=9)
    dense = urpe_attention(q, k, v, attn_bias=bias[:1], multiplier=mult[:1])
    calls = []
    orig = F_.fused_attention

    def spy(q, *a, **kw):
        calls.append(q.shape[2])
        return orig(q, *a, **kw)

    monkeypatch.setattr(F_, "AUTO_CHUNK_ELEMENTS", 2 * 9 * 4)
    monkeypatch.setattr(F_, "fused_attention", spy)
    out = urpe_attention(q, k, v, attn_bias=bias[:1], multiplier=mult[:1])
    assert calls == [4, 4, 1]
    torch.testing.assert_close(out, dense)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_applies_after_multiplier_and_only_in_training(backend):
    q, k, v, bias, mult, _ = _inputs(9)
    kw = {"attn_bias": bias, "multiplier": mult, "backend": backend}
    ref = urpe_attention(q, k, v, **kw)
    torch.testing.assert_close(urpe_attention(q, k, v, dropout_p=0.9, training=False, **kw), ref)
    torch.manual_seed(0)
    dropped = urpe_attention(q, k, v, dropout_p=0.5, **kw)
    assert not torch.allclose(dropped, ref)
    # With V = identity, the output is the attention matrix itself: each entry is either 0 or
    # the undropped (softmax ⊙ C) weight scaled by 1 / (1 - p).
    n = q.shape[2]
    eye = torch.eye(n).expand(q.shape[0], q.shape[1], n, n)
    weights = urpe_attention(q, k, eye, training=False, **kw)
    torch.manual_seed(1)
    dropped_w = urpe_attention(q, k, eye, dropout_p=0.5, **kw)
    kept = dropped_w != 0
    assert 0 < kept.float().mean() < 1
    torch.testing.assert_close(dropped_w[kept], 2 * weights[kept])


@pytest.mark.parametrize("backend", BACKENDS)
def test_need_weights_returns_probabilities_before_multiplier(backend):
    q, k, v, bias, mult, pad = _inputs(10)
    out, w = urpe_attention(
        q, k, v, attn_bias=bias, multiplier=mult, key_padding_mask=pad, need_weights=True,
        backend=backend,
    )
    torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
    assert torch.all(w.masked_select(pad[:, None, None, :].expand_as(w)) == 0)
    torch.testing.assert_close(out, torch.matmul(w * mult, v))


@pytest.mark.parametrize("backend", BACKENDS)
def test_autocast_bf16_softmax_in_float32(backend):
    q, k, v, bias, mult, pad = _inputs(11)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, w = urpe_attention(
            q.bfloat16(), k.bfloat16(), v.bfloat16(), attn_bias=bias, multiplier=mult,
            key_padding_mask=pad, need_weights=True, backend=backend,
        )
    assert w.dtype == torch.float32 and out.dtype == torch.bfloat16
    ref = naive_urpe(q, k, v, bias, mult, pad)
    torch.testing.assert_close(out.double(), ref, rtol=0.05, atol=0.05)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"query": torch.randn(2, 3, 4)}, r"query must have shape \[B, H, N, D\]"),
        ({"key": torch.randn(2, 3, 5, 3)}, r"expected \[2, 3, Nk, 4\]"),
        ({"value": torch.randn(2, 3, 6, 4)}, r"expected \[2, 3, 5, Dv\]"),
        ({"attn_bias": torch.randn(3, 5, 4)}, r"attn_bias .* \[2, 3, 5, 5\]"),
        ({"multiplier": torch.randn(2, 2, 5, 5)}, r"multiplier .* \[2, 3, 5, 5\]"),
        ({"key_padding_mask": torch.zeros(2, 4, dtype=torch.bool)}, r"key_padding_mask .*\[2, 5\]"),
        ({"key_padding_mask": torch.zeros(2, 5)}, r"bool tensor"),
        ({"chunk_size": 0}, r"chunk_size"),
        ({"dropout_p": -0.5}, r"dropout_p must lie in \[0, 1\]"),
        ({"backend": "xformers"}, r"backend must be one of"),
    ],
)
def test_bad_shapes_raise_value_error_naming_expected_shape(kwargs, match):
    q, k, v, _, _, _ = _inputs(12, B=2, H=3, Nq=5, Nk=5, D=4)
    args = {"query": q, "key": k, "value": v}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        urpe_attention(**args)


# --- The paper's point (Luo et al. 2022, Sec. 3): RPE cannot tell positions apart on identical
# tokens, URPE can. -------------------------------------------------------------------------


def _toeplitz_layer(n, heads=2, dim=8, seed=0):
    torch.manual_seed(seed)
    attn = MultiheadURPEAttention(dim, heads)
    ids = relative_position_ids(n, max_distance=n - 1)
    bias_table = RelationEmbedding(2 * n - 1, heads, init="normal", std=1.0)
    c_table = RelationEmbedding(2 * n - 1, heads, init="ones")
    return attn, ids, bias_table, c_table


def test_rpe_gives_identical_outputs_on_identical_tokens():
    n = 7
    attn, ids, bias_table, _ = _toeplitz_layer(n)
    x = torch.randn(1, 1, 8).expand(1, n, 8)  # the same token at every position
    out = attn(x, attn_bias=bias_table(ids))
    # every row of the right-stochastic matrix averages identical value rows
    torch.testing.assert_close(out, out[:, :1].expand_as(out))


def test_urpe_with_nonconstant_toeplitz_c_separates_positions():
    n = 7
    attn, ids, bias_table, c_table = _toeplitz_layer(n)
    with torch.no_grad():
        c_table.weight.copy_(torch.linspace(-1.0, 2.0, 2 * n - 1)[:, None].repeat(1, 2))
    x = torch.randn(1, 1, 8).expand(1, n, 8)
    out = attn(x, attn_bias=bias_table(ids), multiplier=c_table(ids))
    # Independent check: with identical tokens the attention is softmax(B) (q.k is constant
    # per row), so output row i = (sum_j softmax(B)_ij C_ij) * (v W_o) + b_o.
    b, c = bias_table(ids), c_table(ids)
    row_scale = (torch.softmax(b, -1) * c).sum(-1)  # [H, n]
    assert (row_scale.max(1).values - row_scale.min(1).values > 0.1).all()
    dists = torch.cdist(out[0], out[0])
    assert (dists + torch.eye(n) * 1e3).min() > 1e-3  # all positions distinct


def test_bias_shape_check_agrees_with_torch_broadcast_shapes():
    """The attention's shape check of ``attn_bias`` / ``multiplier`` accepts exactly the shapes
    that ``torch.broadcast_shapes`` broadcasts to ``[B, H, Nq, Nk]`` (its own loop, same rule)."""
    from graph_urpe.nn.functional import _check_broadcast

    gen = torch.Generator().manual_seed(0)
    for _ in range(400):
        target = tuple(int(v) for v in torch.randint(1, 4, (4,), generator=gen))
        rank = int(torch.randint(0, 6, (1,), generator=gen))
        shape = tuple(int(v) for v in torch.randint(1, 4, (rank,), generator=gen))
        try:
            expected = rank <= 4 and torch.broadcast_shapes(shape, target) == torch.Size(target)
        except RuntimeError:
            expected = False
        t = torch.empty(shape)
        if expected:
            _check_broadcast("attn_bias", t, target)
        else:
            with pytest.raises(ValueError, match="does not broadcast"):
                _check_broadcast("attn_bias", t, target)
