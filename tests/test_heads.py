"""GraphHead: readouts and the MLP head against hand-written formulas."""

import pytest
import torch

from graph_urpe.nn import GraphHead, Graphormer


def _nodes():
    torch.manual_seed(0)
    nodes = torch.randn(5, 4, dtype=torch.float64)
    batch = torch.tensor([0, 0, 1, 1, 1])
    return nodes, batch


def test_sum_readout_with_hidden_layer_is_relu_mlp_of_the_node_sum():
    nodes, batch = _nodes()
    head = GraphHead(4, 2, readout="sum", hidden_dim=3, dropout=0.5).double().eval()
    w1, b1 = head.hidden[0].weight, head.hidden[0].bias
    w2, b2 = head.linear.weight, head.linear.bias
    pooled = torch.stack([nodes[:2].sum(0), nodes[2:].sum(0)])
    expected = torch.clamp(pooled @ w1.T + b1, min=0) @ w2.T + b2
    torch.testing.assert_close(head(nodes, None, batch, 2), expected, rtol=0, atol=1e-12)


def test_linear_head_and_mean_readout_unchanged():
    nodes, batch = _nodes()
    head = GraphHead(4, 1, readout="mean").double()
    assert head.hidden is None
    pooled = torch.stack([nodes[:2].mean(0), nodes[2:].mean(0)])
    expected = pooled @ head.linear.weight.T + head.linear.bias
    torch.testing.assert_close(head(nodes, None, batch, 2), expected, rtol=0, atol=1e-12)


def test_dropout_acts_in_training_only():
    nodes, batch = _nodes()
    head = GraphHead(4, 1, readout="sum", hidden_dim=64, dropout=0.5).double()
    torch.manual_seed(1)
    train_out = head(nodes, None, batch, 2)
    head.eval()
    assert not torch.allclose(train_out, head(nodes, None, batch, 2))


@pytest.mark.parametrize("kwargs, match", [({"hidden_dim": 0}, "hidden_dim"),
                                           ({"hidden_dim": 8, "dropout": 1.0}, "dropout"),
                                           ({"readout": "max"}, "readout")])
def test_bad_options_are_refused_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GraphHead(4, 1, **kwargs)


def test_graphormer_builds_the_mlp_head_and_refuses_it_at_node_level():
    model = Graphormer(1, [3], [2], num_layers=1, embed_dim=8, num_heads=2, ffn_dim=8,
                       readout="sum", head_hidden_dim=16, head_dropout=0.1)
    assert model.head.hidden[0].out_features == 16 and model.head.hidden[2].p == 0.1
    assert "hidden_dim=16" in repr(model.head)
    # Graphormer's init of every head layer: N(0, 0.02 / sqrt(L)), zero bias.
    assert torch.count_nonzero(model.head.hidden[0].bias) == 0
    with pytest.raises(ValueError, match="head_hidden_dim"):
        Graphormer(1, [3], [2], level="node", num_layers=1, embed_dim=8, num_heads=2,
                   ffn_dim=8, head_hidden_dim=16)
