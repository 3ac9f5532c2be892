"""LightningCLI's parsing with a received ``--ckpt_path``: :class:`CheckpointParsingCLI`, the base of
:class:`~graph_urpe.cli.lightning_cli.GraphURPECLI`.

The checkpoint is data: read by :func:`~graph_urpe.trust.read_checkpoint` (classes by registry
key, values checked against their signatures, sizes against the state dict), its model reaches
the parser only in canonical form, right after the subcommand (:mod:`graph_urpe.cli.
checkpoint_args`): package defaults < the checkpoint's model < ``--config`` files < options, so
``predict --ckpt_path X`` alone rebuilds the trained model and a user's option beats the
checkpoint's. The model built under the user's options must still fit the checkpoint's tensors;
its training vocabulary and classical model are kept for ``predict``. Lightning's own reading of
the checkpoint's hyperparameters (unchecked, over the user's options) is turned off.
"""

from __future__ import annotations

import argparse
import logging
import os.path as osp
import sys
from typing import TYPE_CHECKING, Any

import torch
from lightning.pytorch import LightningModule
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from graph_urpe.cli.checkpoint_args import checkpoint_arguments, ckpt_argument
from graph_urpe.cli.messages import CLIError
from graph_urpe.received_sizes import shape_mismatch
from graph_urpe.trust import read_checkpoint

if TYPE_CHECKING:
    from graph_urpe.models.classical import ClassicalModel

__all__ = ["PREDICT_NEEDS_CHECKPOINT", "SUBCOMMANDS", "CheckpointParsingCLI"]

SUBCOMMANDS = ("fit", "validate", "test", "predict")
"""The LightningCLI subcommands of ``graph-urpe``."""

PREDICT_NEEDS_CHECKPOINT = ("predict needs a trained model: pass --ckpt_path PATH (e.g. the "
                            "best.ckpt printed at the end of `graph-urpe fit`).")
"""The error of ``predict`` without ``--ckpt_path``."""


class CheckpointParsingCLI(LightningCLI):
    """LightningCLI whose ``--ckpt_path`` is read as data, its checked model placed under the
    user's ``--config`` files and options (see the module docstring)."""

    def parse_arguments(self, parser: LightningArgumentParser, args: Any) -> None:
        """Lightning's parse, with a ``--ckpt_path`` checkpoint's model (checked) placed right
        after the subcommand: package defaults < checkpoint < the user's ``--config`` files and
        options, so ``predict --ckpt_path X`` alone rebuilds the trained model and a user's option
        beats the checkpoint's.

        The checkpoint is read by :func:`~graph_urpe.trust.read_checkpoint` (plain data; its
        classes registry keys, its values checked against their signatures, its sizes against
        its state dict, before anything is imported or built). For
        ``validate`` / ``test`` without data options, the data section of the run folder's
        ``config.yaml`` (``RUN/config.yaml`` beside ``RUN/checkpoints/``) is read and checked the
        same way, so the model is evaluated on the data it was trained on.

        Raises:
            CLIError: ``predict`` without ``--ckpt_path``.
            FileNotFoundError: a ``--ckpt_path`` file that does not exist.
            UntrustedFileError: the checkpoint or run folder names a class outside the registry
                or holds a value of another type than the class declares.
            ReceivedFileError: the checkpoint is corrupt or its tensors do not fit its model.
        """
        if isinstance(args, dict) or not isinstance(args, (list, tuple, type(None))):
            super().parse_arguments(parser, args)  # structured configuration (run=False)
            return
        argv = list(sys.argv[1:] if args is None else args)
        sub = argv[0] if argv and argv[0] in SUBCOMMANDS else None
        scanned = ckpt_argument(argv)
        try:
            super().parse_arguments(parser, self._with_checkpoint(argv, sub, scanned))
        except argparse.ArgumentError:
            if sub == "predict" and scanned is None:  # the network's sizes are the checkpoint's
                raise CLIError(PREDICT_NEEDS_CHECKPOINT) from None
            raise
        parsed = self.config[sub].get("ckpt_path") if sub else None
        if sub == "predict" and not parsed:
            raise CLIError(PREDICT_NEEDS_CHECKPOINT)
        if parsed != scanned and parsed is not None:  # given in a --config file
            super().parse_arguments(parser, self._with_checkpoint(argv, sub, parsed))
        if sub == "predict":  # "GPU available", "Seed set": nothing a predicting user acts on
            for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.seed"):
                logging.getLogger(name).setLevel(logging.WARNING)

    training_vocabulary: dict | None = None
    """The ``--ckpt_path`` checkpoint's training vocabulary (plain lists), for predict's warnings."""
    classical: ClassicalModel | None = None
    """The ``--ckpt_path`` checkpoint's classical model (checked), for predict's columns."""

    def _with_checkpoint(self, argv: list[str], sub: str | None, ckpt_path: str | None) -> list[str]:
        """``argv`` with the checked checkpoint's model (and for ``validate`` / ``test`` without
        data options the run folder's checked data section) right after the subcommand."""
        # Imported here, not with the module: graph_urpe.models' callbacks then register after
        # the CLI's own, in the order --help lists the callback classes.
        from graph_urpe.models.classical_baseline import classical_from_checkpoint

        if sub is None or ckpt_path is None or ckpt_path in ("last", "best", "hpc"):
            return argv
        if not osp.isfile(ckpt_path):
            raise FileNotFoundError(
                f"checkpoint {ckpt_path!r} not found: pass --ckpt_path with an existing .ckpt "
                "file (fit prints the best and last checkpoint paths), or 'last' to resume.")
        ckpt = read_checkpoint(ckpt_path)
        self.training_vocabulary = ckpt.get("training_vocabulary")
        self.classical = classical_from_checkpoint(ckpt, ckpt_path)
        self._checkpoint_shapes = (ckpt_path, {k: torch.empty(v.shape, device="meta")
                                               for k, v in ckpt["state_dict"].items()})
        return checkpoint_arguments(argv, sub, ckpt_path, ckpt.module_config)

    _checkpoint_shapes: tuple[str, dict] | None = None

    def instantiate_classes(self) -> None:
        """LightningCLI's instantiation, then: the model built under the user's options must fit
        the ``--ckpt_path`` checkpoint's tensors (one line naming the first difference)."""
        super().instantiate_classes()
        if self._checkpoint_shapes is not None and isinstance(self.model, LightningModule):
            path, shapes = self._checkpoint_shapes
            problem = shape_mismatch(self.model.state_dict(), shapes)
            if problem:
                raise CLIError(f"{path} does not fit the model your options build: {problem}; "
                               "drop the options or --config that change the network's sizes.")

    def _parse_ckpt_path(self) -> None:
        """Disables Lightning's own reading of ``--ckpt_path`` hyperparameters (it parses them over
        the user's options, unchecked): :meth:`parse_arguments` has done it."""
