"""Continuous relations evaluated once per distinct value (issue 47): the same outputs and
gradients as one evaluation per cell (the naive reference below, the code before the change), on
real molecules with padding, the graph token, disconnected molecules and single atoms; in the
encoder (B and C), in URPEGraphConv (stored and computed relations) and under autocast."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.data import Batch

from graph_urpe.data.featurize import feature_dims, smiles_to_graph
from graph_urpe.nn import Graphormer, URPEGraphConv
from graph_urpe.nn.continuous import (
    ContinuousRelations,
    DistinctValues,
    GaussianBasisEmbedding,
    distinct_values,
    gather_heads,
)
from graph_urpe.transforms import pair_pre_transform

# Salts (disconnected), single atoms, rings and chains of different sizes (padding).
SMILES = ["CC(=O)Oc1ccccc1C(=O)O", "[Na+].[Cl-]", "C", "O", "c1ccc2ccccc2c1",
          "CCN(CC)CC.Cl", "C1CC1C(=O)NCc1ccncc1", "OCC(O)CO"]


def per_cell(emb: GaussianBasisEmbedding, value: torch.Tensor) -> torch.Tensor:
    """The equation on every cell of ``value`` ``[..., Nq, Nk]`` -> ``[..., H, Nq, Nk]``."""
    r = (emb.scale * value.to(emb.means.dtype) + emb.shift).unsqueeze(-1)
    std = emb.stds.abs() + 1e-2
    phi = torch.exp(-0.5 * ((r - emb.means) / std) ** 2) / (math.sqrt(2 * math.pi) * std)
    return emb.out(F.gelu(emb.hidden(phi))).movedim(-1, -3).contiguous()


def per_cell_relations(self: ContinuousRelations, values) -> torch.Tensor:
    """:meth:`ContinuousRelations.forward` evaluated per cell, zero at negative values."""
    out = 0
    for name, emb in self.embeddings.items():
        value = values[name]
        if isinstance(value, DistinctValues):
            value = value.values[value.index]
        out = out + per_cell(emb, value).masked_fill((value < 0).unsqueeze(-3), 0.0)
    return out


def _batch() -> Batch:
    pre = pair_pre_transform(resistance=True)
    return Batch.from_data_list([pre(smiles_to_graph(s)) for s in SMILES])


def _trained(model: torch.nn.Module) -> torch.nn.Module:
    """Perturb every parameter, so that the resistance C terms are not zero."""
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


def _outputs_and_grads(model, run):
    model.zero_grad()
    out = run()
    out.square().sum().backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters()
                          if p.grad is not None}


def _compare(model, run, monkeypatch):
    fast, fast_grads = _outputs_and_grads(model, run)
    with monkeypatch.context() as m:
        m.setattr(ContinuousRelations, "forward", per_cell_relations)
        slow, slow_grads = _outputs_and_grads(model, run)
    torch.testing.assert_close(fast, slow, atol=1e-6, rtol=1e-5)
    assert fast_grads.keys() == slow_grads.keys()
    assert any("continuous" in n for n in fast_grads)
    for name in fast_grads:
        torch.testing.assert_close(fast_grads[name], slow_grads[name], atol=1e-5, rtol=1e-4,
                                   msg=lambda m, name=name: f"{name}: {m}")


def test_distinct_values_of_a_hand_worked_map():
    value = torch.tensor([[0.0, 0.5, -1.0], [0.5, 0.0, -1.0], [-1.0, -1.0, -0.0]])
    distinct = distinct_values(value)
    assert torch.equal(distinct.values, torch.tensor([-1.0, 0.0, 0.5]))
    assert torch.equal(distinct.index, torch.tensor([[1, 2, 0], [2, 1, 0], [0, 0, 1]]))
    assert torch.equal(distinct.values[distinct.index], value)
    assert distinct_values(distinct) is distinct  # already distinct: returned as it is


def test_gather_heads_layout_and_gradient():
    table = torch.arange(6.0).view(3, 2).requires_grad_()  # [U=3, H=2]
    index = torch.tensor([[[0, 2], [2, 1]]])  # [B=1, 2, 2]
    out = gather_heads(table, index)
    assert out.shape == (1, 2, 2, 2)
    assert torch.equal(out[0, 0], torch.tensor([[0.0, 4.0], [4.0, 2.0]]))  # head 0: table[:, 0]
    assert torch.equal(out[0, 1], torch.tensor([[1.0, 5.0], [5.0, 3.0]]))
    out.sum().backward()
    assert torch.equal(table.grad, torch.tensor([[1.0, 1.0], [1.0, 1.0], [2.0, 2.0]]))


def test_embedding_equals_per_cell_on_any_map():
    torch.manual_seed(0)
    emb = GaussianBasisEmbedding(num_heads=3, num_kernels=16)
    value = torch.rand(2, 5, 5).round(decimals=1) * 3  # repeated values
    value.requires_grad_(False)
    torch.testing.assert_close(emb(value), per_cell(emb, value), atol=1e-6, rtol=1e-5)
    assert torch.equal(emb(distinct_values(value)), emb(value))


@pytest.mark.parametrize("attention", ["rpe", "urpe"])
@pytest.mark.parametrize("per_layer", [False, True])
def test_encoder_equals_per_cell_on_real_molecules(attention, per_layer, monkeypatch):
    batch = _batch()
    assert (batch.resistance < 0).any()  # the salts' ions are in different components
    atom, bond = feature_dims("ogb")
    torch.manual_seed(0)
    model = _trained(Graphormer(2, atom, bond, num_layers=2, embed_dim=16, num_heads=4,
                                ffn_dim=16, attention=attention, relations=["spd", "resistance"],
                                num_kernels=12, max_distance=6, bias_per_layer=per_layer,
                                multiplier_per_layer=per_layer, dropout=0.0,
                                attention_dropout=0.0))
    _compare(model, lambda: model(batch), monkeypatch)


@pytest.mark.parametrize("stored", [True, False], ids=["stored", "computed"])
def test_conv_equals_per_cell(stored, monkeypatch):
    batch = _batch()
    torch.manual_seed(0)
    conv = _trained(URPEGraphConv(8, heads=2, relations=["resistance", "spd"], num_kernels=12))
    x = torch.randn(batch.num_nodes, 8)
    kwargs = ({"pair_index": batch.pair_index, "spd": batch.spd, "resistance": batch.resistance}
              if stored else {})
    _compare(conv, lambda: conv(x, batch.edge_index, batch.batch, **kwargs), monkeypatch)


def test_autocast_equals_per_cell():
    batch = _batch()
    atom, bond = feature_dims("ogb")
    torch.manual_seed(0)
    model = _trained(Graphormer(1, atom, bond, num_layers=1, embed_dim=16, num_heads=2,
                                ffn_dim=16, attention="urpe", relations=["spd", "resistance"],
                                num_kernels=8))
    from graph_urpe.nn.densify import densify_graphs

    dense = densify_graphs(torch.zeros(batch.num_nodes, 1),
                           {"spd": batch.spd, "resistance": batch.resistance}, batch.pair_index,
                           batch.batch, batch.ptr, torch.zeros(1, 1), 6)
    value = dense.values["resistance"]
    for relations in (model.encoder.continuous_bias, model.encoder.continuous_multiplier):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            fast = relations({"resistance": value})
            slow = per_cell_relations(relations, {"resistance": value})
        assert fast.dtype == slow.dtype == torch.bfloat16
        torch.testing.assert_close(fast, slow, atol=0, rtol=0)


@pytest.mark.parametrize("name", ["moses-gd-urpe", "moses-gd-rpe"])
def test_shipped_encoder_saved_before_the_change_encodes_the_same(name, monkeypatch):
    """An encoder file written with the per-cell code loads into today's module (same parameter
    names) and encodes real molecules as the per-cell evaluation does."""
    from graph_urpe.nn import GraphormerEncoder
    from graph_urpe.pretrained import resolve

    blob = torch.load(resolve(name), weights_only=True)
    args = {k: v for k, v in blob["encoder_args"].items()
            if k not in ("head_hidden_dim", "head_dropout", "outputs_per_task")}
    encoder = GraphormerEncoder(**args).eval()
    encoder.load_state_dict(blob["encoder_state"])
    batch = _batch()
    keys = ("x", "edge_index", "pair_index", "batch", "ptr", "edge_attr", "spd",
            "spd_pred_index", "resistance")

    def run():
        return encoder(**{k: batch[k] for k in keys})[0]

    with torch.no_grad():
        fast = run()
        with monkeypatch.context() as m:
            m.setattr(ContinuousRelations, "forward", per_cell_relations)
            slow = run()
    torch.testing.assert_close(fast, slow, atol=1e-6, rtol=1e-5)


def test_a_learned_relation_gets_its_gradient_per_cell():
    """A value map that requires grad (e.g. a resistance from learned edge weights) is kept per
    cell: its gradient equals the per-cell evaluation's, cells with equal values included."""
    torch.manual_seed(0)
    emb = GaussianBasisEmbedding(num_heads=3, num_kernels=8)
    value = (torch.rand(2, 4, 4).round(decimals=1) * 3).requires_grad_()
    grad = torch.randn(2, 3, 4, 4)
    (fast,) = torch.autograd.grad((emb(value) * grad).sum(), value)
    (slow,) = torch.autograd.grad((per_cell(emb, value) * grad).sum(), value)
    torch.testing.assert_close(fast, slow, atol=1e-6, rtol=1e-5)
    conv = URPEGraphConv(8, heads=2, relations=["resistance"], num_kernels=8)
    batch = _batch()
    resistance = batch.resistance.clone().requires_grad_()
    out = conv(torch.randn(batch.num_nodes, 8), batch.edge_index, batch.batch,
               pair_index=batch.pair_index, resistance=resistance)
    out.sum().backward()
    assert resistance.grad is not None and resistance.grad.abs().sum() > 0


def test_bad_relation_inputs_name_the_fix():
    batch = _batch()
    conv = URPEGraphConv(8, heads=2, relations=["spd", "resistance"], num_kernels=8)
    x = torch.randn(batch.num_nodes, 8)
    with pytest.raises(ValueError, match=r"pass spd=data.spd \(stored by graph_urpe.transforms."
                                         r"AddShortestPathDistance\(\)"):
        conv(x, batch.edge_index, batch.batch, pair_index=batch.pair_index,
             resistance=batch.resistance)
    for bad in (batch.resistance > 1, batch.resistance[:, None]):
        with pytest.raises(TypeError, match="resistance must be a real vector aligned with "
                                            "pair_index"):
            conv(x, batch.edge_index, batch.batch, pair_index=batch.pair_index, spd=batch.spd,
                 resistance=bad)
    with pytest.raises(ValueError, match=r"table \[U, H\] and an index"):
        gather_heads(torch.zeros(3), torch.zeros(2, 2, dtype=torch.long))
    with pytest.raises(TypeError, match="real values"):
        distinct_values(torch.zeros(2, 2, dtype=torch.complex64))


def test_float64_relation_keeps_its_precision():
    """A float64 layer fed a float64 resistance reads it at float64 (no float32 rounding)."""
    batch = _batch()
    torch.manual_seed(0)
    conv = URPEGraphConv(8, heads=2, relations=["resistance"], num_kernels=8).double()
    x = torch.randn(batch.num_nodes, 8, dtype=torch.float64)
    exact = batch.resistance.double() + 1e-9  # differs from its float32 rounding
    seen = {}

    def spy(self, values):
        seen.update(values)
        return per_cell_relations(self, values)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(ContinuousRelations, "forward", spy)
        conv(x, batch.edge_index, batch.batch, pair_index=batch.pair_index, resistance=exact)
    assert seen["resistance"].values.dtype == torch.float64
