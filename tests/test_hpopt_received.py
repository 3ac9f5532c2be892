"""Issue 39, case 4: a study folder is data. ``best.yaml`` is built from the best trial's
``config.yaml`` and the values the study recorded through the checks of a received checkpoint,
so a class outside graph-urpe's registry named there is refused in one line and never imported.
"""

from __future__ import annotations

import copy
import sys

import pytest
import yaml

from graph_urpe.cli.hpopt import PRUNING_CALLBACK, write_best_config
from graph_urpe.trust import UntrustedFileError

PAYLOAD = "payload_xyz.Evil"

TRIAL = {  # a trial's config.yaml as graph-urpe fit writes it (shortened), under old aliases
    "seed_everything": 0,
    "trainer": {"accelerator": "cpu", "strategy": "auto", "max_epochs": 2, "logger": None,
                "profiler": None, "default_root_dir": "runs.old/x",
                "callbacks": [{"class_path": PRUNING_CALLBACK,
                               "init_args": {"study": "s.jsonl", "trial": 0}}]},
    "model": {"class_path": "graph_urpe.models.graph.GraphPropertyModule", "init_args": {
        "model": {"class_path": "graph_urpe.nn.Graphormer",
                  "init_args": {"num_layers": 1, "embed_dim": 16, "dropout": 0.0}},
        "optimizer": {"class_path": "torch.optim.AdamW", "init_args": {"lr": 0.001}},
        "standardize": True}},
    "data": {"class_path": "graph_urpe.data.modules.CSVDataModule",
             "init_args": {"path": "mols.csv", "batch_size": 4}},
    "name": "tiny-hpopt", "version": 0, "test_after_fit": False, "test_checkpoint": "best",
    "optimizer": None, "lr_scheduler": None, "ckpt_path": None,
}
LR = "model.init_args.optimizer.init_args.lr"


@pytest.fixture
def payload(tmp_path, monkeypatch):
    """``payload_xyz`` (importable) writes ``MARKER`` when imported."""
    mark = tmp_path / "MARKER"
    (tmp_path / "payload_xyz.py").write_text(
        f"import pathlib\npathlib.Path({str(mark)!r}).write_text('imported')\nclass Evil:\n"
        "    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return mark


def trial_folder(tmp_path, config: dict):
    run = tmp_path / "tiny-hpopt" / "version_0"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return run


def test_best_yaml_is_the_trial_with_its_recorded_values_in_canonical_form(tmp_path):
    run = trial_folder(tmp_path, TRIAL)
    path = write_best_config(str(run), str(tmp_path / "best.yaml"), "tiny",
                             ["Best trial 0.", "Values: lr=0.002\ntrainer: {}"],
                             {LR: 0.002, "trainer.max_epochs": 3})
    text = (tmp_path / "best.yaml").read_text()
    # A recorded value's line break cannot start a YAML line in the header.
    assert text.startswith("# Best trial 0.\n# Values: lr=0.002 trainer: {}\nseed_everything: 0\n")
    expected = copy.deepcopy(TRIAL)
    for key in ("version", "test_after_fit", "ckpt_path"):
        del expected[key]
    expected["name"] = "tiny"
    expected["trainer"].update(max_epochs=3, callbacks=None)  # the pruning callback is gone
    expected["model"]["class_path"] = "graph_urpe.models.GraphPropertyModule"  # the registry's
    expected["model"]["init_args"]["optimizer"]["init_args"]["lr"] = 0.002
    expected["data"]["class_path"] = "graph_urpe.data.modules.CSVDataModule"
    assert path == str(tmp_path / "best.yaml") and yaml.safe_load(text) == expected


def _set(config: dict, option: str, value) -> dict:
    config = copy.deepcopy(config)
    *parents, last = option.split(".")
    node = config
    for key in parents:
        node = node[key]
    node[last] = value
    return config


HOSTILE = {  # name -> (the trial's config.yaml, the recorded values, the entry named)
    "network": (_set(TRIAL, "model.init_args.model.class_path", PAYLOAD), {},
                "model.init_args.model names 'payload_xyz.Evil'"),
    "data": (_set(TRIAL, "data.class_path", PAYLOAD), {}, "data names 'payload_xyz.Evil'"),
    "callback": (_set(TRIAL, "trainer.callbacks", [{"class_path": PAYLOAD}]), {},
                 "trainer.callbacks[0] holds {'class_path': 'payload_xyz.Evil'}"),
    "profiler-name": (_set(TRIAL, "trainer.profiler", PAYLOAD), {},
                      "trainer.profiler holds 'payload_xyz.Evil', a dotted name"),
    "lightning-optimizer": (_set(TRIAL, "optimizer", {"class_path": PAYLOAD}), {},
                            "optimizer names 'payload_xyz.Evil'"),
    "top-level": (_set(TRIAL, "seed_everything", {"class_path": PAYLOAD}), {},
                  "seed_everything holds"),
    "recorded-optimizer": (TRIAL, {"model.init_args.optimizer": PAYLOAD},
                           "model.init_args.optimizer names 'payload_xyz.Evil'"),
    "recorded-float": (TRIAL, {LR: {"class_path": PAYLOAD}},
                       "model.init_args.optimizer.init_args.lr holds"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_study_folder_naming_a_class_outside_the_registry_is_refused_unimported(
        tmp_path, payload, name):
    config, values, named = HOSTILE[name]
    run = trial_folder(tmp_path, config)
    with pytest.raises(UntrustedFileError) as info:
        write_best_config(str(run), str(tmp_path / "best.yaml"), "tiny", [], values)
    message = str(info.value)
    assert message.startswith(f"refusing {run / 'config.yaml'}: {named}"), message
    assert "\n" not in message and "best.yaml was not written" in message
    assert ("the value study.jsonl records for this trial" in message) == bool(values)
    assert not payload.exists() and "payload_xyz" not in sys.modules
    assert not (tmp_path / "best.yaml").exists()
