"""The OGB leaderboard path: a test on PCQM4Mv2's hidden test-dev split ends in OGB's submission
file, which NumPy (OGB's own format: ``np.savez_compressed``) reads back as the model's
predictions; summaries say whether a number is a leaderboard number (rebuilt data, cut tests)."""

from __future__ import annotations

import glob
import shlex

import numpy as np
import pytest
import torch
import yaml
from build_ogb import write_ogb_graphprop_folder
from build_pcqm4mv2 import write_pcqm4mv2_folder
from ogb.lsc import PCQM4Mv2Evaluator

from graph_urpe.cli import main
from graph_urpe.cli.leaderboard import read_record
from graph_urpe.cli.seeds import build_parser, seeds_command
from graph_urpe.data.modules.molecule import PCQM4Mv2DataModule
from graph_urpe.data.ogb import save_submission
from graph_urpe.models.graph import GraphPropertyModule

SMILES = ["C", "N", "O", "CC", "CO", "CN", "C#C", "C=O", "CCO", "CC#N", "C1CC1", "NC=O",
          "OCCO", "CC(C)C", "c1ccccc1", "c1ccncc1", "FC(F)F", "CC(=O)O", "N#N", "O=C=O",
          "CCN", "CCCO", "OC1CC1", "C1CO1", "CCCC", "CCCN", "CCOC", "NCCN", "CCS", "CC=C",
          "CC(C)O", "OC=O", "C1CCC1", "CCC#N", "NC(N)=O", "C1CCCC1", "CCOCC", "COC", "CCCl",
          "c1ccoc1"]


def write_config(tmp_path, data_class, init_args) -> str:
    """An experiment file: a tiny network for one epoch on the given data module."""
    config = {
        "name": "sub",
        "trainer": {"accelerator": "cpu", "max_epochs": 1, "enable_progress_bar": False,
                    "enable_model_summary": False, "num_sanity_val_steps": 0,
                    "default_root_dir": str(tmp_path / "runs")},
        "model": {"init_args": {"model": {"init_args": {
            "num_layers": 1, "embed_dim": 16, "num_heads": 2, "ffn_dim": 16, "max_hops": 4,
            "max_distance": 8, "max_degree": 6}}}},
        "data": {"class_path": f"graph_urpe.data.modules.molecule.{data_class}",
                 "init_args": {"root": str(tmp_path / "data"), "batch_size": 3, **init_args}},
    }
    path = tmp_path / "sub.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def fit(tmp_path, data_class, init_args, *extra):
    """``graph-urpe fit`` of :func:`write_config`'s experiment."""
    main(["fit", "--config", write_config(tmp_path, data_class, init_args), *extra])


def test_stand_in_fit_on_test_dev_ends_in_a_submission_file(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    gaps = np.linspace(4.0, 12.0, len(SMILES))
    write_pcqm4mv2_folder(str(data / "pcqm4mv2_qm9"), SMILES, gaps,
                          fractions=(0.6, 0.2, 0.1, 0.1), num_workers=0)
    fit(tmp_path, "PCQM4Mv2DataModule", {"standin": True, "test_split": "test-dev"})
    out = capsys.readouterr().out
    assert ("Not a leaderboard number (MAE by ogb.lsc.PCQM4Mv2Evaluator): the data are an "
            "offline rebuild (Offline PCQM4Mv2 stand-in built by") in out
    assert "test-dev labels are hidden: OGB scores the submission file." in out
    run = tmp_path / "runs" / "sub" / "version_0"
    written = run / "y_pred_pcqm4m-v2_test-dev_standin.npz"
    assert f"Wrote {written}: 4 test-dev predictions" in out
    y_pred = np.load(written)["y_pred"]
    # Independent: the best checkpoint over the test-dev molecules, in split order.
    model = GraphPropertyModule.load_from_checkpoint(run / "checkpoints" / "best.ckpt").eval()
    dm = PCQM4Mv2DataModule(standin=True, root=str(data), test_split="test-dev")
    dm.setup("test")
    split = dm.splits["test"]
    assert len(split) == 4 and y_pred.shape == (4,) and y_pred.dtype == np.float32
    with torch.no_grad():
        expected = [model.predict_values(dm._loader([split[i]], shuffle=False, indexed=False)
                                         .__iter__().__next__()).item() for i in range(4)]
    np.testing.assert_allclose(y_pred, expected, atol=1e-5)


def test_real_size_submission_is_written_by_ogb(tmp_path, monkeypatch):
    calls = []
    real = PCQM4Mv2Evaluator.save_test_submission
    monkeypatch.setattr(PCQM4Mv2Evaluator, "save_test_submission",
                        lambda self, *a, **k: calls.append(k["mode"]) or real(self, *a, **k))
    y = np.linspace(3.0, 9.0, 147_037).astype(np.float32)
    path = save_submission(torch.from_numpy(y), str(tmp_path / "sub"))
    assert calls == ["test-dev"] and path.endswith("y_pred_pcqm4m-v2_test-dev.npz")
    np.testing.assert_array_equal(np.load(path)["y_pred"], y)
    with pytest.raises(ValueError, match="147037 predictions, got 10"):
        save_submission(np.zeros(10), str(tmp_path / "sub"))
    with pytest.raises(ValueError, match="mode must be one of"):
        save_submission(y, str(tmp_path / "sub"), mode="valid")
    y[5] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        save_submission(y, str(tmp_path / "sub"))


def test_summary_and_record_mark_rebuilt_data_and_cut_test_splits(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    labels = np.array([[float(i % 2)] for i in range(len(SMILES))])
    folder = write_ogb_graphprop_folder(str(tmp_path / "data"), "ogbg-molhiv", SMILES, labels,
                                        num_workers=0)
    # A rebuilt folder, and a test cut to two batches of one of the split's 4 molecules.
    fit(tmp_path, "OGBDataModule", {"name": "ogbg-molhiv", "batch_size": 1},
        "--trainer.limit_test_batches", "2")
    out = capsys.readouterr().out
    assert ("Not a leaderboard number (ROC-AUC by ogb.graphproppred.Evaluator('ogbg-molhiv')): "
            "the data are an offline rebuild (ogbg-molhiv rebuilt offline by") in out
    assert "the test covered 2 of the split's 4 graphs (limit_test_batches)." in out
    record = read_record(str(tmp_path / "runs" / "sub" / "version_0"))
    assert record["leaderboard"] is False and not record["official_data"]
    assert (record["tested_graphs"], record["split_graphs"]) == (2, 4)
    # The same folder as OGB's download (its release file says nothing of a rebuild), tested
    # whole by `graph-urpe test`: a leaderboard number, naming the evaluator.
    for release in glob.glob(f"{folder}/RELEASE_v*.txt"):
        with open(release, "w") as handle:
            handle.write("ogbg-molhiv\n")
    best = tmp_path / "runs" / "sub" / "version_0" / "checkpoints" / "best.ckpt"
    main(["test", "--config", str(tmp_path / "sub.yaml"), "--ckpt_path", str(best)])
    assert ("Leaderboard number: ROC-AUC by ogb.graphproppred.Evaluator('ogbg-molhiv') on the "
            "official data, all 4 graphs of the test split.") in capsys.readouterr().out


def test_seeds_runs_one_fit_per_seed_and_writes_the_leaderboard_row(tmp_path, capsys,
                                                                    monkeypatch):
    import pandas as pd

    from graph_urpe.cli.seeds import main as seeds_main

    monkeypatch.chdir(tmp_path)
    csv = tmp_path / "mols.csv"
    split = ["train"] * 30 + ["valid"] * 5 + ["test"] * 5
    pd.DataFrame({"smiles": SMILES, "target": [len(s) / 4.0 for s in SMILES],
                  "split": split}).to_csv(csv, index=False)
    config = write_config(tmp_path, "CSVDataModule",
                          {"path": str(csv), "split": "split", "batch_size": 8})
    assert seeds_main(["--config", config, "--seeds", "2", "--first-seed", "3"]) == 0
    captured = capsys.readouterr()
    runs = [tmp_path / "runs" / "sub" / f"version_{v}" for v in (0, 1)]
    # Each run is a plain fit with its seed; the test MAE of each, as its metrics.csv holds it.
    maes = []
    for seed, run in zip((3, 4), runs):
        assert yaml.safe_load((run / "config.yaml").read_text())["seed_everything"] == seed
        maes.append(pd.read_csv(run / "metrics.csv")["test/mae"].dropna().iloc[-1])
    table = pd.read_csv(tmp_path / "runs" / "sub" / "seeds.csv")
    assert table["mae"].tolist()[:2] == pytest.approx(maes)
    row = (tmp_path / "runs" / "sub" / "leaderboard.md").read_text().splitlines()[2]
    cells = [c.strip() for c in row.strip("|").split("|")]
    mean, std = np.mean(maes), np.std(maes, ddof=1)
    assert cells[0] == "sub" and cells[1] == f"{mean:.4f} ± {std:.4f}" and cells[5] == "2"
    model = GraphPropertyModule.load_from_checkpoint(runs[0] / "checkpoints" / "best.ckpt")
    assert cells[3] == f"{sum(p.numel() for p in model.parameters()):,}"
    assert cells[4].startswith("1 x ") and "cores" in cells[4]
    valid = [read_record(str(r))["valid"] for r in runs]
    assert cells[2] == f"{np.mean(valid):.4f} ± {np.std(valid, ddof=1):.4f}"
    assert "has no official evaluator" in captured.out


def test_a_users_own_file_is_not_called_a_rebuild():
    from graph_urpe.cli.leaderboard import leaderboard_record

    record = leaderboard_record(None, "mae", "my.csv", False, 6, 6)
    assert record["note"] == ("Not a leaderboard number: my.csv has no official evaluator "
                              "(metrics by torchmetrics).")
    assert not record["leaderboard"]


def test_seeds_command_printed_by_fit_parses_as_the_same_fit():
    # The summary's hint: seeds' own parser reads it back, and the options after `--` are the
    # fit's, without the seed and run identity (each seed is a new run).
    fit = ["fit", "--config", "csv/template", "--config=extra.yaml", "--data.init_args.path",
           "my file.csv", "--seed_everything", "4", "--version=2", "--trainer.max_epochs", "3"]
    words = shlex.split(seeds_command(fit))
    assert words[:4] == ["graph-urpe", "seeds", "--seeds", "3"]
    cut = words.index("--")
    args = build_parser().parse_args(words[2:cut])
    assert args.config == ["csv/template", "extra.yaml"] and args.seeds == 3
    assert words[cut + 1:] == ["--data.init_args.path", "my file.csv", "--trainer.max_epochs", "3"]
    assert seeds_command(["fit", "--trainer.max_epochs", "1"]) is None  # seeds needs a config
