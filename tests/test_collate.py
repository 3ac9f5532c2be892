"""graph_urpe.data.collate: the batches of the graph loaders equal PyG's
``Batch.from_data_list`` (values, dtypes, ``batch`` / ``ptr``, slice and increment dicts, the
graphs read back), and anything outside the plain case is left to PyG."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from torch_geometric import EdgeIndex
from torch_geometric.data import Batch, Data

from graph_urpe.data.collate import GraphCollater, collate_graphs
from graph_urpe.data.modules.molecule import CSVDataModule

SMILES = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "C1CC1N", "O=C(O)CCl", "CCN(CC)CC",
          "c1ccncc1", "OC1CCCCC1", "CC(C)(C)O", "N#Cc1ccccc1", "C", "ClC(Cl)Cl"]


def assert_same_batch(ours: Batch, pyg: Batch) -> None:
    assert type(ours) is type(pyg)
    assert list(ours.keys()) == list(pyg.keys())
    for key in pyg.keys():  # noqa: SIM118 (a Data iterates (key, value) pairs)
        a, b = ours[key], pyg[key]
        if isinstance(b, torch.Tensor):
            assert a.dtype == b.dtype and torch.equal(a, b), key
        else:
            assert a == b, key
    assert ours.num_graphs == pyg.num_graphs and ours.num_nodes == pyg.num_nodes
    assert ours._store._num_nodes == pyg._store._num_nodes
    for name in ("_slice_dict", "_inc_dict"):
        mine, theirs = getattr(ours, name), getattr(pyg, name)
        assert mine.keys() == theirs.keys(), name
        for key, value in theirs.items():
            if value is None:
                assert mine[key] is None, (name, key)
            else:
                assert mine[key].dtype == value.dtype and torch.equal(mine[key], value), (name,
                                                                                          key)
    for x, y in zip(ours.to_data_list(), pyg.to_data_list()):  # read back through the dicts
        for key in y.keys():  # noqa: SIM118
            assert (torch.equal(x[key], y[key]) if isinstance(y[key], torch.Tensor)
                    else x[key] == y[key]), key


@pytest.fixture(scope="module")
def molecules(tmp_path_factory):
    folder = tmp_path_factory.mktemp("collate")
    pd.DataFrame({"smiles": SMILES, "y": [float(len(s)) for s in SMILES],
                  "split": ["train"] * 8 + ["valid"] * 2 + ["test"] * 2}
                 ).to_csv(folder / "mols.csv", index=False)
    dm = CSVDataModule(str(folder / "mols.csv"), target_columns=["y"], split="split",
                       root=str(folder / "data"), batch_size=4, seed=3)
    dm.setup("fit")
    return dm


def test_loader_batches_equal_pygs(molecules):
    for loader in (molecules.train_dataloader(), molecules.val_dataloader(),
                   molecules.test_dataloader()):
        assert isinstance(loader.collate_fn, GraphCollater)
        graphs = [[loader.dataset[i] for i in batch] for batch in loader.batch_sampler]
        batches = list(loader)
        assert len(batches) == len(graphs) > 0
        for batch, members in zip(batches, graphs):
            assert collate_graphs(members) is not None  # the fast path, not PyG's
            assert_same_batch(batch, Batch.from_data_list(members))


def _graph(n: int, seed: int) -> Data:
    g = torch.Generator().manual_seed(seed)
    edges = torch.randint(0, n, (2, 2 * n), generator=g)
    return Data(
        x=torch.randn(n, 3, generator=g),
        edge_index=edges,
        pair_index=torch.randint(0, n, (2, n * n), generator=g).to(torch.int32),
        spd_pred_index=torch.randint(0, n * n, (n * n,), generator=g),
        face=torch.randint(0, n, (3, n), generator=g),
        coord_index=torch.rand(n, generator=g),  # a float "index": offsets added as floats
        small_index=torch.randint(0, 3, (n,), generator=g).to(torch.uint8),
        local_batch=torch.randint(0, 4, (n,), generator=g),  # PyG: offset max + 1 per graph
        scalar=torch.tensor(float(seed)),  # 0-dimensional: stacked
        y=torch.randn(1, 2, generator=g),
        smiles="C" * n,
        sample_id=seed,  # numbers: one tensor
        weight=0.5 * seed,
        node_index=n - 1,  # a number with "index" in its name: offset by the node count
        num_nodes=n,
    )


def test_every_kind_of_attribute_equals_pyg():
    graphs = [_graph(n, seed) for seed, n in enumerate([3, 1, 5, 2, 4])]
    assert_same_batch(collate_graphs(graphs), Batch.from_data_list(graphs))
    assert_same_batch(collate_graphs(graphs[1:2]), Batch.from_data_list(graphs[1:2]))


class _Graph(Data):
    pass


@pytest.mark.parametrize("change", ["subclass", "edge_index_class", "list_attribute",
                                    "bool_index"])
def test_outside_the_plain_case_pyg_batches(change):
    graphs = [_graph(n, seed) for seed, n in enumerate([3, 2, 4])]
    if change == "subclass":
        graphs = [_Graph(**g.to_dict()) for g in graphs]
    elif change == "edge_index_class":
        for g in graphs:
            g.edge_index = EdgeIndex(g.edge_index, sparse_size=(g.num_nodes, g.num_nodes))
    elif change == "list_attribute":
        for g in graphs:
            g.tags = [1, 2]
    else:
        for g in graphs:
            g.mask_index = torch.ones(g.num_nodes, dtype=torch.bool)
    assert collate_graphs(graphs) is None
    collater = GraphCollater(graphs)
    assert_same_batch(collater(graphs), Batch.from_data_list(graphs))


def test_follow_batch_and_exclude_keys_are_pygs():
    graphs = [_graph(n, seed) for seed, n in enumerate([3, 2])]
    collater = GraphCollater(graphs, follow_batch=["x"], exclude_keys=["face"])
    assert_same_batch(collater(graphs), Batch.from_data_list(graphs, follow_batch=["x"],
                                                             exclude_keys=["face"]))
