"""Graphormer / URPE-Graphormer layers checked against independent computations.

The reference forward (:func:`reference_forward`) re-implements Graphormer for ONE graph with
loops, networkx shortest paths and plain tensor algebra (no batching, padding, relation ids or the
package's attention core), reading the weights of the module under test.
"""

from __future__ import annotations

import itertools
import math
import unittest.mock

import networkx as nx
import pytest
import torch
from torch_geometric.data import Batch, Data

from graph_urpe.constants import UNREACHABLE
from graph_urpe.dense import to_dense_path_edges
from graph_urpe.nn import Graphormer, GraphormerLayer, graph_relation_ids
from graph_urpe.nn.encoders import CategoricalEncoder, DegreeEncoder
from graph_urpe.transforms import AddShortestPathDistance

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
        if model.encoder.multiplier is not None:
            model.encoder.multiplier.weight[-1] = 0.0  # padding row stays 0
        if model.encoder.spatial_bias is not None:
            model.encoder.spatial_bias.weight[-1] = 0.0
    return model.eval()


def reference_forward(model: Graphormer, data: Data, return_maps: bool = False):
    """Graphormer for a single graph, written out with loops (independent of the module code).

    Returns the graph-level ``[num_tasks]`` or node-level ``[n, num_tasks]`` output (and, with
    ``return_maps``, per layer the ``[H, n', n']`` attention maps before and after ``C``).
    """
    enc = model.encoder
    n = data.num_nodes
    H, E, L = enc.num_heads, enc.embed_dim, enc.num_layers
    t = 1 if enc.graph_token is not None else 0  # slot of node 0
    G = nx.Graph()
    G.add_nodes_from(range(n))
    edge_of = {}
    for col, (u, v) in enumerate(data.edge_index.T.tolist()):
        G.add_edge(u, v)
        edge_of.setdefault((u, v), col)
    dist = dict(nx.all_pairs_shortest_path_length(G))

    atom_w = enc.atom_encoder.embedding.weight
    h = torch.zeros(n + t, E)
    if t:
        h[0] = enc.graph_token.view(E)
    for v in range(n):
        h[v + t] = atom_w[int(data.x[v, 0])]
        if enc.degree_encoder is not None:
            deg = min(G.degree(v), enc.degree_encoder.max_degree)
            h[v + t] += enc.degree_encoder.in_degree.weight[deg]

    M = enc.max_distance
    bias = torch.zeros(L, H, n + t, n + t)
    mult = torch.ones(L, H, n + t, n + t)
    for i in range(n + t):
        for j in range(n + t):
            if i < t or j < t:
                rel = M + 2
            elif j - t in dist[i - t]:
                rel = min(dist[i - t][j - t], M)
            else:
                rel = M + 1
            for layer in range(L):
                if enc.spatial_bias is not None:
                    w = enc.spatial_bias.weight[rel]
                    bias[layer, :, i, j] += w[layer * H:(layer + 1) * H] if enc.bias_per_layer else w
                if enc.multiplier is not None:
                    w = enc.multiplier.weight[rel]
                    mult[layer, :, i, j] = w[layer * H:(layer + 1) * H] if enc.multiplier_per_layer else w
    if enc.edge_encoder is not None:
        bond_w = enc.edge_encoder.edge_encoder.embedding.weight
        for i in range(n):
            for j in range(n):
                if i == j or j not in dist[i]:
                    continue
                path = nx.shortest_path(G, i, j)
                hops = list(itertools.pairwise(path))[: enc.max_hops]
                total = torch.zeros(H)
                for k, (u, v) in enumerate(hops):
                    e = bond_w[int(data.edge_attr[edge_of[(u, v)], 0])]
                    total = total + e @ enc.hop_weight[k]
                bias[:, :, i + t, j + t] += total / len(hops)

    maps = []
    for layer_idx, layer in enumerate(enc.layers):
        x = torch.nn.functional.layer_norm(h, (E,), layer.attn_norm.weight, layer.attn_norm.bias)
        qkv = x @ layer.attn.qkv_proj.weight.T + layer.attn.qkv_proj.bias
        q, k, v = qkv.split(E, dim=-1)
        d = E // H
        heads, before, after = [], [], []
        for head in range(H):
            qh, kh, vh = (t_[:, head * d:(head + 1) * d] for t_ in (q, k, v))
            scores = qh @ kh.T / math.sqrt(d) + bias[layer_idx, head]
            p = torch.softmax(scores, dim=-1)
            attn = p * mult[layer_idx, head]
            before.append(p)
            after.append(attn)
            heads.append(attn @ vh)
        maps.append((torch.stack(before), torch.stack(after)))
        out = torch.cat(heads, dim=-1) @ layer.attn.out_proj.weight.T + layer.attn.out_proj.bias
        h = h + out
        x = torch.nn.functional.layer_norm(h, (E,), layer.ffn_norm.weight, layer.ffn_norm.bias)
        x = torch.nn.functional.gelu(x @ layer.ffn[0].weight.T + layer.ffn[0].bias)
        h = h + x @ layer.ffn[3].weight.T + layer.ffn[3].bias
    h = torch.nn.functional.layer_norm(h, (E,), enc.final_norm.weight, enc.final_norm.bias)
    if model.level == "node":
        out = h[t:] @ model.head.weight.T + model.head.bias
    else:
        pooled = {"graph_token": lambda: h[0], "mean": lambda: h[t:].mean(0),
                  "sum": lambda: h[t:].sum(0)}[model.readout]()
        out = pooled @ model.head.linear.weight.T + model.head.linear.bias
    return (out, maps) if return_maps else out


@pytest.mark.parametrize(
    "kw",
    [
        {"attention": "urpe"},
        {"attention": "rpe"},
        {"attention": "none"},
        {"attention": "urpe", "multiplier_per_layer": True, "bias_per_layer": True},
        {"attention": "urpe", "edge_encoding": "none"},
        {"attention": "urpe", "graph_token": False},  # readout: mean
        {"attention": "rpe", "graph_token": False, "readout": "sum"},
        {"attention": "urpe", "readout": "mean", "centrality_encoding": False},
        {"attention": "none", "edge_encoding": "none", "centrality_encoding": False},
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
    assert rpe.encoder.multiplier is None
    rpe.load_state_dict({k: v for k, v in urpe.state_dict().items() if not k.startswith("encoder.multiplier")})
    batch = Batch.from_data_list([tree_graph(), ring_graph()])
    with torch.no_grad():
        urpe.encoder.multiplier.weight[:-1] = 1.0
        torch.testing.assert_close(urpe(batch), rpe(batch))
        urpe.encoder.multiplier.weight[:-1] = torch.linspace(-1.0, 2.0, urpe.encoder.multiplier.weight[:-1].numel()).view(-1, 4)
        assert not torch.allclose(urpe(batch), rpe(batch), atol=1e-3)  # C matters in URPE
    # Fresh URPE starts as RPE: C initialised to ones (padding row 0).
    fresh = Graphormer(1, 28, 4, num_layers=1, embed_dim=8, num_heads=2, ffn_dim=8)
    assert torch.equal(fresh.encoder.multiplier.weight[:-1], torch.ones_like(fresh.encoder.multiplier.weight[:-1]))
    assert torch.equal(fresh.encoder.multiplier.weight[-1], torch.zeros(2))


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
    with pytest.raises(ValueError, match="'spd' is missing"):
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


@pytest.mark.parametrize("kw", [{}, {"graph_token": False, "centrality_encoding": False}])
def test_node_level_matches_reference(kw):
    model = small_model(level="node", **kw)
    graphs = [tree_graph(0), ring_graph(1), make_graph([], 1, 28, 4, 2)]
    batch = Batch.from_data_list(graphs)
    with torch.no_grad():
        out = model(batch)
    assert out.shape == (batch.num_nodes, 2)
    for b, g in enumerate(graphs):
        rows = out[batch.ptr[b]:batch.ptr[b + 1]]
        torch.testing.assert_close(rows, reference_forward(model, g), atol=1e-4, rtol=1e-4)


def test_encoder_returns_nodes_token_and_attention_maps():
    model = small_model(attention="urpe", multiplier_per_layer=True)
    graphs = [tree_graph(0), ring_graph(1)]
    batch = Batch.from_data_list(graphs)
    with torch.no_grad():
        out, maps = model(batch, return_attention=True)
        nodes, token = model.encoder(batch.x, batch.edge_index, batch.pair_index, batch.batch,
                                     batch.ptr, batch.edge_attr, batch.spd, batch.spd_pred_index)
    torch.testing.assert_close(out, model(batch))
    assert nodes.shape == (batch.num_nodes, 16) and token.shape == (2, 16)
    assert len(maps) == 2
    for b, g in enumerate(graphs):
        _, ref_maps = reference_forward(model, g, return_maps=True)
        n = g.num_nodes + 1
        for (before, after), (ref_before, ref_after) in zip(maps, ref_maps, strict=True):
            torch.testing.assert_close(before[b, :, :n, :n], ref_before, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(after[b, :, :n, :n], ref_after, atol=1e-5, rtol=1e-5)
            assert (before[b, :, :, n:] == 0).all()  # padded keys


def test_structural_encodings_can_be_turned_off():
    model = Graphormer(1, 28, 4, num_layers=1, embed_dim=8, num_heads=2, ffn_dim=8,
                       centrality_encoding=False, edge_encoding="none", graph_token=False)
    enc = model.encoder
    assert enc.degree_encoder is None and enc.edge_encoder is None and enc.graph_token is None
    assert model.readout == "mean" and model.hop_weight is None
    slim = Graphormer.slim()
    assert slim.hop_weight is slim.encoder.edge_encoder.hop_weight
    with pytest.raises(ValueError, match="graph_token=True"):
        Graphormer(1, 28, 4, graph_token=False, readout="graph_token")
    with pytest.raises(ValueError, match="readout"):
        Graphormer(1, 28, 4, readout="max")
    with pytest.raises(ValueError, match="level"):
        Graphormer(1, 28, 4, level="edge")


def test_validate_inputs_names_the_column_and_unvalidated_still_raises():
    data = tree_graph()
    data.x[0, 0] = 30  # outside the 28 atom types
    batch = Batch.from_data_list([data])
    with pytest.raises(ValueError, match="column 0"):
        small_model(validate_inputs=True)(batch)
    with pytest.raises(IndexError):
        small_model()(batch)


def test_sparse_and_dense_edge_gathers_agree():
    # The CPU-eager sparse gather and the compile / accelerator dense gather compute the same sum.
    model = small_model()
    batch = Batch.from_data_list([tree_graph(), ring_graph(), even_ring_graph()])
    path = to_dense_path_edges(batch.spd_pred_index, batch.pair_index, batch.edge_index,
                               ptr=batch.ptr, max_hops=3)
    enc = model.encoder.edge_encoder
    sparse = enc(batch.edge_attr, path)
    with unittest.mock.patch.object(torch.compiler, "is_compiling", return_value=True):
        dense = enc(batch.edge_attr, path)
    torch.testing.assert_close(sparse, dense)


def test_torch_compile_two_shapes_rpe():
    # The RPE model (no URPE multiplier: its compile is the attention core's business) compiles
    # and recompiles for a second padded size without crashing, and matches eager.
    model = small_model(num_layers=1, attention="rpe")
    compiled = torch.compile(model, backend="aot_eager", dynamic=False)
    with torch.no_grad():
        for graphs in ([tree_graph(), ring_graph()], [ring_graph(), even_ring_graph()]):
            batch = Batch.from_data_list(graphs)
            torch.testing.assert_close(compiled(batch), model(batch), atol=1e-5, rtol=1e-5)


def test_no_graph_break_when_the_padded_size_is_given():
    # No host synchronisation in the RPE forward (multi-hop edge encoding included) once N is
    # known: dynamo traces the whole encoder and head as one graph.
    model = small_model(attention="rpe", num_layers=1).train()
    batch = Batch.from_data_list([tree_graph(), ring_graph()])

    def forward(x, edge_index, pair_index, vec, ptr, edge_attr, spd, spd_pred_index):
        nodes, token = model.encoder(x, edge_index, pair_index, vec, ptr, edge_attr, spd,
                                     spd_pred_index, num_graphs=2, max_num_nodes=9)
        return nodes.sum() + (0 if token is None else token.sum())

    explained = torch._dynamo.explain(forward)(
        batch.x, batch.edge_index, batch.pair_index, batch.batch, batch.ptr, batch.edge_attr,
        batch.spd, batch.spd_pred_index)
    assert explained.graph_break_count == 0, explained.break_reasons


def test_batch_of_single_atom_molecules_equals_each_alone():
    """Graphs without edges batched together (e.g. PCQM4Mv2's "C", "N"): the edge encoding's
    path tensor is then non-contiguous; the batch must equal each molecule alone."""
    from torch_geometric.data import Batch

    from graph_urpe.data.featurize import smiles_to_graph
    from graph_urpe.transforms import AddShortestPathDistance

    torch.manual_seed(0)
    net = Graphormer(num_tasks=1, atom_categories=[119, 5, 12, 12, 10, 6, 6, 2, 2],
                     bond_categories=[5, 6, 2], num_layers=1, embed_dim=16, num_heads=2,
                     ffn_dim=16, max_hops=4, max_distance=8, max_degree=6).eval()
    spd = AddShortestPathDistance(max_distance=None, paths=True)
    graphs = [spd(smiles_to_graph(s, "ogb")) for s in ("C", "N")]
    with torch.no_grad():
        both = net(Batch.from_data_list(graphs))
        alone = torch.cat([net(Batch.from_data_list([g])) for g in graphs])
    torch.testing.assert_close(both, alone)
