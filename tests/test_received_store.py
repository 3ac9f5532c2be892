"""A processed-data store someone shipped with their CSV is data (issue 39, cases 2, 3 and 5): a
planted ``progress.json`` naming paths outside the store truncates nothing, a symbolic link in
the store is refused before anything is written through it, and a store built from another CSV
(copied into this CSV's key folder) is rebuilt, never trained on."""

import json
import os
import os.path as osp

import numpy as np
import pandas as pd
import pytest
from test_received_run_state import _leaves

from graph_urpe.data.csv.dataset import SmilesCSVDataset
from graph_urpe.data.store import PROGRESS, STORE_FORMAT
from graph_urpe.data.store_writer import GraphStoreWriter
from graph_urpe.owned import LinkRefusedError, open_no_follow, own_name, refuse_links
from graph_urpe.transforms import AddShortestPathDistance

MOLECULES = ["CCO", "c1ccccc1", "CC(=O)O", "CCN(CC)CC", "C", "O=C=O", "c1ccncc1", "CC#N"]


def write_csv(path, values):
    pd.DataFrame({"smiles": MOLECULES[:len(values)], "y": values}).to_csv(path, index=False)
    return str(path)


def load(root, csv, **kwargs):
    return SmilesCSVDataset(str(root), csv, "smiles", ["y"], pre_transform=AddShortestPathDistance(),
                            split="random", num_workers=0, log=False, **kwargs)


def store_folder(root):
    folder = osp.join(str(root), "processed")
    (key,) = [n for n in os.listdir(folder) if not n.endswith(".lock")]
    return osp.join(folder, key)


def victim(tmp_path, text="keep me\n"):
    path = tmp_path / "outside" / "victim.txt"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["ABS", "../../outside/victim.txt", "sub/victim.txt"])
def test_a_planted_progress_file_truncates_nothing_outside_the_store(tmp_path, name):
    target = victim(tmp_path)
    folder = tmp_path / "store"
    folder.mkdir()
    planted = str(target) if name == "ABS" else name
    state = {"format": STORE_FORMAT, "columns": {}, "sizes": {planted: 0}, "crcs": {planted: 0},
             "info": {"rows": 5}}
    (folder / PROGRESS).write_text(json.dumps(state))
    writer = GraphStoreWriter(str(folder), resume=True)
    assert writer.committed == {}  # not resumed: the file is not one this writer wrote
    assert target.read_text() == "keep me\n"


def test_a_progress_file_naming_a_column_outside_the_store_is_not_restored(tmp_path):
    target = victim(tmp_path)
    folder = tmp_path / "store"
    folder.mkdir()
    writer = GraphStoreWriter(str(folder))
    writer.append("y", np.arange(3, dtype=np.float32), [1, 2])
    writer.commit({"rows": 2})
    state = json.loads((folder / PROGRESS).read_text())
    # a column named as a path: its file would be <folder>/../outside/victim.txt.slices.bin
    state["columns"]["../outside/victim"] = state["columns"].pop("y")
    (folder / PROGRESS).write_text(json.dumps(state))
    assert GraphStoreWriter(str(folder), resume=True).committed == {}
    assert target.read_text() == "keep me\n"
    assert sorted(os.listdir(tmp_path / "outside")) == ["victim.txt"]


def test_a_link_in_the_store_is_refused_and_its_target_kept(tmp_path):
    target = victim(tmp_path)
    folder = tmp_path / "store"
    folder.mkdir()
    os.symlink(target, folder / "y.slices.bin")
    with pytest.raises(LinkRefusedError, match=r"y\.slices\.bin.*symbolic link.*victim\.txt"):
        GraphStoreWriter(str(folder))
    assert target.read_text() == "keep me\n"


@pytest.mark.parametrize("name", ["config.json", "invalid_rows.csv"])
def test_a_link_among_the_store_files_is_refused_before_processing_writes(tmp_path, name):
    target = victim(tmp_path)
    csv = write_csv(tmp_path / "a.csv", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    load(tmp_path / "root", csv)
    folder = store_folder(tmp_path / "root")
    os.remove(osp.join(folder, "store.json"))  # processed again, writing both files
    path = osp.join(folder, name)
    if osp.exists(path):
        os.remove(path)
    os.symlink(target, path)
    with pytest.raises(LinkRefusedError, match=f"{name} in the processed-data store is a symbolic"):
        load(tmp_path / "root", csv)
    assert target.read_text() == "keep me\n"


def test_a_store_copied_from_another_csv_is_rebuilt_not_used(tmp_path):
    first = write_csv(tmp_path / "a.csv", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    second = write_csv(tmp_path / "b.csv", [10.0, 20.0, 30.0, 40.0, 50.0, 60.0])
    load(tmp_path / "ra", first)
    load(tmp_path / "rb", second)
    a_folder, b_folder = store_folder(tmp_path / "ra"), store_folder(tmp_path / "rb")
    for name in os.listdir(a_folder):  # b's key folder now holds a's store, checksums and all
        os.replace(osp.join(a_folder, name), osp.join(b_folder, name))
    with pytest.warns(UserWarning, match="store.json.*built from another CSV.*rebuilding"):
        ds = load(tmp_path / "rb", second)
    labels = sorted(float(ds[i].y) for i in range(len(ds)))
    assert labels == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]  # b's own molecules, not a's


def test_refuse_links_and_own_name(tmp_path):
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    refuse_links(str(tmp_path / "run"))
    target = victim(tmp_path)
    os.symlink(target, tmp_path / "run" / "checkpoints" / "last.ckpt")
    with pytest.raises(LinkRefusedError, match="last.ckpt in the run folder"):
        refuse_links(str(tmp_path / "run"), what="run folder")
    refuse_links(str(tmp_path / "run"), depth=0)  # one level only: the link is below it
    os.symlink(tmp_path / "outside", tmp_path / "linked")
    with pytest.raises(LinkRefusedError):
        refuse_links(str(tmp_path / "linked"))
    with pytest.raises(LinkRefusedError):
        open_no_follow(str(tmp_path / "run" / "checkpoints" / "last.ckpt"), "wb")
    assert target.read_text() == "keep me\n"
    assert [own_name(n) for n in ("x.bin", "a-1.slices.bin", "../x", "/x", "a/b", "..", ".x",
                                  "", 3, None)] == ["x.bin", "a-1.slices.bin"] + [None] * 8


def test_fuzzed_store_files_are_used_restarted_or_refused_and_touch_nothing_outside(tmp_path):
    """Hypothesis changes one value or key of a store's ``progress.json`` or ``store.json``
    (paths to a victim, names with separators, huge and negative sizes): the writer resumes or
    starts again, :func:`read_store` reads or raises :class:`CorruptCacheError`, and the victim
    outside the store keeps its bytes and is the only file there."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from graph_urpe.data.cache import CorruptCacheError
    from graph_urpe.data.store import MANIFEST, read_store

    target = victim(tmp_path)
    folder = tmp_path / "store"
    folder.mkdir()
    writer = GraphStoreWriter(str(folder))
    writer.append("y", np.arange(6, dtype=np.float32), [2, 4])
    writer.append("pairs", np.arange(12, dtype=np.int32).reshape(2, 6), [2, 4], cat_dim=1)
    writer.commit({"rows": 2})
    progress = json.loads((folder / PROGRESS).read_text())
    writer.finish({"config": {}})
    manifest = json.loads((folder / MANIFEST).read_text())
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    hostile = st.one_of(
        st.sampled_from([str(target), "../outside/victim.txt", "../outside", "/", "..", "",
                         "y.bin", "x/../../outside/victim.txt"]),
        st.integers(-2**62, 2**62), st.none(), st.booleans(), st.text(max_size=6),
        st.lists(st.integers(-3, 3), max_size=3))

    @settings(max_examples=60, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def one(data):
        for name, content in files.items():  # the store as written
            (folder / name).write_bytes(content)
        which, base = data.draw(st.sampled_from([(PROGRESS, progress), (MANIFEST, manifest)]))
        changed = json.loads(json.dumps(base))
        path = data.draw(st.sampled_from(sorted((p for p, _ in _leaves(changed)), key=str)))
        node = changed
        for key in path[:-1]:
            node = node[key]
        if isinstance(node, dict) and data.draw(st.booleans()):
            node[data.draw(hostile.filter(lambda k: isinstance(k, str)))] = node.pop(path[-1])
        else:
            node[path[-1]] = data.draw(hostile)
        (folder / which).write_text(json.dumps(changed))
        if which == PROGRESS:
            os.remove(folder / MANIFEST)
            GraphStoreWriter(str(folder), resume=True)
        else:
            try:
                read_store(str(folder))
            except CorruptCacheError:
                pass
        assert target.read_text() == "keep me\n"
        assert sorted(os.listdir(tmp_path / "outside")) == ["victim.txt"]

    one()
