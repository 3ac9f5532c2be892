"""Relation-table figures: tables read from state dicts checked against the models' own gathers,
labels against hand-worked id tables, plotted lines against the tables."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("matplotlib")  # the optional plotting extra; .[dev] installs it, so CI runs these
from PIL import Image

from graph_urpe.nn import Graphormer, SequenceTransformer, TransformerLM
from graph_urpe.viz.relations import (
    graph_relation_labels,
    plot_relation_tables,
    relation_tables_figure,
    relation_tables_from_state_dict,
    sequence_relation_labels,
)


def randomise(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "bias" in name or "multiplier" in name or "rel_" in name:
                p.copy_(torch.randn(p.shape, generator=g))
    return model


def test_graph_labels_hand_worked():
    assert graph_relation_labels(3) == ["0", "1", "2", "≥3", "unreach.", "token"]
    with pytest.raises(ValueError):
        graph_relation_labels(-1)


@pytest.mark.parametrize("per_layer", [False, True])
def test_graph_tables_match_the_models_gather(per_layer):
    L, H, M = 3, 4, 5
    model = randomise(Graphormer(1, 28, bond_categories=4, num_layers=L, num_heads=H,
                                 max_distance=M, multiplier_per_layer=per_layer))
    sd = {f"model.{k}": v for k, v in model.state_dict().items()}  # as in a Lightning checkpoint
    tables = relation_tables_from_state_dict(sd)
    assert tables.labels == graph_relation_labels(M)
    assert tables.xlabel == "shortest-path distance"
    ids = torch.arange(M + 3).view(1, 1, -1)  # every relation id except padding
    enc = model.encoder
    bias = enc._per_layer(enc.spatial_bias, ids, False)  # [1, H, 1, R]
    torch.testing.assert_close(tables.bias, bias[0, :, 0].T)
    mult = enc._per_layer(enc.multiplier, ids, per_layer)
    if per_layer:  # [1, L, H, 1, R] -> [L, R, H]
        torch.testing.assert_close(tables.multiplier, mult[0, :, :, 0].transpose(1, 2))
    else:
        torch.testing.assert_close(tables.multiplier, mult[0, :, 0].T)


def test_graph_per_layer_heads_from_hparams_without_edge_encoding():
    model = randomise(Graphormer(1, 28, edge_encoding="none", num_layers=2, num_heads=3, embed_dim=12,
                                 max_distance=4, bias_per_layer=True, attention="rpe"))
    # Without hparams the 6 columns cannot be split into layers: read as 6 heads.
    assert relation_tables_from_state_dict(model.state_dict()).bias.shape == (7, 6)
    tables = relation_tables_from_state_dict(
        model.state_dict(), hparams={"model": {"init_args": {"num_heads": 3}}}
    )
    assert tables.bias.shape == (2, 7, 3) and tables.multiplier is None
    torch.testing.assert_close(tables.bias[1, :, 2], model.encoder.spatial_bias.weight[:-1, 1 * 3 + 2])


def test_sequence_labels_hand_worked():
    assert sequence_relation_labels(2) == ["≤-2", "-1", "0", "1", "≥2"]
    assert sequence_relation_labels(2, causal=True) == ["0", "-1", "≤-2"]
    # T5, 8 buckets, 4 per side, 2 exact: |j - i| = 2..6 share bucket 2 (log(d / 2) / log(10) * 2
    # < 1 iff d < 6.32), 7 and beyond bucket 3; bucket 4 (j > i with |j - i| = 0) is never used.
    assert sequence_relation_labels(20, num_buckets=8) == [
        "0", "-1", "-6..-2", "≤-7", "", "1", "2..6", "≥7"
    ]


def test_sequence_tables_per_layer_and_causal_lm():
    enc = randomise(SequenceTransformer(10, num_layers=3, max_length=6, share_relations=False))
    tables = relation_tables_from_state_dict(enc.state_dict())
    assert tables.labels == sequence_relation_labels(5)
    assert tables.xlabel == "relative position j - i"
    torch.testing.assert_close(tables.bias, torch.stack([t.weight for t in enc.rel_bias]))
    torch.testing.assert_close(tables.multiplier[2], enc.rel_multiplier[2].weight)
    lm = TransformerLM(10, max_length=5, num_layers=1, attention="rpe")
    tables = relation_tables_from_state_dict(lm.state_dict())
    assert tables.labels == ["0", "-1", "-2", "-3", "≤-4"] and tables.multiplier is None
    t5 = SequenceTransformer(10, num_layers=1, num_buckets=8, max_distance=20)
    labels = relation_tables_from_state_dict(t5.state_dict(), {"num_buckets": 8,
                                                               "max_distance": 20}).labels
    assert labels == sequence_relation_labels(20, num_buckets=8)


def test_no_tables_is_a_clear_error():
    model = Graphormer(1, 28, edge_encoding="none", num_layers=1, num_heads=2, attention="none")
    with pytest.raises(ValueError, match="no relation table"):
        relation_tables_from_state_dict(model.state_dict())
    two = {"a.spatial_bias.weight": torch.zeros(5, 2), "b.spatial_bias.weight": torch.zeros(5, 2)}
    with pytest.raises(ValueError, match="prefix="):
        relation_tables_from_state_dict(two)
    assert relation_tables_from_state_dict(two, prefix="b.").bias.shape == (4, 2)


def test_figure_lines_are_the_tables(tmp_path):
    g = torch.Generator().manual_seed(0)
    bias = torch.randn(2, 6, 3, generator=g)  # per layer
    mult = torch.randn(6, 3, generator=g)  # shared
    labels = graph_relation_labels(3)
    fig = relation_tables_figure(bias, mult, labels, "SPD", title="t")
    axes = fig.axes
    b0, c0, b1, c1 = axes  # row-major [layer, column]
    assert not c1.get_visible()
    assert b1.get_title() == "B (bias), layer 1" and c0.get_title().endswith("shared by all layers")
    for h in range(3):
        assert list(b1.lines[h].get_xdata()) == list(range(6))
        torch.testing.assert_close(torch.tensor(b1.lines[h].get_ydata()), bias[1, :, h])
        torch.testing.assert_close(torch.tensor(c0.lines[h].get_ydata()), mult[:, h])
    assert [t.get_text() for t in b0.get_xticklabels()] == labels
    out = plot_relation_tables(bias, mult, labels, tmp_path / "sub" / "tables.png", "SPD")
    assert out.stat().st_size > 0
    with Image.open(out) as im:
        assert im.format == "PNG" and im.width > 200


def test_figure_checks_shapes():
    with pytest.raises(ValueError, match="both are None"):
        relation_tables_figure(None, None, ["0"])
    with pytest.raises(ValueError, match="len\\(labels\\)"):
        relation_tables_figure(torch.zeros(4, 2), None, ["0", "1"])
    with pytest.raises(ValueError, match="same H"):
        relation_tables_figure(torch.zeros(2, 2), torch.zeros(2, 3), ["0", "1"])
    with pytest.raises(ValueError, match=r"\[R, H\] or \[L, R, H\]"):
        relation_tables_figure(torch.zeros(2), None, ["0", "1"])
