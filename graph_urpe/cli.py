"""The ``graph-urpe`` command: training, evaluation and prediction, built on LightningCLI.

Usage::

    graph-urpe fit                                   # URPE-Graphormer on the embedded ZINC-like data
    graph-urpe fit --config configs/zinc/graphormer-slim-urpe.yaml
    graph-urpe fit --config CONFIG --ckpt_path last  # resume
    graph-urpe test --config CONFIG --ckpt_path runs/.../checkpoints/best.ckpt
    graph-urpe predict --ckpt_path CKPT --data.predict_csv mols.csv --data.predict_output out.csv
    graph-urpe predict --ckpt_path CKPT --data.predict_smiles '[CCO, c1ccccc1O]'
    graph-urpe summarize zinc-like                   # graphs, splits and label statistics

Every option of the model (``--model.init_args.*``), data module (``--data.init_args.*``) and
Trainer (``--trainer.*``) can be set in a YAML file (``--config``) and overridden on the command
line; ``graph-urpe fit --help`` lists them, ``--print_config`` shows the resolved configuration.
Models and data modules are chosen by class path (``--model``, ``--data``), so other tasks
(e.g. the sequence models) plug in through their YAMLs.

Without ``--config`` the package's default configuration
(``graph_urpe/configs/default.yaml``: URPE-Graphormer on the embedded ZINC-like 12k set, a CPU
schedule) is used, so ``graph-urpe fit`` needs no arguments. With ``--config`` only the given files
are used. ``fit`` ends by testing the best checkpoint (``--test_after_fit false`` to skip) and
printing the test metric and the checkpoint paths. When a checkpoint file is given with
``--ckpt_path``, the model's hyperparameters are read from it (LightningCLI), so ``predict`` and
``test`` rebuild the trained architecture without repeating its options. ``summarize NAME``
prints a dataset's splits and label statistics (:mod:`graph_urpe.data.summary`; ``graph-urpe
summarize --help``).
"""

from __future__ import annotations

import os
import sys

# OpenMP threads that busy-wait between parallel regions collapse when the CPU is shared (another
# job, DDP ranks on one machine): measured 5-10x slower steps on a busy 2-core machine. Passive
# waiting costs little when the machine is idle. Must be set before torch starts OpenMP; an
# explicit OMP_WAIT_POLICY in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
from importlib.resources import files
from typing import Any

from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.utilities.model_helpers import is_overridden

__all__ = ["DEFAULT_CONFIG", "GraphURPECLI", "main"]

DEFAULT_CONFIG = str(files("graph_urpe") / "configs" / "default.yaml")
"""The configuration used when no ``--config`` is given."""

SUBCOMMANDS = ("fit", "validate", "test", "predict")


class GraphURPECLI(LightningCLI):
    """LightningCLI with ``fit`` followed by ``test`` on the best checkpoint, and a ``predict``
    that requires a checkpoint. Models and data modules are subclass-mode (chosen by class path).
    """

    def _prepare_subcommand_parser(self, klass: type, subcommand: str, **kwargs: Any):
        parser: LightningArgumentParser = super()._prepare_subcommand_parser(
            klass, subcommand, **kwargs
        )
        if subcommand == "fit":
            parser.add_argument(
                "--test_after_fit",
                type=bool,
                default=True,
                help="After training, test the best checkpoint and print the test metric and "
                "the checkpoint paths.",
            )
        return parser

    def fit(self, model: LightningModule, **kwargs: Any) -> None:
        """``trainer.fit``, then (unless ``--test_after_fit false``) test the best checkpoint."""
        self.trainer.fit(model, **kwargs)
        datamodule = kwargs.get("datamodule")
        if (
            not self.config["fit"].get("test_after_fit", True)
            or self.trainer.interrupted
            or not is_overridden("test_step", model)
            or datamodule is None
            or not is_overridden("test_dataloader", datamodule)
        ):
            return
        callback = self.trainer.checkpoint_callback
        best = getattr(callback, "best_model_path", "") if callback is not None else ""
        results = self.trainer.test(
            model, datamodule=datamodule, ckpt_path=best or None, verbose=False
        )
        if self.trainer.is_global_zero:
            _print_summary(results, best, getattr(callback, "last_model_path", ""))

    def predict(self, model: LightningModule, **kwargs: Any) -> Any:
        """``trainer.predict``; refuses to run without ``--ckpt_path``."""
        if not kwargs.get("ckpt_path"):
            raise ValueError(
                "predict needs a trained model: pass --ckpt_path PATH (e.g. the best.ckpt "
                "printed at the end of `graph-urpe fit`)."
            )
        result = self.trainer.predict(model, **kwargs)
        dm = kwargs.get("datamodule")
        frame = getattr(dm, "predict_frame", None)
        if frame is not None and not getattr(dm, "predict_graphs", None):
            # Lightning skips the loop on an empty loader: still write one row per input with its
            # error, and fail, so that no stale output file is mistaken for this run's.
            if len(frame) and self.trainer.is_global_zero:
                dm.prediction_writer().on_predict_epoch_end(self.trainer, model)
            raise CLIError(
                f"no molecule could be predicted: {len(frame)} input rows"
                + (", all failed (see the 'error' column above)." if len(frame) else
                   ": give at least one SMILES (--data.init_args.predict_csv or predict_smiles).")
            )
        return result


class CLIError(Exception):
    """An error in the user's input, printed as one line (no traceback) by :func:`main`."""


def _print_summary(results: list[dict[str, float]], best: str, last: str) -> None:
    metrics = results[0] if results else {}
    print("\n" + "=" * 72)
    for key, value in metrics.items():
        if key.startswith("test/") and key not in ("test/loss", "test/num_graphs"):
            print(f"Test {key[5:].upper()}: {value:.4f}")
    if "test/loss" in metrics:
        print(f"Test loss: {metrics['test/loss']:.4f}")
    print(f"Best checkpoint: {best or '(none saved)'}")
    if last:
        print(f"Last checkpoint: {last}  (resume with --ckpt_path last)")
    print("=" * 72)


def _has_config(argv: list[str]) -> bool:
    return any(a in ("-c", "--config") or a.startswith("--config=") for a in argv)


def main(args: list[str] | None = None) -> None:
    """Entry point of ``graph-urpe`` (see the module docstring).

    Args:
        args (list[str], optional): the arguments (default: ``sys.argv[1:]``).
    """
    argv = list(sys.argv[1:] if args is None else args)
    try:
        _main(argv, args)
    except (CLIError, FileNotFoundError, ValueError) as err:
        if os.environ.get("GRAPH_URPE_DEBUG"):
            raise
        print(f"graph-urpe: error: {err}\n(set GRAPH_URPE_DEBUG=1 for the traceback)",
              file=sys.stderr)
        raise SystemExit(2) from None


def _check_ckpt_path(argv: list[str]) -> None:
    """Refuse a ``--ckpt_path`` that names a missing file (not ``last``/``best``/``hpc``)."""
    for i, arg in enumerate(argv):
        value = None
        if arg == "--ckpt_path" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--ckpt_path="):
            value = arg.split("=", 1)[1]
        if value and value not in ("last", "best", "hpc", "null") and not os.path.exists(value):
            raise FileNotFoundError(
                f"checkpoint {value!r} not found: pass --ckpt_path with an existing .ckpt file "
                "(fit prints the best and last checkpoint paths), or 'last' to resume."
            )


def _main(argv: list[str], args: list[str] | None) -> None:
    _check_ckpt_path(argv)
    if argv[:1] == ["summarize"]:
        from graph_urpe.data.summary import main as summarize_main

        summarize_main(argv[1:])
        return
    parser_kwargs: dict[str, Any] = {
        "description": "URPE-Graphormer training, evaluation and prediction (LightningCLI). "
        "Also: `graph-urpe summarize NAME` prints a dataset's splits and label statistics."
    }
    if not _has_config(argv):
        for sub in SUBCOMMANDS:
            parser_kwargs[sub] = {"default_config_files": [DEFAULT_CONFIG]}
    GraphURPECLI(
        LightningModule,
        LightningDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        parser_kwargs=parser_kwargs,
        save_config_kwargs={"overwrite": True},
        args=args,  # None: LightningCLI reads sys.argv itself
    )


if __name__ == "__main__":
    main()
