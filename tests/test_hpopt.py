"""``graph-urpe hpopt``: the search space, the pruning callback, and a search whose best
configuration, trained again with ``graph-urpe fit --config best.yaml``, reproduces its trial's
validation metric."""

from __future__ import annotations

import copy
import json

import optuna
import pandas as pd
import pytest
import yaml

from graph_urpe.cli import main
from graph_urpe.cli.hpopt import _objective, _probe
from graph_urpe.cli.messages import CLIError
from graph_urpe.cli.search_space import DEFAULT_SPACE, cap_epochs, parse_space
from graph_urpe.models.pruning import PRUNED_AT, open_study

SMILES = [
    "CCO", "CCN", "CCCC", "c1ccccc1", "CC(=O)O", "CCOC", "c1ccncc1", "CC(C)O",
    "OCCO", "CC#N", "C1CCCCC1", "CCCl", "Cc1ccccc1", "COC(=O)C", "NCCN", "CCS",
]


def tiny_config(tmp_path) -> str:
    """A 16-molecule regression CSV and an experiment file of a one-layer, width-16 network."""
    split = ["train"] * 10 + ["valid"] * 3 + ["test"] * 3
    pd.DataFrame({"smiles": SMILES, "target": [len(s) / 4 for s in SMILES],
                  "split": split}).to_csv(tmp_path / "mols.csv", index=False)
    config = {
        "name": "tiny",
        "trainer": {"accelerator": "cpu", "max_epochs": 2, "enable_progress_bar": False,
                    "enable_model_summary": False, "num_sanity_val_steps": 0,
                    "default_root_dir": str(tmp_path / "runs")},
        "model": {"init_args": {
            "model": {"init_args": {"num_layers": 1, "embed_dim": 16, "num_heads": 2,
                                    "ffn_dim": 16, "max_hops": 4, "max_distance": 8,
                                    "max_degree": 6}},
            "lr_scheduler": {"init_args": {"warmup_steps": 2}},
        }},
        "data": {"class_path": "graph_urpe.data.modules.CSVDataModule",
                 "init_args": {"path": str(tmp_path / "mols.csv"), "split": "split",
                               "featurization": "zinc", "root": str(tmp_path / "data"),
                               "batch_size": 4}},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def val_curve(run) -> list[float]:
    return pd.read_csv(run / "metrics.csv")["val/mae"].dropna().tolist()


def test_default_space_parses_and_suggests_in_range():
    space = parse_space(DEFAULT_SPACE)
    assert [p.name for p in space] == ["lr", "encoder_lr_factor", "dropout", "width", "depth",
                                       "epochs"]
    assert [p.name for p in space if p.sets_encoder_shape] == ["width", "depth"]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(20):
        trial = study.ask()
        values = {p.name: p.suggest(trial) for p in space}
        assert 2e-4 <= values["lr"] <= 5e-3 and 0.1 <= values["encoder_lr_factor"] <= 1.0
        assert values["width"] in (32, 64, 128) and values["depth"] in range(2, 7)
        assert values["epochs"] in (10, 20, 30, 40, 50) and isinstance(values["depth"], int)
        study.tell(trial, 0.0)


def test_explicit_max_epochs_caps_the_epochs_parameter():
    space = parse_space(DEFAULT_SPACE)
    epochs = {p.name: p for p in space}["epochs"]
    assert cap_epochs(space, 60) == (space, None)  # above the range: nothing changes
    capped, note = cap_epochs(space, 35)  # on the step-10 grid: 10, 20, 30
    assert {p.name: p for p in capped}["epochs"].high == 30 and epochs.high == 50
    assert [p.name for p in capped] == [p.name for p in space]
    assert note == "epochs is searched within 10 to 30 (capped by --trainer.max_epochs 35)"
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    drawn = {{p.name: p for p in capped}["epochs"].suggest(study.ask()) for _ in range(30)}
    assert drawn == {10, 20, 30}
    for cap in (15, 5):  # no range left: the parameter goes, every trial trains `cap` epochs
        capped, note = cap_epochs(space, cap)
        assert "epochs" not in [p.name for p in capped] and len(capped) == len(space) - 1
        assert note.startswith(f"epochs is fixed at {cap}")
    choices = parse_space("e: {options: [trainer.max_epochs], choices: [5, 10, 20]}")
    assert cap_epochs(choices, 12)[0][0].choices == (5, 10)
    both = parse_space("e: {options: [trainer.max_epochs, trainer.max_steps], low: 1, high: 9}")
    assert cap_epochs(both, 3) == (both, None)  # sets more than the epochs: left alone


def test_objective_is_the_tested_checkpoints_validation_metric(tmp_path):
    pd.DataFrame({"epoch": [0, 0, 1, 1, 2], "val/mae": [0.5, None, 0.3, None, 0.4],
                  "val/rocauc": [0.6, None, 0.8, None, 0.7]}).to_csv(tmp_path / "metrics.csv")
    assert _objective(str(tmp_path), "mae", "min", "best") == (0.3, 3)
    assert _objective(str(tmp_path), "mae", "min", "last") == (0.4, 3)
    assert _objective(str(tmp_path), "rocauc", "max", "best") == (0.8, 3)
    assert _objective(str(tmp_path), "rocauc", "max", "last") == (0.7, 3)
    # What fit tests: the template tests soup.ckpt (test_checkpoint: soup), scored as its best
    # epochs' best value; auto: last for regression, best for classification.
    template = ["--config", "csv/template", "--data.init_args.path", "x.csv"]
    assert _probe(template)[1:4] == ("mae", "min", "soup")
    auto = [*template, "--test_checkpoint", "auto"]
    assert _probe(auto)[1:4] == ("mae", "min", "last")
    assert _probe([*auto, "--data.init_args.task", "classification"])[1:4] == (
        "rocauc", "max", "best")
    assert _probe([*template, "--test_checkpoint", "best"])[3] == "best"


@pytest.mark.parametrize("text, message", [
    ("lr: 3", "give a mapping"),
    ("lr: {options: [a.b], low: 1, high: 2, choices: [1]}", "either low and high"),
    ("lr: {options: [a.b], low: 2, high: 1}", "low < high"),
    ("lr: {options: [a.b], low: 0.0, high: 1.0, log: true}", "log scale needs low > 0"),
    ("lr: {low: 0.1, high: 1.0}", "`options` must list"),
    ("lr: {options: [a.b], low: 0.1, high: 1.0, scale: 2}", "unknown key"),
    ("[1, 2]", "must map parameter names"),
])
def test_bad_spaces_are_refused_in_one_line(text, message):
    with pytest.raises(CLIError, match=message):
        parse_space(text)


def test_pruning_callback_stops_a_trial_worse_than_the_median(tmp_path, capsys, one_thread):
    config = tiny_config(tmp_path)
    path = str(tmp_path / "study.jsonl")
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(path))
    study = optuna.create_study(storage=storage, study_name="tiny", direction="minimize")
    study.set_user_attr("pruner", {"name": "median", "n_startup_trials": 1, "n_warmup_steps": 0})
    # A finished trial with a validation MAE no fit reaches at each epoch: the next is pruned
    # at its first validation.
    study.add_trial(optuna.trial.create_trial(
        value=1e-6, intermediate_values={0: 1e-6, 1: 1e-6}, params={},
        distributions={}))
    trial = study.ask()
    callback = {"class_path": "graph_urpe.models.pruning.TrialPruning",
                "init_args": {"study": path, "trial": trial.number}}
    main(["fit", "--config", config, "--test_after_fit", "false",
          f"--trainer.callbacks+={json.dumps(callback)}"])
    out = capsys.readouterr().out
    assert "stopped after 1 of 2 epochs: pruned by graph-urpe hpopt (trial 1" in out
    run = tmp_path / "runs" / "tiny" / "version_0"
    reloaded = open_study(path).trials[1]
    assert reloaded.user_attrs[PRUNED_AT] == 0
    assert reloaded.intermediate_values == {0: pytest.approx(val_curve(run)[0])}
    assert len(val_curve(run)) == 1 and not (run / "test_predictions.csv").exists()


def test_search_writes_trials_and_a_best_config_that_reproduces_its_trial(
        tmp_path, capsys, monkeypatch, one_thread):
    monkeypatch.chdir(tmp_path)
    config = tiny_config(tmp_path)
    (tmp_path / "space.yaml").write_text(
        "lr: {options: [model.init_args.optimizer.init_args.lr], low: 1.0e-3, high: 1.0e-2, "
        "log: true}\nepochs: {options: [trainer.max_epochs], low: 2, high: 3}\n")
    main(["hpopt", "--config", config, "--trials", "3", "--space", "space.yaml",
          "--pruner", "none", "--", "--model.init_args.model.init_args.dropout", "0.1"])
    out = capsys.readouterr().out
    folder = tmp_path / "runs" / "tiny-hpopt"
    trials = pd.read_csv(folder / "trials.csv")
    assert trials["trial"].tolist() == [0, 1, 2] and set(trials["state"]) == {"complete"}
    for row in trials.itertuples():
        run = folder / f"version_{row.trial}"
        # The objective is the best validation MAE of the trial's own log; trials never test.
        assert row.value == pytest.approx(min(val_curve(run)))
        assert row.validations == row.epochs == len(val_curve(run))
        assert not (run / "test_predictions.csv").exists()
        assert yaml.safe_load((run / "config.yaml").read_text())["model"]["init_args"][
            "optimizer"]["init_args"]["lr"] == pytest.approx(row.lr)
    best = trials.loc[trials["value"].idxmin()]
    assert f"Best trial: {best.trial}, val/mae {best.value:.6g}" in out
    written = yaml.safe_load((folder / "best.yaml").read_text())
    assert written["name"] == "tiny" and "version" not in written
    assert written["trainer"]["callbacks"] is None  # the search's pruning callback is gone
    assert written["model"]["init_args"]["model"]["init_args"]["dropout"] == 0.1  # after --

    # best.yaml's base is the search's configuration as a fit saves it: a trial's config.yaml
    # is that with its values and the search's own settings (and Trainer.fit's arguments).
    saved = _probe(["--config", config, "--model.init_args.model.init_args.dropout", "0.1"])[4]
    for row in trials.itertuples():
        trial = yaml.safe_load((folder / f"version_{row.trial}" / "config.yaml").read_text())
        expected = copy.deepcopy(saved)
        expected["model"]["init_args"]["optimizer"]["init_args"]["lr"] = trial["model"][
            "init_args"]["optimizer"]["init_args"]["lr"]
        expected["trainer"]["max_epochs"] = row.epochs
        expected["trainer"]["callbacks"] = [{
            "class_path": "graph_urpe.models.pruning.TrialPruning",
            "init_args": {"study": str(folder / "study.jsonl"), "trial": row.trial}}]
        expected.update(name="tiny-hpopt", version=row.trial, test_after_fit=False,
                        ckpt_path=None, weights_only=None)
        assert trial == expected
        assert trial["model"]["init_args"]["optimizer"]["init_args"]["lr"] == pytest.approx(
            row.lr)
    best_trial = yaml.safe_load((folder / f"version_{best.trial}" / "config.yaml").read_text())
    for key in ("version", "test_after_fit", "ckpt_path", "weights_only"):
        del best_trial[key]
    best_trial.update(name="tiny")
    best_trial["trainer"]["callbacks"] = None
    assert written == best_trial

    # The best configuration, trained again, reproduces its trial's validation metric (and
    # is tested this time).
    main(["fit", "--config", str(folder / "best.yaml")])
    run = tmp_path / "runs" / "tiny" / "version_0"
    assert min(val_curve(run)) == pytest.approx(best.value, abs=1e-6)
    assert val_curve(run) == pytest.approx(val_curve(folder / f"version_{best.trial}"), abs=1e-6)
    assert (run / "test_predictions.csv").exists()


def test_search_scores_the_last_checkpoint_when_fit_tests_it_within_the_epoch_cap(
        tmp_path, capsys, monkeypatch, one_thread):
    monkeypatch.chdir(tmp_path)
    config = tiny_config(tmp_path)
    (tmp_path / "space.yaml").write_text(
        "lr: {options: [model.init_args.optimizer.init_args.lr], low: 1.0e-3, high: 3.0e-2, "
        "log: true}\nepochs: {options: [trainer.max_epochs], low: 2, high: 6}\n")
    main(["hpopt", "--config", config, "--trials", "2", "--space", "space.yaml", "--pruner",
          "none", "--", "--test_checkpoint", "auto", "--trainer.max_epochs", "3"])
    out = capsys.readouterr().out
    assert "epochs is searched within 2 to 3 (capped by --trainer.max_epochs 3)" in out
    assert "a trial's objective is its last val/mae (the last checkpoint" in out
    assert "the value given after -- is overridden" not in out
    trials = pd.read_csv(tmp_path / "runs" / "tiny-hpopt" / "trials.csv")
    for row in trials.itertuples():
        curve = val_curve(tmp_path / "runs" / "tiny-hpopt" / f"version_{row.trial}")
        assert row.epochs in (2, 3) and len(curve) == row.epochs
        assert row.value == pytest.approx(curve[-1])  # last.ckpt's, what fit tests
