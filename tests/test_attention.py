"""MultiheadURPEAttention against an independent einsum computation."""

import pytest
import torch

from graph_urpe.nn import MultiheadURPEAttention


def einsum_reference(m, x, bias, mult, pad):
    b, n, e = x.shape
    h, d = m.num_heads, m.head_dim
    w_q, w_k, w_v = m.qkv_proj.weight.double().split(e)
    b_q, b_k, b_v = m.qkv_proj.bias.double().split(e)
    x = x.double()
    q = (x @ w_q.T + b_q).view(b, n, h, d)
    k = (x @ w_k.T + b_k).view(b, n, h, d)
    v = (x @ w_v.T + b_v).view(b, n, h, d)
    s = torch.einsum("bihd,bjhd->bhij", q, k) / d**0.5 + bias.double()
    s = s.masked_fill(pad[:, None, None, :], float("-inf"))
    a = torch.softmax(s, -1) * mult.double()
    o = torch.einsum("bhij,bjhd->bihd", a, v).reshape(b, n, e)
    return o @ m.out_proj.weight.double().T + m.out_proj.bias.double()


def test_matches_einsum_reference_and_returns_weights():
    torch.manual_seed(0)
    m = MultiheadURPEAttention(12, 3)
    with torch.no_grad():
        m.qkv_proj.bias.normal_()
        m.out_proj.bias.normal_()
    x = torch.randn(2, 5, 12)
    bias, mult = torch.randn(2, 3, 5, 5), torch.randn(2, 3, 5, 5)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    out, w = m(x, attn_bias=bias, multiplier=mult, key_padding_mask=pad, need_weights=True)
    torch.testing.assert_close(out.double(), einsum_reference(m, x, bias, mult, pad),
                               rtol=1e-5, atol=1e-5)
    assert w.shape == (2, 3, 5, 5)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 5))


def test_bad_arguments():
    with pytest.raises(ValueError, match="multiple of num_heads"):
        MultiheadURPEAttention(10, 3)
    m = MultiheadURPEAttention(8, 2)
    with pytest.raises(ValueError, match=r"\[B, N, 8\]"):
        m(torch.randn(2, 5, 6))
    assert repr(m) == "MultiheadURPEAttention(8, num_heads=2, dropout=0.0)"


def test_reset_parameters_zeroes_biases():
    m = MultiheadURPEAttention(8, 2)
    with torch.no_grad():
        m.qkv_proj.bias.fill_(1.0)
    m.reset_parameters()
    assert torch.all(m.qkv_proj.bias == 0)
