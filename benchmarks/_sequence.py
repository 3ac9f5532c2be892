"""The sequence benchmarks' link to the shipped configs: build the run a config file describes.

``benchmarks/synthetic.py`` and ``benchmarks/lm.py`` read ``configs/<family>/base.yaml`` plus an
experiment file with the same LightningCLI parser as ``graph-urpe fit`` (data sizes linked into the
model by :func:`graph_urpe.data.modules.sequence.sequence_links`), so every model, optimizer and
schedule setting is written once, in the config; a benchmark only overrides sizes, steps and seeds
(``--set KEY=VALUE`` for any other key) and turns off logging and checkpointing.
"""

from __future__ import annotations

import logging
import warnings

from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningCLI

from graph_urpe.cli.configs import CONFIG_DIR
from graph_urpe.cli.lightning_cli import GraphURPECLI

__all__ = ["CONFIGS", "QUIET_TRAINER", "experiment_args", "sequence_cli"]

#: The shipped configuration files.
CONFIGS = CONFIG_DIR
#: Trainer overrides of a benchmark run: no logger, checkpoints, callbacks, bars or validation.
QUIET_TRAINER = [
    "--trainer.logger=false", "--trainer.enable_checkpointing=false", "--trainer.callbacks=[]",
    "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false",
    "--trainer.num_sanity_val_steps=0", "--trainer.limit_val_batches=0", "--trainer.devices=1",
]
_POSITION = "--model.init_args.model.init_args.attention"



def experiment_args(family: str, name: str, position: str) -> list[str]:
    """``--config`` arguments of experiment ``name`` (e.g. ``"pi-urpe"``) on its family base.

    Where no file exists for ``position`` (e.g. ``pi-ape-paper``), the URPE file of the same
    setting is used with the position overridden.
    """
    base = CONFIGS / family / "base.yaml"
    path = CONFIGS / family / f"{name}.yaml"
    if path.is_file():
        return ["--config", str(base), "--config", str(path)]
    urpe = CONFIGS / family / f"{name.replace(position, 'urpe', 1)}.yaml"
    if not urpe.is_file():
        raise FileNotFoundError(f"no config {path} nor {urpe}.")
    return ["--config", str(base), "--config", str(urpe), f"{_POSITION}={position}"]


def sequence_cli(args: list[str]) -> LightningCLI:
    """Parse ``args`` (``--config`` files, then ``--key=value`` overrides) and instantiate the
    Trainer, model and data module, without running anything."""
    warnings.filterwarnings("ignore")
    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return GraphURPECLI(LightningModule, LightningDataModule, subclass_mode_model=True,
                        subclass_mode_data=True, args=args, run=False,
                        save_config_callback=None)
