"""Version fences for every private API of another library that graph-urpe reads or overrides
(none has a public counterpart in the pinned versions: ``pyproject.toml`` bounds Lightning, PyG
and jsonargparse to the minor releases these were checked against). If an upgrade renames or
changes one, a test here fails and names it and the graph-urpe code that uses it, instead of the
behaviour that depends on it going silently wrong. This file is the one list of them:

* ``lightning.pytorch.core.mixins.hparams_mixin._given_hyperparameters``: set by LightningCLI while
  it instantiates a module; every module of the package then keeps the network / optimizer /
  scheduler configuration in its hyperparameters (a checkpoint rebuilds them), and in plain Python
  leaves the injected objects out (:func:`graph_urpe.models.hparams.save_configuration`);
* ``Trainer._accelerator_connector.use_distributed_sampler``: the graph loaders split batches
  across ranks themselves and refuse a Trainer that would also wrap their sampler;
* the fit loop's restart machinery (``_FitLoop`` / ``_Loop.restarting``, ``_combined_loader``,
  ``_load_combined_loader_states``, ``epoch_loop._batches_that_stepped``): exact resume
  (:class:`graph_urpe.cli.run.ExactResumeFitLoop`);
* ``ExperimentWriter._check_log_dir_exists`` and ``CSVLogger._experiment``: a resumed run keeps
  its ``metrics.csv`` (:class:`graph_urpe.cli.run.RunCSVLogger`);
* ``LightningCLI._prepare_subcommand_parser`` (to know which subcommand's parser it builds) and
  ``LightningCLI._parse_ckpt_path``: :class:`graph_urpe.cli.lightning_cli.GraphURPECLI`;
* jsonargparse's ``ArgumentParser._default_config_files_group`` (and argparse's
  ``_action_groups``): its section of absolute paths is left out of the help
  (:class:`graph_urpe.cli.parser.GraphURPEArgumentParser`);
* PyG's ``Dataset._process`` and ``InMemoryDataset._data``: safe cache reads
  (:mod:`graph_urpe.data.cache`) and label statistics read from the collated storage;
* ``torch._softmax_backward_data``: the fused attention core's backward
  (:mod:`graph_urpe.nn._fused`);
* Optuna's ``FrozenTrial._trial_id``: an hpopt trial's fit process reports to its trial
  (:mod:`graph_urpe.models.pruning`).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import ClassVar

import pytest
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.core.mixins import hparams_mixin

GIVEN = "lightning.pytorch.core.mixins.hparams_mixin._given_hyperparameters"


class _Probe(LightningModule):
    """Records what the private context variable holds while it is constructed."""

    seen: ClassVar[list] = []

    def __init__(self, width: int = 1) -> None:
        super().__init__()
        _Probe.seen.append(hparams_mixin._given_hyperparameters.get())


def test_lightning_cli_still_sets_the_private_hparams_context_graph_module_reads():
    var = getattr(hparams_mixin, "_given_hyperparameters", None)
    assert isinstance(var, ContextVar), (
        f"Lightning no longer has {GIVEN} (a ContextVar): update "
        "graph_urpe.models.hparams.save_configuration")
    _Probe.seen.clear()
    _Probe(width=3)
    LightningCLI(_Probe, run=False, args=["--model.width", "2"], save_config_callback=None,
                 trainer_defaults={"logger": False, "enable_checkpointing": False,
                                   "enable_progress_bar": False, "accelerator": "cpu"})
    plain, cli = _Probe.seen
    assert plain is None, f"{GIVEN} is set outside LightningCLI: {plain!r}"
    assert isinstance(cli, dict) and cli.get("width") == 2, (
        f"LightningCLI no longer passes the module's configuration through {GIVEN} (got "
        f"{cli!r}): update graph_urpe.models.hparams.save_configuration")


def test_lightning_still_has_the_private_sampler_flag_the_loaders_check():
    for flag in (True, False):
        trainer = Trainer(accelerator="cpu", use_distributed_sampler=flag, logger=False,
                          enable_checkpointing=False, enable_progress_bar=False)
        connector = getattr(trainer, "_accelerator_connector", None)
        found = getattr(connector, "use_distributed_sampler", None)
        assert found is flag, (
            "Lightning no longer has Trainer._accelerator_connector.use_distributed_sampler "
            f"(use_distributed_sampler={flag} reads {found!r}): update "
            "BatchedGraphDataModule._rank (graph_urpe/data/modules/graph.py)")


def _fence(owner, name: str, user: str) -> None:
    assert hasattr(owner, name), (
        f"{getattr(owner, '__qualname__', owner)}.{name} is gone in this version: update {user}")


def test_fit_loop_restart_machinery_exact_resume_overrides():
    from lightning.pytorch.loops import _FitLoop, _Loop

    user = "graph_urpe/cli/run.py (ExactResumeFitLoop)"
    for cls in (_Loop, _FitLoop):
        prop = getattr(cls, "restarting", None)
        assert isinstance(prop, property) and prop.fset is not None, (
            f"{cls.__qualname__}.restarting is no longer a settable property: update {user}")
    _fence(_FitLoop, "_load_combined_loader_states", user)
    trainer = Trainer(accelerator="cpu", logger=False, enable_checkpointing=False,
                      enable_progress_bar=False)
    _fence(trainer.fit_loop, "_combined_loader", user)
    assert isinstance(trainer.fit_loop.epoch_loop._batches_that_stepped, int), user


def test_csv_logger_internals_the_resumed_run_logger_overrides():
    from lightning.pytorch.loggers import CSVLogger
    from lightning.pytorch.loggers.csv_logs import ExperimentWriter

    user = "graph_urpe/cli/run.py (RunCSVLogger)"
    _fence(ExperimentWriter, "_check_log_dir_exists", user)
    logger = CSVLogger("unused-folder")
    assert logger._experiment is None, user  # created lazily by the `experiment` property


def test_lightning_cli_hooks_the_cli_overrides():
    user = "graph_urpe/cli/lightning_cli.py (GraphURPECLI)"
    _fence(LightningCLI, "_prepare_subcommand_parser", user)
    _fence(LightningCLI, "_parse_ckpt_path", user)


def test_jsonargparse_default_config_group_the_parser_hides(tmp_path):
    from lightning.pytorch.cli import LightningArgumentParser

    config = tmp_path / "base.yaml"
    config.write_text("{}\n")
    parser = LightningArgumentParser(default_config_files=[str(config)])
    user = "graph_urpe/cli/parser.py (GraphURPEArgumentParser)"
    _fence(parser, "_default_config_files_group", user)
    assert parser._default_config_files_group in parser._action_groups, (
        f"jsonargparse no longer lists its default-config section in _action_groups: update {user}")


def test_pyg_dataset_internals_the_caches_replace():
    from torch_geometric.data import Dataset, InMemoryDataset

    _fence(Dataset, "_process", "graph_urpe/data/cache.py (SafeCacheMixin)")
    import torch
    from torch_geometric.data import Data

    class _Tiny(InMemoryDataset):
        def __init__(self):
            super().__init__(None)
            self.data, self.slices = self.collate([Data(x=torch.zeros(2, 1), y=torch.ones(1))])

    assert torch.equal(_Tiny()._data.y, torch.ones(1)), (
        "InMemoryDataset._data no longer holds the collated storage: update "
        "graph_urpe/data/modules/graph.py, data/csv/dataset.py and data/summary.py")


def test_softmax_backward_data_equals_autograd():
    import torch

    _fence(torch, "_softmax_backward_data", "graph_urpe/nn/_fused.py")
    torch.manual_seed(0)
    scores = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(3, 5, dtype=torch.float64)
    probs = torch.softmax(scores, -1)
    (expected,) = torch.autograd.grad(probs, scores, grad)
    found = torch._softmax_backward_data(grad, probs.detach(), -1, torch.float64)
    assert torch.allclose(found, expected)


def test_optuna_frozen_trial_id_the_pruning_callback_reports_to():
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study()
    study.tell(study.ask(), 1.0)
    assert isinstance(getattr(study.trials[0], "_trial_id", None), int), (
        "optuna.trial.FrozenTrial._trial_id is gone: update graph_urpe/models/pruning.py")
