"""Graphormer / URPE-Graphormer layers checked against independent computations.

The reference forward (:func:`reference_forward`) re-implements Graphormer for ONE graph with
loops, networkx shortest paths and plain tensor algebra (no batching, padding, relation ids or the
package's attention core), reading the weights of the module under test.
"""

from __future__ import annotations

import itertools
import math

import networkx as nx
import pytest
import torch
from torch_geometric.data import Batch, Data

from graph_urpe.nn.encoders import CategoricalEncoder, DegreeEncoder
from graph_urpe.nn.graphormer import Graphormer, GraphormerLayer, graph_relation_ids
from graph_urpe.transforms import UNREACHABLE, AddShortestPathDistance

SPD = AddShortestPathDistance()


def make_graph(edges, num_nodes, atom, bond, seed=0):
    """Undirected graph (both directions, PyG style) with random categorical features."""
    g = torch.Generator().manual_seed(seed)
    e = torch.tensor(edges, dtype=torch.long).view(-1, 2).T
    edge_index = torch.cat([e, e.flip(0)], dim=1)
    bond_half = torch.randint(0, bond, (e.shape[1], 1), generator=g)
    data = Data(
        x=torch.randint(0, atom, (num_nodes, 1), generator=g),
        edge_index=edge_index,
        edge_attr=torch.cat([bond_half, bond_half]),
        num_nodes=num_nodes,
    )
    return SPD(data)


def tree_graph(seed=0):
    # A branched tree (unique shortest paths) plus an isolated pair: 7 + 2 nodes.
    edges = [(0, 1), (1, 2), (2, 3), (1, 4), (4, 5), (2, 6), (7, 8)]
    return make_graph(edges, 9, 28, 4, seed)


def ring_graph(seed=1):
    # A 5-ring with a tail (odd cycle: shortest paths are still unique).
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (0, 5), (5, 6)]
    return make_graph(edges, 7, 28, 4, seed)


def even_ring_graph(seed=2):
    # Benzene-like 6-ring with a tail: two shortest paths between opposite ring atoms.
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (0, 6), (6, 7)]
    return make_graph(edges, 8, 28, 4, seed)


def small_model(**kw):
    cfg = {"num_layers": 2, "embed_dim": 16, "num_heads": 4, "ffn_dim": 24, "dropout": 0.0,
               "attention_dropout": 0.0, "max_distance": 5, "max_degree": 3, "max_hops": 3}
    cfg.update(kw)
    torch.manual_seed(0)
    model = Graphormer(2, 28, 4, **cfg)
    # Non-trivial values everywhere (Graphormer's init is tiny), incl. C when present.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
        if model.multiplier is not None:
            model.multiplier.weight[-1] = 0.0  # padding row stays 0
        if model.spatial_bias is not None:
            model.spatial_bias.weight[-1] = 0.0
    return model.eval()


def reference_forward(model: Graphormer, data: Data) -> torch.Tensor:
    """Graphormer for a single graph, written out with loops (independent of the module code)."""
    n = data.num_nodes
    H, E, L = model.num_heads, model.embed_dim, model.num_layers
    G = nx.Graph()
    G.add_nodes_from(range(n))
    edge_of = {}
    for col, (u, v) in enumerate(data.edge_index.T.tolist()):
        G.add_edge(u, v)
        edge_of.setdefault((u, v), col)
    dist = dict(nx.all_pairs_shortest_path_length(G))

    atom_w = model.atom_encoder.embedding.weight
    deg_w = model.degree_encoder.in_degree.weight
    h = torch.zeros(n + 1, E)
    h[0] = model.graph_token.view(E)
    for v in range(n):
        deg = min(G.degree(v), model.degree_encoder.max_degree)
        h[v + 1] = atom_w[int(data.x[v, 0])] + deg_w[deg]

    M = model.max_distance
    bias = torch.zeros(L, H, n + 1, n + 1)
    mult = torch.ones(L, H, n + 1, n + 1)
    for i in range(n + 1):
        for j in range(n + 1):
            if i == 0 or j == 0:
                rel = M + 2
            elif j - 1 in dist[i - 1]:
                rel = min(dist[i - 1][j - 1], M)
            else:
                rel = M + 1
            for layer in range(L):
                if model.spatial_bias is not None:
                    w = model.spatial_bias.weight[rel]
                    bias[layer, :, i, j] += w[layer * H:(layer + 1) * H] if model.bias_per_layer else w
                if model.multiplier is not None:
                    w = model.multiplier.weight[rel]
                    mult[layer, :, i, j] = w[layer * H:(layer + 1) * H] if model.multiplier_per_layer else w
    if model.edge_encoder is not None:
        bond_w = model.edge_encoder.embedding.weight
        for i in range(n):
            for j in range(n):
                if i == j or j not in dist[i]:
                    continue
                path = nx.shortest_path(G, i, j)
                hops = list(itertools.pairwise(path))[: model.max_hops]
                total = torch.zeros(H)
                for k, (u, v) in enumerate(hops):
                    e = bond_w[int(data.edge_attr[edge_of[(u, v)], 0])]
                    total = total + e @ model.hop_weight[k]
                bias[:, :, i + 1, j + 1] += total / len(hops)

    for layer_idx, layer in enumerate(model.layers):
        x = torch.nn.functional.layer_norm(h, (E,), layer.attn_norm.weight, layer.attn_norm.bias)
        qkv = x @ layer.attn.qkv_proj.weight.T + layer.attn.qkv_proj.bias
        q, k, v = qkv.split(E, dim=-1)
        d = E // H
        heads = []
        for head in range(H):
            qh, kh, vh = (t[:, head * d:(head + 1) * d] for t in (q, k, v))
            scores = qh @ kh.T / math.sqrt(d) + bias[layer_idx, head]
            attn = torch.softmax(scores, dim=-1) * mult[layer_idx, head]
            heads.append(attn @ vh)
        out = torch.cat(heads, dim=-1) @ layer.attn.out_proj.weight.T + layer.attn.out_proj.bias
        h = h + out
        x = torch.nn.functional.layer_norm(h, (E,), layer.ffn_norm.weight, layer.ffn_norm.bias)
        x = torch.nn.functional.gelu(x @ layer.ffn[0].weight.T + layer.ffn[0].bias)
        h = h + x @ layer.ffn[3].weight.T + layer.ffn[3].bias
    g = torch.nn.functional.layer_norm(h[0], (E,), model.final_norm.weight, model.final_norm.bias)
    return g @ model.head.weight.T + model.head.bias


@pytest.mark.parametrize(
    "kw",
    [
        {"attention": "urpe"},
        {"attention": "rpe"},
        {"attention": "none"},
        {"attention": "urpe", "multiplier_per_layer": True, "bias_per_layer": True},
        {"attention": "urpe", "edge_encoding": "none"},
    ],
)
def test_forward_matches_reference_in_a_padded_batch(kw):
    model = small_model(**kw)
    graphs = [tree_graph(0), ring_graph(1), make_graph([], 1, 28, 4, 2)]  # incl. a single atom
    with torch.no_grad():
        out = model(Batch.from_data_list(graphs))
        assert out.shape == (3, 2)
        for b, g in enumerate(graphs):
            torch.testing.assert_close(out[b], reference_forward(model, g), atol=1e-4, rtol=1e-4)


def test_relation_ids_hand_worked():
    # Graph 0: path 0-1-2; graph 1: two isolated nodes (padded to 3).
    spd = torch.tensor([
        [[0, 1, 2], [1, 0, 1], [2, 1, 0]],
        [[0, UNREACHABLE, UNREACHABLE], [UNREACHABLE, 0, UNREACHABLE],
         [UNREACHABLE, UNREACHABLE, UNREACHABLE]],
    ])
    pad = torch.tensor([[False, False, False], [False, False, True]])
    ids = graph_relation_ids(spd, pad, max_distance=1)  # 0,1 distances; 2 unreach; 3 token; 4 pad
    expected = torch.tensor([
        [[3, 3, 3, 3], [3, 0, 1, 1], [3, 1, 0, 1], [3, 1, 1, 0]],
        [[3, 3, 3, 4], [3, 0, 2, 4], [3, 2, 0, 4], [4, 4, 4, 4]],
    ])
    assert torch.equal(ids, expected)


def test_categorical_and_degree_encoders():
    enc = CategoricalEncoder([3, 4], 5)
    x = torch.tensor([[1, 2], [0, 3]])
    w = enc.embedding.weight
    torch.testing.assert_close(enc(x), torch.stack([w[1] + w[3 + 2], w[0] + w[3 + 3]]))
    with pytest.raises(ValueError, match="column 1"):
        enc(torch.tensor([[0, 4]]))
    with pytest.raises(ValueError, match=r"\[\*, 2\]"):
        enc(torch.tensor([1, 2, 0]))
    single = CategoricalEncoder(28, 4)
    torch.testing.assert_close(single(torch.tensor([5, 7])), single.embedding.weight[[5, 7]])

    deg = DegreeEncoder(2, 3, directed=True)
    edge_index = torch.tensor([[0, 0, 0, 1], [1, 2, 3, 2]])  # in: [0,1,2,1], out: [3,1,0,0]
    expect = deg.in_degree.weight[[0, 1, 2, 1]] + deg.out_degree.weight[[2, 1, 0, 0]]
    torch.testing.assert_close(deg(edge_index, 4), expect)


def _permute(data: Data, perm: torch.Tensor) -> Data:
    """Relabel node v as perm[v] and shuffle the edge order; recompute the SPD."""
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel())
    order = torch.randperm(data.edge_index.shape[1], generator=torch.Generator().manual_seed(3))
    out = Data(
        x=data.x[inv],
        edge_index=perm[data.edge_index][:, order],
        edge_attr=data.edge_attr[order],
        num_nodes=data.num_nodes,
    )
    return SPD(out)


@pytest.mark.parametrize(
    "graph_fn, kw",
    [
        (tree_graph, {}),  # unique shortest paths: invariant with the edge encoding
        (ring_graph, {}),
        (even_ring_graph, {"edge_encoding": "none"}),  # ties between shortest paths
    ],
)
def test_permutation_invariance(graph_fn, kw):
    model = small_model(**kw)
    data = graph_fn()
    perm = torch.randperm(data.num_nodes, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        a = model(Batch.from_data_list([data]))
        b = model(Batch.from_data_list([_permute(data, perm)]))
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_urpe_with_unit_c_equals_rpe_and_rpe_has_no_c():
    urpe = small_model(attention="urpe")
    rpe = small_model(attention="rpe")
    assert rpe.multiplier is None
    rpe.load_state_dict({k: v for k, v in urpe.state_dict().items() if not k.startswith("multiplier")})
    batch = Batch.from_data_list([tree_graph(), ring_graph()])
    with torch.no_grad():
        urpe.multiplier.weight[:-1] = 1.0
        torch.testing.assert_close(urpe(batch), rpe(batch))
        urpe.multiplier.weight[:-1] = torch.linspace(-1.0, 2.0, urpe.multiplier.weight[:-1].numel()).view(-1, 4)
        assert not torch.allclose(urpe(batch), rpe(batch), atol=1e-3)  # C matters in URPE
    # Fresh URPE starts as RPE: C initialised to ones (padding row 0).
    fresh = Graphormer(1, 28, 4, num_layers=1, embed_dim=8, num_heads=2, ffn_dim=8)
    assert torch.equal(fresh.multiplier.weight[:-1], torch.ones_like(fresh.multiplier.weight[:-1]))
    assert torch.equal(fresh.multiplier.weight[-1], torch.zeros(2))


def test_padding_does_not_leak_and_gradients_flow():
    model = small_model()
    model.train()  # dropout is 0: deterministic
    alone = Batch.from_data_list([ring_graph()])
    mixed = Batch.from_data_list([ring_graph(), tree_graph(), even_ring_graph()])
    torch.testing.assert_close(model(alone)[0], model(mixed)[0], atol=1e-5, rtol=1e-5)
    model(mixed).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


def test_slim_parameter_counts():
    counts = {a: sum(p.numel() for p in Graphormer.slim(attention=a).parameters())
              for a in ("rpe", "urpe")}
    # Transformer body: 12 x (4*(80*80+80) + 2*(80*80+80) + 4*80) = 470,400; tables below.
    body = 12 * (4 * (80 * 80 + 80) + 2 * (80 * 80 + 80) + 4 * 80)
    tables = 28 * 80 + 64 * 80 + 80 + 40 * 8 + 4 * 8 + 20 * 8 * 8 + 2 * 80 + 81
    assert counts["rpe"] == body + tables == 479_713
    assert counts["urpe"] - counts["rpe"] == 40 * 8
    per_layer = Graphormer.slim(attention="urpe", multiplier_per_layer=True)
    assert sum(p.numel() for p in per_layer.parameters()) - counts["rpe"] == 12 * 40 * 8


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="attention"):
        Graphormer(1, 28, 4, attention="abs")
    with pytest.raises(ValueError, match="bond_categories"):
        Graphormer(1, 28)
    model = small_model()
    data = tree_graph()
    del data.spd
    with pytest.raises(ValueError, match="spd"):
        model(Batch.from_data_list([data]))


def test_layer_standalone_masks_padding():
    torch.manual_seed(0)
    layer = GraphormerLayer(8, 2, 16, dropout=0.0, attention_dropout=0.0).eval()
    x = torch.randn(1, 5, 8)
    mask = torch.tensor([[False, False, False, True, True]])
    full = layer(x, key_padding_mask=mask)
    x2 = x.clone()
    x2[:, 3:] = 100.0  # padded slots hold garbage
    torch.testing.assert_close(layer(x2, key_padding_mask=mask)[:, :3], full[:, :3])
    torch.testing.assert_close(layer(x[:, :3])[:, :3], full[:, :3])


def test_bf16_autocast_close_to_fp32():
    model = small_model()
    batch = Batch.from_data_list([tree_graph(), ring_graph()])
    with torch.no_grad():
        ref = model(batch)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = model(batch)
    assert torch.isfinite(low).all()
    torch.testing.assert_close(low.float(), ref, atol=0.1, rtol=0.05)


def test_torch_compile_matches_eager():
    # aot_eager traces the model with dynamo + AOTAutograd (graph breaks allowed) without
    # generating C++ kernels, which keeps this test to seconds on a CPU.
    model = small_model(num_layers=1)
    batch = Batch.from_data_list([tree_graph(), ring_graph()])
    compiled = torch.compile(model, backend="aot_eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(batch), model(batch), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("batch_size", [1, 3])
def test_edge_bias_without_spatial_bias_has_no_layer_axis(batch_size):
    # attention="none" + multi-hop edge encoding + bias_per_layer: the bias is the edge encoding
    # alone, shared by all layers (5 layers > 4 heads used to raise IndexError; at batch size 1
    # it silently indexed the head axis by layer).
    model = small_model(attention="none", edge_encoding="multi_hop", bias_per_layer=True,
                        num_layers=5)
    graphs = [tree_graph(0), ring_graph(1), even_ring_graph(2)][:batch_size]
    with torch.no_grad():
        out = model(Batch.from_data_list(graphs))
        for b, g in enumerate(graphs):
            torch.testing.assert_close(out[b], reference_forward(model, g), atol=1e-4, rtol=1e-4)
