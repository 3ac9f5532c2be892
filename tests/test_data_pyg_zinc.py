"""PyG's own ZINC loader reading a raw folder written by datasets/build_pyg_zinc.py."""

import pickle
import socket
import urllib.error

import pandas as pd
import pytest
import torch
from build_pyg_zinc import write_pyg_zinc_raw
from torch_geometric.datasets import ZINC

from graph_urpe.data.families import load_dataset
from graph_urpe.data.featurize import smiles_to_zinc_graph
from graph_urpe.data.statistics import summarize
from graph_urpe.data.zinc import (
    EMBEDDED_ZINC_LIKE,
    PYG_ZINC_SOURCE,
    STANDIN_MARKER,
    ZINC_LIKE_STANDIN,
    ZincDownloadError,
    pyg_zinc,
    zinc_source,
)
from graph_urpe.transforms import AddShortestPathDistance


@pytest.fixture
def offline(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.fixture
def molecules():
    frame = pd.read_csv(EMBEDDED_ZINC_LIKE)
    frame = pd.concat([frame[frame.split == s].head(n) for s, n in
                       (("train", 10), ("valid", 5), ("test", 5))], ignore_index=True)
    # Charged atoms (not in MOSES) exercise more of the 28 types.
    extra = pd.DataFrame({"smiles": ["C[NH3+]", "CC(=O)[O-]"], "target": [0.5, -0.5],
                          "split": ["train", "test"]})
    return pd.concat([frame, extra], ignore_index=True)


def test_pyg_zinc_reads_builder_output(tmp_path, molecules, offline):
    root = str(tmp_path / "zinc")
    write_pyg_zinc_raw(root, molecules["smiles"], molecules["target"], molecules["split"],
                       num_workers=0)
    with open(tmp_path / "zinc" / "raw" / "train.pickle", "rb") as f:
        records = pickle.load(f)
    assert set(records[0]) == {"num_atom", "atom_type", "bond_type", "logP_SA_cycle_normalized"}
    for split, pyg_split in (("train", "train"), ("valid", "val"), ("test", "test")):
        expected_rows = molecules[molecules.split == split]
        loaded = ZINC(root, subset=True, split=pyg_split)  # PyG's very loader
        assert len(loaded) == len(expected_rows)
        for graph, (_, row) in zip(loaded, expected_rows.iterrows()):
            ours = smiles_to_zinc_graph(row["smiles"])
            assert torch.equal(graph.x, ours.x)
            assert torch.equal(graph.edge_index, ours.edge_index)
            assert torch.equal(graph.edge_attr, ours.edge_attr.view(-1))
            assert graph.y.item() == pytest.approx(row["target"], abs=1e-6)


def test_accessor_layout_and_offline_error(tmp_path, molecules, offline):
    root = str(tmp_path / "zinc")
    with pytest.raises(FileNotFoundError, match="build_pyg_zinc.py"):
        pyg_zinc(root, download=False)
    write_pyg_zinc_raw(root, molecules["smiles"], molecules["target"], molecules["split"],
                       num_workers=0)
    ds = pyg_zinc(root, split="valid", download=False, pre_transform=AddShortestPathDistance())
    graph = ds[0]
    assert graph.y.shape == (1, 1) and graph.edge_attr.shape == (graph.num_edges, 1)
    assert graph.spd.numel() == graph.num_nodes ** 2
    with pytest.raises(ValueError, match="split must be"):
        pyg_zinc(root, split="dev")


def test_builder_refuses_empty_split(tmp_path):
    with pytest.raises(ValueError, match="'test' has no usable molecule"):
        write_pyg_zinc_raw(str(tmp_path / "z"), ["C", "CC"], [0.0, 1.0], ["train", "valid"],
                           num_workers=0)


def test_failed_download_is_one_line_and_leaves_no_folder(tmp_path, monkeypatch):
    def unreachable(*args, **kwargs):
        raise urllib.error.URLError(OSError(101, "Network is unreachable"))

    from torch_geometric.datasets import zinc as pyg_zinc_module

    monkeypatch.setattr(pyg_zinc_module, "download_url", unreachable)  # as urllib fails offline
    root = tmp_path / "data" / "zinc"
    with pytest.raises(ZincDownloadError) as info:
        pyg_zinc(str(root), download=True)
    message = str(info.value)
    assert "\n" not in message
    assert f"python datasets/build_pyg_zinc.py --root {root}" in message
    assert not root.exists()  # no empty data/zinc left for the builder to trip over


def test_builder_fills_empty_or_partial_folder_and_labels_it(tmp_path, molecules, offline):
    root = tmp_path / "zinc"
    (root / "raw").mkdir(parents=True)  # what a failed download used to leave
    (root / "raw" / "train.index").write_text("0\n")
    write_pyg_zinc_raw(str(root), molecules["smiles"], molecules["target"], molecules["split"],
                       num_workers=0)
    assert (root / STANDIN_MARKER).read_text().strip() == ZINC_LIKE_STANDIN
    assert zinc_source(str(root)) == ZINC_LIKE_STANDIN
    assert zinc_source(str(tmp_path / "elsewhere")) == PYG_ZINC_SOURCE
    with pytest.raises(FileExistsError, match="holds a ZINC dataset.*--overwrite"):
        write_pyg_zinc_raw(str(root), molecules["smiles"], molecules["target"],
                           molecules["split"], num_workers=0)
    loaded = load_dataset("zinc", root=str(tmp_path))
    assert loaded.source == ZINC_LIKE_STANDIN
    assert f"source: {ZINC_LIKE_STANDIN}" in summarize(loaded)
    assert len(loaded.splits["train"]) == int((molecules.split == "train").sum())
