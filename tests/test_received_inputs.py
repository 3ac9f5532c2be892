"""Issue 28's "sizes not bounded", "wrong results and lost data" and "not one line" cases outside
the checkpoint reader: each one fast, one line naming the file and the fix, nothing lost."""

from __future__ import annotations

import errno
import os
import re
import socket
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from graph_urpe.cli import main
from graph_urpe.cli.collect import CollectError, read_run
from graph_urpe.data.csv.labels import label_matrix
from graph_urpe.data.csv.reading import read_csv_file
from graph_urpe.data.processing import molecules_to_graphs
from graph_urpe.files import OutputError, atomic_write_csv, lock_run_folder
from graph_urpe.files import remove_stale_temporaries as clean
from tests.test_cli import write_config
from tests.test_trust import checkpoint, state_dict


def test_a_20001_atom_ring_fails_fast_before_featurization():
    ring = "C1" + "C" * 20000 + "1"
    start = time.process_time()
    graphs, errors = molecules_to_graphs([ring, "CCO"], featurization="ogb", max_graph_nodes=128,
                                         num_workers=1, progress=False)
    assert time.process_time() - start < 5
    assert [e.reason for e in errors] == ["graph has 20001 nodes > max_graph_nodes=128"]
    assert [int(g.row) for g in graphs] == [1]
    # Explicit hydrogens are not nodes: [H]-decorated molecules are counted as parse_smiles keeps
    # them (the limit is the graph's node count).
    graphs, errors = molecules_to_graphs(["[H]C([H])([H])[H]", "[2H]C"], featurization="ogb",
                                         max_graph_nodes=1, num_workers=1, progress=False)
    assert [g.num_nodes for g in graphs] == [1] and [e.row for e in errors] == [1]


@pytest.mark.parametrize("content, message", [
    (b"", "is empty (0 bytes)"),
    ("smiles,y\nCCO,1\n".encode("utf-16"), "NUL bytes"),
    ("smiles,y\nCC\u00e9,1\n".encode("latin-1"), "is not UTF-8 text"),
    (b"\x89PNG\r\n\x1a\n\xff\xd8", "is not UTF-8 text"),
    (b"smiles,y,y\nCCO,1,2\n", "names the column(s) ['y'] more than once"),
    (b"\n\nsmiles\n", "no header line"),
    (b'smiles,y\n"CCO,1\n', "not a well-formed CSV"),
])
def test_unreadable_csv_files_are_one_line_naming_the_file(tmp_path, content, message):
    path = tmp_path / "in.csv"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        read_csv_file(str(path))
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ValueError, match="is a folder"):
        read_csv_file(str(tmp_path))


def test_a_label_that_overflows_float32_is_refused():
    frame = pd.DataFrame({"y": ["1.0", "1e300", "2"]})
    with pytest.raises(ValueError, match=r"1 infinite value \(row 1 \(CSV line 3\): 1e\+300\).*float32") as info:
        label_matrix(frame, ["y"], source="mols.csv")
    assert "mols.csv" in str(info.value)
    assert np.isfinite(label_matrix(pd.DataFrame({"y": ["3e38"]}), ["y"], source="m")).all()


@pytest.fixture
def model_ckpt(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return checkpoint(tmp_path / "model.ckpt")


def _predict(capsys, *args):
    with pytest.raises(SystemExit) as info:
        main(["predict", *args])
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 2, err
    return err


def test_predict_never_writes_over_its_inputs_nor_the_users_columns(model_ckpt, tmp_path,
                                                                    capsys):
    before = model_ckpt.read_bytes()
    err = _predict(capsys, "--ckpt_path", str(model_ckpt), "--smiles",
                   "CCO", "--output", str(model_ckpt))
    assert "--ckpt_path" in err and model_ckpt.read_bytes() == before
    inputs = tmp_path / "in.csv"
    inputs.write_text("smiles,error\nCCO,mine\n")
    err = _predict(capsys, "--ckpt_path", str(model_ckpt), "--csv",
                   str(inputs), "--output", str(tmp_path / "link.csv"))
    assert "['error']" in err and "rename them" in err
    os.symlink(inputs, tmp_path / "link.csv")
    err = _predict(capsys, "--ckpt_path", str(model_ckpt), "--csv",
                   str(inputs), "--output", str(tmp_path / "link.csv"))
    assert "--csv" in err and inputs.read_text() == "smiles,error\nCCO,mine\n"
    inputs.write_text("smiles,smiles\nCCO,CCN\n")
    assert "more than once" in _predict(capsys, "--ckpt_path", str(model_ckpt),
                                        "--csv", str(inputs))
    assert "is a folder" in _predict(capsys, "--ckpt_path", str(model_ckpt),
                                     "--csv", str(tmp_path))


def test_non_finite_predictions_are_row_errors_and_counted(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    broken = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v
              for k, v in state_dict().items()}
    ckpt = checkpoint(tmp_path / "nan.ckpt", state=broken)
    with pytest.raises(SystemExit):  # nothing could be predicted
        main(["predict", "--ckpt_path", str(ckpt), "--smiles",
              "CCO", "c1ccccc1", "--output", "out.csv"])
    out = capsys.readouterr().out
    assert "0 predicted, 2 failed" in out
    table = pd.read_csv(tmp_path / "out.csv")
    assert table["y_pred"].isna().all() and table["error"].str.contains("not finite").all()


def test_an_explicit_version_is_claimed_exclusively(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    config, runs = write_config(tmp_path)
    held = lock_run_folder(str(runs / "version_0"))
    with pytest.raises(OutputError, match="in use by another"):
        lock_run_folder(str(runs / "version_0"))
    with pytest.raises(SystemExit):
        main(["fit", "--config", config, "--version", "0"])
    err = capsys.readouterr().err
    assert "version_0 is in use by another `graph-urpe fit`" in err
    assert not (runs / "version_0" / "config.yaml").exists()
    held.close()
    assert lock_run_folder(str(runs / "version_0")) is not None  # free again


def test_stale_temporaries_of_our_naming_are_removed_and_nothing_else(tmp_path):
    host = socket.gethostname().split(".")[0]
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    files = {
        f".last.ckpt.{host}-{dead}-abcd1234.tmp": False,  # its writer was killed: removed
        f".pred.csv.{host}-{os.getpid()}-abcd1234.tmp": True,  # being written: kept
        f".probe-{host}-{dead}-x1y2z3w4": False,
        ".probe-otherhost-1-abcd1234": True,   # another host's, fresh: kept
        ".last.ckpt.abcd1234.tmp": False,       # the older naming, two hours old: removed
        ".notes.tmp": True, "last.ckpt": True,  # not ours
    }
    for name in files:
        (tmp_path / name).write_text("x")
    old = time.time() - 7200
    os.utime(tmp_path / ".last.ckpt.abcd1234.tmp", (old, old))
    clean(str(tmp_path))
    assert {n for n in files if (tmp_path / n).exists()} == {n for n, keep in files.items() if keep}
    # What atomic writes name is what is cleaned.
    atomic_write_csv(pd.DataFrame({"a": [1]}), str(tmp_path / "t.csv"))
    assert sorted(p.name for p in tmp_path.glob(".t.csv*")) == []


def test_collect_over_a_run_whose_config_is_a_list_is_one_line(tmp_path):
    run = tmp_path / "version_0"
    run.mkdir()
    pd.DataFrame({"epoch": [0], "test/mae": [0.5]}).to_csv(run / "metrics.csv", index=False)
    (run / "config.yaml").write_text(yaml.safe_dump(["a", "b"]))
    with pytest.raises(CollectError, match="not a run configuration") as info:
        read_run(str(run))
    assert str(run / "config.yaml") in str(info.value) and "\n" not in str(info.value)


def test_fit_on_a_full_disk_is_one_line_before_any_logger(tmp_path, monkeypatch, capsys):
    from graph_urpe import files

    monkeypatch.chdir(tmp_path)
    config, runs = write_config(tmp_path)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.tempfile, "NamedTemporaryFile", full)
    with pytest.raises(SystemExit):
        main(["fit", "--config", config])
    err = capsys.readouterr().err
    assert "no space left on the device" in err and len(err.strip().splitlines()) == 2
    assert not list(runs.rglob("events.out.tfevents*"))


def test_run_folders_of_earlier_versions_load_without_the_retired_predict_options():
    """predict's inputs were data-module options before they became its own: a run folder's
    config.yaml written then still loads (those values dropped), anything else unknown is
    refused."""
    from graph_urpe.received import Refusal, check_class

    old = {"class_path": "graph_urpe.data.modules.molecule.CSVDataModule", "init_args": {
        "path": "my.csv", "smiles_column": "SMILES", "predict_csv": None, "predict_smiles": None,
        "predict_output": "predictions.csv", "predict_chunk_rows": 20000}}
    checked = check_class(old, "data", "data")
    assert checked["init_args"] == {"path": "my.csv", "smiles_column": "SMILES"}
    zinc = check_class({"class_path": "ZincLikeDataModule",
                        "init_args": {"smiles_column": "smiles", "root": "d"}}, "data", "data")
    assert zinc["init_args"] == {"root": "d"}
    with pytest.raises(Refusal, match="no argument 'predict_everything'"):
        check_class({"class_path": "ZincLikeDataModule",
                     "init_args": {"predict_everything": 1}}, "data", "data")


def test_smiles_given_as_one_list_string_are_refused_with_the_form_to_use():
    """predict, fingerprint and explain take --smiles CCO NO; a list written as one string (the
    form of earlier versions) would be one invalid SMILES, so it is refused saying the form."""
    from graph_urpe.data.predict_inputs import read_predict_inputs

    with pytest.raises(ValueError, match=r"""--smiles '\["CCO", "NO"\]' is not a SMILES.*--smiles CCO"""):
        read_predict_inputs(None, ['["CCO", "NO"]'], "smiles")
    frame = read_predict_inputs(None, ["CCO", "NO", "[Na+].[Cl-]", ""], "smiles")
    assert frame["smiles"].tolist() == ["CCO", "NO", "[Na+].[Cl-]", ""]
