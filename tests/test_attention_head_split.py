"""``MultiheadURPEAttention``'s head split (one strided copy per gradient in backward) and the
fused block's masked rows: gradients against autograd's permute / unbind and the eager core."""

import pytest
import torch

from graph_urpe.nn import MultiheadURPEAttention


@pytest.mark.parametrize("backend", ["fused", "eager"])
@pytest.mark.parametrize("head_dim", [4, 16])
def test_multihead_head_split_gradients(monkeypatch, backend, head_dim):
    """MultiheadURPEAttention (head split with one strided copy per gradient in backward) gives
    the gradients of the same network written with autograd's permute / unbind, in float64."""
    import graph_urpe.nn.attention as attention_module

    core = attention_module.urpe_attention
    monkeypatch.setattr(attention_module, "urpe_attention",
                        lambda *a, **kw: core(*a, **{**kw, "backend": backend}))
    torch.manual_seed(0)
    e, n = 2 * head_dim, 7
    attn = MultiheadURPEAttention(e, 2).double()
    x = torch.randn(3, n, e, dtype=torch.float64, requires_grad=True)
    bias, mult = (torch.randn(3, 2, n, n, dtype=torch.float64, requires_grad=True)
                  for _ in range(2))
    pad = torch.zeros(3, n, dtype=torch.bool)
    pad[1, -3:] = True
    w = torch.randn(3, n, e, dtype=torch.float64)
    params = [x, bias, mult, *attn.parameters()]

    qkv = attn.qkv_proj(x).view(3, n, 3, 2, head_dim)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    out = core(q, k, v, attn_bias=bias, multiplier=mult, key_padding_mask=pad, backend="eager")
    ref = attn.out_proj(out.transpose(1, 2).reshape(3, n, e))
    expected = torch.autograd.grad((ref * w).sum(), params)

    out = attn(x, attn_bias=bias, multiplier=mult, key_padding_mask=pad)
    torch.testing.assert_close(out, ref, rtol=1e-9, atol=1e-10)
    for a, r in zip(torch.autograd.grad((out * w).sum(), params), expected):
        torch.testing.assert_close(a, r, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("dropout", [0.0, 0.25])
def test_fused_masked_rows_and_dropout_gradients_equal_eager(dropout):
    """Query rows with no visible key (a sequence of padding only) get 0 output and 0 gradient;
    the fused block's backward (mask and dropout scale applied in place on its padded copy of
    ``dO``) equals the eager core with the same keep mask, in float64."""
    from graph_urpe.nn._dropout import keep_mask
    from graph_urpe.nn.functional import urpe_attention

    g = torch.Generator().manual_seed(3)
    b, h, n, d = 3, 2, 5, 6
    q, k, v = (torch.randn(b, h, n, d, generator=g, dtype=torch.float64) for _ in range(3))
    bias, mult = (torch.randn(b, h, n, n, generator=g, dtype=torch.float64) for _ in range(2))
    pad = torch.zeros(b, n, dtype=torch.bool)
    pad[1] = True
    pad[2, -2:] = True
    w = torch.randn(b, h, n, d, generator=g, dtype=torch.float64)
    results = []
    for backend in ("fused", "eager"):
        ins = [t.clone().requires_grad_(True) for t in (q, k, v, bias, mult)]
        torch.manual_seed(5)
        if backend == "fused" or dropout == 0.0:
            out = urpe_attention(*ins[:3], attn_bias=ins[3], multiplier=ins[4],
                                 key_padding_mask=pad, dropout_p=dropout, training=True,
                                 backend=backend)
        else:  # the eager core with the fused block's keep mask applied by hand
            keep, scale = keep_mask(torch.empty(b, h, n, n), dropout)
            _, probs = urpe_attention(*ins[:2], ins[2], attn_bias=ins[3], key_padding_mask=pad,
                                      need_weights=True, backend="eager")
            out = torch.einsum("bhij,bhjd->bhid", probs * ins[4] * keep * scale, ins[2])
        (out * w).sum().backward()
        results.append([out, *(t.grad for t in ins)])
    assert results[0][0][1].abs().max() == 0
    for a, r in zip(*results):
        torch.testing.assert_close(a, r, rtol=1e-9, atol=1e-10)
