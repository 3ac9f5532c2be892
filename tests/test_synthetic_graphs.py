"""SyntheticGraphDataset's biconnectivity tasks on 'bridged' graphs, against a naive check (remove
each node, count components)."""

import networkx as nx
import pytest
import torch
from torch_geometric.transforms import Compose

from graph_urpe.data.synthetic_graphs import SyntheticGraphDataset
from graph_urpe.transforms import AddResistanceDistance, AddShortestPathDistance


def _graph(data) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(range(data.num_nodes))
    g.add_edges_from(data.edge_index.t().tolist())
    return g


def _naive_cut_vertices(g: nx.Graph) -> set[int]:
    return {v for v in g if not nx.is_connected(g.subgraph(set(g) - {v}))}


def test_bridged_graphs_and_cut_vertex_labels():
    nodes = SyntheticGraphDataset("cut_vertex", num_graphs=60, kinds=("bridged",), seed=3)
    graphs = SyntheticGraphDataset("has_cut_vertex", num_graphs=60, kinds=("bridged",), seed=3)
    counts = []
    for node_data, graph_data in zip(nodes, graphs, strict=True):
        g = _graph(node_data)
        assert nx.is_connected(g) and 8 <= g.number_of_nodes() <= 20
        cut = _naive_cut_vertices(g)
        assert node_data.y.tolist() == [int(v in cut) for v in range(g.number_of_nodes())]
        assert graph_data.y.tolist() == [int(bool(cut))]
        assert len(cut) in (0, 3)  # 2-connected, or the connector and its two neighbours
        counts.append(len(cut))
    assert 15 <= counts.count(0) <= 45  # about half of the graphs are 2-connected


def test_bridged_needs_seven_nodes_and_takes_a_pre_transform():
    with pytest.raises(ValueError, match="min_nodes >= 7"):
        SyntheticGraphDataset("cut_vertex", kinds=("bridged",), min_nodes=6)
    pre = Compose([AddShortestPathDistance(paths=False), AddResistanceDistance()])
    data = SyntheticGraphDataset("has_cut_vertex", num_graphs=4, kinds=("bridged",), pre_transform=pre)
    assert data[0].resistance.shape == (data[0].num_nodes ** 2,)
    assert data[0].resistance.dtype == torch.float32
