"""PCQM4Mv2 folder format: the QM9 stand-in builder, OGB's own PygPCQM4Mv2Dataset reading it,
the parallel subclass producing the same graphs, and hidden labels."""

import shutil
import socket
import zipfile

import build_pcqm4mv2
import numpy as np
import pytest
import torch
from build_pcqm4mv2 import read_qm9, write_pcqm4mv2_folder
from ogb.lsc import PygPCQM4Mv2Dataset

from graph_urpe.data.cache import allow_safe_globals
from graph_urpe.data.ogb import (
    PCQM4Mv2Dataset,
    StandinTestLabels,
)

SMILES = ["C", "N", "O", "CC", "CO", "CN", "C#C", "C=O", "CCO", "CC#N", "C1CC1", "NC=O",
          "OCCO", "CC(C)C", "c1ccccc1", "c1ccncc1", "FC(F)F", "CC(=O)O", "N#N", "O=C=O",
          "CCN", "CCCO", "OC1CC1", "C1CO1"]


@pytest.fixture
def offline(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    import ogb.lsc.pcqm4mv2_pyg as module

    monkeypatch.setattr(module, "download_url", refuse)
    monkeypatch.setattr(module, "decide_download", refuse)


def test_official_loader_reads_standin(tmp_path, offline):
    smiles = SMILES[:5] + ["C(("] + SMILES[5:]
    gaps = np.linspace(4.0, 12.0, len(smiles))
    with pytest.warns(UserWarning, match="skipped 1 of 25"):
        write_pcqm4mv2_folder(str(tmp_path / "a"), smiles, gaps, num_workers=0)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    kept = [i for i, s in enumerate(smiles) if s != "C(("]
    allow_safe_globals()
    official = PygPCQM4Mv2Dataset(str(tmp_path / "a"))
    split = official.get_idx_split()
    assert sorted(split) == ["test-challenge", "test-dev", "train", "valid"]
    assert sum(len(v) for v in split.values()) == len(official) == 24
    hidden = set(split["test-dev"].tolist() + split["test-challenge"].tolist())
    for i, graph in enumerate(official):
        if i in hidden:
            assert torch.isnan(graph.y).all()
        else:
            assert graph.y.item() == pytest.approx(gaps[kept[i]], rel=1e-6)
    ours = PCQM4Mv2Dataset(str(tmp_path / "b"), num_workers=0, download=False)
    assert len(ours) == len(official)
    for a, b in zip(official, ours):
        assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index)
        assert torch.equal(a.edge_attr, b.edge_attr)
        assert b.y.shape == (1, 1)
        assert torch.equal(a.y.view(-1).isnan(), b.y.view(-1).isnan())
    # Hidden labels restored for local scoring.
    dev = split["test-dev"].tolist()
    restore = StandinTestLabels(str(tmp_path / "b"))
    restored = [restore(ours[i]).y.item() for i in dev]
    assert restored == pytest.approx([gaps[kept[i]] for i in dev], rel=1e-6)


def test_offline_error_and_bad_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="build_pcqm4mv2.py"):
        PCQM4Mv2Dataset(str(tmp_path), download=False)
    with pytest.raises(ValueError, match="finite"):
        write_pcqm4mv2_folder(str(tmp_path), ["C", "CC"], [1.0, np.nan])


def test_qm9_reader_converts_hartree_to_ev(tmp_path):
    wheel = tmp_path / "qm9pack-1.0.3-py3-none-any.whl"
    header = "XYZ_file,Index,SMILES,HOMO_LUMO_gap_au,Other\n"
    parts = [header + '"a",2,"N",0.3399,1\n', header + '"b",1,"C",0.5048,2\n', header]
    with zipfile.ZipFile(wheel, "w") as archive:
        for member, text in zip(build_pcqm4mv2.QM9_MEMBERS, parts):
            archive.writestr(member, text)
    qm9 = read_qm9(str(wheel))
    assert qm9["smiles"].tolist() == ["C", "N"] and qm9["qm9_index"].tolist() == [1, 2]
    # CH4: 0.5048 Hartree = 13.7363 eV (1 Hartree = 27.211386245988 eV).
    assert qm9["gap_ev"].tolist() == pytest.approx([0.5048 * 27.211386245988,
                                                   0.3399 * 27.211386245988])
