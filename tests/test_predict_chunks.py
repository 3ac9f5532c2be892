"""``predict`` in chunks: the one-pass table (predictions equal to float32 rounding), rows written
chunk by chunk, and a killed run resumed without predicting its finished chunks again; under DDP
one writer per file (graph_urpe/cli/predict.py, graph_urpe/cli/prediction_parts.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from lightning.pytorch.callbacks import Callback
from test_models_graph import _fit_with_checkpoints, tiny_net, trainer

from graph_urpe.cli.predict import PredictInputs, predict_smiles
from graph_urpe.cli.prediction_parts import PredictionParts
from graph_urpe.data.modules.molecule import CSVDataModule
from graph_urpe.models.graph import GraphPropertyModule

INPUTS = ["CCO", "C1CC", "[Na+].[Cl-]", "CCCCCCCCCCCC", "c1ccccc1", "", "OCCO", "CCN", "CC(=O)O"]


def assert_same_predictions(got, expected):
    """Chunked against one-pass tables (read as text): every column equal, the prediction columns
    (``<target>_pred`` / ``_std`` / ``_lower`` / ``_upper``) to float32 rounding. The batches
    differ: the size-sorted batches are cut within a chunk, so a molecule meets other molecules
    (and other padding) than in one pass, and the matrix products sum in another order (on an
    AVX-512 CPU: 1.16018545627594 against 1.1601853370666504, one float32 step)."""
    assert list(got.columns) == list(expected.columns)
    numeric = [c for c in got.columns if c.rsplit("_", 1)[-1] in ("pred", "std", "lower", "upper")]
    assert numeric
    pd.testing.assert_frame_equal(got.drop(columns=numeric), expected.drop(columns=numeric))
    for column in numeric:
        a, b = (np.array([float(v) if v else np.nan for v in t[column]]) for t in (got, expected))
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=column)


def _predict(tmp_path, loaded, chunk_rows, out, trainer_=None):
    csv = tmp_path / "to_predict.csv"
    if not csv.exists():  # the same file (size, modification time) for a resumed run
        pd.DataFrame({"id": [f"m{i}" for i in range(len(INPUTS))],
                      "smiles": INPUTS}).to_csv(csv, index=False)
    pdm = CSVDataModule(str(tmp_path / "mols_regression.csv"), featurization="zinc",
                        max_graph_nodes=10, batch_size=2)
    inputs = PredictInputs(csv=str(csv), output=str(out), chunk_rows=chunk_rows)
    return predict_smiles(trainer_ or trainer(tmp_path), loaded, pdm, inputs)


def test_chunks_give_the_one_pass_table_and_resume_after_a_kill(tmp_path, monkeypatch):
    _model, _dm, ckpt, _ = _fit_with_checkpoints(tmp_path, epochs=1)
    loaded = GraphPropertyModule.load_from_checkpoint(ckpt.last_model_path, model=tiny_net())
    whole = tmp_path / "whole.csv"
    counts = _predict(tmp_path, loaded, 1000, whole)
    assert counts == {"rows": 9, "predicted": 5, "failed": 4, "flagged": 0, "resumed_chunks": 0}
    expected = pd.read_csv(whole, keep_default_na=False, dtype=str)
    assert expected["row"].tolist() == [str(i) for i in range(9)]

    # Chunks of 2 rows; chunk 1 (rows 2, 3) has no graph, so the third trainer.predict is chunk 3:
    # killed there, chunks 0-2 are on disk.
    out = tmp_path / "chunked.csv"
    t = trainer(tmp_path)
    real = t.predict
    calls = []

    def dies_on_third(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(t, "predict", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        _predict(tmp_path, loaded, 2, out, t)
    assert not out.exists()  # the output appears only whole
    parts = sorted(os.listdir(f"{out}.parts"))
    assert parts == ["made-by-graph-urpe-predict", "manifest.json", "part-0000000.csv",
                     "part-0000001.csv", "part-0000002.csv"]
    first = pd.read_csv(f"{out}.parts/part-0000002.csv", keep_default_na=False, dtype=str)
    assert_same_predictions(first, expected.iloc[4:6].reset_index(drop=True))

    # Started again: the three chunks are reused (predict runs for chunks 3 and 4 only).
    t2 = trainer(tmp_path)
    real2, calls2 = t2.predict, []
    monkeypatch.setattr(t2, "predict", lambda *a, **k: (calls2.append(1), real2(*a, **k))[1])
    counts = _predict(tmp_path, loaded, 2, out, t2)
    assert counts["resumed_chunks"] == 3 and len(calls2) == 2
    assert {k: counts[k] for k in ("rows", "predicted", "failed")} == \
        {"rows": 9, "predicted": 5, "failed": 4}
    assert_same_predictions(pd.read_csv(out, keep_default_na=False, dtype=str), expected)
    assert not os.path.exists(f"{out}.parts")


def test_a_different_input_with_the_same_size_and_time_reuses_no_chunk(tmp_path, monkeypatch):
    """Before, parts were reused when the input had the same size and modification time: a
    ``cp -p`` of another file got the killed run's predictions of the first. Now reuse is keyed
    on the input's content (SHA-256)."""
    _model, _dm, ckpt, _ = _fit_with_checkpoints(tmp_path, epochs=1)
    loaded = GraphPropertyModule.load_from_checkpoint(ckpt.last_model_path, model=tiny_net())
    out = tmp_path / "chunked.csv"
    t = trainer(tmp_path)
    real = t.predict
    monkeypatch.setattr(t, "predict", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt)
                        if os.path.exists(f"{out}.parts/part-0000002.csv") else real(*a, **k))
    with pytest.raises(KeyboardInterrupt):
        _predict(tmp_path, loaded, 2, out, t)
    assert os.path.isfile(f"{out}.parts/part-0000002.csv")
    # Another molecule of the same length in each row, the file's size and time put back.
    csv = tmp_path / "to_predict.csv"
    stat = csv.stat()
    other = csv.read_text().replace(",CCO\n", ",CCN\n").replace("c1ccccc1", "c1ccncc1")
    assert other != csv.read_text() and len(other) == stat.st_size
    csv.write_text(other)
    os.utime(csv, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (csv.stat().st_size, csv.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    counts = _predict(tmp_path, loaded, 2, out, trainer(tmp_path))
    assert counts["resumed_chunks"] == 0
    chunked = pd.read_csv(out, keep_default_na=False, dtype=str)
    assert chunked["smiles"].tolist()[:5] == ["CCN", "C1CC", "[Na+].[Cl-]", "CCCCCCCCCCCC",
                                              "c1ccncc1"]
    whole = tmp_path / "whole.csv"
    _predict(tmp_path, loaded, 1000, whole)  # the new file in one pass
    assert_same_predictions(chunked, pd.read_csv(whole, keep_default_na=False, dtype=str))


class _TermDuringPredict(Callback):
    """Sends this process SIGTERM after the first batch of the ``at``-th ``trainer.predict``
    (Lightning's own SIGTERM handler is installed then)."""

    def __init__(self, at):
        self.at, self.calls = at, 0

    def on_predict_start(self, trainer, pl_module):
        self.calls += 1

    def on_predict_batch_end(self, trainer, pl_module, *args):
        if self.calls == self.at:
            self.at = None
            os.kill(os.getpid(), signal.SIGTERM)


def test_sigterm_stops_predict_after_the_chunk_with_status_143_and_keeps_its_chunks(
        tmp_path, capsys):
    """Before: Lightning's predict loop ignored its SIGTERM flag and forgot it at the next
    chunk's ``trainer.predict``, so predict went on. Now it stops once the chunk at hand is
    written (exit status 143, one line saying how to resume), and the same command resumes."""
    _model, _dm, ckpt, _ = _fit_with_checkpoints(tmp_path, epochs=1)
    loaded = GraphPropertyModule.load_from_checkpoint(ckpt.last_model_path, model=tiny_net())
    whole = tmp_path / "whole.csv"
    _predict(tmp_path, loaded, 1000, whole)
    expected = pd.read_csv(whole, keep_default_na=False, dtype=str)

    # Chunks of 2 rows (chunk 1 has no graph): the second trainer.predict is chunk 2.
    out = tmp_path / "chunked.csv"
    t = trainer(tmp_path)
    t.callbacks.append(_TermDuringPredict(at=2))
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stop:
        _predict(tmp_path, loaded, 2, out, t)
    assert stop.value.code == 143
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is put back
    err = capsys.readouterr().err
    assert f"predict stopped by SIGTERM after 3 chunks of 2 rows, kept in {out}.parts" in err
    assert "run the same command again to resume" in err
    assert not out.exists()
    assert sorted(os.listdir(f"{out}.parts")) == \
        ["made-by-graph-urpe-predict", "manifest.json", "part-0000000.csv", "part-0000001.csv",
         "part-0000002.csv"]

    counts = _predict(tmp_path, loaded, 2, out, trainer(tmp_path))
    assert counts["resumed_chunks"] == 3
    assert_same_predictions(pd.read_csv(out, keep_default_na=False, dtype=str), expected)


def test_parts_of_another_input_are_not_reused(tmp_path):
    out = str(tmp_path / "p.csv")
    parts = PredictionParts(out, {"input": {"size": 1}})
    parts.write(0, pd.DataFrame({"row": [0], "x_pred": [1.0]}))
    assert PredictionParts(out, {"input": {"size": 1}}).resumed == 1
    again = PredictionParts(out, {"input": {"size": 2}})  # the input changed
    assert again.resumed == 0 and not again.done(0)
    again.write(0, pd.DataFrame({"row": [0], "x_pred": [2.0]}))
    again.write(1, pd.DataFrame({"row": [1], "x_pred": [3.0]}))
    again.finish(2)
    assert pd.read_csv(out).to_dict("list") == {"row": [0, 1], "x_pred": [2.0, 3.0]}


def test_only_the_owner_writes_and_readers_trust_only_their_manifest(tmp_path):
    """Under DDP rank 0 owns the parts folder; another rank never removes or writes a file, and
    counts a chunk as written only under its own manifest (stale parts are the owner's to
    remove), so every rank skips the same chunks."""
    out = str(tmp_path / "p.csv")
    owner = PredictionParts(out, {"input": {"size": 1}})
    owner.write(0, pd.DataFrame({"row": [0], "x_pred": [1.0]}))
    same = PredictionParts(out, {"input": {"size": 1}}, owner=False)
    assert same.resumed == 1 and same.done(0) and not same.done(1)
    other = PredictionParts(out, {"input": {"size": 2}}, owner=False)  # stale for this reader
    assert other.resumed == 0 and not other.done(0)
    assert os.path.isfile(owner.path(0))  # a reader removed nothing
    for call in (lambda: other.write(1, pd.DataFrame({"row": [1]})), lambda: other.finish(1),
                 other.discard):
        with pytest.raises(RuntimeError, match="only the owner"):
            call()
    assert sorted(os.listdir(owner.folder)) == ["made-by-graph-urpe-predict", "manifest.json",
                                                "part-0000000.csv"]


def test_a_parts_folder_predict_did_not_make_is_neither_removed_nor_reused(tmp_path, capsys,
                                                                           monkeypatch):
    """Before, ``predict --output results.csv`` removed an existing ``results.csv.parts/`` with
    all it held. Now predict removes or reuses only a parts folder holding its marker file; a
    user's folder of that name, or a link there to a folder outside, stays as it is, and the
    command stops with one line naming it."""
    from graph_urpe.cli import main
    from graph_urpe.files import OutputError
    from tests.test_trust import checkpoint

    monkeypatch.chdir(tmp_path)
    ckpt = checkpoint(tmp_path / "model.ckpt")
    out = tmp_path / "results.csv"
    mine = tmp_path / "results.csv.parts"
    mine.mkdir()
    (mine / "manifest.json").write_text("{}")
    (mine / "thesis.tex").write_text("victim")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"  # outside the work folder
    outside.mkdir()
    (outside / "data.csv").write_text("victim")
    (tmp_path / "linked.csv.parts").symlink_to(outside, target_is_directory=True)
    for output, message in ((out, "exists but predict did not make it"),
                            (tmp_path / "linked.csv", "is a symbolic link")):
        with pytest.raises(SystemExit) as stop:
            main(["predict", "--ckpt_path", str(ckpt), "--smiles", "CCO",
                  "--output", str(output)])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and message in err and f"{output}.parts" in err
        assert len(err.strip().splitlines()) == 2  # the line and the debugging hint
        assert not output.exists()
    assert sorted(os.listdir(mine)) == ["manifest.json", "thesis.tex"]
    assert (mine / "thesis.tex").read_text() == "victim"
    assert sorted(os.listdir(outside)) == ["data.csv"]
    assert (outside / "data.csv").read_text() == "victim"
    with pytest.raises(OutputError, match="move it away or choose another --output"):
        PredictionParts(str(out), {"input": None})
    # A folder predict made is its own: reused under its manifest, removed once joined.
    other = str(tmp_path / "other.csv")
    parts = PredictionParts(other, {"input": None})
    assert sorted(os.listdir(parts.folder)) == ["made-by-graph-urpe-predict", "manifest.json"]
    parts.write(0, pd.DataFrame({"row": [0]}))
    assert PredictionParts(other, {"input": None}).resumed == 1
    parts.finish(1)
    assert not os.path.exists(parts.folder) and os.path.isfile(other)


@pytest.mark.slow  # a CLI fit, then predict in one process and with DDP over 2 processes
def test_ddp_predict_writes_the_one_process_table(tmp_path):
    from test_cli import SMILES, write_config

    config, run = write_config(tmp_path, max_epochs=1)
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}

    def cli(*args):
        proc = subprocess.run([sys.executable, "-m", "graph_urpe.cli", *args], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]

    cli("fit", "--config", config)
    ckpt = str(run / "version_0" / "checkpoints" / "last.ckpt")
    inputs = tmp_path / "inputs.csv"
    pd.DataFrame({"smiles": (SMILES + ["xx", "C1CC"]) * 3}).to_csv(inputs, index=False)
    common = ["predict", "--ckpt_path", ckpt, "--csv", str(inputs), "--chunk_rows", "7"]
    cli(*common, "--output", str(tmp_path / "one.csv"))
    # Before: rank 1 had no table (TypeError) and every rank rebuilt the parts folder.
    cli(*common, "--output", str(tmp_path / "ddp.csv"), "--trainer.strategy", "ddp",
        "--trainer.devices", "2", "--trainer.accelerator", "cpu")
    one, ddp = (pd.read_csv(tmp_path / name, keep_default_na=False, dtype=str)
                for name in ("one.csv", "ddp.csv"))
    assert len(one) == 54 and (one["error"] != "").sum() == 6
    pd.testing.assert_frame_equal(ddp, one)
    assert not os.path.exists(tmp_path / "ddp.csv.parts")

