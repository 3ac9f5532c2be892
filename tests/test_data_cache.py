"""Processed-dataset caches are read back safely on every dataset path: a pickled payload in
``pre_transform.pt`` or in the processed data file is refused (naming the file) and never runs; a
corrupt cache (truncated data, empty split file) is rebuilt with a warning naming the file."""

import glob
import os
import os.path as osp
import socket
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from build_ogb import write_ogb_graphprop_folder
from build_pcqm4mv2 import write_pcqm4mv2_folder
from build_pyg_zinc import write_pyg_zinc_raw

from graph_urpe.data.cache import CorruptCacheError, UnsafeCacheError, safe_torch_load
from graph_urpe.data.csv.dataset import SmilesCSVDataset
from graph_urpe.data.ogb import PCQM4Mv2Dataset, ogb_graphprop_dataset
from graph_urpe.data.zinc import ZincLikeDataset, pyg_zinc
from graph_urpe.transforms import AddShortestPathDistance

SMILES = ["CCO", "c1ccccc1", "CC(=O)O", "CCN", "CCCC", "C1CC1", "CO", "CC#N", "OCCO", "CCCl",
          "NC=O", "C1CCOC1", "c1ccncc1", "CC(C)C", "FC(F)F", "O=C=O", "CCCO", "OC1CC1", "C1CO1",
          "CCS"]
SPLITS = ["train"] * 12 + ["valid"] * 4 + ["test"] * 4


class Payload:
    """Unpickling this creates a marker file: proof that code in a cache file ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture
def offline(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.fixture
def csv(tmp_path):
    path = tmp_path / "mols.csv"
    pd.DataFrame({"smiles": SMILES, "target": np.linspace(-1, 1, len(SMILES)),
                  "split": SPLITS}).to_csv(path, index=False)
    return str(path)


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _csv(tmp_path, csv):
    return quiet(SmilesCSVDataset, str(tmp_path / "csv"), csv, split="split", log=False,
                 pre_transform=AddShortestPathDistance())


def _zinc_like(tmp_path, csv):
    return quiet(ZincLikeDataset, str(tmp_path / "zl"), split=None, csv_path=csv, log=False)


def _pyg_zinc(tmp_path, csv):
    root = str(tmp_path / "zinc")
    if not osp.exists(root):
        frame = pd.read_csv(csv)
        quiet(write_pyg_zinc_raw, root, frame.smiles, frame.target, frame.split, num_workers=0)
    return quiet(pyg_zinc, root, split="train", download=False)


def _ogb(tmp_path, csv):
    root = str(tmp_path / "ogb")
    if not osp.exists(root):
        labels = (np.arange(len(SMILES)) % 2).astype(float)[:, None]
        quiet(write_ogb_graphprop_folder, root, "ogbg-molhiv", SMILES, labels,
              label_names=["HIV_active"], num_workers=0)
    return quiet(ogb_graphprop_dataset, "ogbg-molhiv", root=root, download=False)


def _pcqm(tmp_path, csv):
    root = str(tmp_path / "pcqm")
    if not osp.exists(root):
        quiet(write_pcqm4mv2_folder, root, SMILES, np.linspace(3, 9, len(SMILES)), num_workers=0)
    return quiet(PCQM4Mv2Dataset, root, num_workers=0, download=False)


LOADERS = {"csv": _csv, "zinc-like": _zinc_like, "pyg-zinc": _pyg_zinc, "ogb": _ogb,
           "pcqm4mv2": _pcqm}


def _processed_files(tmp_path, name):
    """(pre_transform.pt, the processed data file) of the dataset's cache."""
    data_names = {"csv": "data.pt", "zinc-like": "data.pt", "pyg-zinc": "train.pt",
                  "ogb": "geometric_data_processed.pt", "pcqm4mv2": "geometric_data_processed.pt"}
    (pre,) = glob.glob(str(tmp_path / "**" / "pre_transform.pt"), recursive=True)
    return pre, osp.join(osp.dirname(pre), data_names[name])


@pytest.mark.parametrize("name", ["pyg-zinc", "ogb", "pcqm4mv2"])
@pytest.mark.parametrize("target", ["pre_transform", "data"])
def test_payload_is_refused_and_never_runs(tmp_path, csv, offline, name, target):
    loader = LOADERS[name]
    first = loader(tmp_path, csv)
    assert len(first) > 0
    pre, data = _processed_files(tmp_path, name)
    victim = pre if target == "pre_transform" else data
    marker = tmp_path / "marker"
    torch.save(Payload(marker) if target == "pre_transform" else (Payload(marker), {}), victim)
    assert not marker.exists()  # saving does not run it
    with pytest.raises(UnsafeCacheError, match=victim.replace("\\", "\\\\")) as info:
        loader(tmp_path, csv)
    assert "Delete" in str(info.value)
    assert not marker.exists()


def test_safe_torch_load_outcomes(tmp_path):
    marker = tmp_path / "marker"
    torch.save({"a": torch.arange(3)}, tmp_path / "ok.pt")
    assert torch.equal(safe_torch_load(str(tmp_path / "ok.pt"))["a"], torch.arange(3))
    torch.save([Payload(marker)], tmp_path / "bad.pt")
    with pytest.raises(UnsafeCacheError, match="bad.pt") as info:
        safe_torch_load(str(tmp_path / "bad.pt"))
    # one line naming the refused object, never PyTorch's advice to retry with weights_only=False
    message = str(info.value)
    assert "weights_only" not in message and "\n" not in message
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(CorruptCacheError, match="empty.pt"):
        safe_torch_load(str(tmp_path / "empty.pt"))
    assert not marker.exists()


@pytest.mark.parametrize("damage", ["truncate graph.spd.bin", "empty split.train.bin",
                                    "garble store.json", "shift graph.x.slices.bin",
                                    "flip graph.y.bin", "flip graph.spd.bin"])
def test_corrupt_csv_cache_is_rebuilt(tmp_path, csv, damage):
    first = _csv(tmp_path, csv)
    expected = [(g.x.clone(), g.y.clone(), g.spd.clone()) for g in first]
    split = first.get_idx_split()
    kind, name = damage.split()
    path = osp.join(first.processed_dir, name)
    blob = Path(path).read_bytes()
    if kind == "truncate":
        Path(path).write_bytes(blob[: len(blob) // 2])
    elif kind == "empty":
        Path(path).write_bytes(b"")
    elif kind == "garble":
        Path(path).write_bytes(b"{not json" + blob[9:])
    elif kind == "flip":  # same size and bounds, one byte changed (found by its CRC-32 only)
        changed = bytearray(blob)
        changed[len(blob) // 3] ^= 0x5A
        Path(path).write_bytes(bytes(changed))
    else:  # same size, slices that no longer end at the column's length
        ends = np.frombuffer(blob, dtype=np.int64).copy()
        ends[-1] += 1
        Path(path).write_bytes(ends.tobytes())
    del first
    with pytest.warns(UserWarning, match=f"{name}.*corrupt.*rebuilding"):
        again = SmilesCSVDataset(str(tmp_path / "csv"), csv, split="split", log=False,
                                 pre_transform=AddShortestPathDistance())
    assert len(again) == len(expected)
    for g, (x, y, spd) in zip(again, expected):
        assert torch.equal(g.x, x) and torch.equal(g.y, y) and torch.equal(g.spd, spd)
    for k, v in again.get_idx_split().items():
        assert torch.equal(v, split[k])
    assert os.path.getsize(path) > 0


@pytest.mark.parametrize("name", ["csv", "zinc-like"])
def test_store_holds_no_pickle_and_a_planted_one_never_runs(tmp_path, csv, offline, name):
    first = LOADERS[name](tmp_path, csv)
    folder = first.processed_dir
    for entry in os.listdir(folder):  # bytes, JSON and CSV: nothing a loader could unpickle
        head = Path(folder, entry).read_bytes()[:2]
        assert head[:1] != b"\x80" and head != b"PK", entry
    marker = tmp_path / "marker"
    torch.save(Payload(marker), osp.join(folder, "data.pt"))  # the old cache's file name
    again = LOADERS[name](tmp_path, csv)
    assert len(again) == len(first) and not marker.exists()
    torch.save(Payload(marker), osp.join(folder, "pre_transform.pt"))
    with pytest.raises(UnsafeCacheError, match="pre_transform.pt"):
        LOADERS[name](tmp_path, csv)
    assert not marker.exists()


def test_corrupt_ogb_cache_is_rebuilt(tmp_path, csv, offline):
    first = _ogb(tmp_path, csv)
    _, data = _processed_files(tmp_path, "ogb")
    Path(data).write_bytes(Path(data).read_bytes()[:100])
    with pytest.warns(UserWarning, match="geometric_data_processed.pt.*corrupt"):
        again = ogb_graphprop_dataset("ogbg-molhiv", root=str(tmp_path / "ogb"), download=False)
    assert len(again) == len(first)
    assert all(torch.equal(a.x, b.x) for a, b in zip(first, again))


def test_other_pre_transform_is_refused_not_stale(tmp_path, csv, offline):
    _pyg_zinc(tmp_path, csv)
    with pytest.raises(ValueError, match="processed with pre_transform"):
        quiet(pyg_zinc, str(tmp_path / "zinc"), split="train", download=False,
              pre_transform=AddShortestPathDistance())
