"""Attention maps of a tiny Graphormer checked against a hand computation (einsum over the
module's weights, SPD from networkx on the RDKit molecule) and against the module's own output."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import torch
from rdkit import Chem

from graph_urpe.data.featurize import smiles_to_graph
from graph_urpe.nn import Graphormer
from graph_urpe.viz.attention import attention_maps

SMILES = "CC(=O)Nc1ccc(O)cc1"  # paracetamol, 11 atoms, longest SPD 7
M = 3  # max_distance: distances 3..7 share the last id


def tiny(edge_encoding="none", seed=0):
    torch.manual_seed(seed)
    model = Graphormer(1, 28, bond_categories=4, num_layers=2, embed_dim=16, num_heads=4,
                       ffn_dim=16, max_distance=M, edge_encoding=edge_encoding)
    with torch.no_grad():  # away from the initial values, so each term matters
        model.spatial_bias.weight.normal_(0.0, 1.0)
        model.multiplier.weight.normal_(0.5, 1.0)
        for lin in model.modules():
            if isinstance(lin, torch.nn.Linear):
                lin.weight.normal_(0.0, 0.5)
    return model


def hand_relation_ids():
    """[n + 1, n + 1] ids: token row/column M + 2, else min(SPD, M) (networkx on the molecule)."""
    mol = Chem.MolFromSmiles(SMILES)
    g = nx.Graph([(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()])
    n = mol.GetNumAtoms()
    ids = torch.full((n + 1, n + 1), M + 2)
    for i, dist in nx.all_pairs_shortest_path_length(g):
        for j, d in dist.items():
            ids[i + 1, j + 1] = min(d, M)
    return ids


def test_before_rows_are_distributions_and_after_is_before_times_c():
    model = tiny()
    maps = attention_maps(model, SMILES, "zinc")
    assert len(maps) == 2
    ids = hand_relation_ids()
    for before, after in maps:
        assert before.shape == after.shape == (4, 12, 12) and before.dtype == torch.float32
        torch.testing.assert_close(before.sum(-1), torch.ones(4, 12))
        assert (before >= 0).all()
        c = model.multiplier.weight[ids].permute(2, 0, 1)  # [H, n + 1, n + 1]
        torch.testing.assert_close(after, before * c)
    with torch.no_grad():
        model.multiplier.weight.fill_(1.0)
    for before, after in attention_maps(model, SMILES, "zinc"):
        torch.testing.assert_close(after, before)


def test_layer0_head_matches_hand_einsum():
    model = tiny()
    data = smiles_to_graph(SMILES, "zinc")
    n = data.num_nodes
    h0 = model.atom_encoder(data.x) + model.degree_encoder(data.edge_index, n)
    h0 = torch.cat([model.graph_token[0], h0])  # [n + 1, E], token first
    x = model.layers[0].attn_norm(h0)
    attn = model.layers[0].attn
    E, H = 16, 4
    d = E // H
    w, b = attn.qkv_proj.weight, attn.qkv_proj.bias
    ids = hand_relation_ids()
    before, after = attention_maps(model, SMILES, "zinc")[0]
    for head in range(H):
        rows_q = slice(head * d, (head + 1) * d)
        rows_k = slice(E + head * d, E + (head + 1) * d)
        q = torch.einsum("nc,dc->nd", x, w[rows_q]) + b[rows_q]
        k = torch.einsum("nc,dc->nd", x, w[rows_k]) + b[rows_k]
        scores = torch.einsum("id,jd->ij", q, k) / math.sqrt(d)
        scores = scores + model.spatial_bias.weight[ids, head]
        expected = torch.softmax(scores, dim=-1)
        torch.testing.assert_close(before[head], expected.detach(), atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(
            after[head], (expected * model.multiplier.weight[ids, head]).detach(),
            atol=1e-5, rtol=1e-4,
        )


def test_after_reproduces_the_modules_output_with_edge_encoding():
    model = tiny("multi_hop")
    attn = model.layers[1].attn
    seen = {}
    pre = attn.register_forward_pre_hook(lambda m, a, kw: seen.update(x=a[0]), with_kwargs=True)
    post = attn.register_forward_hook(lambda m, a, out: seen.update(out=out))
    try:
        _, after = attention_maps(model, SMILES, "zinc")[1]
    finally:
        pre.remove()
        post.remove()
    x = seen["x"][0]  # [n + 1, E]
    v = (x @ attn.qkv_proj.weight[32:].T + attn.qkv_proj.bias[32:]).view(-1, 4, 4)  # [N, H, d]
    heads = torch.einsum("hij,jhd->ihd", after, v).reshape(x.shape[0], 16)
    torch.testing.assert_close(attn.out_proj(heads), seen["out"][0], atol=1e-5, rtol=1e-4)


def test_mode_restored_hooks_removed_and_errors():
    model = tiny().train()
    attention_maps(model, SMILES, "zinc")
    assert model.training
    assert all(not m._forward_pre_hooks for m in model.modules())
    with pytest.raises(ValueError, match="no MultiheadURPEAttention"):
        attention_maps(torch.nn.Linear(2, 2), SMILES)


def test_plot_attention_panels(tmp_path):
    pytest.importorskip("matplotlib")
    from PIL import Image

    from graph_urpe.viz.attention import attention_figure, plot_attention

    before, after = attention_maps(tiny(), SMILES, "zinc")[1]
    fig = attention_figure(SMILES, before[2], after[2], layer=1, head=2)
    mol_ax, before_ax, after_ax = fig.axes[:3]
    np.testing.assert_allclose(before_ax.images[0].get_array(), before[2].numpy())
    np.testing.assert_allclose(after_ax.images[0].get_array(), after[2].numpy())
    norm = after_ax.images[0].norm
    assert norm.vmin == -norm.vmax == -float(after[2].abs().max())  # diverging, centred at 0
    ticks = [t.get_text() for t in before_ax.get_yticklabels()]
    assert ticks == ["G", "C0", "C1", "O2", "N3", "C4", "C5", "C6", "C7", "O8", "C9", "C10"]
    assert "layer 1, head 2" in after_ax.get_title()
    assert mol_ax.images[0].get_array().shape[:2] == (420, 420)
    out = plot_attention(SMILES, before[2], after[2], tmp_path / "a.png", 1, 2,
                         atom_labels=[str(i) for i in range(11)])
    with Image.open(out) as im:
        assert im.format == "PNG" and im.width > 600
    with pytest.raises(ValueError, match=r"\[12, 12\]"):
        attention_figure(SMILES, before, after, 1, 2)  # all heads instead of one
    with pytest.raises(ValueError, match="atom_labels"):
        attention_figure(SMILES, before[0], after[0], 0, 0, atom_labels=["a"])
