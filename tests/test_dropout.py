"""The CPU dropout with 16 random bits per element (graph_urpe/nn/_dropout.py)."""

import pytest
import torch

from graph_urpe.nn._dropout import Dropout, dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_fraction_and_scale(p):
    torch.manual_seed(0)
    keep, scale = keep_mask(torch.empty(400_000), p)
    rounded = round(p * 65536) / 65536
    assert scale == 1 / (1 - rounded)
    # binomial standard deviation at n = 400k is below 0.0008: 5 sigma
    assert abs(1 - keep.float().mean().item() - rounded) < 0.004
    # the four 16-bit lanes of a draw are independent: neighbours agree as often as chance says
    agree = (keep[:-1] == keep[1:]).float().mean().item()
    assert abs(agree - (rounded**2 + (1 - rounded) ** 2)) < 0.004


def test_values_and_gradient_are_mask_times_scale():
    x = torch.randn(37, 11, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(3)
    y = dropout(x, 0.3)
    torch.manual_seed(3)
    keep, scale = keep_mask(x, 0.3)
    torch.testing.assert_close(y, torch.where(keep, x * scale, 0.0))
    w = torch.randn_like(x)
    (y * w).sum().backward()
    torch.testing.assert_close(x.grad, torch.where(keep, w * scale, 0.0))


def test_mean_is_kept_and_seeded_masks_repeat():
    x = torch.ones(200_000)
    torch.manual_seed(1)
    a = dropout(x, 0.25)
    assert abs(a.mean().item() - 1.0) < 0.01
    torch.manual_seed(1)
    assert torch.equal(dropout(x, 0.25), a)


def test_module_edges():
    m = Dropout(0.4)
    x = torch.randn(5, 3)
    assert torch.equal(m.eval()(x), x) and torch.equal(dropout(x, 0.0), x)
    assert torch.equal(Dropout(1.0).train()(x), torch.zeros_like(x))
    assert repr(m) == "Dropout(p=0.4)"
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Dropout(1.5)
