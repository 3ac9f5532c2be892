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
