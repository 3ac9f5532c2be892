"""A fit's run folder: a fit that fails before writing anything gives its ``version_N`` back, and
a new run does not get Lightning's "logs directory exists and is not empty" warning for the
files graph-urpe itself put there first (its ``.lock``, ``config.yaml``)."""

from __future__ import annotations

import os
import signal
import warnings

import pandas as pd
import pytest
import yaml
from lightning.pytorch.callbacks import Callback

from graph_urpe.cli import main
from graph_urpe.cli.run import RunCSVLogger
from graph_urpe.files import lock_run_folder, remove_unused_run_folder

SMILES = ["CCO", "CCN", "CCCC", "c1ccccc1", "CC(=O)O", "CCOC", "c1ccncc1", "CC(C)O", "OCCO",
          "CC#N", "C1CCCCC1", "CCCl"]


def tiny_config(tmp_path) -> str:
    split = ["train"] * 8 + ["valid"] * 2 + ["test"] * 2
    pd.DataFrame({"smiles": SMILES, "target": [len(s) / 4 for s in SMILES],
                  "split": split}).to_csv(tmp_path / "mols.csv", index=False)
    config = {
        "name": "tiny",
        "trainer": {"accelerator": "cpu", "max_epochs": 1, "enable_progress_bar": False,
                    "enable_model_summary": False, "num_sanity_val_steps": 0,
                    "default_root_dir": str(tmp_path / "runs")},
        "model": {"init_args": {"model": {"init_args": {
            "num_layers": 1, "embed_dim": 16, "num_heads": 2, "ffn_dim": 16, "max_hops": 4,
            "max_distance": 8, "max_degree": 6}}}},
        "data": {"class_path": "graph_urpe.data.modules.CSVDataModule",
                 "init_args": {"path": str(tmp_path / "mols.csv"), "split": "split",
                               "featurization": "zinc", "root": str(tmp_path / "data"),
                               "batch_size": 4}},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_only_a_folder_with_nothing_but_its_lock_and_empty_folders_is_removed(tmp_path):
    run = tmp_path / "version_0"
    lock = lock_run_folder(str(run))
    (run / "checkpoints" / "deeper").mkdir(parents=True)
    assert remove_unused_run_folder(str(run)) and not run.exists()
    lock.close()

    kept = tmp_path / "version_1"
    lock = lock_run_folder(str(kept))
    (kept / "checkpoints").mkdir()
    (kept / "checkpoints" / "last.ckpt").write_bytes(b"")  # even an empty file of a run stays
    assert not remove_unused_run_folder(str(kept))
    assert sorted(p.name for p in kept.iterdir()) == [".lock", "checkpoints"]
    lock.close()


def test_new_run_writer_warns_only_over_an_earlier_metrics_csv(tmp_path):
    run = tmp_path / "tiny" / "version_0"
    run.mkdir(parents=True)
    (run / ".lock").write_text("")
    (run / "config.yaml").write_text("name: tiny\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RunCSVLogger(str(tmp_path), name="tiny", version=0).experiment  # noqa: B018
    (run / "metrics.csv").write_text("epoch,step\n0,1\n")
    with pytest.warns(UserWarning, match="exists and is not empty"):
        RunCSVLogger(str(tmp_path), name="tiny", version=0).experiment  # noqa: B018
    assert not (run / "metrics.csv").exists()  # Lightning's own behaviour for a new run


@pytest.mark.slow  # two CLI fits
def test_failed_fit_leaves_no_empty_version_and_a_fresh_fit_no_logs_warning(
        tmp_path, capsys, one_thread):
    config = tiny_config(tmp_path)
    runs = tmp_path / "runs" / "tiny"
    with pytest.raises(SystemExit):  # fails at setup, after the run folder was claimed
        main(["fit", "--config", config, "--data.init_args.target_columns", "[nope]"])
    assert "label columns ['nope'] not found" in capsys.readouterr().err  # the error is kept
    assert list(runs.iterdir()) == []

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        main(["fit", "--config", config, "--test_after_fit", "false"])
    assert not [w for w in caught if "exists and is not empty" in str(w.message)]
    assert sorted(p.name for p in runs.iterdir()) == ["version_0"]  # not version_1
    assert (runs / "version_0" / "metrics.csv").exists()


class TermAtFirstBatch(Callback):
    """Sends this process SIGTERM after the first training batch."""

    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step == 1:
            os.kill(os.getpid(), signal.SIGTERM)


def test_sigterm_stops_fit_with_status_143(tmp_path, capsys, one_thread):
    """Lightning stops training at the next batch with its SIGTERMException, a SystemExit of
    status 0; the fit exits 143 and prints how to resume."""
    config = tiny_config(tmp_path)
    with pytest.raises(SystemExit) as stop:
        main(["fit", "--config", config,
              "--trainer.callbacks+=test_run_folder.TermAtFirstBatch"])
    assert stop.value.code == 143
    assert "--ckpt_path last" in capsys.readouterr().out
    assert (tmp_path / "runs" / "tiny" / "version_0" / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.slow  # a fit over 2 DDP processes (Lightning's subprocess launcher)
def test_ddp_fit_writes_one_run_folder_and_tests_its_checkpoint(tmp_path):
    """Before: each DDP rank claimed its own next free version (here version_1 and version_2);
    rank 1 then looked for the tested last.ckpt in its empty folder, and the fit failed. Now
    every rank takes rank 0's folder, and no other is left."""
    import subprocess
    import sys

    config = tiny_config(tmp_path)
    earlier = tmp_path / "runs" / "tiny" / "version_0"  # an earlier run: the next is version_1
    earlier.mkdir(parents=True)
    (earlier / "metrics.csv").write_text("step\n")
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "graph_urpe.cli", "fit", "--config", config,
         "--test_checkpoint", "last", "--trainer.strategy", "ddp", "--trainer.devices", "2",
         "--trainer.accelerator", "cpu"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(os.listdir(tmp_path / "runs" / "tiny")) == ["version_0", "version_1"]
    run = tmp_path / "runs" / "tiny" / "version_1"
    last = run / "checkpoints" / "last.ckpt"
    assert last.is_file() and (run / "test_predictions.csv").is_file()
    assert f"Last checkpoint: {last}  (tested; " in proc.stdout
    assert os.listdir(earlier) == ["metrics.csv"]
