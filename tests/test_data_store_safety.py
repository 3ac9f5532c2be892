"""The CSV store under the accidents of real use: two processes processing one new CSV at once
both end with the same good cache (they take turns on a lock); a changed byte in a column file is
found by its checksum and rebuilt with a warning naming the file; a killed processing resumes
after its completed chunks, says so, and a partial store whose bytes changed starts again."""

import os
import os.path as osp
import subprocess
import sys
import time
import warnings
import zlib

import numpy as np
import pandas as pd
import pytest

from graph_urpe.data.cache import CorruptCacheError
from graph_urpe.data.csv import store_builder
from graph_urpe.data.csv.dataset import SmilesCSVDataset
from graph_urpe.data.store import read_store
from graph_urpe.data.store_writer import GraphStoreWriter
from graph_urpe.transforms import AddShortestPathDistance

MOLECULES = ["CCO", "c1ccccc1", "CC(=O)O", "CCN(CC)CC", "C", "O=C=O", "c1ccncc1", "CC#N",
             "C1CC1", "OCCO", "CCCl", "NC=O", "C1CCOC1", "FC(F)F", "CC(C)C", "CCS"]

# Run in two processes at once: a pre_transform slow enough (5 ms a graph, 200 graphs) that the
# two processings overlap; prints a digest of every graph read back.
CHILD = """
import sys, time, zlib, warnings
from graph_urpe.data.csv.dataset import SmilesCSVDataset
from graph_urpe.transforms import AddShortestPathDistance

class Slow(AddShortestPathDistance):
    def __call__(self, data):
        time.sleep(0.005)
        return super().__call__(data)

    def __repr__(self):
        return "Slow()"

warnings.simplefilter("error")  # a corrupt-cache warning fails the child
ds = SmilesCSVDataset(sys.argv[1], sys.argv[2], "smiles", ["y"], split="scaffold",
                      pre_transform=Slow(), chunk_rows=16, num_workers=0)
crc = 0
for g in ds:
    for key in ("x", "edge_index", "edge_attr", "y", "spd"):
        crc = zlib.crc32(g[key].numpy().tobytes(), crc)
print(len(ds), crc)
"""


def write_csv(path, n, seed=0):
    rng = np.random.default_rng(seed)
    pd.DataFrame({"smiles": [MOLECULES[int(i)] for i in rng.integers(len(MOLECULES), size=n)],
                  "y": rng.normal(size=n)}).to_csv(path, index=False)
    return str(path)


def digest(ds):
    crc = 0
    for g in ds:
        for key in ("x", "edge_index", "edge_attr", "y", "spd"):
            crc = zlib.crc32(g[key].numpy().tobytes(), crc)
    return f"{len(ds)} {crc}"


def test_two_processes_processing_one_csv_at_once_end_with_one_good_cache(tmp_path):
    csv = write_csv(tmp_path / "c.csv", 200)
    root = str(tmp_path / "root")
    # the children import this checkout's package, whatever the installed one
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(
        [osp.dirname(osp.dirname(osp.abspath(__file__))), os.environ.get("PYTHONPATH", "")])}
    children = [subprocess.Popen([sys.executable, "-c", CHILD, root, csv], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
    results = [child.communicate(timeout=300) for child in children]
    for child, (out, err) in zip(children, results):
        assert child.returncode == 0, err
        assert "corrupt" not in err
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = SmilesCSVDataset(root, csv, "smiles", ["y"], split="scaffold", log=False,
                                 pre_transform=AddShortestPathDistance())
    fresh = SmilesCSVDataset(str(tmp_path / "fresh"), csv, "smiles", ["y"], split="scaffold",
                             log=False, pre_transform=AddShortestPathDistance())
    # the children's graphs equal one processing alone (same transform but its delay)
    assert [out.strip() for out, _ in results] == [digest(fresh)] * 2
    assert len(again) == len(fresh) == 200
    read_store(again.processed_dir)  # sizes, checksums and slices all check out


def kill_after(monkeypatch, rows):
    real_commit = GraphStoreWriter.commit

    def killed(self, info):
        real_commit(self, info)
        if info["rows"] >= rows:
            raise KeyboardInterrupt

    monkeypatch.setattr(GraphStoreWriter, "commit", killed)
    return real_commit


def count_rows(monkeypatch):
    seen = []
    real_rows = store_builder.rows_to_columns

    def counting(items, **kwargs):
        seen.extend(r for r, _, _ in items)
        return real_rows(items, **kwargs)

    monkeypatch.setattr(store_builder, "rows_to_columns", counting)
    return seen


def load(root, csv, **kwargs):
    return SmilesCSVDataset(str(root), csv, "smiles", ["y"], pre_transform=AddShortestPathDistance(),
                            chunk_rows=10, num_workers=0, **kwargs)


def test_a_killed_processing_resumes_its_completed_chunks_and_says_so(tmp_path, monkeypatch,
                                                                       capsys):
    csv = write_csv(tmp_path / "c.csv", 35)
    real_commit = kill_after(monkeypatch, 10)
    with pytest.raises(KeyboardInterrupt):
        load(tmp_path / "root", csv, log=False)
    monkeypatch.setattr(GraphStoreWriter, "commit", real_commit)
    seen = count_rows(monkeypatch)
    capsys.readouterr()
    ds = load(tmp_path / "root", csv)
    lines = [line for line in capsys.readouterr().err.splitlines() if "resuming" in line]
    assert lines == [("Processing c.csv: resuming: 10 of 35 rows already processed (kept per "
                      "completed chunk of 10 rows)")]
    assert seen == list(range(10, 35))
    assert digest(ds) == digest(load(tmp_path / "fresh", csv, log=False))


def test_a_partial_store_whose_bytes_changed_starts_again(tmp_path, monkeypatch):
    csv = write_csv(tmp_path / "c.csv", 35)
    real_commit = kill_after(monkeypatch, 20)
    with pytest.raises(KeyboardInterrupt):
        load(tmp_path / "root", csv, log=False)
    monkeypatch.setattr(GraphStoreWriter, "commit", real_commit)
    folder = osp.join(str(tmp_path / "root"), "processed")
    (key,) = [name for name in os.listdir(folder) if not name.endswith(".lock")]
    path = osp.join(folder, key, "graph.y.bin")
    with open(path, "r+b") as handle:  # one byte of the first, committed chunk
        handle.seek(5)
        byte = handle.read(1)
        handle.seek(5)
        handle.write(bytes([byte[0] ^ 0xFF]))
    seen = count_rows(monkeypatch)
    with pytest.warns(UserWarning, match="graph.y.bin.*checksum.*first row"):
        ds = load(tmp_path / "root", csv, log=False)
    assert seen == list(range(35))
    assert digest(ds) == digest(load(tmp_path / "fresh", csv, log=False))


def test_a_flipped_byte_is_refused_by_read_store(tmp_path):
    writer = GraphStoreWriter(str(tmp_path))
    writer.append("pairs", np.arange(6, dtype=np.int32).reshape(2, 3), [1, 2], cat_dim=1)
    writer.append("y", np.linspace(0, 1, 3, dtype=np.float32), [1, 2])
    writer.finish({})
    read_store(str(tmp_path))
    for name in ("pairs.bin", "y.bin"):
        path = tmp_path / name
        blob = bytearray(path.read_bytes())
        blob[-1] ^= 1
        path.write_bytes(bytes(blob))
        with pytest.raises(CorruptCacheError, match=f"{name}.*CRC-32"):
            read_store(str(tmp_path))
        blob[-1] ^= 1
        path.write_bytes(bytes(blob))
        read_store(str(tmp_path))


def _small_store(folder) -> None:
    writer = GraphStoreWriter(str(folder))
    writer.append("pairs", np.arange(6, dtype=np.int32).reshape(2, 3), [1, 2], cat_dim=1)
    writer.append("y", np.linspace(0, 1, 3, dtype=np.float32), [1, 2])
    writer.finish({})
    time.sleep(0.05)  # older than the record a check writes by more than a clock tick


def _crc_reads(monkeypatch) -> list:
    from graph_urpe.data import store

    reads, crc32 = [], store.file_crc32
    monkeypatch.setattr(store, "file_crc32", lambda path: reads.append(osp.basename(path)) or
                        crc32(path))
    return reads


def test_a_store_is_checksummed_once_then_opened_by_its_files_identity(tmp_path, monkeypatch):
    """The first open reads every byte (CRC-32) and records the files' identity in
    ``verified.json``; later opens read none; a byte changed after that, at once (the same tick
    of the file system's clock) or later, is found again."""
    _small_store(tmp_path)
    reads = _crc_reads(monkeypatch)
    read_store(str(tmp_path))
    assert sorted(reads) == ["pairs.bin", "pairs.slices.bin", "y.bin", "y.slices.bin"]
    assert (tmp_path / "verified.json").is_file()
    reads.clear()
    columns, _ = read_store(str(tmp_path))
    assert reads == []
    assert columns["y"].values.tolist() == pytest.approx([0.0, 0.5, 1.0])
    with open(tmp_path / "y.bin", "r+b") as handle:  # in place: same inode, same size
        handle.seek(4)
        handle.write(b"\x00\x00\x80\x7f")
    with pytest.raises(CorruptCacheError, match="y.bin.*CRC-32"):
        read_store(str(tmp_path))


def test_a_copied_store_or_any_other_record_is_checked_in_full(tmp_path, monkeypatch):
    """A copy (other inodes), a touched file (another change time) or a ``verified.json``
    that is not the record of this store's files (garbage, another store's, a folder) means
    the full check: a changed byte is refused whatever the record says."""
    import json
    import shutil

    _small_store(tmp_path / "a")
    read_store(str(tmp_path / "a"))
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    reads = _crc_reads(monkeypatch)
    read_store(str(tmp_path / "b"))
    assert len(reads) == 4
    time.sleep(0.05)
    reads.clear()
    os.utime(tmp_path / "b" / "y.bin")
    read_store(str(tmp_path / "b"))
    assert len(reads) == 4
    stamp = (tmp_path / "a" / "verified.json").read_text()
    path = tmp_path / "b" / "y.bin"
    blob = bytearray(path.read_bytes())
    blob[0] ^= 1
    path.write_bytes(bytes(blob))
    for record in [stamp, "{}", "[1, 2]", "not json", json.dumps({"files": None}),
                   (tmp_path / "b" / "verified.json").read_text()]:
        (tmp_path / "b" / "verified.json").write_text(record)
        with pytest.raises(CorruptCacheError, match="y.bin.*CRC-32"):
            read_store(str(tmp_path / "b"))
    (tmp_path / "b" / "verified.json").unlink()
    (tmp_path / "b" / "verified.json").mkdir()
    with pytest.raises(CorruptCacheError, match="y.bin.*CRC-32"):
        read_store(str(tmp_path / "b"))


def test_a_store_in_a_folder_that_cannot_be_written_is_checked_at_every_open(tmp_path,
                                                                              monkeypatch):
    from graph_urpe.data import store
    from graph_urpe.files import OutputError

    _small_store(tmp_path)

    def refuse(path, value):
        raise OutputError(13, f"{path}: permission denied")

    monkeypatch.setattr(store, "write_json", refuse)
    reads = _crc_reads(monkeypatch)
    for _ in range(2):
        reads.clear()
        read_store(str(tmp_path))
        assert len(reads) == 4
