"""Issue 39, case 4: a study folder is data. ``best.yaml`` is built from the search's own
configuration (the user's ``--config`` files and options, trusted) and the values ``study.jsonl``
records for the best trial, each checked against its search parameter; a trial's ``config.yaml``
is never read, so what is planted there (a payload class, a top-level ``config:`` key, another
CSV) has no effect, and a recorded value the space cannot draw is refused in one line.
"""

from __future__ import annotations

import copy
import math
import sys

import optuna
import pytest
import yaml

from graph_urpe.cli import main
from graph_urpe.cli.hpopt import _probe
from graph_urpe.cli.search_outputs import PRUNING_CALLBACK, write_best_config
from graph_urpe.cli.search_space import parse_space
from graph_urpe.trust import UntrustedFileError
from tests.test_hpopt import tiny_config

PAYLOAD = "evilpayload.Net"

BASE = {  # the search's configuration as _probe gives it (shortened)
    "seed_everything": 0,
    "trainer": {"accelerator": "cpu", "strategy": "auto", "max_epochs": 2, "logger": None,
                "profiler": None, "default_root_dir": "runs",
                "callbacks": [{"class_path": "lightning.pytorch.callbacks.Timer",
                               "init_args": {"duration": None}}]},
    "model": {"class_path": "graph_urpe.models.graph.GraphPropertyModule", "init_args": {
        "model": {"class_path": "graph_urpe.nn.Graphormer",
                  "init_args": {"num_layers": 1, "embed_dim": 16, "ffn_dim": 16,
                                "dropout": 0.0}},
        "optimizer": {"class_path": "torch.optim.AdamW", "init_args": {"lr": 0.001}},
        "objective": {"standardize": True}}},
    "data": {"class_path": "my_lab.data.MyDataModule",  # the user's own class: trusted
             "init_args": {"path": "mols.csv", "batch_size": 4}},
    "name": "tiny", "version": None, "test_after_fit": True, "test_checkpoint": "best",
    "optimizer": None, "lr_scheduler": None,
}
LR = "model.init_args.optimizer.init_args.lr"
SPACE = parse_space(f"""
lr: {{options: [{LR}], low: 1.0e-4, high: 1.0e-2, log: true}}
width: {{options: [model.init_args.model.init_args.embed_dim,
                  model.init_args.model.init_args.ffn_dim], choices: [16, 32]}}
depth: {{options: [model.init_args.model.init_args.num_layers], low: 1, high: 4}}
epochs: {{options: [trainer.max_epochs], low: 10, high: 50, step: 10}}
act: {{options: [model.init_args.objective.standardize], choices: [true, false]}}
""")


@pytest.fixture
def payload(tmp_path, monkeypatch):
    """``evilpayload`` (importable) writes ``MARKER`` when imported."""
    mark = tmp_path / "MARKER"
    (tmp_path / "evilpayload.py").write_text(
        f"import pathlib\npathlib.Path({str(mark)!r}).write_text('imported')\nclass Net:\n"
        "    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return mark


def test_best_yaml_is_the_searchs_configuration_with_the_recorded_values(tmp_path):
    base = copy.deepcopy(BASE)
    base["trainer"]["callbacks"].append({"class_path": PRUNING_CALLBACK,
                                         "init_args": {"study": "s.jsonl", "trial": 0}})
    recorded = {"lr": 0.002, "width": 32, "depth": 3, "epochs": 30, "act": False,
                "gone": "evilpayload.Net"}  # a parameter outside the space: not used
    path = write_best_config(base, str(tmp_path / "best.yaml"), "tiny",
                             ["Best trial 0.", "Values: lr=0.002\ntrainer: {}"], SPACE,
                             recorded, "study.jsonl", 0)
    text = (tmp_path / "best.yaml").read_text()
    # A recorded value's line break cannot start a YAML line in the header.
    assert text.startswith("# Best trial 0.\n# Values: lr=0.002 trainer: {}\nseed_everything: 0\n")
    expected = copy.deepcopy(BASE)
    for key in ("version", "test_after_fit"):
        del expected[key]
    expected["trainer"]["max_epochs"] = 30  # the user's Timer stays, the pruning callback goes
    network = expected["model"]["init_args"]["model"]["init_args"]
    network.update(num_layers=3, embed_dim=32, ffn_dim=32)
    expected["model"]["init_args"]["optimizer"]["init_args"]["lr"] = 0.002
    expected["model"]["init_args"]["objective"]["standardize"] = False
    assert path == str(tmp_path / "best.yaml") and yaml.safe_load(text) == expected
    assert base["trainer"]["callbacks"][-1]["class_path"] == PRUNING_CALLBACK  # not modified
    # A parameter the trial does not record keeps the configuration's value.
    write_best_config(BASE, str(tmp_path / "b2.yaml"), "tiny", [], SPACE, {"lr": 0.003},
                      "study.jsonl", 0)
    written = yaml.safe_load((tmp_path / "b2.yaml").read_text())
    assert written["model"]["init_args"]["model"] == BASE["model"]["init_args"]["model"]
    assert written["trainer"]["max_epochs"] == 2
    assert "evilpayload" not in sys.modules


HOSTILE = {  # name -> (the parameter, the recorded value, the fault named)
    "choice-dotted-name": ("width", PAYLOAD, "not one of its choices [16, 32]"),
    "choice-class-entry": ("width", {"class_path": PAYLOAD}, "not one of its choices"),
    "choice-other-type": ("width", "32", "not one of its choices"),
    "choice-float-for-int": ("width", 32.0, "not one of its choices"),
    "choice-int-for-bool": ("act", 1, "not one of its choices [True, False]"),
    "range-above": ("lr", 1e9, "outside its range [0.0001, 0.01]"),
    "range-below": ("lr", -1.0, "outside its range"),
    "range-string": ("lr", PAYLOAD, "not a number in its range"),
    "range-class-entry": ("lr", {"class_path": PAYLOAD}, "not a number in its range"),
    "range-nan": ("lr", math.nan, "not a number in its range"),
    "range-bool": ("lr", True, "not a number in its range"),
    "int-range-float": ("depth", 2.5, "not an int in its range [1, 4]"),
    "int-range-bool": ("depth", True, "not an int in its range"),
    "off-step": ("epochs", 25, "not on its grid 10 + k * 10"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_recorded_value_the_space_cannot_draw_is_refused_unimported(tmp_path, payload, name):
    param, value, fault = HOSTILE[name]
    study = tmp_path / "study.jsonl"
    recorded = {"lr": 0.002, "width": 32, "depth": 2, "epochs": 20, param: value}
    with pytest.raises(UntrustedFileError) as info:
        write_best_config(BASE, str(tmp_path / "best.yaml"), "tiny", [], SPACE, recorded,
                          str(study), 7)
    message = str(info.value)
    assert message.startswith(f"refusing {study}: trial 7 records "), message
    assert f"for search parameter {param!r}, {fault}" in message, message
    assert "\n" not in message and "best.yaml was not written" in message
    assert not payload.exists() and "evilpayload" not in sys.modules
    assert not (tmp_path / "best.yaml").exists()


def _planted_study(tmp_path, folder, trial_config: dict, lr: float):
    """A study folder whose finished trial 0 (objective 1e-9: the best) records ``lr`` and whose
    ``version_0/config.yaml`` is ``trial_config``."""
    (folder / "version_0").mkdir(parents=True)
    (folder / "version_0" / "config.yaml").write_text(yaml.safe_dump(trial_config))
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(folder / "study.jsonl")))
    study = optuna.create_study(storage=storage, study_name="tiny", direction="minimize")
    study.set_user_attr("metric", "mae")
    study.set_user_attr("pruner", {"name": "none"})
    distribution = optuna.distributions.FloatDistribution(1e-3, max(lr, 1e-2), log=True)
    study.add_trial(optuna.trial.create_trial(value=1e-9, params={"lr": lr},
                                              distributions={"lr": distribution}))
    (tmp_path / "space.yaml").write_text(
        f"lr: {{options: [{LR}], low: 1.0e-3, high: 1.0e-2, log: true}}\n")


def test_what_a_trials_config_yaml_plants_has_no_effect_on_best_yaml(
        tmp_path, capsys, monkeypatch, payload, one_thread):
    """The best trial's config.yaml names a payload model, a top-level ``config:`` file that
    names a payload, and another CSV: best.yaml is the search's own configuration with the
    recorded lr, and nothing is imported."""
    monkeypatch.chdir(tmp_path)
    config = tiny_config(tmp_path)
    (tmp_path / "evil.yaml").write_text(yaml.safe_dump({"model": {"class_path": PAYLOAD}}))
    (tmp_path / "other.csv").write_text("smiles,target,split\nC,1.0,train\n")
    planted = yaml.safe_load((tmp_path / "tiny.yaml").read_text())
    planted["config"] = str(tmp_path / "evil.yaml")
    planted["model"]["class_path"] = PAYLOAD
    planted["model"]["init_args"]["optimizer"] = {"init_args": {"lr": 1e-3}}  # as fit writes
    planted["data"]["init_args"]["path"] = "other.csv"
    folder = tmp_path / "runs" / "tiny-hpopt"
    _planted_study(tmp_path, folder, planted, 2e-3)
    fit_args = ["--config", config, "--trainer.max_epochs", "1"]
    main(["hpopt", "--config", config, "--trials", "1", "--space", "space.yaml",
          "--pruner", "none", "--", *fit_args[2:]])
    assert "Best trial: 0, val/mae 1e-09: lr=0.002" in capsys.readouterr().out
    expected = _probe(fit_args)[4]
    expected["model"]["init_args"]["optimizer"]["init_args"]["lr"] = 2e-3
    for key in ("version", "test_after_fit"):
        del expected[key]
    written = yaml.safe_load((folder / "best.yaml").read_text())
    assert written == expected and "config" not in written
    assert written["data"]["init_args"]["path"] == str(tmp_path / "mols.csv")
    assert written["model"]["class_path"] == "graph_urpe.models.graph.GraphPropertyModule"
    assert not payload.exists() and "evilpayload" not in sys.modules
    assert (folder / "version_1" / "metrics.csv").exists()  # the new trial ran as usual


def test_a_continued_study_recording_a_value_outside_the_space_is_refused_in_one_line(
        tmp_path, capsys, monkeypatch, one_thread):
    monkeypatch.chdir(tmp_path)
    config = tiny_config(tmp_path)
    folder = tmp_path / "runs" / "tiny-hpopt"
    _planted_study(tmp_path, folder, {"model": {"class_path": PAYLOAD}}, 1e9)
    with pytest.raises(SystemExit) as info:
        main(["hpopt", "--config", config, "--trials", "1", "--space", "space.yaml",
              "--pruner", "none", "--", "--trainer.max_epochs", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 2 and "Traceback" not in "\n".join(err)
    assert err[-2].startswith(f"graph-urpe: error: refusing {folder / 'study.jsonl'}: trial 0 "
                              "records 1000000000.0 for search parameter 'lr', outside its "
                              "range [0.001, 0.01]"), err
    assert not (folder / "best.yaml").exists()
    assert (folder / "version_1" / "metrics.csv").exists()  # the new trial ran as usual
