"""The module's option groups (issue 40): ModelRecord / Objective / Finetune, the record linked
whole at fit, stored as plain data, checked on receipt, and earlier checkpoints' flat arguments
regrouped."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from graph_urpe.data.families import dataset_family
from graph_urpe.models.finetune import Finetune
from graph_urpe.models.graph import GraphPropertyModule
from graph_urpe.models.objective import Objective
from graph_urpe.models.record import ModelRecord, nest_flat_arguments
from graph_urpe.received import Refusal, check_module_hparams
from graph_urpe.trust import ReceivedFileError
from tests.test_trust import checkpoint, hparams, state_dict


def test_flat_arguments_of_earlier_versions_move_into_their_groups():
    flat = {"model": {"class_path": "x"}, "task": "classification", "metric": "ap",
            "target_names": ["a"], "max_graph_nodes": 64, "loss": "bce", "platt_scaling": True,
            "pos_weight": "balanced", "pretrained": "moses-rdkit", "freeze_encoder": 0.1,
            "ensemble_size": 3}
    assert nest_flat_arguments(flat) == {
        "model": {"class_path": "x"}, "ensemble_size": 3,
        "record": {"task": "classification", "metric": "ap", "target_names": ["a"],
                   "max_graph_nodes": 64},
        "objective": {"loss": "bce", "platt_scaling": True, "pos_weight": "balanced"},
        "finetune": {"pretrained": "moses-rdkit", "freeze_encoder": 0.1}}
    grouped = {"record": {"task": "regression"}, "objective": {"loss": "mse"}}
    assert nest_flat_arguments(grouped) == grouped  # today's layout: left as it is
    # A file of no version: a field flat and in its group, or a group that is not a mapping.
    with pytest.raises(ValueError, match="task given twice"):
        nest_flat_arguments({"task": "regression", "record": {"task": "classification"}})
    with pytest.raises(ValueError, match="objective is not a mapping"):
        nest_flat_arguments({"standardize": True, "objective": 12345})
    with pytest.raises(Refusal, match="loss given twice"):
        check_module_hparams(hparams(loss="mse", objective={"loss": "l1"}))


@pytest.mark.parametrize("word", ["None", "none", "null", "NULL"])
def test_the_word_none_means_no_pretrained_encoder(word):
    # jsonargparse 4.53 passes `--model.init_args.finetune.pretrained null` as the string "None".
    assert Finetune(pretrained=word).pretrained is None
    assert Finetune(pretrained="moses-rdkit").pretrained == "moses-rdkit"


def test_an_earlier_checkpoint_loads_into_todays_groups(tmp_path):
    old = {k: v for k, v in hparams().items() if k != "record"}
    old.update(task="regression", featurization="zinc", target_names=["logp"], loss="mse",
               standardize=False, dataset_source="my.csv")
    module = GraphPropertyModule.load_from_checkpoint(checkpoint(tmp_path / "old.ckpt", old))
    assert module.record == ModelRecord(task="regression", featurization="zinc",
                                        target_names=["logp"], dataset_source="my.csv")
    assert module.objective == Objective(loss="mse", standardize=False)
    assert module.finetune == Finetune() and module.target_names == ["logp"]
    for key, value in state_dict().items():  # the weights as written
        torch.testing.assert_close(module.state_dict()[key], value, equal_nan=True)


@pytest.mark.parametrize("group,value,fault", [
    ("objective", {"loss": "mse", "shell": "rm -rf /"}, "Objective has no field 'shell'"),
    ("objective", {"loss": "sigmoid"}, "expected one of"),
    ("objective", {"pos_weight": {"class_path": "os.system"}}, "objective.pos_weight"),
    ("record", {"task": 5}, "record.task"),
    ("record", {"target_names": "abc"}, "record.target_names"),
    ("record", {"featurization": "bogus"}, "expected one of"),
    ("finetune", {"freeze_encoder": "half"}, "finetune.freeze_encoder"),
    ("record", ["regression"], "record"),
])
def test_a_received_group_holds_its_fields_of_their_types_only(group, value, fault):
    with pytest.raises(Refusal, match=fault):
        check_module_hparams(hparams(**{group: value}))


def test_a_hostile_group_in_a_checkpoint_is_refused_by_load(tmp_path):
    path = checkpoint(tmp_path / "h.ckpt", hparams(objective={"__class__": "os.system"}))
    with pytest.raises(ReceivedFileError, match="Objective has no field '__class__'"):
        GraphPropertyModule.load_from_checkpoint(path)


@pytest.mark.parametrize("family", ["zinc", "ogbg-molhiv", "pcqm4mv2"])
def test_the_record_is_the_data_modules_facts(family):
    facts = dataset_family(family).facts
    record = ModelRecord.from_facts(facts)
    for field in ("task", "metric", "evaluator", "featurization", "max_graph_nodes",
                  "smiles_column"):
        assert getattr(record, field) == getattr(facts, field), field
    assert record.target_names == list(facts.target_names) and record.dataset_source is None


def test_groups_are_stored_as_plain_fields():
    from graph_urpe.nn import Graphormer

    net = Graphormer(num_tasks=2, atom_categories=[28], bond_categories=[4], num_layers=1,
                     embed_dim=16, num_heads=2, ffn_dim=16)
    module = GraphPropertyModule(net, ModelRecord(task="classification", target_names=["a", "b"]),
                                 Objective(pos_weight=[1.0, 2.0]), Finetune(encoder_lr_factor=0.5))
    hp = dict(module.hparams)
    assert hp["record"] == dataclasses.asdict(module.record)
    assert hp["objective"]["pos_weight"] == [1.0, 2.0]
    assert hp["finetune"] == {"pretrained": None, "encoder_lr_factor": 0.5, "freeze_encoder": 0.0}
    # A dict of fields builds the same module (what a checkpoint or YAML gives).
    again = GraphPropertyModule(net, hp["record"], hp["objective"], hp["finetune"])
    assert (again.record, again.objective, again.finetune) == \
        (module.record, module.objective, module.finetune)
    with pytest.raises(ValueError, match="target_names lists 1 name"):
        GraphPropertyModule(net, ModelRecord(target_names=["a"]))


def test_an_option_of_earlier_versions_is_named_with_its_new_place(capsys):
    from graph_urpe.cli import main
    from graph_urpe.cli.messages import regrouped_hint

    assert regrouped_hint("Option 'pretrained' is not accepted (option model)").endswith(
        "pretrained -> finetune.pretrained (docs/guide/command-line.md)")
    assert regrouped_hint("Option 'dropout' is not accepted") == ""  # not one of the groups
    assert "dataset_source: delete it" in regrouped_hint("Option 'dataset_source' is not accepted")
    with pytest.raises(SystemExit):
        main(["fit", "--config", "csv/template", "--data.init_args.path", "my.csv",
              "--model.init_args.loss", "mve"])
    assert "loss -> objective.loss" in capsys.readouterr().err
