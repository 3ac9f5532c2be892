"""URPEGraphConv, PyG's way: shape, repr, reset, batched output equal to per-graph output for every
relation kind (stored or computed), against a per-graph loop over GraphormerLayer with networkx
SPD / resistance distances, and torch.compile."""

import doctest

import networkx as nx
import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.transforms import Compose
from torch_geometric.utils import dropout_edge, subgraph, to_torch_coo_tensor

import graph_urpe.nn.conv
from graph_urpe.nn import URPEGraphConv
from graph_urpe.transforms import AddResistanceDistance, AddShortestPathDistance

RELATIONS = [["spd"], ["resistance"], ["spd", "resistance"]]
PRE = Compose([AddShortestPathDistance(paths=False), AddResistanceDistance()])
GRAPHS = [nx.path_graph(6), nx.disjoint_union(nx.path_graph(2), nx.cycle_graph(3)),
          nx.empty_graph(1), nx.lollipop_graph(3, 2)]


def test_docstring_example_runs():
    result = doctest.testmod(graph_urpe.nn.conv, raise_on_error=False)
    assert result.attempted > 0 and result.failed == 0


def _graph(g: nx.Graph, width: int, seed: int) -> Data:
    edges = list(g.edges()) + [(v, u) for u, v in g.edges()]
    edge_index = torch.tensor(edges, dtype=torch.long).t().reshape(2, -1)
    x = torch.randn(g.number_of_nodes(), width, generator=torch.Generator().manual_seed(seed))
    return PRE(Data(x=x, edge_index=edge_index, num_nodes=g.number_of_nodes()))


def _batch() -> tuple[Batch, list[Data]]:
    data = [_graph(g, 8, s) for s, g in enumerate(GRAPHS)]
    return Batch.from_data_list(data), data


def _networkx_resistance(graph: nx.Graph) -> dict:
    out = {}
    for nodes in nx.connected_components(graph):
        if len(nodes) > 1:
            out.update(nx.resistance_distance(graph.subgraph(nodes)))
    return out


def _reference(conv: URPEGraphConv, data: Data, graph: nx.Graph) -> torch.Tensor:
    """One graph at a time: ids and resistances from networkx, the tables and the Gaussian
    embeddings applied by hand to each pair, the dense layer."""
    n, m = graph.number_of_nodes(), conv.max_distance
    dist = dict(nx.all_pairs_shortest_path_length(graph))
    res = _networkx_resistance(graph)
    ids = torch.empty(n, n, dtype=torch.long)
    rd = torch.full((n, n), float("nan"))
    for i in range(n):
        for j in range(n):
            ids[i, j] = min(dist[i][j], m) if j in dist[i] else m + 1
            if j in dist[i]:
                rd[i, j] = 0.0 if i == j else res[i][j]
    bias = mult = None
    if conv.spatial_bias is not None:
        bias = conv.spatial_bias.weight[ids].permute(2, 0, 1)
    if conv.multiplier is not None:
        mult = conv.multiplier.weight[ids].permute(2, 0, 1)
    if "resistance" in conv.relations:
        reach = ~rd.isnan()
        for part, table in (("bias", conv.continuous_bias), ("mult", conv.continuous_multiplier)):
            if table is None:
                continue
            emb = table.embeddings["resistance"]
            term = emb(rd.nan_to_num(0.0)) * reach  # [H, n, n]
            if part == "bias":
                bias = bias + term
            else:
                mult = mult + term
    return conv.layer(data.x.unsqueeze(0), bias, mult)[0]


def _randomised(conv: URPEGraphConv) -> URPEGraphConv:
    with torch.no_grad():
        for p in conv.parameters():
            p.add_(torch.randn_like(p) * 0.3)
        for table in (conv.spatial_bias, conv.multiplier):
            if table is not None:
                table.weight[-1] = 0.0
    return conv.eval()


@pytest.mark.parametrize("relations", RELATIONS, ids="+".join)
@pytest.mark.parametrize("attention", ["none", "rpe", "urpe"])
def test_batched_equals_per_graph_and_networkx(relations, attention):
    torch.manual_seed(0)
    conv = _randomised(URPEGraphConv(8, heads=2, attention=attention, relations=relations,
                                     max_distance=3, num_kernels=6))
    batch, data = _batch()
    stored = {"pair_index": batch.pair_index, "spd": batch.spd, "resistance": batch.resistance}
    with torch.no_grad():
        out = conv(batch.x, batch.edge_index, batch.batch, **stored, ptr=batch.ptr)
        assert out.shape == (batch.num_nodes, 8)
        # Relations computed on the fly from edge_index, and the batch vector without ptr.
        torch.testing.assert_close(conv(batch.x, batch.edge_index, batch.batch), out)
        torch.testing.assert_close(
            conv(batch.x, batch.edge_index, batch.batch, **stored, num_graphs=len(data)), out)
        for b, (d, g) in enumerate(zip(data, GRAPHS, strict=True)):
            rows = slice(int(batch.ptr[b]), int(batch.ptr[b + 1]))
            alone = conv(d.x, d.edge_index)  # one graph, no batch vector
            torch.testing.assert_close(out[rows], alone, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(out[rows], _reference(conv, d, g), atol=1e-5, rtol=1e-5)


def test_urpe_starts_as_rpe():
    torch.manual_seed(0)
    batch, _ = _batch()
    urpe = URPEGraphConv(8, 2, attention="urpe", relations=["spd", "resistance"], num_kernels=4)
    rpe = URPEGraphConv(8, 2, attention="rpe", relations=["spd", "resistance"], num_kernels=4)
    rpe.load_state_dict(urpe.state_dict(), strict=False)
    with torch.no_grad():
        torch.testing.assert_close(urpe(batch.x, batch.edge_index, batch.batch),
                                   rpe(batch.x, batch.edge_index, batch.batch))


def test_reset_parameters_and_repr():
    conv = URPEGraphConv(8, 2, relations=["spd", "resistance"], num_kernels=4)
    assert repr(conv) == ("URPEGraphConv(8, heads=2, attention='urpe', "
                          "relations=['spd', 'resistance'])")
    before = {k: v.clone() for k, v in conv.state_dict().items()}
    with torch.no_grad():
        for p in conv.parameters():
            p.add_(1.0)
    conv.reset_parameters()
    after = conv.state_dict()
    assert torch.equal(after["multiplier.weight"][:-1], torch.ones(39, 2))  # C rows: SPD 0..36 + 2
    assert not after["continuous_multiplier.embeddings.resistance.out.weight"].any()
    assert torch.equal(after["layer.attn_norm.weight"], before["layer.attn_norm.weight"])


def test_compile_matches_eager():
    torch.manual_seed(0)
    conv = _randomised(URPEGraphConv(8, 2, relations=["spd", "resistance"], num_kernels=4))
    batch, _ = _batch()
    args = (batch.x, batch.edge_index, batch.batch)
    kwargs = {"pair_index": batch.pair_index, "spd": batch.spd, "resistance": batch.resistance,
              "ptr": batch.ptr, "max_num_nodes": 6}
    compiled = torch.compile(conv, dynamic=False)
    with torch.no_grad():
        torch.testing.assert_close(compiled(*args, **kwargs), conv(*args, **kwargs),
                                   atol=1e-5, rtol=1e-5)


def test_bad_input_names_the_fix():
    conv = URPEGraphConv(8, 2)
    batch, _ = _batch()
    with pytest.raises(ValueError, match=r"x must have shape \[num_nodes, 8\]") as wrong:
        conv(torch.randn(3, 12), batch.edge_index)
    message = str(wrong.value)  # one line naming both widths and the projection that fixes it
    assert "\n" not in message and "x.size(-1) = 12, channels = 8" in message
    assert "torch.nn.Linear(12, 8)" in message and "URPEGraphConv(12, ...)" in message
    for shape in [(12,), (3, 4, 8)]:  # 1-D (one feature per node) and 3-D: not a width error
        with pytest.raises(ValueError) as wrong:
            conv(torch.randn(shape), batch.edge_index)
        assert str(wrong.value) == (
            f"x must be 2-D [num_nodes, channels] = [num_nodes, 8], got shape {shape}: for one "
            "feature per node use x.unsqueeze(-1) and project it to 8 channels (e.g. "
            "torch.nn.Linear(1, 8))")
    with pytest.raises(ValueError) as wrong:
        URPEGraphConv(10, heads=4)  # named as the user typed them, not embed_dim / num_heads
    assert str(wrong.value) == ("channels (10) must be a positive multiple of heads (4): each head "
                                "attends over channels / heads features")
    with pytest.raises(ValueError, match="relations entry"):
        URPEGraphConv(8, 2, relations=["spd", "hops"])
    with pytest.raises(ValueError, match="without repeats"):
        URPEGraphConv(8, 2, relations=["spd", "spd"])
    with pytest.raises(ValueError, match="'spd' is missing"):
        conv(batch.x, batch.edge_index, batch.batch, pair_index=batch.pair_index)
    with pytest.raises(TypeError, match=r"x must be a tensor of node features \[num_nodes, 8\]"):
        conv(None, batch.edge_index)
    with pytest.raises(ValueError, match="max_distance must be >= 1 with the 'spd' relation"):
        URPEGraphConv(8, 2, max_distance=0)
    assert URPEGraphConv(8, 2, relations=["resistance"], max_distance=0).max_distance == 0
    stored = {"pair_index": batch.pair_index, "ptr": batch.ptr}
    with pytest.raises(TypeError, match="spd must hold integer shortest-path distances"):
        conv(batch.x, batch.edge_index, spd=batch.resistance, **stored)
    with pytest.raises(ValueError, match="spd holds -5: shortest-path distances are >= 0"):
        conv(batch.x, batch.edge_index, spd=torch.where(batch.spd == 2, -5, batch.spd), **stored)


PATH5 = torch.tensor([[0, 1, 1, 2, 2, 3, 3, 4], [1, 0, 2, 1, 3, 2, 4, 3]])


def _path5(**transform) -> Data:
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(3))
    return AddShortestPathDistance(**transform)(Data(x=x, edge_index=PATH5))


def _dropped(edge_index: torch.Tensor) -> torch.Tensor:
    """DropEdge (PyG's dropout_edge, both directions of an edge together), seeded."""
    with torch.random.fork_rng():
        torch.manual_seed(2)  # keeps 3 of the 4 edges (seed 0 drops all)
        return dropout_edge(edge_index, p=0.5, force_undirected=True)[0]


# Stored relations whose edges or node order changed after the transforms, as a user gets them.
CHANGED = {
    "Data.subgraph(perm), all nodes": lambda d: d.subgraph(torch.tensor([4, 2, 0, 1, 3])),
    "Data.edge_subgraph": lambda d: d.edge_subgraph(torch.arange(2, 8)),
    "dropout_edge": lambda d: d.update({"edge_index": _dropped(d.edge_index)}),
    "edge added": lambda d: d.update({"edge_index": torch.cat([d.edge_index, torch.tensor(
        [[0], [2]])], 1)}),
}


@pytest.mark.parametrize("case", list(CHANGED))
def test_stored_spd_must_match_edge_index(case):
    conv = _randomised(URPEGraphConv(8, 2))
    changed = CHANGED[case](_path5())
    assert changed.edge_index.shape[1] > 0  # an edge list that still differs from the path's
    with pytest.raises(ValueError, match="stored relations do not match edge_index.*apply "
                                         "AddShortestPathDistance.*again"):
        conv(changed.x, changed.edge_index, pair_index=changed.pair_index, spd=changed.spd)
    fixed = AddShortestPathDistance()(changed)  # the fix named
    with torch.no_grad():
        torch.testing.assert_close(
            conv(fixed.x, fixed.edge_index, pair_index=fixed.pair_index, spd=fixed.spd),
            conv(fixed.x, fixed.edge_index))


def test_stored_spd_that_matches_edge_index_is_accepted():
    with torch.no_grad():
        # Reversing a path is an automorphism: the stored SPD still fits the relabelled edges.
        flipped = _path5().subgraph(torch.arange(4, -1, -1))
        # One direction of each edge, self-loops and duplicates: the same simple graph.
        loose = _path5()
        loose.edge_index = torch.cat([PATH5[:, ::2], torch.tensor([[0, 3], [0, 2]])], 1)
        # Clipped at 1 by the transform: every reachable pair at 1, edges among them. With the
        # layer's max_distance at most the transform's, the same as computed on the fly.
        for d, m in [(flipped, 2), (loose, 2), (_path5(max_distance=2), 2),
                     (_path5(max_distance=1), 1)]:
            layer = _randomised(URPEGraphConv(8, 2, max_distance=m))
            torch.testing.assert_close(
                layer(d.x, d.edge_index, pair_index=d.pair_index, spd=d.spd),
                layer(d.x, d.edge_index))
        # Clipped at 2 read by a layer distinguishing more (36): read as stored, distances >= 2
        # take the entry of 2 (worked by hand on the path: SPD(i, j) = |i - j|).
        d = _path5(max_distance=2)
        nodes = torch.arange(5)
        ids = (nodes[:, None] - nodes[None, :]).abs().clamp(max=2)
        wide = _randomised(URPEGraphConv(8, 2))
        by_hand = wide.layer(d.x.unsqueeze(0), wide.spatial_bias.weight[ids].permute(2, 0, 1),
                             wide.multiplier.weight[ids].permute(2, 0, 1))[0]
        stored = wide(d.x, d.edge_index, pair_index=d.pair_index, spd=d.spd)
        torch.testing.assert_close(stored, by_hand)
        assert not torch.allclose(stored, wide(d.x, d.edge_index))  # on the fly: up to 4


def _stale(kind: str) -> list[Data]:
    """Graphs whose stored pairs no longer fit them, as a user gets them (graph 0, the 6-path,
    cut to its first four nodes after the transforms ran; or values of another graph)."""
    data = [_graph(g, 8, s) for s, g in enumerate(GRAPHS)]
    keep = torch.arange(4)
    if kind == "Data.subgraph":
        data[0] = data[0].subgraph(keep)
    elif kind == "utils.subgraph":
        edge_index, _ = subgraph(keep, data[0].edge_index, relabel_nodes=True, num_nodes=6)
        data[0] = Data(x=data[0].x[keep], edge_index=edge_index, pair_index=data[0].pair_index,
                       spd=data[0].spd, resistance=data[0].resistance)
    else:  # relations of another graph, the pair index of this one
        data[0].spd, data[0].resistance = data[3].spd, data[3].resistance
    return data


@pytest.mark.parametrize("batched", [True, False], ids=["batch", "one graph"])
@pytest.mark.parametrize("kind", ["Data.subgraph", "utils.subgraph", "values of another graph"])
def test_stale_pairs_are_refused_and_recomputing_fixes_them(kind, batched):
    conv = URPEGraphConv(8, 2, relations=["spd", "resistance"], num_kernels=4).eval()
    data = _stale(kind)
    graphs = data if batched else data[:1]
    b = Batch.from_data_list(graphs)
    stored = {"pair_index": b.pair_index, "spd": b.spd, "resistance": b.resistance}
    fix = (r"computed on these very graphs \(and a batch of several graphs needs batch=data.batch "
           r"or ptr=data.ptr, else it is taken as one graph\): apply AddShortestPathDistance / "
           "AddResistanceDistance")
    with pytest.raises(ValueError, match=fix):
        conv(b.x, b.edge_index, b.batch, **stored, ptr=b.ptr)
    # The fix named: the transforms again on the final graphs (or no pair_index at all).
    b = Batch.from_data_list([PRE(d) for d in graphs])
    with torch.no_grad():
        out = conv(b.x, b.edge_index, b.batch, pair_index=b.pair_index, spd=b.spd,
                   resistance=b.resistance, ptr=b.ptr)
        torch.testing.assert_close(out, conv(b.x, b.edge_index, b.batch))
        n = graphs[0].num_nodes
        torch.testing.assert_close(out[:n], conv(graphs[0].x, graphs[0].edge_index))


@pytest.mark.parametrize("given", [["spd"], ["resistance"], ["spd", "resistance"]], ids="+".join)
def test_relations_without_pair_index_are_refused(given):
    conv = URPEGraphConv(8, 2, relations=["spd", "resistance"], num_kernels=4)
    batch, _ = _batch()
    with pytest.raises(ValueError, match="given without pair_index.*pass pair_index="):
        conv(batch.x, batch.edge_index, batch.batch, **{k: batch[k] for k in given})


def _cross_edge(b: Batch) -> dict:
    return {"edge_index": torch.cat([b.edge_index, torch.tensor([[0], [7]])], 1)}


BAD_BATCHES = {
    "unsorted batch": (lambda b: {"batch": b.batch.flip(0), "ptr": None}, "batch is not sorted"),
    "edge between graphs": (_cross_edge, r"joins graph 0 and graph 1: every edge must stay"),
    "edge outside": (lambda b: {"edge_index": b.edge_index + 1},
                     r"outside the batch's \[0, 17\)"),
    "float edge_index": (lambda b: {"edge_index": b.edge_index.float()}, "integer tensor"),
    "max_num_nodes": (lambda b: {"max_num_nodes": 5},
                      (r"max_num_nodes=5 is smaller than the largest graph of the batch "
                       r"\(6 nodes\): pass at least 6")),
    "num_graphs": (lambda b: {"ptr": None, "num_graphs": 2},
                   "batch refers to graph 3 but num_graphs=2"),
    "ptr of another batch": (lambda b: {"ptr": b.ptr[:-1]},
                             "describe 12 nodes but the node features have 17 rows"),
    # Node 5 (last of graph 0) put in graph 1: batch still sorted and 17 nodes long.
    "batch and ptr disagree": (lambda b: {"batch": torch.where(torch.arange(17) == 5, 1, b.batch)},
                               "batch and ptr disagree: batch puts node 5 in graph 1, ptr in graph 0"),
    "float batch": (lambda b: {"batch": b.batch.float()}, r"batch must be an integer .*\.long"),
}


@pytest.mark.parametrize("stored", [False, True], ids=["computed", "stored"])
@pytest.mark.parametrize("case", list(BAD_BATCHES))
def test_bad_batches_are_refused(case, stored):
    conv = URPEGraphConv(8, 2, relations=["spd", "resistance"], num_kernels=4)
    batch, _ = _batch()
    args = {"edge_index": batch.edge_index, "batch": batch.batch, "ptr": batch.ptr}
    if stored:
        args.update(pair_index=batch.pair_index, spd=batch.spd, resistance=batch.resistance)
    change, message = BAD_BATCHES[case]
    args.update(change(batch))
    error = TypeError if case.startswith("float") else ValueError
    with pytest.raises(error, match=message):
        conv(batch.x, **args)


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr, torch.sparse_csc])
@pytest.mark.parametrize("transposed", [False, True], ids=["adj", "adj_t"])
def test_sparse_adjacency_equals_edge_index(layout, transposed):
    conv = _randomised(URPEGraphConv(8, 2, relations=["spd", "resistance"], num_kernels=4))
    batch, _ = _batch()
    edge_index = batch.edge_index.flip(0) if transposed else batch.edge_index
    n = batch.num_nodes
    adj = to_torch_coo_tensor(edge_index, size=(n, n)).to_sparse(layout=layout)
    with torch.no_grad():
        torch.testing.assert_close(conv(batch.x, adj, batch.batch),
                                   conv(batch.x, batch.edge_index, batch.batch))
    with pytest.raises(ValueError, match=r"sparse adjacency must be \[num_nodes, num_nodes\]"):
        conv(batch.x, to_torch_coo_tensor(edge_index, size=(n, n + 1)), batch.batch)


def test_sparse_tensor_equals_edge_index():
    torch_sparse = pytest.importorskip("torch_sparse")  # PyG's @withPackage('torch_sparse')
    conv = _randomised(URPEGraphConv(8, 2, num_kernels=4))
    batch, _ = _batch()
    n = batch.num_nodes
    adj_t = torch_sparse.SparseTensor.from_edge_index(batch.edge_index, sparse_sizes=(n, n)).t()
    with torch.no_grad():
        torch.testing.assert_close(conv(batch.x, adj_t, batch.batch),
                                   conv(batch.x, batch.edge_index, batch.batch))


def _all_pairs(n: int, width: int = 8, seed: int = 0) -> Data:
    """A complete graph with a self-loop on every node: E = n^2 edges, one per node pair."""
    nodes = torch.arange(n)
    edge_index = torch.stack([nodes.repeat_interleave(n), nodes.repeat(n)])
    x = torch.randn(n, width, generator=torch.Generator().manual_seed(seed))
    return PRE(Data(x=x, edge_index=edge_index, num_nodes=n))


# Graphs whose n^2 pairs PyG's length heuristic takes for node (n = 1) or edge (E = n^2)
# attributes: data, networkx twin, the kind PyG gives the pair attributes.
MISREAD = {
    "one node": (lambda: _graph(nx.empty_graph(1), 8, 5), nx.empty_graph(1), "node"),
    "one node, self-loop": (lambda: _all_pairs(1, seed=6), nx.empty_graph(1), "node"),
    "K2 + loops (E=4)": (lambda: _all_pairs(2, seed=7), nx.complete_graph(2), "edge"),
    "K4 + loops (E=16)": (lambda: _all_pairs(4, seed=8), nx.complete_graph(4), "edge"),
}


@pytest.mark.parametrize("case", list(MISREAD))
def test_pairs_pyg_misreads_as_node_or_edge_attributes_batch_correctly(case):
    make, graph, kind = MISREAD[case]
    odd = make()
    for key in ("pair_index", "spd", "resistance"):  # the premise
        assert (odd.is_node_attr(key), odd.is_edge_attr(key)) == (kind == "node", kind == "edge")
    conv = _randomised(URPEGraphConv(8, 2, relations=["spd", "resistance"], max_distance=3,
                                     num_kernels=4))
    data = [_graph(nx.path_graph(4), 8, 0), odd, _graph(nx.cycle_graph(5), 8, 1), make()]
    batch = Batch.from_data_list(data)
    for b, d in enumerate(data):  # collated by key name (PyG's increments) and back
        again = batch.get_example(b)
        assert all(torch.equal(again[k], d[k]) for k in ("pair_index", "spd", "resistance"))
    with torch.no_grad():
        out = conv(batch.x, batch.edge_index, batch.batch, pair_index=batch.pair_index,
                   spd=batch.spd, resistance=batch.resistance, ptr=batch.ptr)
        for b in (1, 3):
            rows = slice(int(batch.ptr[b]), int(batch.ptr[b + 1]))
            torch.testing.assert_close(out[rows], conv(data[b].x, data[b].edge_index))
            torch.testing.assert_close(out[rows], _reference(conv, data[b], graph),
                                       atol=1e-5, rtol=1e-5)


def test_pyg_operations_on_misread_pairs_are_exact_or_refused():
    conv = URPEGraphConv(8, 2, relations=["spd", "resistance"], num_kernels=4).eval()

    def run(d):
        return conv(d.x, d.edge_index, pair_index=d.pair_index, spd=d.spd,
                    resistance=d.resistance)

    # n = 1: PyG subsets the pairs as node attributes, exact since n^2 = n for every subset.
    one = MISREAD["one node"][0]()
    with torch.no_grad():
        torch.testing.assert_close(run(one.subgraph(torch.tensor([0]))), run(one))
    # E = n^2: PyG subsets them with the edge mask: refused, and fixed by recomputing.
    cut = MISREAD["K4 + loops (E=16)"][0]().subgraph(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="computed on these very graphs"):
        run(cut)
    with torch.no_grad():
        torch.testing.assert_close(run(PRE(cut)), conv(cut.x, cut.edge_index))


def test_integer_node_features_are_refused_with_what_to_do():
    """``from_smiles`` gives integer atom categories: one line saying to embed them (issue 43)."""
    from torch_geometric.utils import from_smiles

    data = from_smiles("CCO")
    conv = URPEGraphConv(data.x.shape[1], 1)
    with pytest.raises(TypeError, match=r"floating-point node features .*torch.int64.*embedded "
                                        r"first.*CategoricalEncoder"):
        conv(data.x, data.edge_index)
    out = conv(data.x.float(), data.edge_index)
    assert out.shape == data.x.shape and out.dtype == torch.float32


def test_node_features_of_another_dtype_name_the_cast():
    """float64 ``x`` (numpy's default) against float32 parameters: one line naming both casts,
    not LayerNorm's "mixed dtype"; under autocast a bfloat16 ``x`` is autocast's own business."""
    torch.manual_seed(0)
    conv = URPEGraphConv(8, 2)
    batch, _ = _batch()
    hints = {torch.float64: (", e.g. x.float() for numpy's float64", ""),
             torch.float32: ("", ""),
             torch.bfloat16: ("", ", or run the layer under torch.autocast")}
    for x_dtype, layer_dtype in [(torch.float64, torch.float32), (torch.float32, torch.float64),
                                 (torch.bfloat16, torch.float32)]:
        with pytest.raises(TypeError) as wrong:
            conv.to(layer_dtype)(batch.x.to(x_dtype), batch.edge_index)
        numpy_hint, autocast_hint = hints[x_dtype]
        assert str(wrong.value) == (
            f"x is {x_dtype} but the URPEGraphConv's parameters are {layer_dtype}: cast x "
            f"(x.to({layer_dtype}){numpy_hint}) or the layer (layer.to({x_dtype})){autocast_hint}")
    conv.float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with pytest.raises(TypeError, match="x is torch.float64 but"):  # autocast leaves float64
            conv(batch.x.double(), batch.edge_index)
        out = conv(batch.x.bfloat16(), batch.edge_index)  # autocast casts: no error
    with torch.no_grad():  # the float32 result, to bfloat16's precision (8 mantissa bits)
        reference = conv(batch.x.bfloat16().float(), batch.edge_index)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), reference, atol=2e-2, rtol=1.6e-2)
    with torch.no_grad():  # both fixes the message names give the float32 / float64 results
        torch.testing.assert_close(conv(batch.x.double().float(), batch.edge_index),
                                   conv(batch.x, batch.edge_index))
        torch.testing.assert_close(conv.double()(batch.x.double(), batch.edge_index),
                                   conv.float()(batch.x, batch.edge_index).double(),
                                   atol=1e-5, rtol=1e-5)
