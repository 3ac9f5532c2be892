"""Atomic outputs: a failed write leaves the previous file intact and names the path."""

from __future__ import annotations

import errno

import pandas as pd
import pytest

from graph_urpe.files import OutputError, atomic_write, atomic_write_csv, check_writable


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "out.csv"
    atomic_write_csv(pd.DataFrame({"a": [1, 2]}), str(path))
    with pytest.raises(RuntimeError, match="disk died"), atomic_write(str(path)) as handle:
        handle.write("a\n9\n")
        raise RuntimeError("disk died")  # as a full disk or a kill mid-write would
    assert pd.read_csv(path)["a"].tolist() == [1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]  # no temporary left


def test_no_space_is_one_line_naming_the_path(tmp_path, monkeypatch):
    path = tmp_path / "out.csv"

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("os.replace", full)
    with pytest.raises(OutputError, match="no space left") as info:
        atomic_write_csv(pd.DataFrame({"a": [1]}), str(path))
    assert str(path) in str(info.value)
    assert not path.exists()


def test_check_writable_refuses_folders_and_unwritable_places(tmp_path):
    with pytest.raises(OutputError, match="folder"):
        check_writable(str(tmp_path))
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="cannot write"):
        check_writable(str(tmp_path / "file" / "out.csv"))
    check_writable(str(tmp_path / "new" / "out.csv"))  # creates the folder
    assert (tmp_path / "new").is_dir()


TORCH_FULL_DISK = ("[enforce fail at inline_container.cc:664] . unexpected pos 4864 vs 4758\n"
                   "frame #0: c10::ThrowEnforceNotMet(...)")


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_torch_save_runtime_error_on_a_full_disk_is_one_line_and_leaves_no_temp(tmp_path,
                                                                                 monkeypatch):
    """torch.save reports ENOSPC as a RuntimeError, not an OSError: it must be caught too."""
    import torch

    from graph_urpe.cli.run import AtomicCheckpointIO

    path = tmp_path / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint({"w": torch.ones(2)}, path)

    def full(obj, target, *args, **kwargs):
        open(target, "wb").close()  # the 0-byte temp file a full disk leaves
        raise RuntimeError(TORCH_FULL_DISK)

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(OutputError) as info:
        AtomicCheckpointIO().save_checkpoint({"w": torch.zeros(2)}, path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message and "full" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]  # no temp file left
    monkeypatch.undo()
    assert torch.equal(torch.load(path, weights_only=True)["w"], torch.ones(2))  # intact


@pytest.mark.parametrize("where", ["os.fsync", "os.replace"])
def test_no_space_at_any_stage_of_a_write_leaves_no_temp(tmp_path, monkeypatch, where):
    path = tmp_path / "out.csv"
    monkeypatch.setattr(where, _no_space)
    with pytest.raises(OutputError, match="no space left") as info:
        atomic_write_csv(pd.DataFrame({"a": [1]}), str(path))
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_check_writable_notices_a_full_disk(tmp_path, monkeypatch):
    """An empty probe file fits even on a full disk: the probe writes data and syncs it."""
    monkeypatch.setattr("os.fsync", _no_space)
    with pytest.raises(OutputError, match="no space left") as info:
        check_writable(str(tmp_path / "out.csv"))
    assert str(tmp_path / "out.csv") in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_data_reaches_the_disk_before_the_rename(tmp_path, monkeypatch):
    import os

    calls = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr("os.fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr("os.replace", lambda a, b: (calls.append("replace"), real_replace(a, b))[1])
    atomic_write_csv(pd.DataFrame({"a": [1]}), str(tmp_path / "out.csv"))
    assert calls[:2] == ["fsync", "replace"]


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_outputs_honour_the_umask(tmp_path, umask):
    import os

    import torch

    from graph_urpe.cli.run import AtomicCheckpointIO

    old = os.umask(umask)
    try:
        atomic_write_csv(pd.DataFrame({"a": [1]}), str(tmp_path / "out.csv"))
        AtomicCheckpointIO().save_checkpoint({"w": torch.ones(1)}, tmp_path / "x.ckpt")
        plain = tmp_path / "plain"
        plain.write_text("x")  # what open() gives under this umask
    finally:
        os.umask(old)
    expected = 0o666 & ~umask
    assert plain.stat().st_mode & 0o777 == expected
    for name in ("out.csv", "x.ckpt"):
        assert (tmp_path / name).stat().st_mode & 0o777 == expected, name


def test_two_writers_of_one_file_use_their_own_temporary_files(tmp_path):
    path = str(tmp_path / "out.csv")
    with atomic_write(path) as first, atomic_write(path) as second:
        assert first.name != second.name
        first.write("a\n1\n")
        second.write("a\n2\n")
    assert pd.read_csv(path)["a"].tolist() == [1]  # the last to finish wins, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_run_folders_are_claimed_exclusively(tmp_path, monkeypatch):
    import os
    from concurrent.futures import ThreadPoolExecutor

    from graph_urpe.files import claim_run_folder

    (tmp_path / "runs" / "version_0").mkdir(parents=True)
    (tmp_path / "runs" / "version_3").mkdir()
    (tmp_path / "runs" / "version_x").mkdir()
    assert claim_run_folder(str(tmp_path / "runs")) == (4, str(tmp_path / "runs" / "version_4"))
    # another process creates version_5 between our listing and our mkdir: take version_6
    real_mkdir = os.mkdir

    def racing_mkdir(path, *args):
        if path.endswith("version_5"):
            real_mkdir(path)
        return real_mkdir(path, *args)

    monkeypatch.setattr("os.mkdir", racing_mkdir)
    assert claim_run_folder(str(tmp_path / "runs"))[0] == 6
    monkeypatch.undo()
    with ThreadPoolExecutor(8) as pool:
        versions = list(pool.map(lambda _: claim_run_folder(str(tmp_path / "many"))[0], range(16)))
    assert sorted(versions) == list(range(16))
