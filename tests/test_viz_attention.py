"""Attention maps of a tiny Graphormer checked against a hand computation (einsum over the
module's weights, SPD from networkx on the RDKit molecule) and against the output of the model's
default (non-eager) attention path."""

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
L, E, H = 2, 16, 4


def tiny(edge_encoding="none", seed=0, **kw):
    torch.manual_seed(seed)
    model = Graphormer(1, 28, bond_categories=4, num_layers=L, embed_dim=E, num_heads=H,
                       ffn_dim=16, max_distance=M, edge_encoding=edge_encoding, **kw)
    with torch.no_grad():  # away from the initial values, so each term matters
        model.encoder.spatial_bias.weight[:-1].normal_(0.0, 1.0)
        model.encoder.multiplier.weight[:-1].normal_(0.5, 1.0)
        for lin in model.modules():
            if isinstance(lin, torch.nn.Linear):
                lin.weight.normal_(0.0, 0.5)
    return model


def hand_relation_ids(graph_token=True):
    """``[n', n']`` ids from networkx on the molecule: ``min(SPD, M)`` between atoms, ``M + 2``
    on the graph token's row and column (first, when present)."""
    mol = Chem.MolFromSmiles(SMILES)
    g = nx.Graph([(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()])
    n, t = mol.GetNumAtoms(), int(graph_token)
    ids = torch.full((n + t, n + t), M + 2)
    for i, dist in nx.all_pairs_shortest_path_length(g):
        for j, d in dist.items():
            ids[i + t, j + t] = min(d, M)
    return ids


@pytest.mark.parametrize("graph_token", [True, False])
@pytest.mark.parametrize("per_layer", [False, True])
def test_before_rows_are_distributions_and_after_is_before_times_c(graph_token, per_layer):
    model = tiny(graph_token=graph_token, multiplier_per_layer=per_layer)
    maps = attention_maps(model, SMILES, "zinc")
    assert len(maps) == L
    n = 11 + int(graph_token)
    ids = hand_relation_ids(graph_token)
    table = model.encoder.multiplier.weight.detach()  # [R, H] or [R, L * H] (layer-major)
    for layer, (before, after) in enumerate(maps):
        assert before.shape == after.shape == (H, n, n) and before.dtype == torch.float32
        torch.testing.assert_close(before.sum(-1), torch.ones(H, n))
        assert (before >= 0).all()
        cols = table[:, layer * H:(layer + 1) * H] if per_layer else table
        c = cols[ids].permute(2, 0, 1)  # [H, n', n']
        torch.testing.assert_close(after, before * c)
    with torch.no_grad():
        model.encoder.multiplier.weight[:-1].fill_(1.0)
    for before, after in attention_maps(model, SMILES, "zinc"):
        torch.testing.assert_close(after, before)


def test_layer0_head_matches_hand_einsum():
    model = tiny()
    enc = model.encoder
    data = smiles_to_graph(SMILES, "zinc")
    n = data.num_nodes
    h0 = enc.atom_encoder(data.x) + enc.degree_encoder(data.edge_index, n)
    h0 = torch.cat([enc.graph_token[0], h0])  # [n + 1, E], token first
    x = enc.layers[0].attn_norm(h0)
    attn = enc.layers[0].attn
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
        scores = scores + enc.spatial_bias.weight[ids, head]
        expected = torch.softmax(scores, dim=-1)
        torch.testing.assert_close(before[head], expected.detach(), atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(
            after[head], (expected * enc.multiplier.weight[ids, head]).detach(),
            atol=1e-5, rtol=1e-4,
        )


def test_after_reproduces_the_default_forward_with_edge_encoding():
    """``after @ V`` through ``out_proj`` gives what the attention module returns in a plain
    ``model(batch)`` pass (the fused / chunked path, not the eager one that made the maps)."""
    from torch_geometric.data import Batch

    from graph_urpe.transforms import AddShortestPathDistance

    model = tiny("multi_hop").eval()
    attn = model.encoder.layers[1].attn
    seen = {}
    pre = attn.register_forward_pre_hook(lambda m, a, kw: seen.update(x=a[0]), with_kwargs=True)
    post = attn.register_forward_hook(lambda m, a, out: seen.update(out=out))
    batch = Batch.from_data_list([AddShortestPathDistance()(smiles_to_graph(SMILES, "zinc"))])
    try:
        with torch.no_grad():
            model(batch)
    finally:
        pre.remove()
        post.remove()
    _, after = attention_maps(model, SMILES, "zinc")[1]
    x = seen["x"][0]  # [n + 1, E]
    v = (x @ attn.qkv_proj.weight[2 * E:].T + attn.qkv_proj.bias[2 * E:]).view(-1, H, E // H)
    heads = torch.einsum("hij,jhd->ihd", after, v).reshape(x.shape[0], E)
    torch.testing.assert_close(attn.out_proj(heads), seen["out"][0], atol=1e-5, rtol=1e-4)


def test_encoder_gives_the_same_maps_mode_restored_and_errors():
    model = tiny("multi_hop").train()
    maps = attention_maps(model, SMILES, "zinc")
    assert model.training
    for (b0, a0), (b1, a1) in zip(maps, attention_maps(model.encoder, SMILES, "zinc")):
        torch.testing.assert_close(b0, b1)
        torch.testing.assert_close(a0, a1)
    with pytest.raises(ValueError, match="cannot return attention maps"):
        attention_maps(torch.nn.Linear(2, 2), SMILES)


def test_plot_attention_panels(tmp_path):
    pytest.importorskip("matplotlib")  # optional plotting extra; .[dev] installs it
    from PIL import Image

    from graph_urpe.viz.attention import attention_figure, plot_attention

    before, after = attention_maps(tiny(), SMILES, "zinc")[1]
    fig = attention_figure(SMILES, before[2], after[2], layer=1, head=2)
    mol_ax, before_ax, after_ax = fig.axes[:3]
    np.testing.assert_allclose(before_ax.images[0].get_array(), before[2].numpy())
    np.testing.assert_allclose(after_ax.images[0].get_array(), after[2].numpy())
    assert (after[2] < 0).any()  # C has negative entries here
    norm = after_ax.images[0].norm
    assert norm.vmin == -norm.vmax == -float(after[2].abs().max())  # diverging, centred at 0
    assert before_ax.images[0].norm.vmin == 0.0
    assert before_ax.images[0].norm.vmax == float(before[2].max())
    # Without negative values both panels share one sequential scale, 0 .. max of both maps.
    doubled = attention_figure(SMILES, before[2], 2 * before[2], layer=1, head=2)
    for ax in doubled.axes[1:3]:
        norm = ax.images[0].norm
        assert (norm.vmin, norm.vmax) == (0.0, 2 * float(before[2].max()))
        assert ax.images[0].get_cmap().name == "viridis"
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
