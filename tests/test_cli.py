"""The ``graph-urpe`` command: fit + test, resume, predict, summarize, and a 2-process DDP fit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
import yaml
from lightning.pytorch import Trainer

from graph_urpe.cli import main
from graph_urpe.tasks.graph import GraphPropertyModule
from graph_urpe.tasks.graph_data import CSVDataModule

SMILES = [
    "CCO", "CCN", "CCCC", "c1ccccc1", "CC(=O)O", "CCOC", "c1ccncc1", "CC(C)O",
    "OCCO", "CC#N", "C1CCCCC1", "CCCl", "Cc1ccccc1", "COC(=O)C", "NCCN", "CCS",
]


def write_config(tmp_path, max_epochs=2):
    csv = tmp_path / "mols.csv"
    split = ["train"] * 10 + ["valid"] * 3 + ["test"] * 3
    pd.DataFrame({"smiles": SMILES, "target": [len(s) / 4.0 for s in SMILES],
                  "split": split}).to_csv(csv, index=False)
    run = tmp_path / "run"
    config = {
        "seed_everything": 0,
        "trainer": {
            "accelerator": "cpu", "devices": 1, "max_epochs": max_epochs,
            "use_distributed_sampler": False, "enable_progress_bar": False,
            "enable_model_summary": False, "num_sanity_val_steps": 0,
            "default_root_dir": str(run),
            "logger": [{"class_path": "lightning.pytorch.loggers.CSVLogger",
                        "init_args": {"save_dir": str(run), "name": "csv"}}],
            "callbacks": [{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                           "init_args": {"dirpath": str(run / "checkpoints"),
                                         "filename": "best-{epoch}", "monitor": "val/mae",
                                         "mode": "min", "save_last": True}}],
        },
        "model": {"class_path": "graph_urpe.tasks.graph.GraphPropertyModule",
                  "init_args": {"num_layers": 1, "embed_dim": 16, "num_heads": 2, "ffn_dim": 16,
                                "max_hops": 4, "max_distance": 8, "max_degree": 6,
                                "dropout": 0.0, "attention_dropout": 0.0, "lr": 3e-3,
                                "warmup_steps": 2}},
        "data": {"class_path": "graph_urpe.tasks.graph_data.CSVDataModule",
                 "init_args": {"path": str(csv), "split": "split", "featurization": "zinc",
                               "root": str(tmp_path / "data"), "batch_size": 4}},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path), run


def test_fit_tests_best_checkpoint_then_resume_and_predict(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # predict below uses the default config (its run folder lands here)
    config, run = write_config(tmp_path)
    main(["fit", "--config", config])
    out = capsys.readouterr().out
    mae = float(re.search(r"Test MAE: ([0-9.]+)", out).group(1))
    best = re.search(r"Best checkpoint: (\S+)", out).group(1)
    assert os.path.isfile(best) and os.path.isfile(run / "checkpoints" / "last.ckpt")
    # The printed test MAE is the best checkpoint's MAE on the 3 test molecules.
    model = GraphPropertyModule.load_from_checkpoint(best)
    dm = CSVDataModule(str(tmp_path / "mols.csv"), split="split", featurization="zinc",
                       root=str(tmp_path / "data"), batch_size=4)
    dm.setup("test")
    model.eval()
    errors = []
    with torch.no_grad():
        for batch in dm.test_dataloader():
            errors.append((model(batch) - batch.y).abs().view(-1))
    assert mae == pytest.approx(torch.cat(errors).mean().item(), abs=1e-4)

    # Resume from last.ckpt for one more epoch: 3 epochs x 3 batches of training in total.
    main(["fit", "--config", config, "--trainer.max_epochs", "3", "--ckpt_path", "last",
          "--test_after_fit", "false"])
    resumed = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False, map_location="cpu")
    assert resumed["global_step"] == 9 and resumed["epoch"] == 3  # epochs completed

    # Predict with the default configuration: architecture and featurisation come from the
    # checkpoint; one output row per input, in order, failures reported.
    pred = tmp_path / "pred.csv"
    main(["predict", "--ckpt_path", best, "--data.init_args.predict_smiles",
          '["CCO", "C1CC", "[Na+].[Cl-]", "c1ccccc1"]',
          "--data.init_args.predict_output", str(pred)])
    out = capsys.readouterr().out
    assert "2 failed" in out
    table = pd.read_csv(pred, keep_default_na=False)
    assert table["smiles"].tolist() == ["CCO", "C1CC", "[Na+].[Cl-]", "c1ccccc1"]
    assert [bool(e) for e in table["error"]] == [False, True, True, False]
    assert table["pred_target"][0] != "" and table["pred_target"][1] == ""

    # Every row failing: still one row per input with its error, and a non-zero exit.
    pred.unlink()
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", "--ckpt_path", best, "--data.init_args.predict_smiles",
              '["xyz", "C1CC"]', "--data.init_args.predict_output", str(pred)])
    assert exit_info.value.code == 2
    assert "no molecule could be predicted: 2 input rows" in capsys.readouterr().err
    table = pd.read_csv(pred, keep_default_na=False)
    assert table["smiles"].tolist() == ["xyz", "C1CC"] and all(table["error"])


def test_predict_requires_an_existing_checkpoint(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", "--data.init_args.predict_smiles", '["CCO"]'])
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
        dm = CSVDataModule(str(tmp_path / "mols.csv"), split="split", featurization="zinc",
                           root=str(tmp_path / "data"), batch_size=5)  # 2 batches
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
    mae = float(re.search(r"Test MAE: ([0-9.]+)", proc.stdout).group(1))
    best = re.search(r"Best checkpoint: (\S+)", proc.stdout).group(1)
    # The global test metric equals a single-process evaluation of the same checkpoint.
    model = GraphPropertyModule.load_from_checkpoint(best)
    dm = CSVDataModule(str(tmp_path / "mols.csv"), split="split", featurization="zinc",
                       root=str(tmp_path / "data"), batch_size=4)
    trainer = Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                      use_distributed_sampler=False, enable_model_summary=False)
    single = trainer.test(model, dm, verbose=False)[0]
    assert single["test/num_graphs"] == 3
    assert mae == pytest.approx(single["test/mae"], abs=1e-4)
    # Validation under DDP saw each of the 3 validation graphs exactly once (after de-duplication).
    metrics = pd.read_csv(next(run.glob("csv/version_*/metrics.csv")))
    assert set(metrics["val/num_graphs"].dropna()) == {3.0}


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRAPH_CONFIGS = sorted(
    os.path.join(folder, name)
    for folder in ("configs/zinc", "configs/ogbg-molhiv", "configs/pcqm4mv2", "configs/csv")
    for name in os.listdir(os.path.join(ROOT, folder))
)


@pytest.mark.parametrize("config", GRAPH_CONFIGS)
def test_shipped_graph_configs_parse(config, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", os.path.join(ROOT, config), "--print_config"])
    assert exit_info.value.code in (0, None)
    assert "graph_urpe.tasks.graph.GraphPropertyModule" in capsys.readouterr().out


def test_default_config_matches_zinc_like_urpe():
    root = ROOT
    from graph_urpe.cli import DEFAULT_CONFIG

    with open(DEFAULT_CONFIG) as f:
        default = yaml.safe_load(f)
    with open(os.path.join(root, "configs", "zinc", "zinc-like-urpe.yaml")) as f:
        assert yaml.safe_load(f) == default
    with open(os.path.join(root, "configs", "zinc", "zinc-like-rpe.yaml")) as f:
        rpe = yaml.safe_load(f)
    text = yaml.safe_dump(default).replace("zinc-like-urpe", "zinc-like-rpe")
    expected = yaml.safe_load(text.replace("attention: urpe", "attention: rpe"))
    assert rpe == expected  # same budget, only the attention (and run folder) differ
