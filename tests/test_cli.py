"""The ``graph-urpe`` command: fit + test, resume, predict, summarize, and a 2-process DDP fit."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import Callback

from graph_urpe.cli import main
from graph_urpe.cli.configs import CONFIG_DIR, DEFAULT_CONFIG
from graph_urpe.data.modules.molecule import CSVDataModule
from graph_urpe.models.graph import GraphPropertyModule

SMILES = [
    "CCO", "CCN", "CCCC", "c1ccccc1", "CC(=O)O", "CCOC", "c1ccncc1", "CC(C)O",
    "OCCO", "CC#N", "C1CCCCC1", "CCCl", "Cc1ccccc1", "COC(=O)C", "NCCN", "CCS",
]


def write_config(tmp_path, max_epochs=2, task="regression"):
    """A tiny experiment file on a 16-molecule CSV: only what differs from the package base."""
    csv = tmp_path / "mols.csv"
    split = ["train"] * 10 + ["valid"] * 3 + ["test"] * 3
    if task == "regression":
        target = [len(s) / 4.0 for s in SMILES]
    else:
        target = [float(len(s) > 4) for s in SMILES]
    pd.DataFrame({"smiles": SMILES, "target": target, "split": split}).to_csv(csv, index=False)
    root = tmp_path / "runs"
    config = {
        "name": "tiny",
        "trainer": {
            "accelerator": "cpu", "max_epochs": max_epochs, "enable_progress_bar": False,
            "enable_model_summary": False, "num_sanity_val_steps": 0,
            "default_root_dir": str(root),
        },
        "model": {"init_args": {
            "model": {"init_args": {"num_layers": 1, "embed_dim": 16, "num_heads": 2,
                                    "ffn_dim": 16, "max_hops": 4, "max_distance": 8,
                                    "max_degree": 6}},
            "optimizer": {"init_args": {"lr": 3e-3}},
            "lr_scheduler": {"init_args": {"warmup_steps": 2}},
        }},
        "data": {"class_path": "graph_urpe.data.modules.molecule.CSVDataModule",
                 "init_args": {"path": str(csv), "split": "split", "featurization": "zinc",
                               "task": task, "root": str(tmp_path / "data"), "batch_size": 4}},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path), root / "tiny"


def test_fit_writes_one_run_folder_tests_best_then_resumes_and_predicts(
        tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config, runs = write_config(tmp_path)
    main(["fit", "--config", config])
    out = capsys.readouterr().out
    run = runs / "version_0"
    assert "Training finished the planned schedule: 2 of 2 epochs." in out
    assert "Warning: the test split holds only 3 labelled graph(s)" in out  # 16 molecules: 3 tested
    for name in ("config.yaml", "metrics.csv", "hparams.yaml", "checkpoints/best.ckpt",
                 "checkpoints/last.ckpt", "test_predictions.csv", "splits.csv",
                 "figures/learning_curves.png", "figures/parity.png"):
        assert (run / name).is_file(), name
    assert any(p.name.startswith("events.out.tfevents") for p in run.iterdir())
    # Test MAE: <blend, the prediction> (prediction: blend, ...) | <network> (network) | ...
    blend_mae = float(re.search(r"Test MAE: ([0-9.]+) \(prediction: blend", out).group(1))
    mae = float(re.search(r"Test MAE: .*?([0-9.]+) \(network\)", out).group(1))
    best = re.search(r"Best checkpoint: (\S+)  \(val/mae, tested\)", out).group(1)
    assert best == str(run / "checkpoints" / "best.ckpt")
    # The checkpoint alone rebuilds the trained network (its class path and arguments).
    model = GraphPropertyModule.load_from_checkpoint(best)
    dm = CSVDataModule(str(tmp_path / "mols.csv"), split="split", featurization="zinc",
                       root=str(tmp_path / "data"), batch_size=4)
    dm.setup("test")
    model.eval()
    errors, preds = [], {}
    with torch.no_grad():
        for batch in dm.test_dataloader():
            p = model.predict_values(batch)
            preds.update(zip(batch.sample_id.tolist(), p.view(-1).tolist()))
            errors.append((p - batch.y).abs().view(-1))
    assert mae == pytest.approx(torch.cat(errors).mean().item(), abs=1e-4)
    # test_predictions.csv: source rows of the test molecules (13-15), their labels, predictions.
    table = pd.read_csv(run / "test_predictions.csv")
    assert table["row"].tolist() == [13, 14, 15]
    assert table["smiles"].tolist() == SMILES[13:]
    assert table["target"].tolist() == pytest.approx([len(s) / 4.0 for s in SMILES[13:]])
    assert table["target_network"].tolist() == pytest.approx([preds[i] for i in range(3)],
                                                             abs=1e-5)
    # The bootstrap interval of the prediction's (the blend's) test MAE: every resample's MAE
    # lies between the smallest and the largest absolute error of the 3 test molecules.
    pattern = (r"Test MAE of the blend \(the prediction\) 95% interval over the 3 labelled "
               r"test graphs \(bootstrap\): "
               r"(\d+\.\d+) to (\d+\.\d+)\. The spread over training seeds: graph-urpe seeds "
               r"--seeds 3 --config \S+tiny.yaml\n")
    low, high = map(float, re.search(pattern, out).groups())
    err = (table["target"] - table["target_pred"]).abs()
    assert err.mean() == pytest.approx(blend_mae, abs=1e-4)
    assert err.min() - 1e-4 <= low <= blend_mae <= high <= err.max() + 1e-4
    first = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)

    # Resume the latest version from its last.ckpt for one more epoch: no new version folder.
    main(["fit", "--config", config, "--trainer.max_epochs", "3", "--ckpt_path", "last",
          "--test_after_fit", "false"])
    resumed = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    per_epoch = first["global_step"] // 2
    assert resumed["global_step"] == 3 * per_epoch and resumed["epoch"] == first["epoch"] + 1
    assert sorted(p.name for p in runs.iterdir()) == ["version_0"]
    capsys.readouterr()

    # `test --ckpt_path X` alone evaluates on the run's own data (its config.yaml), not on the
    # package default's; the run's config.yaml is accepted as it is, too.
    for extra in ([], ["--config", str(run / "config.yaml")]):
        main(["test", "--ckpt_path", best, *extra])
        out = capsys.readouterr().out
        assert ("data as in" in out) == (not extra)
        assert re.search(r"test/num_graphs\W+3(\.0)?\b", out), out[-2000:]
    assert not (tmp_path / "data" / "zinc_like").exists()

    # Predict in a fresh process with the package base configuration: the architecture and
    # featurization come from the checkpoint; one row per input, in order; nothing else written.
    pred = tmp_path / "out" / "pred.csv"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    before = sorted(os.listdir(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-m", "graph_urpe.cli", "predict", "--ckpt_path", best,
         "--smiles", "CCO", "C1CC", "[Na+].[Cl-]", "c1ccccc1", "CCS",
         "--output", str(pred), "--trainer.enable_progress_bar", "false"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 failed" in proc.stdout
    assert sorted(os.listdir(tmp_path)) == sorted(before + ["out"])  # no runs/ or logs added
    assert "GPU available" not in proc.stdout + proc.stderr  # no Lightning start-up chatter
    assert "Seed set" not in proc.stdout + proc.stderr
    table = pd.read_csv(pred, keep_default_na=False)
    assert table["row"].tolist() == [0, 1, 2, 3, 4]
    assert table["smiles"].tolist() == ["CCO", "C1CC", "[Na+].[Cl-]", "c1ccccc1", "CCS"]
    assert [bool(e) for e in table["error"]] == [False, True, True, False, False]
    assert table["target_pred"][0] != "" and table["target_pred"][1] == ""
    # Sulfur is in no training molecule (the first 10): predicted, and flagged.
    assert table["warning"].tolist()[:4] == ["", "", "", ""]
    assert "outside the training vocabulary: atom type" in table["warning"][4]
    assert "1 flagged: outside the training vocabulary" in proc.stdout

    # Every row failing: still one row per input with its error, and a non-zero exit.
    pred.unlink()
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", "--ckpt_path", best, "--smiles",
              "xyz", "C1CC", "--output", str(pred)])
    assert exit_info.value.code == 2
    assert "no molecule could be predicted: 2 input rows" in capsys.readouterr().err
    table = pd.read_csv(pred, keep_default_na=False)
    assert table["smiles"].tolist() == ["xyz", "C1CC"] and all(table["error"])


def test_second_fit_gets_its_own_version_and_last_is_the_latest_state(tmp_path, capsys):
    config, runs = write_config(tmp_path, max_epochs=1)
    main(["fit", "--config", config, "--test_after_fit", "false"])
    main(["fit", "--config", config, "--trainer.max_epochs", "3", "--test_after_fit", "false"])
    assert sorted(p.name for p in runs.iterdir()) == ["version_0", "version_1"]
    last = torch.load(runs / "version_1" / "checkpoints" / "last.ckpt", weights_only=True)
    first = torch.load(runs / "version_0" / "checkpoints" / "last.ckpt", weights_only=True)
    # The final state (3 epochs), whether or not the last epoch improved the metric.
    assert last["global_step"] == 3 * first["global_step"]
    assert sorted(os.listdir(runs / "version_1" / "checkpoints")) == ["best.ckpt", "last.ckpt"]
    with pytest.raises(SystemExit):  # an explicit version that already holds a run
        main(["fit", "--config", config, "--version", "0"])
    assert "already holds a trained run" in capsys.readouterr().err


def test_metrics_csv_keeps_the_epochs_after_the_best_checkpoint(tmp_path, capsys):
    # lr 0: every epoch's validation MAE is the same, so best.ckpt stays the first epoch's (a
    # tie does not replace it). Testing best.ckpt loads it; the three epochs' rows must stay.
    config, runs = write_config(tmp_path, max_epochs=3)
    main(["fit", "--config", config, "--model.init_args.optimizer.init_args.lr", "0.0"])
    out = capsys.readouterr().out
    best = torch.load(runs / "version_0" / "checkpoints" / "best.ckpt", weights_only=True)
    assert best["epoch"] == 0 and "Test MAE:" in out
    # --test_checkpoint last: the end of the schedule is tested instead, and the summary says so.
    main(["fit", "--config", config, "--test_checkpoint", "last"])
    out = capsys.readouterr().out
    last = runs / "version_1" / "checkpoints" / "last.ckpt"
    assert f"Last checkpoint: {last}  (tested; resume with --ckpt_path last)" in out
    assert "(val/mae)" in out and "(val/mae, tested)" not in out
    main(["fit", "--config", config, "--test_checkpoint", "auto"])  # regression: last
    last2 = runs / "version_2" / "checkpoints" / "last.ckpt"
    assert f"Last checkpoint: {last2}  (tested; " in capsys.readouterr().out
    model = GraphPropertyModule.load_from_checkpoint(str(last))
    table = pd.read_csv(runs / "version_1" / "test_predictions.csv")
    dm = CSVDataModule(str(tmp_path / "mols.csv"), split="split", featurization="zinc",
                       root=str(tmp_path / "data"), batch_size=4)
    dm.setup("test")
    model.eval()
    with torch.no_grad():
        preds = torch.cat([model.predict_values(b).view(-1) for b in dm.test_dataloader()])
    assert sorted(table["target_network"]) == pytest.approx(sorted(preds.tolist()), abs=1e-5)
    metrics = pd.read_csv(runs / "version_0" / "metrics.csv")
    assert sorted(metrics.loc[metrics["val/mae"].notna(), "epoch"]) == [0, 1, 2]
    assert metrics["test/mae"].notna().sum() == 1


def test_summary_counts_unlabelled_test_graphs_and_says_when_nothing_was_tested(
        tmp_path, capsys):
    config, _ = write_config(tmp_path, max_epochs=1)
    csv = tmp_path / "mols.csv"
    frame = pd.read_csv(csv)
    frame.loc[15, "target"] = float("nan")  # one of the 3 test molecules has no label
    frame.to_csv(csv, index=False)
    main(["fit", "--config", config])
    out = capsys.readouterr().out
    assert "Test graphs without any label: 1 of 3 (masked" in out
    assert "Test MAE of the blend (the prediction) 95% interval over the 2 labelled test graphs" in out
    assert "holds only 2 labelled graph(s)" in out
    frame.loc[13:, "split"] = "train"  # no test part at all
    frame.to_csv(csv, index=False)
    main(["fit", "--config", config])
    out = capsys.readouterr().out
    assert "No test metrics: the test split is empty." in out
    assert "Test MAE" not in out and "tested" not in out


def test_classification_monitors_rocauc_without_editing_the_config(tmp_path, capsys):
    config, runs = write_config(tmp_path, max_epochs=2, task="classification")
    main(["fit", "--config", config, "--test_checkpoint", "auto"])  # classification: best
    out = capsys.readouterr().out
    assert "Test ROC-AUC:" in out and "(val/rocauc, tested)" in out
    assert (runs / "version_0" / "figures" / "roc_pr.png").is_file()


def test_predict_requires_an_existing_checkpoint(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", "--smiles", "CCO"])
    assert exit_info.value.code == 2
    assert "ckpt_path" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["predict", "--ckpt_path", str(tmp_path / "nope.ckpt")])
    assert "nope.ckpt' not found" in capsys.readouterr().err


def test_summarize_subcommand(tmp_path, capsys):
    write_config(tmp_path)
    main(["summarize", "csv", "--csv-path", str(tmp_path / "mols.csv"), "--split", "split",
          "--featurization", "zinc", "--root", str(tmp_path / "data")])
    out = capsys.readouterr().out
    assert re.search(r"train\s+10\b", out) and re.search(r"test\s+3\b", out)


def test_ranks_get_distinct_batches(tmp_path):
    write_config(tmp_path)
    seen = []
    for rank in (0, 1):
        # Graph-count batches only (2 batches): each rank gets one, no padding batch needed.
        dm = CSVDataModule(str(tmp_path / "mols.csv"), split="split", featurization="zinc",
                           root=str(tmp_path / "data"), batch_size=5, max_cells_per_batch=None)
        # Stand-in for the Trainer: only what the data module reads.
        dm.trainer = SimpleNamespace(world_size=2, global_rank=rank, state=SimpleNamespace(fn="fit"),
                                     _accelerator_connector=SimpleNamespace(use_distributed_sampler=False))
        dm.setup("fit")
        seen.append([int(i) for b in dm.train_dataloader() for i in b.sample_id])
    assert not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == list(range(10))


def test_ddp_two_processes_on_cpu(tmp_path):
    config, run = write_config(tmp_path)
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "graph_urpe.cli", "fit", "--config", config,
         "--trainer.strategy", "ddp", "--trainer.devices", "2", "--trainer.accelerator", "cpu",
         "--trainer.max_epochs", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Test MAE: <blend> (prediction: blend, ...) | <network> (network) | <SVR> (...)
    mae = float(re.search(r"Test MAE: .*?([0-9.]+) \(network\)", proc.stdout).group(1))
    blend_mae = float(re.search(r"Test MAE: ([0-9.]+) \(prediction: blend", proc.stdout).group(1))
    best = re.search(r"Best checkpoint: (\S+)", proc.stdout).group(1)
    # The global test metric and loss equal a single-process evaluation of the checkpoint.
    model = GraphPropertyModule.load_from_checkpoint(best)
    dm = CSVDataModule(str(tmp_path / "mols.csv"), split="split", featurization="zinc",
                       root=str(tmp_path / "data"), batch_size=4)
    trainer = Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                      use_distributed_sampler=False, enable_model_summary=False)
    single = trainer.test(model, dm, verbose=False)[0]
    assert single["test/num_graphs"] == 3
    assert mae == pytest.approx(single["test/mae"], abs=1e-4)
    loss = float(re.search(r"Test loss[^:\n]*: ([0-9.]+)", proc.stdout).group(1))
    assert loss == pytest.approx(single["test/loss"], abs=1e-4)  # no padding batch counted twice
    # Validation under DDP saw each of the 3 validation graphs exactly once (after de-duplication).
    metrics = pd.read_csv(run / "version_0" / "metrics.csv")
    assert set(metrics["val/num_graphs"].dropna()) == {3.0}
    # The blend under DDP is the tested checkpoint's stored one, scored on the gathered test
    # rows: test_predictions.csv is what `predict` writes with that checkpoint.
    from graph_urpe import Predictor

    tested = pd.read_csv(run / "version_0" / "test_predictions.csv")
    again = Predictor.from_checkpoint(best).predict(tested["smiles"].tolist())
    for column in ("target_pred", "target_lower", "target_upper", "target_network"):
        np.testing.assert_allclose(tested[column], again[column], rtol=1e-5)
    assert (tested["target"] - tested["target_pred"]).abs().mean() == pytest.approx(blend_mae,
                                                                                 abs=1e-4)


GRAPH_CONFIGS = sorted(
    os.path.join(folder, name)
    for folder in ("zinc", "ogbg-molhiv", "pcqm4mv2", "csv")
    for name in os.listdir(CONFIG_DIR / folder)
)


@pytest.mark.parametrize("config", GRAPH_CONFIGS)
def test_shipped_graph_configs_parse(config, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(CONFIG_DIR / config), "--print_config"])
    assert exit_info.value.code in (0, None)
    assert "graph_urpe.models.graph.GraphPropertyModule" in capsys.readouterr().out


def test_experiment_files_state_only_what_differs():
    with open(DEFAULT_CONFIG) as f:
        base = yaml.safe_load(f)
    with open(CONFIG_DIR / "zinc" / "zinc-like-rpe.yaml") as f:
        rpe = yaml.safe_load(f)
    assert base["model"]["init_args"]["model"]["init_args"]["attention"] == "urpe"
    assert rpe == {"name": "zinc-like-rpe",
                   "model": {"init_args": {"model": {"init_args": {"attention": "rpe"}}}}}


class InterruptAfterFirstEpoch(Callback):
    """Ctrl-C at the end of the first epoch (Lightning handles KeyboardInterrupt as SIGINT)."""

    def on_train_epoch_end(self, trainer, pl_module):
        if trainer.current_epoch == 0:
            raise KeyboardInterrupt


def test_interrupt_then_resume_equals_the_uninterrupted_run_with_dropout(tmp_path, capsys):
    """Ctrl-C leaves a resumable last.ckpt and prints the summary with the command that resumes
    the run; RNG states and the sampler's epoch are restored, so the resumed run ends with
    exactly the weights of the uninterrupted one (dropout on)."""
    config, runs = write_config(tmp_path, max_epochs=2)
    dropout = ["--model.init_args.model.init_args.dropout", "0.3",
               "--model.init_args.model.init_args.attention_dropout", "0.3",
               "--test_after_fit", "false"]
    main(["fit", "--config", config, "--name", "whole", *dropout])
    with pytest.raises(SystemExit):  # Lightning's graceful shutdown on Ctrl-C exits with 1
        main(["fit", "--config", config, "--name", "split", *dropout,
              "--trainer.callbacks+=test_cli.InterruptAfterFirstEpoch"])
    assert (runs.parent / "split" / "version_0" / "checkpoints" / "last.ckpt").is_file()
    out = capsys.readouterr().out
    assert re.search(r"Training interrupted at step \d+, in epoch 1 of 2 \(0 complete\)", out)
    resume = re.search(r"^Resume: (.+)$", out, re.MULTILINE).group(1)
    command = shlex.split(resume)
    assert command[:2] == ["graph-urpe", "fit"]
    assert command[-6:] == ["--name", "split", "--version", "0", "--ckpt_path", "last"]
    # The printed command, as it is (minus the test's interrupting callback), resumes the run.
    command.remove("--trainer.callbacks+=test_cli.InterruptAfterFirstEpoch")
    main(command[1:])
    whole = torch.load(runs.parent / "whole" / "version_0" / "checkpoints" / "last.ckpt",
                       weights_only=True)
    split = torch.load(runs.parent / "split" / "version_0" / "checkpoints" / "last.ckpt",
                       weights_only=True)
    assert whole["global_step"] == split["global_step"]
    for key, value in whole["state_dict"].items():
        torch.testing.assert_close(split["state_dict"][key], value, rtol=0, atol=0)


def test_predict_checks_the_output_path_before_any_work(tmp_path, capsys):
    config, runs = write_config(tmp_path, max_epochs=1)
    main(["fit", "--config", config, "--test_after_fit", "false"])
    ckpt = runs / "version_0" / "checkpoints" / "last.ckpt"
    blocked = tmp_path / "a_file"
    blocked.write_text("not a folder")
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", "--ckpt_path", str(ckpt), "--smiles", "CCO",
              "--output", str(blocked / "out.csv")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "cannot write" in err and "out.csv" in err and "Traceback" not in err
