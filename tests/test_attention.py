"""MultiheadURPEAttention against an independent einsum computation."""

import math

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
    ref = einsum_reference(m, x, bias, mult, pad)
    torch.testing.assert_close(m(x, attn_bias=bias, multiplier=mult, key_padding_mask=pad).double(),
                               ref, rtol=1e-5, atol=1e-5)
    out, (w, wc) = m(x, attn_bias=bias, multiplier=mult, key_padding_mask=pad, need_weights=True)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    assert w.shape == wc.shape == (2, 3, 5, 5)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 5))
    torch.testing.assert_close(wc, w * mult)
    assert (w[1, :, :, 3:] == 0).all()


def test_weights_hand_worked():
    # One head, width 1, zero projections: scores are the bias alone, so the weights are
    # softmax(B) and softmax(B) * C, computed here by hand.
    m = MultiheadURPEAttention(1, 1)
    with torch.no_grad():
        m.qkv_proj.weight.zero_()
        m.qkv_proj.bias.copy_(torch.tensor([0.0, 0.0, 2.0]))  # v = 2 everywhere
        m.out_proj.weight.fill_(1.0)
    x = torch.zeros(1, 2, 1)
    bias = torch.tensor([[[[0.0, math.log(3.0)], [0.0, 0.0]]]])
    mult = torch.tensor([[[[2.0, 1.0], [0.5, 0.5]]]])
    out, (w, wc) = m(x, attn_bias=bias, multiplier=mult, need_weights=True)
    expected = torch.tensor([[[[0.25, 0.75], [0.5, 0.5]]]])
    torch.testing.assert_close(w, expected)
    torch.testing.assert_close(wc, torch.tensor([[[[0.5, 0.75], [0.25, 0.25]]]]))
    # out = (P ⊙ C) v = 2 * row sums of P ⊙ C: 2.5 and 1.0
    torch.testing.assert_close(out, torch.tensor([[[2.5], [1.0]]]))


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
