"""The CSV dataset's memory-mapped store: the graphs equal what the in-memory path (featurize every
row, PyG's collate) gives, across chunk boundaries and with invalid rows in several chunks;
``pair_index`` rebuilt only where it is the canonical one; ``get`` keeps nothing; a killed
processing resumes after its last chunk; the store's writer and reader on their own."""

import os.path as osp
import tracemalloc
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from torch_geometric.data import InMemoryDataset
from torch_geometric.transforms import Compose

from graph_urpe.data import stored_graphs
from graph_urpe.data.cache import CorruptCacheError
from graph_urpe.data.csv import store_builder
from graph_urpe.data.csv.dataset import SmilesCSVDataset
from graph_urpe.data.csv.splits import random_split
from graph_urpe.data.processing import molecules_to_graphs
from graph_urpe.data.store import StringColumn, read_store
from graph_urpe.data.store_writer import GraphStoreWriter
from graph_urpe.transforms import AddResistanceDistance, AddShortestPathDistance

MOLECULES = ["CCO", "c1ccccc1", "CC(=O)O", "CCN(CC)CC", "C", "O=C=O", "c1ccncc1", "CC#N",
             "C1CC1", "OCCO", "CCCl", "NC=O", "C1CCOC1", "FC(F)F", "CC(C)C", "CCS", "[Na+].[Cl-]",
             "c1ccc2ccccc2c1", "CC(=O)Nc1ccc(O)cc1", "OC1CC1"]
INVALID = {3: "C1CC", 17: "not a smiles", 18: "", 41: "C(C)(C)(C)(C)C"}


class ReversePairs:
    """A pre_transform leaving a non-canonical pair_index (columns reversed) on graphs of an
    even node count."""

    def __call__(self, data):
        if data.num_nodes % 2 == 0:
            data.pair_index = data.pair_index.flip(1)
            data.spd = data.spd.flip(0)
        return data

    def __repr__(self):
        return "ReversePairs()"


def write_csv(path, n=47, seed=0):
    rng = np.random.default_rng(seed)
    smiles = [INVALID.get(i, MOLECULES[int(rng.integers(len(MOLECULES)))]) for i in range(n)]
    pd.DataFrame({"smiles": smiles, "y": rng.normal(size=n),
                  "z": np.where(rng.random(n) < 0.3, np.nan, rng.normal(size=n))}).to_csv(
        path, index=False)
    return str(path), smiles


def load(root, csv, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SmilesCSVDataset(str(root), csv, "smiles", ["y", "z"], log=False, **kwargs)


def reference(smiles, csv, pre_transform):
    """The in-memory path: every row featurized, PyG's collate, PyG's separate."""
    labels = pd.read_csv(csv)[["y", "z"]].to_numpy()
    graphs, errors = molecules_to_graphs(smiles, labels, pre_transform=pre_transform,
                                         num_workers=0, progress=False, canonical=True)
    keys = [g.canonical_key for g in graphs]
    for g in graphs:
        del g.canonical_key

    class Collated(InMemoryDataset):
        def __init__(self):
            super().__init__(None)
            self.data, self.slices = self.collate(graphs)

    return Collated(), errors, keys


def assert_same_graph(got, want):
    assert sorted(got.keys()) == sorted(want.keys())
    assert got.num_nodes == want.num_nodes
    for key in want.keys():  # noqa: SIM118 (iterating a Data yields (key, value) pairs)
        a, b = got[key], want[key]
        if isinstance(b, torch.Tensor):
            assert a.dtype == b.dtype and a.shape == b.shape, key
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True, msg=key)
        else:
            assert a == b, key


@pytest.mark.parametrize("chunk_rows,workers", [(10, 0), (7, 2), (1000, 0)])
def test_store_equals_the_in_memory_path(tmp_path, chunk_rows, workers):
    csv, smiles = write_csv(tmp_path / "mols.csv")
    pre = Compose([AddShortestPathDistance(), AddResistanceDistance()])
    ds = load(tmp_path / "root", csv, pre_transform=pre, chunk_rows=chunk_rows,
              num_workers=workers)
    want, errors, keys = reference(smiles, csv, pre)
    assert len(ds) == len(want) == len(smiles) - len(INVALID)
    for i in range(len(ds)):
        assert_same_graph(ds[i], want[i])
    assert [(e.row, e.smiles, e.reason) for e in ds.invalid_rows] == \
        [(e.row, e.smiles, e.reason) for e in errors]
    assert ds._canonical_keys.tolist() == keys
    split = random_split(len(want), (0.8, 0.1, 0.1), 0)
    assert all(torch.equal(ds.get_idx_split()[k], split[k]) for k in split)
    # collated attributes as an InMemoryDataset holds them (collated.py, summary.py, sampler.py);
    # features and edge indices in their narrow stored dtypes (the same values)
    for key in ("x", "edge_index", "edge_attr", "y", "spd", "row"):
        narrow = stored_graphs.NARROW.get(key)
        assert ds._data[key].dtype == (want._data[key].dtype if narrow is None
                                       else torch.from_numpy(np.zeros(0, narrow)).dtype), key
        torch.testing.assert_close(ds._data[key], want._data[key], rtol=0, atol=0,
                                   equal_nan=True, check_dtype=False)
        assert torch.equal(ds.slices[key], want.slices[key]), key
    assert "pair_index" not in ds.slices  # every graph's was the canonical one: rebuilt
    assert not osp.exists(osp.join(ds.processed_dir, "graph.pair_index.part0.bin"))


def test_a_pair_index_that_is_not_the_canonical_one_is_stored(tmp_path):
    csv, smiles = write_csv(tmp_path / "mols.csv", n=30)
    pre = Compose([AddShortestPathDistance(), ReversePairs()])
    ds = load(tmp_path / "root", csv, pre_transform=pre, chunk_rows=8, num_workers=0)
    want, _, _ = reference(smiles, csv, pre)
    stored = 0
    for i in range(len(ds)):
        assert_same_graph(ds[i], want[i])
        stored += int(want[i].num_nodes % 2 == 0)
    assert 0 < stored < len(ds)
    columns, _ = read_store(ds.processed_dir)
    assert int((columns["derived.pair_index"].values == 0).sum()) == stored


def test_get_keeps_no_graph_of_a_store_too_large_to_keep(tmp_path, monkeypatch):
    csv, _ = write_csv(tmp_path / "mols.csv", n=40)
    monkeypatch.setattr(stored_graphs, "CACHE_BYTES", 0)
    ds = load(tmp_path / "root", csv, pre_transform=AddShortestPathDistance(), num_workers=0)
    for graph in ds:  # warm up: imports, caches of pair_index per size
        pass
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(3):
        for graph in ds:
            del graph
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert ds._data_list is None
    assert grown < 20_000, grown  # 3 x 36 graphs kept would be about 300 KB


def test_a_small_store_keeps_its_graphs_as_pyg_does(tmp_path, monkeypatch):
    csv, smiles = write_csv(tmp_path / "mols.csv", n=40)
    pre = AddShortestPathDistance()
    ds = load(tmp_path / "root", csv, pre_transform=pre, num_workers=0)
    want, _, _ = reference(smiles, csv, pre)
    first = [ds[i] for i in range(len(ds))]
    kept = ds._graphs._kept
    assert all(graph is not None for graph in kept)
    for i in range(len(ds)):
        again = ds[i]
        assert again is not first[i] and again is not kept[i]  # shallow copies, as PyG's get
        assert_same_graph(again, want[i])
        again.extra = torch.zeros(1)  # an attribute set on a returned graph stays there
        assert "extra" not in ds[i]
    # above the budget nothing is kept, and the graphs are the same
    monkeypatch.setattr(stored_graphs, "CACHE_BYTES", len(ds) * stored_graphs.GRAPH_OBJECT_BYTES)
    big = load(tmp_path / "root", csv, pre_transform=pre, num_workers=0)
    assert big._graphs._kept is None
    for i in range(len(big)):
        assert_same_graph(big[i], want[i])


def test_killed_processing_resumes_after_its_last_chunk(tmp_path, monkeypatch):
    csv, smiles = write_csv(tmp_path / "mols.csv")
    pre = AddShortestPathDistance()
    real_commit = GraphStoreWriter.commit

    def killed(self, info):
        real_commit(self, info)
        if info["rows"] >= 20:
            raise KeyboardInterrupt

    monkeypatch.setattr(GraphStoreWriter, "commit", killed)
    with pytest.raises(KeyboardInterrupt):
        load(tmp_path / "root", csv, pre_transform=pre, chunk_rows=10, num_workers=0)
    monkeypatch.setattr(GraphStoreWriter, "commit", real_commit)
    seen = []
    real_rows = store_builder.rows_to_columns

    def counting(items, **kwargs):
        seen.extend(r for r, _, _ in items)
        return real_rows(items, **kwargs)

    monkeypatch.setattr(store_builder, "rows_to_columns", counting)
    ds = load(tmp_path / "root", csv, pre_transform=pre, chunk_rows=10, num_workers=0)
    assert seen == list(range(20, len(smiles)))
    want, _, _ = reference(smiles, csv, pre)
    assert len(ds) == len(want)
    for i in range(len(ds)):
        assert_same_graph(ds[i], want[i])


def test_writer_and_reader(tmp_path):
    writer = GraphStoreWriter(str(tmp_path))
    # [2, E] blocks joined along axis 1 through one part file per row
    writer.append("pairs", np.array([[0, 1], [1, 0]], dtype=np.int32), [2], cat_dim=1)
    writer.append("pairs", np.array([[5], [6]], dtype=np.int32), [1], cat_dim=1)
    writer.append_strings("text", ["ä", "", "CCO"])
    with pytest.raises(ValueError, match="changes from"):
        writer.append("pairs", np.zeros((2, 1), dtype=np.int64), [1], cat_dim=1)
    with pytest.raises(ValueError, match="counts add up"):
        writer.append("pairs", np.zeros((2, 3), dtype=np.int32), [1], cat_dim=1)
    writer.finish({"what": "test"})
    columns, meta = read_store(str(tmp_path))
    assert meta == {"what": "test"}
    assert columns["pairs"].values.tolist() == [[0, 1, 5], [1, 0, 6]]
    assert columns["pairs"].slices.tolist() == [0, 2, 3] and columns["pairs"].cat_dim == 1
    text = StringColumn(columns["text"].values, columns["text"].slices)
    assert list(text) == ["ä", "", "CCO"] and text[-1] == "CCO"
    with open(osp.join(tmp_path, "pairs.bin"), "ab") as handle:
        handle.write(b"\0")
    with pytest.raises(CorruptCacheError, match="pairs.bin"):
        read_store(str(tmp_path))


def test_categorical_features_beyond_a_byte_are_refused_by_name():
    from torch_geometric.data import Data

    graph = Data(x=torch.tensor([[3], [300]]), edge_index=torch.tensor([[0, 1], [1, 0]]),
                 num_nodes=2)
    with pytest.raises(ValueError, match=r"graph attribute 'x' holds values in \[3, 300\], "
                                         r"outside uint8"):
        stored_graphs.graphs_to_columns([graph])
    graph.x = torch.tensor([[0.5], [300.0]])  # floating features are stored as they are
    columns = {name: values for name, values, *_ in stored_graphs.graphs_to_columns([graph])}
    assert columns["graph.x"].dtype == np.float32
    assert columns["graph.edge_index"].dtype == np.int32
