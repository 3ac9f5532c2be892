"""Version fences for the two private Lightning APIs the package reads (Lightning 2.6 has no
public counterpart); if an upgrade renames or changes one, these fail and name it, instead of the
behaviour that depends on it going silently wrong:

* ``lightning.pytorch.core.mixins.hparams_mixin._given_hyperparameters``: set by LightningCLI while
  it instantiates a module; :class:`~graph_urpe.models.graph.GraphPropertyModule` then keeps the
  network / optimizer / scheduler configuration in its hyperparameters (a checkpoint rebuilds
  them), and in plain Python leaves the injected objects out;
* ``Trainer._accelerator_connector.use_distributed_sampler``: the graph loaders split batches
  across ranks themselves and refuse a Trainer that would also wrap their sampler.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import ClassVar

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
        "GraphPropertyModule.__init__'s save_hyperparameters call (graph_urpe/models/graph.py)")
    _Probe.seen.clear()
    _Probe(width=3)
    LightningCLI(_Probe, run=False, args=["--model.width", "2"], save_config_callback=None,
                 trainer_defaults={"logger": False, "enable_checkpointing": False,
                                   "enable_progress_bar": False, "accelerator": "cpu"})
    plain, cli = _Probe.seen
    assert plain is None, f"{GIVEN} is set outside LightningCLI: {plain!r}"
    assert isinstance(cli, dict) and cli.get("width") == 2, (
        f"LightningCLI no longer passes the module's configuration through {GIVEN} (got "
        f"{cli!r}): update GraphPropertyModule.__init__ (graph_urpe/models/graph.py)")


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
