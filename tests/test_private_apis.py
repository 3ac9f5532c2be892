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
* ``LightningCLI._prepare_subcommand_parser`` (to know which subcommand's parser it builds):
  :class:`graph_urpe.cli.lightning_cli.GraphURPECLI`, and ``LightningCLI._parse_ckpt_path``:
  :class:`graph_urpe.cli.checkpoint_parsing.CheckpointParsingCLI`;
* jsonargparse's ``ArgumentParser._default_config_files_group`` (and argparse's
  ``_action_groups``): its section of absolute paths is left out of the help
  (:class:`graph_urpe.cli.parser.GraphURPEArgumentParser`);
* PyG's ``Dataset._process`` and ``InMemoryDataset._data``: safe cache reads
  (:mod:`graph_urpe.data.cache`) and label statistics read from the collated storage;
* ``torch._softmax_backward_data``: the fused attention core's backward
  (:mod:`graph_urpe.nn._fused`);
* Optuna's ``FrozenTrial._trial_id``: an hpopt trial's fit process reports to its trial
  (:mod:`graph_urpe.models.pruning`);
* torch's ``Optimizer._step_supports_amp_scaling`` (a fused optimizer, for clipping under mixed
  precision: :mod:`graph_urpe.models.optim`), ``torch._softmax`` (in place, the fused core),
  ``torch.utils._device._device_constructors`` (the tensor factories whose sizes
  :mod:`graph_urpe.received_sizes` counts);
* RDKit's ``Descriptors._descList`` (the pretraining labels, :mod:`graph_urpe.data.descriptors`),
  NumPy's ``_reconstruct`` (arrays the safe cache loader rebuilds, :mod:`graph_urpe.data.cache`);
* PyG's ``Dataset._download`` and ``Dataset._indices`` (:mod:`graph_urpe.data.zinc`);
* the ``_class_path`` / ``_instantiator`` keys LightningCLI saves into a module's
  hyperparameters (read by :mod:`graph_urpe.received` and :mod:`graph_urpe.trust`);
* CPython's ``atexit._run_exitfuncs``: the ``graph-urpe`` program runs the exit handlers itself
  before it ends without the interpreter's teardown (:func:`graph_urpe.cli.program`).
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
    _fence(LightningCLI, "_prepare_subcommand_parser",
           "graph_urpe/cli/lightning_cli.py (GraphURPECLI)")
    _fence(LightningCLI, "_parse_ckpt_path",
           "graph_urpe/cli/checkpoint_parsing.py (CheckpointParsingCLI)")


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
        "graph_urpe/data/modules/graph.py, data/csv/dataset.py and data/statistics.py")


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


def test_fused_optimizer_flag_the_clipping_reads():
    import torch

    param = torch.nn.Parameter(torch.zeros(2))
    fused = torch.optim.AdamW([param], fused=True)
    assert getattr(fused, "_step_supports_amp_scaling", None) is True, (
        "torch.optim's _step_supports_amp_scaling flag of a fused optimizer is gone: update "
        "graph_urpe/models/optim.py (configure_gradient_clipping)")
    assert getattr(torch.optim.AdamW([param]), "_step_supports_amp_scaling", False) is False


def test_torch_softmax_out_the_fused_core_writes_in_place():
    import torch

    _fence(torch, "_softmax", "graph_urpe/nn/_fused.py")
    scores = torch.randn(3, 5)
    expected = torch.softmax(scores, -1)
    found = torch._softmax(scores, -1, False, out=scores)
    assert torch.allclose(found, expected) and found.data_ptr() == scores.data_ptr()


def test_torch_device_constructors_the_size_check_counts():
    import torch
    from torch.utils import _device

    _fence(_device, "_device_constructors", "graph_urpe/received_sizes.py (_FACTORIES)")
    factories = _device._device_constructors()
    assert {torch.zeros, torch.empty, torch.ones, torch.full} <= set(factories), (
        "torch.utils._device._device_constructors() no longer lists the tensor factories: "
        "update graph_urpe/received_sizes.py")


def test_rdkit_descriptor_list_the_pretraining_labels_read():
    from rdkit.Chem import Descriptors

    _fence(Descriptors, "_descList", "graph_urpe/data/descriptors.py")
    names = dict(Descriptors._descList)
    assert callable(names["MolWt"]) and callable(names["BalabanJ"]), (
        "rdkit.Chem.Descriptors._descList is no longer (name, function) pairs: update "
        "graph_urpe/data/descriptors.py")


def test_numpy_reconstruct_the_safe_loader_allows():
    import numpy as np

    from graph_urpe.data.cache import SAFE_GLOBALS

    allowed = SAFE_GLOBALS
    assert any(getattr(g, "__name__", "") == "_reconstruct" for g in allowed), (
        "numpy's _reconstruct (numpy._core.multiarray / numpy.core.multiarray) is gone: update "
        "graph_urpe/data/cache.py")
    assert np.ndarray in allowed


def test_pyg_dataset_download_and_indices_the_zinc_datasets_use():
    import torch
    from torch_geometric.data import Data, Dataset, InMemoryDataset

    _fence(Dataset, "_download", "graph_urpe/data/zinc.py (pyg_zinc's cleanup on failure)")

    class _Tiny(InMemoryDataset):
        def __init__(self):
            super().__init__(None)
            graphs = [Data(x=torch.full((1, 1), float(i))) for i in range(4)]
            self.data, self.slices = self.collate(graphs)

    tiny = _Tiny()
    tiny._indices = [2, 0]  # ZincLikeDataset restricts itself to one split this way
    assert list(tiny.indices()) == [2, 0] and tiny[0].x.item() == 2.0, (
        "PyG's Dataset._indices no longer selects the graphs: update graph_urpe/data/zinc.py")


class _Saving(LightningModule):
    """Saves its hyperparameters, as the package's modules do."""

    def __init__(self, width: int = 1) -> None:
        super().__init__()
        self.save_hyperparameters()


def test_lightning_cli_hparams_keys_the_checkpoint_reader_checks():
    cli = LightningCLI(_Saving, run=False, subclass_mode_model=True,
                       args=["--model", f"{__name__}._Saving", "--model.width", "2"],
                       save_config_callback=None,
                       trainer_defaults={"logger": False, "enable_checkpointing": False,
                                         "enable_progress_bar": False, "accelerator": "cpu"})
    keys = set(cli.model.hparams)
    assert {"_class_path", "_instantiator"} <= keys and cli.model.hparams["width"] == 2, (
        f"LightningCLI's saved hyperparameters no longer hold _class_path / _instantiator "
        f"({sorted(keys)}): update graph_urpe/received.py (check_module_hparams) and "
        "graph_urpe/trust.py")


def test_pyg_storage_mapping_the_stored_graphs_fill():
    import torch
    from torch_geometric.data import Data

    data = Data()
    data._store._mapping.update({"x": torch.zeros(3, 2), "edge_index": torch.zeros(2, 0,
                                 dtype=torch.long), "num_nodes": 3, "smiles": "CCO"})
    assert data.num_nodes == 3 and data.x.shape == (3, 2) and data.smiles == "CCO", (
        "PyG's Data._store._mapping no longer holds a graph's attributes: update "
        "graph_urpe/data/stored_graphs.py (StoredGraphs.get)")
    assert sorted(data.keys()) == ["edge_index", "num_nodes", "smiles", "x"]


def test_atexit_run_exitfuncs_runs_and_clears_the_handlers():
    import subprocess
    import sys

    code = ("import atexit\ncalls = []\natexit.register(calls.append, 1)\n"
            "atexit._run_exitfuncs()\natexit._run_exitfuncs()\nprint(calls)\n")
    # in a child: running the handlers here would run (and clear) pytest's own
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[1]", ("atexit._run_exitfuncs no longer runs (and clears) the exit "
                                  "handlers: update graph_urpe/cli/__init__.py (_end_process)")
