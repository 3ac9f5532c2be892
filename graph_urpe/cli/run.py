"""A ``fit`` run's checkpoints and logs, and how it resumes exactly.

* :class:`AtomicCheckpointIO`: checkpoints written under a temporary name and renamed, so a full
  disk or a kill never leaves a truncated ``last.ckpt``;
* :class:`RNGStateCheckpoint` and :class:`ExactResumeFitLoop` (:func:`use_exact_resume`): a
  resumed run trains exactly the steps of the uninterrupted one;
* :class:`RunCSVLogger` and :class:`LogsAtCheckpoint`: ``metrics.csv`` holds every step once,
  also across a kill and resume;
* :class:`SharedRunFolder`: under DDP every rank uses rank 0's run folder.

What the run writes after training and prints at the end is :mod:`graph_urpe.cli.fit_report`.
"""

from __future__ import annotations

import csv
import os
import os.path as osp
import random
import warnings
from typing import Any

import numpy as np
import pandas as pd
import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.loggers.logger import rank_zero_experiment
from lightning.pytorch.loops import _FitLoop, _Loop
from lightning.pytorch.trainer.states import TrainerFn

from graph_urpe.files import atomic_save, atomic_write_csv
from graph_urpe.trust import read_checkpoint

__all__ = [
    "AtomicCheckpointIO",
    "ExactResumeFitLoop",
    "LogsAtCheckpoint",
    "RNGStateCheckpoint",
    "RunCSVLogger",
    "SharedRunFolder",
    "tested_checkpoint",
    "use_exact_resume",
]


class AtomicCheckpointIO(TorchCheckpointIO):
    """:class:`~lightning.fabric.plugins.io.torch_io.TorchCheckpointIO` that writes each checkpoint
    to a temporary file in the destination folder and renames it over the target
    (:func:`graph_urpe.files.atomic_save`): a failed write leaves the previous checkpoint intact,
    and that reads every checkpoint Lightning restores (``--ckpt_path``: resume, test, predict)
    with :func:`graph_urpe.trust.read_checkpoint`, so the bytes restored are the bytes checked.

    Raises:
        graph_urpe.files.OutputError: on file-system errors (names the path).
        graph_urpe.trust.ReceivedFileError: a checkpoint :func:`~graph_urpe.trust.read_checkpoint`
            refuses.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options=None) -> None:
        atomic_save(lambda tmp: torch.save(checkpoint, tmp), str(path))

    def remove_checkpoint(self, path) -> None:
        """Remove a checkpoint file: only a regular file (never a link or a folder, which
        Lightning's removes recursively); anything else is left with a warning."""
        path = str(path)
        if osp.islink(path) or not osp.isfile(path):
            warnings.warn(f"not removing {path}: not a checkpoint file this run wrote",
                          stacklevel=2)
            return
        os.unlink(path)

    def load_checkpoint(self, path, map_location: Any = None,
                        weights_only: bool | None = None) -> dict[str, Any]:
        return dict(read_checkpoint(str(path), map_location or "cpu"))


class RNGStateCheckpoint(Callback):
    """Stores the random-number generators' states in every checkpoint and restores them on
    resume, so a resumed run draws the same dropout masks as the uninterrupted one (the batch
    order is a function of the sampler's seed and the epoch; the place within the epoch is the
    training loader's state, :class:`graph_urpe.data.resumable_loader.ResumableDataLoader`).

    Saved under ``checkpoint["rng_states"]``: Python's :mod:`random`, NumPy's legacy global
    generator and torch's CPU (and, where present, CUDA) generators, all as tensors or plain
    data so the checkpoint stays loadable with ``weights_only=True``.
    """

    def state_dict(self) -> dict[str, Any]:
        version, state, gauss = random.getstate()
        np_state = np.random.get_state()
        states = {
            "python": [version, list(state), gauss],
            "numpy": [np_state[0], torch.from_numpy(np_state[1].astype(np.int64)),
                      *np_state[2:]],
            "torch": torch.get_rng_state(),
        }
        if torch.cuda.is_available():
            states["cuda"] = torch.cuda.get_rng_state_all()
        return states

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the generators (their form was checked against :meth:`state_dict`'s by
        :mod:`graph_urpe.cli.resume_state`).

        Raises:
            ValueError: a value the generators refuse (one line)."""
        try:
            version, state, gauss = state_dict["python"]
            random.setstate((version, tuple(state), gauss))
            name, keys, *rest = state_dict["numpy"]
            np.random.set_state((name, keys.numpy().astype(np.uint32), *rest))
            torch.set_rng_state(state_dict["torch"])
            if "cuda" in state_dict and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(state_dict["cuda"])
        except (TypeError, ValueError, OverflowError, RuntimeError, KeyError) as err:
            first = (str(err).strip().splitlines() or [""])[0][:200]
            raise ValueError(f"the checkpoint's random-number generator states are not valid "
                             f"({type(err).__name__}: {first}): resume from a last.ckpt this "
                             "version's `graph-urpe fit` wrote") from None


class ExactResumeFitLoop(_FitLoop):
    """Lightning's fit loop, resuming a checkpoint taken at an epoch's end at the next epoch also
    when ``trainer.max_steps`` is set.

    Why: ``last.ckpt`` and ``best.ckpt`` are saved from ``on_train_epoch_end``, with the epoch
    counted as processed but not yet completed. On resume Lightning (2.6) completes it and starts
    the next epoch when the run is epoch-based, but with ``max_steps`` set (iteration-based
    training) its ``restarting`` is always true, so it replays the finished epoch's end as if it
    were a new epoch: one epoch fewer is trained (the summary still says "3 of 3 epochs") and
    every later epoch gets the batches of the wrong epoch number. This loop treats such a
    checkpoint as Lightning treats it without ``max_steps``. A checkpoint from an epoch that
    ``max_steps`` cut short (not at its last batch) and a mid-epoch one still restart within
    the epoch, as in Lightning.

    Mid-epoch (Ctrl-C, which Lightning checkpoints through ``save_on_exception``), the batches
    already trained are skipped: the training loader's
    :class:`~graph_urpe.data.sampler.SizeBucketBatchSampler` is told the batch from which
    Lightning's progress counters resume (:meth:`~graph_urpe.data.sampler.SizeBucketBatchSampler.
    resume_at`), which is exact also when the interrupt came in the middle of a step (that batch
    is trained again), where a count of the batches the loader handed out would be one ahead.
    Install it with :func:`use_exact_resume`.
    """

    @_Loop.restarting.setter
    def restarting(self, restarting: bool) -> None:
        epoch = self.epoch_progress.current
        at_epoch_end = (epoch.ready == epoch.started == epoch.processed == epoch.completed + 1
                        and self.epoch_loop.batch_progress.is_last_batch)
        if restarting and at_epoch_end:
            _Loop.restarting.fset(self, False)  # what Lightning does without max_steps
        else:
            _FitLoop.restarting.fset(self, restarting)

    def reset(self) -> None:
        """Restore the training loader's state and start its sampler at the batch from which
        Lightning resumes (see the class docstring), then Lightning's reset."""
        if self.restarting and self._combined_loader is not None:
            self._resume_loader()
        super().reset()

    def _resume_loader(self) -> None:
        # Lightning loads the loader's state only in setup_data, which already ran before the
        # checkpoint was restored when the schedule asked for estimated_stepping_batches.
        self._load_combined_loader_states()
        progress = self.epoch_loop.batch_progress
        total = progress.total
        # Saved in on_train_batch_end (batch done, not yet counted as completed): Lightning counts
        # it as completed on resume; anywhere else it resumes after the completed batches.
        after_batch_end = total.ready == total.started == total.processed == total.completed + 1
        position = progress.current.completed + int(after_batch_end)
        if not after_batch_end and total.completed < total.ready:
            # Lightning's epoch-loop reset adds one to the logging step for any restart that is
            # not at a batch end (it assumes a checkpoint from on_validation_end); undo it so a
            # resumed run logs its losses at the uninterrupted run's steps.
            self.epoch_loop._batches_that_stepped -= 1
        for loader in self._combined_loader.flattened:
            sampler = getattr(loader, "batch_sampler", None)
            if callable(getattr(sampler, "resume_at", None)):
                sampler.resume_at(self.epoch_progress.current.processed, position)


class _RunWriter(ExperimentWriter):
    def _check_log_dir_exists(self) -> None:
        """Lightning's check, only when a ``metrics.csv`` is there to delete: a new run's folder
        always holds the run's own files before the logger starts (the ``.lock`` that claims it,
        ``config.yaml``), so Lightning warned "logs directory exists and is not empty" on every
        fresh run."""
        if osp.isfile(self.metrics_file_path):
            super()._check_log_dir_exists()


class _KeepingWriter(ExperimentWriter):
    def _check_log_dir_exists(self) -> None:
        """Keep the run's ``metrics.csv`` (Lightning's writer deletes it) and its columns."""
        if osp.isfile(self.metrics_file_path):
            with open(self.metrics_file_path, newline="") as handle:
                self.metrics_keys = next(csv.reader(handle), [])


class RunCSVLogger(CSVLogger):
    """Lightning's :class:`~lightning.pytorch.loggers.CSVLogger` that, for a resumed run, keeps
    the rows already in the run folder's ``metrics.csv`` and appends to them (Lightning's logger
    deletes the file when its folder is not empty, so a resumed run lost the losses logged before
    the interruption). :class:`LogsAtCheckpoint` removes the rows logged after the checkpoint.
    A new run warns (and deletes) only when its folder already holds a ``metrics.csv``, not for
    the run's own ``.lock`` and ``config.yaml``.

    Args:
        *args, **kwargs: those of :class:`~lightning.pytorch.loggers.CSVLogger`.
        resume (bool, optional): keep ``metrics.csv``. (default: :obj:`False`, Lightning's
            behaviour)
    """

    def __init__(self, *args: Any, resume: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.resume = bool(resume)

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        """The writer (see the class docstring)."""
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            writer = _KeepingWriter if self.resume else _RunWriter
            self._experiment = writer(log_dir=self.log_dir)
        return self._experiment


class LogsAtCheckpoint(Callback):
    """Keeps ``metrics.csv`` in step with the checkpoints, so a run killed (``kill -9``, power
    loss) and resumed logs every step exactly once, as the uninterrupted run does.

    * Every checkpoint first writes the loggers' pending rows to disk (Lightning's CSV logger
      otherwise holds up to ``flush_logs_every_n_steps`` rows in memory; a kill lost them).
    * On resume, rows of :class:`~lightning.pytorch.loggers.CSVLogger` logged after the
      checkpoint (at a logging step at or beyond the checkpoint's, written by a later flush
      before the kill) are removed, since the resumed run logs those steps again. Only when
      resuming ``fit``: testing ``best.ckpt`` after training loads it too, and must keep the
      epochs logged after the best one.
    """

    def on_save_checkpoint(self, trainer: Trainer, pl_module: LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        for logger in trainer.loggers:
            logger.save()

    def on_load_checkpoint(self, trainer: Trainer, pl_module: LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        fit = checkpoint.get("loops", {}).get("fit_loop", {})
        step = fit.get("epoch_loop.state_dict", {}).get("_batches_that_stepped")
        if step is None or not trainer.is_global_zero or trainer.state.fn != TrainerFn.FITTING:
            return
        for logger in trainer.loggers:
            path = osp.join(logger.log_dir, "metrics.csv") if isinstance(logger, CSVLogger) \
                else None
            if path is None or not osp.isfile(path):
                continue
            rows = pd.read_csv(path)
            if "step" in rows.columns and (rows["step"] >= step).any():
                atomic_write_csv(rows[rows["step"] < step], path)


class SharedRunFolder(Callback):
    """The run folder ``<folder>/version_<N>``, the same on every DDP rank.

    Lightning's subprocess launcher (``--trainer.strategy ddp``) starts ranks above 0 as new
    processes running the same command, so each rank built its own trainer: each claimed the
    next free version, rank 1 tested a ``last.ckpt`` in a folder rank 0 never wrote, and left an
    empty folder. Only rank 0 claims a folder now (``version=None`` on the other ranks); once
    the processes are connected (``setup``) every rank takes rank 0's version, broadcast as
    Lightning's own :class:`~lightning.pytorch.callbacks.ModelCheckpoint` broadcasts its
    ``dirpath`` and ``Trainer.log_dir`` its folder (the loggers write on rank 0 only).

    Args:
        folder (str): ``<default_root_dir>/<name>``.
        version (int, optional): the version (:obj:`None` until ``setup`` on ranks above 0).
    """

    def __init__(self, folder: str, version: int | None) -> None:
        self.folder, self.version = folder, version

    @property
    def run_dir(self) -> str:
        """``<folder>/version_<N>`` (before ``setup`` on ranks above 0: ``<folder>``)."""
        return self.folder if self.version is None \
            else osp.join(self.folder, f"version_{self.version}")

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        self.version = trainer.strategy.broadcast(self.version)


def task_of(model: Any) -> str | None:
    """The task of a :class:`~graph_urpe.models.GraphPropertyModule` (its ``record.task``);
    :obj:`None` for a model without a record (the sequence modules)."""
    return getattr(getattr(model, "record", None), "task", None)


def tested_checkpoint(choice: str | None, task: str | None) -> str:
    """The checkpoint ``fit`` tests after training, and the summary tells to predict with:
    ``"best"``, ``"last"`` or ``"soup"`` (:class:`~graph_urpe.models.soup.EpochSoup`), from
    ``--test_checkpoint`` (:obj:`None`: ``"best"``; ``"auto"``: ``"last"`` for regression,
    ``"best"`` otherwise). ``graph-urpe hpopt`` scores a trial on the same one."""
    if choice == "auto":
        return "last" if task == "regression" else "best"
    return choice or "best"


def use_exact_resume(trainer: Trainer) -> Trainer:
    """Give ``trainer`` an :class:`ExactResumeFitLoop` (keeping its epoch loop and limits).

    Returns:
        Trainer: ``trainer`` itself.
    """
    old = trainer.fit_loop
    loop = ExactResumeFitLoop(trainer, min_epochs=old.min_epochs, max_epochs=old.max_epochs)
    loop.epoch_loop = old.epoch_loop
    trainer.fit_loop = loop
    return trainer
