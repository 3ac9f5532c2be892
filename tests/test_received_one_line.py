"""Issue 39, case 9: what ended in a traceback is one line naming the input and the fix.

``target_names`` of another length than the targets (an ``IndexError`` later), a corrupt
``study.jsonl`` (Optuna's ``AssertionError``), and a non-finite training loss whose message blamed
the labels whatever its cause.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import optuna
import pandas as pd
import pytest
import torch
from lightning.pytorch import seed_everything
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from graph_urpe.cli import main
from graph_urpe.data.modules.molecule import CSVDataModule
from graph_urpe.models.graph import GraphPropertyModule
from graph_urpe.models.loss_checks import NonFiniteLossError
from graph_urpe.models.objective import Objective
from graph_urpe.models.pruning import open_study, study_storage
from graph_urpe.models.record import ModelRecord
from graph_urpe.trust import ReceivedFileError, read_checkpoint
from tests.test_hpopt import tiny_config
from tests.test_models_graph import SMILES, datamodule, tiny_net, trainer
from tests.test_trust import checkpoint, hparams


def one_error_line(err: str) -> str:
    """The error line of graph-urpe's two-line report (the second: how to see the traceback)."""
    lines = err.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in err and "GRAPH_URPE_DEBUG" in lines[1], err
    return lines[0]


# ------------------------------------------------------------------------- target_names
def test_target_names_of_another_length_than_the_targets_is_one_line(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"^target_names lists 2 name\(s\) \(a, b\) for 1 "
                       r"target\(s\) \(the network's num_tasks\): give one name per target"):
        GraphPropertyModule(tiny_net(num_tasks=1), record=ModelRecord(target_names=["a", "b"]))
    assert GraphPropertyModule(tiny_net(num_tasks=2), record=ModelRecord(target_names=["a", "b"])).target_names == [
        "a", "b"]
    # A received checkpoint saying so is refused before predict builds anything.
    path = checkpoint(tmp_path / "names.ckpt", hparams(target_names=["a", "b"]))
    with pytest.raises(ReceivedFileError, match="target_names lists 2 name"):
        read_checkpoint(path)
    with pytest.raises(SystemExit) as info:
        main(["predict", "--ckpt_path", str(path), "--smiles", "CCO"])
    line = one_error_line(capsys.readouterr().err)
    assert info.value.code == 2 and str(path) in line and "target_names lists 2" in line


# ------------------------------------------------------------------------- non-finite loss
def test_a_diverging_lr_is_blamed_and_not_the_labels(tmp_path, one_thread):
    seed_everything(0)
    model = GraphPropertyModule(tiny_net(), record=ModelRecord(featurization="zinc", target_names=["target"]), optimizer=partial(torch.optim.AdamW, lr=1e30), lr_scheduler=None)
    with pytest.raises(NonFiniteLossError) as info:
        trainer(tmp_path, max_epochs=2).fit(model, datamodule(tmp_path))
    message = str(info.value)
    # The labels (len(smiles) / 4, standardised) are small; the first update at lr 1e30 broke it.
    assert "\n" not in message and "lr 1e+30;" in message and "at epoch 0, step 1," in message
    assert "largest |label| (standardised) is " in message
    assert "the labels are in range, so the updates diverged: lower the optimizer's lr" in message
    assert "label column" not in message


def test_huge_labels_are_blamed_with_the_value_seen(tmp_path, one_thread):
    csv = tmp_path / "huge.csv"
    pd.DataFrame({"smiles": SMILES, "target": [1e30] * len(SMILES),
                  "split": ["train"] * 10 + ["valid"] * 3 + ["test"] * 3}).to_csv(csv, index=False)
    seed_everything(0)
    model = GraphPropertyModule(tiny_net(), record=ModelRecord(featurization="zinc", target_names=["target"]), objective=Objective(loss="mse", standardize=False), optimizer=partial(torch.optim.AdamW, lr=1e-3), lr_scheduler=None)
    dm = CSVDataModule(str(csv), split="split", featurization="zinc", root=str(tmp_path / "p"),
                       batch_size=4)
    with pytest.raises(NonFiniteLossError) as info:
        trainer(tmp_path, max_epochs=1).fit(model, dm)
    message = str(info.value)
    # MSE of 1e30 labels overflows float32 at the first step, before any update.
    assert "training loss is inf at epoch 0, step 0, lr 0.001;" in message
    assert "largest |label| is 1e+30" in message and "label column for huge values" in message
    assert "lower the optimizer's lr" not in message


# ------------------------------------------------------------------------- study.jsonl
def study_lines(path: Path) -> list[str]:
    """A journal of one study (line 1), its pruner (line 2), and one finished trial (lines 3-5:
    created, its lr, its value), as graph-urpe hpopt writes it."""
    study = optuna.create_study(storage=JournalStorage(JournalFileBackend(str(path))),
                                study_name="tiny", direction="minimize")
    study.set_user_attr("pruner", {"name": "median", "n_startup_trials": 1, "n_warmup_steps": 0})
    trial = study.ask()
    trial.suggest_float("lr", 1e-4, 1e-2, log=True)
    study.tell(trial, 0.5)
    lines = path.read_text().splitlines(keepends=True)
    assert [json.loads(line)["op_code"] for line in lines] == [0, 2, 4, 5, 6]
    return lines


def changed(line: str, **fields) -> str:
    return json.dumps({**json.loads(line), **fields}) + "\n"


CORRUPTIONS = {  # name -> (lines -> changed lines, the line named, what is said)
    "assertion": (lambda ls: [ls[0], changed(ls[1], user_attr={"a": 1, "b": 2}), *ls[2:]], 2,
                  "(AssertionError)"),
    "unknown-distribution": (lambda ls: [*ls[:3], changed(ls[3], distribution=json.dumps(
        {"name": "payload_xyz.Evil", "attributes": {}})), ls[4]], 4, "(ValueError)"),
    "not-json": (lambda ls: [*ls[:2], "{garbage\n", *ls[2:]], 3, "not a complete JSON record"),
    "cut-short": (lambda ls: [*ls[:4], ls[4][:30]], 5, "not a complete JSON record"),
    "no-op-code": (lambda ls: [ls[0], "[1, 2]\n", *ls[1:]], 2, "not a complete JSON record"),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_a_corrupt_study_file_is_one_line_naming_its_line(tmp_path, name):
    path = tmp_path / "study.jsonl"
    lines = study_lines(path)
    assert open_study(str(path)).trials[0].params == {"lr": pytest.approx(
        json.loads(lines[3])["param_value_internal"])}
    corrupt, number, said = CORRUPTIONS[name]
    path.write_text("".join(corrupt(lines)))
    for read in (study_storage, open_study):
        with pytest.raises(ReceivedFileError) as info:
            read(str(path))
        message = str(info.value)
        assert message.startswith(f"refusing {path}: line {number} ") and said in message
        assert "\n" not in message and "another --name" in message


def test_a_study_with_a_broken_pruner_setting_is_one_line(tmp_path):
    path = tmp_path / "study.jsonl"
    lines = study_lines(path)
    path.write_text("".join([lines[0], changed(lines[1], user_attr={"pruner": {"name": "median"}}),
                             *lines[2:]]))
    with pytest.raises(ReceivedFileError, match=r"pruner setting: the median pruner needs "
                       r"n_startup_trials and n_warmup_steps as non-negative integers, got "
                       r"\[None, None\]"):
        open_study(str(path))
    path.write_text("")  # emptied
    with pytest.raises(ReceivedFileError, match="it holds no study"):
        open_study(str(path))


def test_hpopt_continuing_a_corrupt_study_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tiny_config(tmp_path)
    folder = tmp_path / "runs" / "tiny-hpopt"
    folder.mkdir(parents=True)
    lines = study_lines(folder / "study.jsonl")
    (folder / "study.jsonl").write_text("".join(CORRUPTIONS["assertion"][0](lines)))
    with pytest.raises(SystemExit) as info:
        main(["hpopt", "--config", config, "--trials", "1"])
    line = one_error_line(capsys.readouterr().err)
    assert info.value.code == 2
    assert f"refusing {folder / 'study.jsonl'}: line 2 is not a record Optuna can apply" in line
    assert not (folder / "version_0").exists()  # no trial ran
