"""AddShortestPathDistance and AddResistanceDistance against networkx: distances, predecessor
paths, resistances, clipping, the pair layout and its collation, bad input."""

import itertools

import networkx as nx
import numpy as np
import pytest
import torch
from rdkit import Chem
from torch.utils.data import IterDataPipe
from torch_geometric.data import Batch, Data
from torch_geometric.transforms import Compose

from graph_urpe import distances, transforms
from graph_urpe.transforms import (
    MAX_NODES,
    UNREACHABLE,
    AddResistanceDistance,
    AddShortestPathDistance,
    pair_index,
)

SMILES = [
    "C",  # single atom
    "[Na+].[Cl-]",  # salt: two components, no bonds
    "CC(=O)O.c1ccccc1",  # two molecules
    "c1ccc2ccccc2c1",  # fused rings
    "CC(C)(C)c1ccc2occ(CC(=O)Nc3ccccc3F)c2c1",  # ZINC-like drug molecule
    "Cn1cnc2c1c(=O)n(C)c(=O)n2C",  # caffeine
    "C1CC2CCC1CC2",  # bridged bicycle
    "[13CH3][N+](C)(C)CCO",  # isotope and charge
]


@pytest.fixture(params=["floyd_warshall", "dijkstra"])
def routine(request, monkeypatch):
    """Runs a test with each of the two SciPy routines (chosen by graph size) on every graph."""
    threshold = MAX_NODES if request.param == "floyd_warshall" else 0
    monkeypatch.setattr(distances, "FLOYD_WARSHALL_MAX_NODES", threshold)
    return request.param


def _data(graph: nx.Graph) -> Data:
    """PyG graph with both directions of every networkx edge, nodes 0..n-1."""
    pairs = [(u, v) for u, v in graph.edges() if u != v]
    both = pairs + [(v, u) for u, v in pairs]
    edge_index = torch.tensor(both, dtype=torch.long).t().reshape(2, -1)
    return Data(edge_index=edge_index, num_nodes=graph.number_of_nodes())


def _mol_graph(smiles: str) -> nx.Graph:
    mol = Chem.MolFromSmiles(smiles)
    graph = nx.Graph()
    graph.add_nodes_from(range(mol.GetNumAtoms()))
    graph.add_edges_from((b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds())
    return graph


def _graphs() -> list[tuple[str, nx.Graph]]:
    cases = [
        ("path", nx.path_graph(7)),
        ("ring", nx.cycle_graph(8)),
        ("odd ring", nx.cycle_graph(5)),
        ("tree", nx.balanced_tree(2, 3)),
        ("random tree", nx.random_labeled_tree(15, seed=3)),
        (
            "disconnected",
            nx.disjoint_union_all([nx.path_graph(3), nx.cycle_graph(4), nx.empty_graph(2)]),
        ),
        ("single node", nx.empty_graph(1)),
        ("no edges", nx.empty_graph(4)),
        ("grid", nx.grid_2d_graph(3, 4)),
        ("sparse random", nx.gnp_random_graph(20, 0.12, seed=7)),
    ]
    cases += [(f"mol {s}", _mol_graph(s)) for s in SMILES]
    return [(name, nx.convert_node_labels_to_integers(g)) for name, g in cases]


def _expected_spd(graph: nx.Graph) -> np.ndarray:
    n = graph.number_of_nodes()
    expected = np.full((n, n), UNREACHABLE)
    for i, lengths in nx.all_pairs_shortest_path_length(graph):
        for j, d in lengths.items():
            expected[i, j] = d
    return expected


@pytest.mark.parametrize(("name", "graph"), _graphs(), ids=[name for name, _ in _graphs()])
def test_spd_and_paths_match_networkx(name, graph, routine):
    data = AddShortestPathDistance()(_data(graph))
    n = graph.number_of_nodes()
    assert data.spd.dtype == torch.int16 and data.spd.shape == (n * n,)
    assert data.spd_pred_index.dtype == torch.int32 and data.spd_pred_index.shape == (n * n,)
    assert data.pair_index.dtype == torch.int32 and data.pair_index.shape == (2, n * n)
    spd = data.spd.view(n, n).numpy()
    pred = data.spd_pred_index.view(n, n).numpy()
    expected = _expected_spd(graph)
    np.testing.assert_array_equal(spd, expected)
    for i in range(n):
        for j in range(n):
            if i == j or expected[i, j] == UNREACHABLE:
                assert pred[i, j] == j  # no predecessor: the pair's own key node
                continue
            # Walk back from j along row i of the predecessor matrix.
            path = [j]
            while path[-1] != i:
                assert len(path) <= n, "predecessor walk does not terminate"
                path.append(int(pred[i, path[-1]]))
            assert len(path) - 1 == expected[i, j]
            assert all(graph.has_edge(u, v) for u, v in itertools.pairwise(path))


def test_large_graph_uses_default_dispatch_correctly():
    # 320 nodes > FLOYD_WARSHALL_MAX_NODES: the Dijkstra branch, with the real threshold.
    graph = nx.convert_node_labels_to_integers(nx.grid_2d_graph(20, 16))
    assert graph.number_of_nodes() > transforms.FLOYD_WARSHALL_MAX_NODES
    data = AddShortestPathDistance()(_data(graph))
    n = graph.number_of_nodes()
    np.testing.assert_array_equal(data.spd.view(n, n).numpy(), _expected_spd(graph))
    pred = data.spd_pred_index.view(n, n).numpy()
    for i in (0, 17, 319):
        for j in range(n):
            path = [j]
            while path[-1] != i:
                path.append(int(pred[i, path[-1]]))
            assert len(path) - 1 == nx.shortest_path_length(graph, i, j)
            assert all(graph.has_edge(u, v) for u, v in itertools.pairwise(path))


def test_max_distance_clips_reachable_pairs_only(routine):
    graph = nx.disjoint_union(nx.path_graph(9), nx.path_graph(2))
    full = AddShortestPathDistance()(_data(graph))
    clipped = AddShortestPathDistance(max_distance=3)(_data(graph))
    expected = _expected_spd(graph)
    expected = np.where(expected == UNREACHABLE, UNREACHABLE, np.minimum(expected, 3))
    np.testing.assert_array_equal(clipped.spd.view(11, 11).numpy(), expected)
    assert (clipped.spd == UNREACHABLE).sum() == 2 * 9 * 2
    # Paths are the full shortest paths, not truncated.
    assert torch.equal(clipped.spd_pred_index, full.spd_pred_index)


def test_paths_false_stores_distances_only(routine):
    data = AddShortestPathDistance(paths=False)(_data(nx.cycle_graph(6)))
    assert "spd_pred_index" not in data
    np.testing.assert_array_equal(data.spd.view(6, 6).numpy(), _expected_spd(nx.cycle_graph(6)))


def test_hand_worked_path_graph(routine):
    # 0 - 1 - 2, listed in one direction only: treated as undirected.
    data = Data(edge_index=torch.tensor([[0, 1], [1, 2]]), num_nodes=3)
    data = AddShortestPathDistance()(data)
    assert data.spd.tolist() == [0, 1, 2, 1, 0, 1, 2, 1, 0]
    assert data.spd_pred_index.tolist() == [0, 0, 1, 1, 1, 1, 1, 2, 2]
    assert data.pair_index.tolist() == [[0, 0, 0, 1, 1, 1, 2, 2, 2], [0, 1, 2, 0, 1, 2, 0, 1, 2]]


def test_empty_graph_and_duplicate_edges_and_self_loops(routine):
    empty = AddShortestPathDistance()(
        Data(edge_index=torch.empty(2, 0, dtype=torch.long), num_nodes=0)
    )
    assert empty.spd.shape == (0,) and empty.spd_pred_index.shape == (0,)
    assert empty.pair_index.shape == (2, 0)
    data = Data(edge_index=torch.tensor([[0, 0, 1, 1, 2], [1, 1, 0, 1, 2]]), num_nodes=3)
    data = AddShortestPathDistance()(data)
    assert data.spd.tolist() == [0, 1, -1, 1, 0, -1, -1, -1, 0]


def test_collate_increments_indices_and_concatenates_values():
    graphs = [nx.path_graph(3), nx.cycle_graph(4), nx.empty_graph(2)]
    pre = Compose([AddShortestPathDistance(), AddResistanceDistance()])
    datas = [pre(_data(g)) for g in graphs]
    batch = Batch.from_data_list(datas)
    offsets = [0, 3, 7]
    for key in ("spd", "resistance"):
        assert torch.equal(batch[key], torch.cat([d[key] for d in datas]))
    for key in ("pair_index", "spd_pred_index"):  # node indices: PyG's increments
        assert torch.equal(batch[key], torch.cat([d[key] + o for d, o in zip(datas, offsets)], -1))
        assert batch[key].dtype == torch.int32
    # and back: separating a batch (as InMemoryDataset's storage does) undoes the increments
    for i, d in enumerate(datas):
        again = batch.get_example(i)
        for key in ("pair_index", "spd_pred_index", "spd", "resistance"):
            assert torch.equal(again[key], d[key])


@pytest.mark.parametrize(("name", "graph"), _graphs(), ids=[name for name, _ in _graphs()])
def test_resistance_matches_networkx(name, graph):
    data = AddResistanceDistance()(_data(graph))
    n = graph.number_of_nodes()
    assert data.resistance.dtype == torch.float32 and data.resistance.shape == (n * n,)
    assert torch.equal(data.pair_index, pair_index(n))
    rd = data.resistance.view(n, n).double().numpy()
    expected = np.full((n, n), float(UNREACHABLE))
    for nodes in nx.connected_components(graph):
        sub = graph.subgraph(nodes)
        nodes = sorted(nodes)
        if len(nodes) == 1:
            expected[nodes[0], nodes[0]] = 0.0
            continue
        ref = nx.resistance_distance(sub)  # dict of dicts, each component on its own
        for u in nodes:
            for v in nodes:
                expected[u, v] = ref[u][v]
    np.testing.assert_allclose(rd, expected, atol=1e-5)


def test_resistance_hand_worked_and_tree_equals_spd():
    # A 4-cycle: adjacent nodes 1 || 3 = 3/4, opposite nodes 2 || 2 = 1.
    data = AddResistanceDistance()(_data(nx.cycle_graph(4)))
    assert data.resistance.view(4, 4)[0].tolist() == pytest.approx([0.0, 0.75, 1.0, 0.75])
    tree = nx.random_labeled_tree(12, seed=5)
    rd = AddResistanceDistance()(_data(tree)).resistance
    assert torch.allclose(rd, AddShortestPathDistance()(_data(tree)).spd.float(), atol=1e-5)
    # Duplicates, one-directional edges and self-loops do not change the simple graph.
    messy = Data(edge_index=torch.tensor([[0, 1, 1, 2, 2], [1, 0, 2, 2, 1]]), num_nodes=3)
    assert AddResistanceDistance()(messy).resistance.tolist() == pytest.approx(
        [0.0, 1.0, 2.0, 1.0, 0.0, 1.0, 2.0, 1.0, 0.0])


def test_attr_name_and_functional_names():
    data = AddShortestPathDistance(attr_name="hops")(_data(nx.path_graph(3)))
    assert "hops" in data and "hops_pred_index" in data and "spd" not in data
    data = AddResistanceDistance(attr_name="rd")(data)
    assert data.rd.shape == (9,) and "resistance" not in data
    for name in ("add_shortest_path_distance", "add_resistance_distance"):
        assert name in IterDataPipe.functions


@pytest.mark.parametrize("transform", [AddShortestPathDistance, AddResistanceDistance])
@pytest.mark.parametrize(("name", "why"), [
    ("rd_index", "increment it as a node index"),
    ("edge_index", "increment it as a node index"),
    ("batch", "increment it as a batch vector"),
    ("sub_batch", "increment it as a batch vector"),
    ("x", "standard PyG attribute or a member of Data"),
    ("edge_attr", "standard PyG attribute or a member of Data"),
    ("y", "standard PyG attribute or a member of Data"),
    ("num_nodes", "standard PyG attribute or a member of Data"),
    ("ptr", "standard PyG attribute or a member of Data"),
    ("subgraph", "standard PyG attribute or a member of Data"),
    ("_spd", "identifier not starting with '_'"),
    ("spd distance", "identifier"),
])
def test_attr_name_colliding_with_pyg_is_refused(transform, name, why):
    with pytest.raises(ValueError, match=f"attr_name.*{why}"):
        transform(attr_name=name)


@pytest.mark.parametrize("transform", [AddShortestPathDistance(), AddResistanceDistance()],
                         ids=repr)
def test_existing_attribute_is_not_overwritten_but_own_output_is_recomputed(transform):
    data = _data(nx.path_graph(4))
    taken = data.clone()
    taken[transform.attr_name] = torch.ones(4)  # a node attribute of the user's
    with pytest.raises(ValueError, match=f"already has an attribute '{transform.attr_name}' "
                       r"\(torch.float32 \[4\]\) that this transform did not store"):
        transform(taken)
    if isinstance(transform, AddShortestPathDistance):  # the predecessors' name too
        taken = data.clone()
        taken.spd_pred_index = torch.zeros(3, dtype=torch.long)
        with pytest.raises(ValueError, match="'spd_pred_index'"):
            transform(taken)
    # Its own output, also once stale: recomputed (after a subgraph, as the layer asks).
    name, keep = transform.attr_name, torch.tensor([1, 2, 3])
    once = transform(data.clone())
    assert torch.equal(transform(once.clone())[name], once[name])
    cut = transform(once.subgraph(keep))
    assert torch.equal(cut[name], transform(data.subgraph(keep))[name])
    both = Compose([AddShortestPathDistance(), AddResistanceDistance()])  # after one another
    cut = both(both(data.clone()).subgraph(keep))
    assert torch.equal(cut[name], both(data.subgraph(keep))[name])
    # Another relation's values (SPD int16, resistance float32) under the same name: refused.
    if isinstance(transform, AddShortestPathDistance):
        other = AddResistanceDistance(attr_name="spd")
    else:
        other = AddShortestPathDistance(attr_name="resistance")
    with pytest.raises(ValueError, match="that this transform did not store"):
        other(once)


# Data() with no attributes makes PyG warn that it cannot infer num_nodes: that is the point.
@pytest.mark.filterwarnings("ignore:Unable to accurately infer 'num_nodes'")
def test_bad_input_is_refused_loudly():
    with pytest.raises(ValueError, match="too large"):
        AddShortestPathDistance()(
            Data(edge_index=torch.empty(2, 0, dtype=torch.long), num_nodes=MAX_NODES + 1)
        )
    with pytest.raises(ValueError, match="outside"):
        AddShortestPathDistance()(Data(edge_index=torch.tensor([[0], [5]]), num_nodes=3))
    with pytest.raises(ValueError, match="shape"):
        AddShortestPathDistance()(Data(edge_index=torch.tensor([0, 1, 2]), num_nodes=3))
    with pytest.raises(ValueError, match="max_distance"):
        AddShortestPathDistance(max_distance=0)
    for transform in (AddShortestPathDistance(), AddResistanceDistance()):
        with pytest.raises(TypeError, match=r"edge_index must be an integer tensor.*\.long\(\)"):
            transform(Data(edge_index=torch.tensor([[0.0, 1.0], [1.0, 0.0]]), num_nodes=2))
    with pytest.raises(ValueError, match="unknown number of nodes"):
        AddShortestPathDistance()(Data())


def test_repr():
    assert repr(AddShortestPathDistance(5, paths=False)) == (
        "AddShortestPathDistance(max_distance=5, paths=False, attr_name='spd')"
    )
    assert repr(AddResistanceDistance()) == "AddResistanceDistance(attr_name='resistance')"


def test_unreachable_lives_in_constants_and_is_re_exported():
    from graph_urpe import constants, transforms

    assert constants.UNREACHABLE == transforms.UNREACHABLE == -1
