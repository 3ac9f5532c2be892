"""URPEGraphConv (PyG sparse layout) against a per-graph loop over GraphormerLayer with networkx SPD."""

import doctest

import networkx as nx
import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader

import graph_urpe.nn.layers
from graph_urpe.nn import URPEGraphConv
from graph_urpe.transforms import AddShortestPathDistance


def test_docstring_example_runs():
    result = doctest.testmod(graph_urpe.nn.layers, raise_on_error=False)
    assert result.attempted > 0 and result.failed == 0


def _graph(g: nx.Graph, width: int, seed: int) -> Data:
    edges = list(g.edges()) + [(v, u) for u, v in g.edges()]
    edge_index = torch.tensor(edges, dtype=torch.long).t().reshape(2, -1)
    x = torch.randn(g.number_of_nodes(), width, generator=torch.Generator().manual_seed(seed))
    return AddShortestPathDistance(paths=False)(Data(x=x, edge_index=edge_index,
                                                     num_nodes=g.number_of_nodes()))


def _reference(conv: URPEGraphConv, data: Data, graph: nx.Graph) -> torch.Tensor:
    """One graph at a time: ids from networkx distances, tables read by hand, the dense layer."""
    n, m, t = graph.number_of_nodes(), conv.max_distance, int(conv.graph_token is not None)
    dist = dict(nx.all_pairs_shortest_path_length(graph))
    ids = torch.full((n + t, n + t), m + 2)
    for i in range(n):
        for j in range(n):
            ids[i + t, j + t] = min(dist[i][j], m) if j in dist[i] else m + 1
    bias = conv.spatial_bias.weight[ids].permute(2, 0, 1) if conv.spatial_bias is not None else None
    mult = conv.multiplier.weight[ids].permute(2, 0, 1) if conv.multiplier is not None else None
    h = data.x if not t else torch.cat([conv.graph_token, data.x])
    out = conv.layer(h.unsqueeze(0), bias, mult)[0]
    return out[t:], (out[0] if t else None)


@pytest.mark.parametrize("attention", ["none", "rpe", "urpe"])
@pytest.mark.parametrize("graph_token", [False, True])
def test_matches_per_graph_dense_layer(attention, graph_token):
    torch.manual_seed(0)
    conv = URPEGraphConv(8, heads=2, attention=attention, max_distance=3,
                         graph_token=graph_token).eval()
    with torch.no_grad():
        for p in conv.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
        for table in (conv.spatial_bias, conv.multiplier):
            if table is not None:
                table.weight[-1] = 0.0
    graphs = [nx.path_graph(6), nx.disjoint_union(nx.path_graph(2), nx.cycle_graph(3)),
              nx.empty_graph(1)]
    data = [_graph(g, 8, s) for s, g in enumerate(graphs)]
    batch = next(iter(DataLoader(data, batch_size=3)))
    with torch.no_grad():
        res = conv(batch.x, batch.batch, batch.spd, ptr=batch.ptr)
        nodes, token = res if graph_token else (res, None)
        assert nodes.shape == (batch.num_nodes, 8)
        for b, (d, g) in enumerate(zip(data, graphs, strict=True)):
            ref_nodes, ref_token = _reference(conv, d, g)
            rows = slice(int(batch.ptr[b]), int(batch.ptr[b + 1]))
            torch.testing.assert_close(nodes[rows], ref_nodes, atol=1e-5, rtol=1e-5)
            if graph_token:
                torch.testing.assert_close(token[b], ref_token, atol=1e-5, rtol=1e-5)
        # Without ptr (batch vector only) and as a single Data.
        again = conv(batch.x, batch.batch, batch.spd, num_graphs=3)
        torch.testing.assert_close(again if not graph_token else again[0], nodes)
        single = conv(data[0].x, None, data[0].spd)
        torch.testing.assert_close(single if not graph_token else single[0],
                                   _reference(conv, data[0], graphs[0])[0], atol=1e-5, rtol=1e-5)


def test_extra_bias_multiplier_and_attention_maps():
    torch.manual_seed(0)
    conv = URPEGraphConv(8, heads=2, attention="urpe", max_distance=3).eval()
    data = _graph(nx.path_graph(4), 8, 0)
    batch = Batch.from_data_list([data])
    extra_b = torch.randn(1, 2, 4, 4)
    extra_c = torch.rand(1, 2, 4, 4)
    with torch.no_grad():
        conv.multiplier.weight[:-1].uniform_(0.5, 1.5)
        out, (before, after) = conv(batch.x, batch.batch, batch.spd, attn_bias=extra_b,
                                    multiplier=extra_c, return_attention=True)
        ids = torch.tensor([[0, 1, 2, 3], [1, 0, 1, 2], [2, 1, 0, 1], [3, 2, 1, 0]])
        bias = conv.spatial_bias.weight[ids].permute(2, 0, 1) + extra_b[0]
        mult = conv.multiplier.weight[ids].permute(2, 0, 1) * extra_c[0]
        ref = conv.layer(data.x.unsqueeze(0), bias, mult)[0]
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(after, before * mult)


def test_bad_arguments():
    with pytest.raises(ValueError, match="attention"):
        URPEGraphConv(8, 2, attention="abs")
    conv = URPEGraphConv(8, 2)
    assert repr(conv) == "URPEGraphConv(8, heads=2, attention='urpe', graph_token=False)"


def test_bad_spd_is_refused_with_the_fix():
    # A path of 3 nodes: spd needs 3 * 3 = 9 integer entries.
    data = _graph(nx.path_graph(3), 8, 0)
    batch = Batch.from_data_list([data])
    conv = URPEGraphConv(8, 2)
    with pytest.raises(ValueError, match="spd is missing"):
        conv(batch.x, batch.batch, None)
    with pytest.raises(ValueError, match="integer shortest-path distances"):
        conv(batch.x, batch.batch, batch.spd.float())
    with pytest.raises(ValueError, match=r"has 8 entries but the graphs' node counts need sum\(n\^2\) = 9"):
        conv(batch.x, batch.batch, batch.spd[:8])


def test_pyg_style_call_is_refused_with_the_right_call():
    """``conv(x, edge_index, batch)``, as for PyG's convolutions: one line naming the right call."""
    batch = Batch.from_data_list([_graph(nx.path_graph(3), 8, 0), _graph(nx.cycle_graph(4), 8, 1)])
    conv = URPEGraphConv(8, 2)
    with pytest.raises(ValueError) as info:
        conv(batch.x, batch.edge_index, batch.batch)
    message = str(info.value)
    assert "\n" not in message
    assert "got an edge_index [2, 12] where it takes the batch vector" in message
    assert "conv(data.x, data.batch, data.spd, ptr=data.ptr)" in message
    with pytest.raises(ValueError, match=r"batch must be the graph index of each node, shape \[7\]"):
        conv(batch.x, batch.batch[:5], batch.spd)
    # The right call works.
    assert conv(batch.x, batch.batch, batch.spd, ptr=batch.ptr).shape == (7, 8)


def test_wrong_input_width_is_refused_with_the_fix():
    batch = Batch.from_data_list([_graph(nx.path_graph(3), 12, 0)])
    conv = URPEGraphConv(8, 2)
    with pytest.raises(ValueError) as info:
        conv(batch.x, batch.batch, batch.spd)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("x must have shape [num_nodes, 8] for URPEGraphConv(8, ...), got (3, 12)")
    assert "torch.nn.Linear(12, 8)" in message and "URPEGraphConv(12, ...)" in message
