"""Padded relation (SPD) and path-edge tensors of a batch against per-graph networkx and to_dense_batch."""

import unittest.mock

import networkx as nx
import pytest
import torch
from rdkit import Chem
from torch_geometric.data import Batch, Data
from torch_geometric.utils import to_dense_batch

from graph_urpe.constants import UNREACHABLE
from graph_urpe.dense import to_dense_pair, to_dense_path_edges
from graph_urpe.dense_relations import dense_relations_from_edges
from graph_urpe.transforms import AddResistanceDistance, AddShortestPathDistance

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _data(graph: nx.Graph, both_directions: bool = True) -> Data:
    pairs = list(graph.edges())
    if both_directions:
        pairs = pairs + [(v, u) for u, v in pairs]
    edge_index = torch.tensor(pairs, dtype=torch.long).t().reshape(2, -1)
    # Shuffle the edge order so edge ids are not trivially sorted.
    perm = torch.randperm(edge_index.size(1), generator=torch.Generator().manual_seed(0))
    data = Data(edge_index=edge_index[:, perm], num_nodes=graph.number_of_nodes())
    data.x = torch.arange(graph.number_of_nodes()).unsqueeze(1)
    return AddShortestPathDistance()(data)


def _mol(smiles: str) -> nx.Graph:
    mol = Chem.MolFromSmiles(smiles)
    graph = nx.Graph()
    graph.add_nodes_from(range(mol.GetNumAtoms()))
    graph.add_edges_from((b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds())
    return graph


def _graphs() -> list[nx.Graph]:
    return [
        nx.path_graph(6),
        nx.empty_graph(1),
        nx.empty_graph(0),
        nx.cycle_graph(7),
        nx.disjoint_union(nx.path_graph(3), nx.cycle_graph(5)),
        nx.empty_graph(3),
        _mol("CC(C)(C)c1ccc2occ(CC(=O)Nc3ccccc3F)c2c1"),
        nx.convert_node_labels_to_integers(nx.balanced_tree(2, 3)),
    ]


def _networkx_spd(graph: nx.Graph) -> dict[tuple[int, int], int]:
    return {
        (i, j): d
        for i, lengths in nx.all_pairs_shortest_path_length(graph)
        for j, d in lengths.items()
    }


@pytest.mark.parametrize("device", DEVICES)
def test_to_dense_pair_spd_matches_networkx_and_to_dense_batch(device):
    graphs = _graphs()
    batch = Batch.from_data_list([_data(g) for g in graphs]).to(device)
    spd, mask = to_dense_pair(batch.spd, batch.pair_index, ptr=batch.ptr, validate=True)
    num_max = max(g.number_of_nodes() for g in graphs)
    assert spd.shape == (len(graphs), num_max, num_max) and spd.dtype == torch.int16
    assert spd.device.type == device and mask.device.type == device
    _, node_mask = to_dense_batch(batch.x, batch.batch, batch_size=len(graphs))
    assert torch.equal(mask, ~node_mask)
    for b, graph in enumerate(graphs):
        lengths = _networkx_spd(graph)
        n = graph.number_of_nodes()
        for i in range(num_max):
            for j in range(num_max):
                if i < n and j < n:
                    assert spd[b, i, j] == lengths.get((i, j), UNREACHABLE)
                else:
                    assert spd[b, i, j] == UNREACHABLE


def test_to_dense_pair_spd_single_data_is_a_batch_of_one():
    graph = nx.cycle_graph(5)
    spd, mask = to_dense_pair(_data(graph).spd, _data(graph).pair_index)
    assert spd.shape == (1, 5, 5) and not mask.any()
    assert spd[0, 0].tolist() == [0, 1, 2, 2, 1]


def test_to_dense_pair_spd_keeps_clipped_values():
    data = AddShortestPathDistance(max_distance=2)(
        Data(edge_index=_data(nx.path_graph(5)).edge_index, num_nodes=5)
    )
    batch = Batch.from_data_list([data])
    spd, _ = to_dense_pair(batch.spd, batch.pair_index, batch.batch)
    assert spd[0, 0].tolist() == [0, 1, 2, 2, 2]


def _check_path_edges(batch, graphs, max_hops):
    edges = to_dense_path_edges(batch.spd_pred_index, batch.pair_index, batch.edge_index, ptr=batch.ptr, max_hops=max_hops,
                                validate=True)
    num_max = max(g.number_of_nodes() for g in graphs)
    assert edges.shape == (len(graphs), num_max, num_max, max_hops) and edges.dtype == torch.long
    assert edges.device == batch.edge_index.device
    edge_index = batch.edge_index.cpu()
    edges = edges.cpu()
    for b, graph in enumerate(graphs):
        lengths = _networkx_spd(graph)
        start = int(batch.ptr[b])
        n = graph.number_of_nodes()
        for i in range(num_max):
            for j in range(num_max):
                ids = edges[b, i, j].tolist()
                if i >= n or j >= n:
                    assert ids == [-1] * max_hops
                    continue
                hops = min(lengths.get((i, j), 0), max_hops)
                assert all(e >= 0 for e in ids[:hops]) and ids[hops:] == [-1] * (max_hops - hops)
                # The edges chain from i along graph edges; a complete path ends at j.
                node = i
                for e in ids[:hops]:
                    u, v = (int(x) - start for x in edge_index[:, e])
                    assert graph.has_edge(u, v)
                    assert node in (u, v)
                    node = v if node == u else u
                if (i, j) in lengths and hops == lengths[(i, j)]:
                    assert node == j
    return edges


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("max_hops", [1, 3, 20])
def test_to_dense_path_edges_are_shortest_paths(device, max_hops):
    graphs = _graphs()
    batch = Batch.from_data_list([_data(g) for g in graphs]).to(device)
    edges = _check_path_edges(batch, graphs, max_hops)
    # With both directions listed, edge k leaves the k-th node: its source is that node.
    ptr = batch.ptr.cpu()
    first = edges[..., 0]
    valid = first >= 0
    sources = batch.edge_index.cpu()[0, first[valid]]
    rows = torch.nonzero(valid)
    assert torch.equal(sources, ptr[rows[:, 0]] + rows[:, 1])


def test_to_dense_path_edges_one_direction_listed():
    graphs = [nx.path_graph(4), nx.cycle_graph(6)]
    batch = Batch.from_data_list([_data(g, both_directions=False) for g in graphs])
    _check_path_edges(batch, graphs, max_hops=5)


def test_to_dense_path_edges_hand_worked():
    # 0 -e0/e1- 1 -e2/e3- 2: path 0 -> 2 uses edge (0, 1) = column 0, then (1, 2) = column 2.
    edge_index = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    data = AddShortestPathDistance()(Data(edge_index=edge_index, num_nodes=3))
    edges = to_dense_path_edges(data.spd_pred_index, data.pair_index, data.edge_index, max_hops=3)
    assert edges[0, 0, 2].tolist() == [0, 2, -1]
    assert edges[0, 2, 0].tolist() == [3, 1, -1]
    assert edges[0, 1, 1].tolist() == [-1, -1, -1]


def _dense_from_batch(batch, **kw):
    return to_dense_path_edges(batch.get("spd_pred_index"), batch.get("pair_index"), batch.edge_index, batch.get("batch"),
                               batch.get("ptr"), **kw)


def test_errors_name_the_fix():
    data = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    with pytest.raises(ValueError, match="AddShortestPathDistance"):
        to_dense_pair(data.get("spd"), data.get("pair_index"))
    with_spd = AddShortestPathDistance(paths=False)(data.clone())
    with pytest.raises(ValueError, match="spd_pred"):
        _dense_from_batch(with_spd, max_hops=2)
    with pytest.raises(ValueError, match="max_hops"):
        _dense_from_batch(AddShortestPathDistance()(data.clone()), max_hops=0)
    grown = Batch.from_data_list([AddShortestPathDistance()(data.clone())])
    with pytest.raises(ValueError, match="sum\\(n\\^2\\)"):
        to_dense_pair(grown.spd, grown.pair_index, ptr=torch.tensor([0, 3]), validate=True)
    dropped = AddShortestPathDistance()(data.clone())
    dropped.edge_index = dropped.edge_index[:, :0]
    with pytest.raises(ValueError, match="missing from edge_index"):
        _dense_from_batch(dropped, max_hops=2, validate=True)
    # Without validation a missing edge counts as absent.
    assert (_dense_from_batch(dropped, max_hops=2) == -1).all()


def test_batch_vector_ptr_and_fixed_size_agree():
    graphs = [nx.path_graph(4), nx.empty_graph(0), nx.cycle_graph(5)]
    batch = Batch.from_data_list([_data(g) for g in graphs])
    a, ma = to_dense_pair(batch.spd, batch.pair_index, ptr=batch.ptr)
    b, mb = to_dense_pair(batch.spd, batch.pair_index, batch.batch, num_graphs=3)
    c, mc = to_dense_pair(batch.spd, batch.pair_index, ptr=batch.ptr, max_num_nodes=7)
    assert torch.equal(a, b) and torch.equal(ma, mb)
    assert c.shape == (3, 7, 7) and torch.equal(c[:, :5, :5], a) and (c[:, 5:] == UNREACHABLE).all()
    assert mc[:, 5:].all() and torch.equal(mc[:, :5], ma)
    pa = to_dense_path_edges(batch.spd_pred_index, batch.pair_index, batch.edge_index, ptr=batch.ptr, max_hops=3)
    pc = to_dense_path_edges(batch.spd_pred_index, batch.pair_index, batch.edge_index, ptr=batch.ptr, max_hops=3,
                             max_num_nodes=7)
    assert torch.equal(pc[:, :5, :5], pa) and (pc[:, 5:] == -1).all()


def test_to_dense_path_edges_early_exit_matches_the_full_walk():
    # On CPU in eager mode the walk stops once every path has ended (here after 12 of 20 hops);
    # the walk that never stops early (as when compiling) gives the same edges.
    graphs = [nx.path_graph(12), nx.cycle_graph(7), nx.star_graph(4)]
    batch = Batch.from_data_list([_data(g) for g in graphs])
    early = to_dense_path_edges(batch.spd_pred_index, batch.pair_index, batch.edge_index, ptr=batch.ptr, max_hops=20)
    with unittest.mock.patch.object(torch.compiler, "is_compiling", return_value=True):
        full = to_dense_path_edges(batch.spd_pred_index, batch.pair_index, batch.edge_index, ptr=batch.ptr, max_hops=20)
    assert torch.equal(early, full)
    assert (early[..., 11:] == -1).all() and (early[0, 0, 11, :11] >= 0).all()


def _set(pairs: torch.Tensor, column: int, value: torch.Tensor) -> torch.Tensor:
    pairs = pairs.clone()
    pairs[:, column] = value
    return pairs


BAD_PAIRS = {
    "node outside": (lambda p: _set(p, 0, torch.tensor([0, 99])),
                     r"refers to node 99, outside the batch's \[0, 9\)"),
    "pair across graphs": (lambda p: _set(p, 1, torch.tensor([0, 5])),
                           r"column 1, \(0, 5\), joins nodes of graph 0 and graph 1"),
    "pair twice": (lambda p: _set(p, 1, p[:, 0]),
                   r"lists some node pair twice \(and so misses another\)"),
}


@pytest.mark.parametrize("case", list(BAD_PAIRS))
def test_validate_refuses_pairs_that_do_not_fit_and_accepts_any_order(case):
    batch = Batch.from_data_list([_data(nx.path_graph(4)), _data(nx.cycle_graph(5))])
    change, message = BAD_PAIRS[case]
    with pytest.raises(ValueError, match=message + ": the pair relations must be computed on"):
        to_dense_pair(batch.spd, change(batch.pair_index), ptr=batch.ptr, validate=True)
    # The pairs are scattered by pair_index: any column order (as a PyG edge-level transform
    # leaves them on a graph with E == n^2) gives the same matrices.
    perm = torch.randperm(batch.spd.numel(), generator=torch.Generator().manual_seed(0))
    expected = to_dense_pair(batch.spd, batch.pair_index, ptr=batch.ptr, validate=True)
    permuted = to_dense_pair(batch.spd[perm], batch.pair_index[:, perm], ptr=batch.ptr,
                             validate=True)
    assert all(torch.equal(a, b) for a, b in zip(expected, permuted, strict=True))


def _random_graphs() -> list[nx.Graph]:
    """Random and disconnected graphs, with an isolated node and a one-node graph."""
    graphs = [nx.gnp_random_graph(n, p, seed=s) for s, (n, p) in
              enumerate([(9, 0.3), (12, 0.15), (7, 0.5), (10, 0.1)])]
    graphs.append(nx.disjoint_union_all([nx.cycle_graph(4), nx.path_graph(3), nx.empty_graph(1)]))
    return graphs + [nx.empty_graph(1), _mol("CC(C)(C)c1ccc2occ(CC(=O)Nc3ccccc3F)c2c1")]


def test_relations_computed_on_the_fly_equal_the_transforms_and_networkx():
    # The two routines (SciPy in the transforms, once per graph on the CPU; batched torch on the
    # layer's device): same values, same conventions (UNREACHABLE, padding).
    graphs = _random_graphs()
    datas = [AddResistanceDistance()(_data(g)) for g in graphs]
    batch = Batch.from_data_list(datas)
    counts = batch.ptr[1:] - batch.ptr[:-1]
    n = int(counts.max())
    computed = dense_relations_from_edges(batch.edge_index, counts, n, ["spd", "resistance"],
                                          validate=True)
    spd, _ = to_dense_pair(batch.spd, batch.pair_index, ptr=batch.ptr, validate=True)
    rd, _ = to_dense_pair(batch.resistance, batch.pair_index, ptr=batch.ptr, validate=True)
    assert torch.equal(computed["spd"], spd.long())
    torch.testing.assert_close(computed["resistance"], rd, atol=1e-5, rtol=1e-5)
    for b, graph in enumerate(graphs):  # and networkx, for the SPD
        for (i, j), d in _networkx_spd(graph).items():
            assert computed["spd"][b, i, j] == d
    assert int((computed["spd"] >= 0).sum()) == sum(len(_networkx_spd(g)) for g in graphs)
