"""What a ``fit`` run sets up before training: its run folder and its callbacks.

* :func:`open_run_folder`: ``<root>/<name>/version_<N>``, a new version claimed by exclusive
  creation (parallel runs never share one) or the one resumed (``--ckpt_path last``,
  ``--version``); on rank 0 locked for this command, refused if a link was planted in it or a
  checkpoint name is a folder, cleared of what a killed run left, and checked writable;
* :func:`fit_callbacks`: the run's checkpoints (``best.ckpt`` on ``val/<metric>``,
  ``last.ckpt``), exact-resume state, logs at checkpoints, early stopping, the classical model of
  a CSV fit and the time cues;
* :func:`release_run_folders`: the locks released when the command ends (and the folder of a fit
  that wrote nothing removed).
"""

from __future__ import annotations

import os
import os.path as osp
import re
from typing import Any

from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.callbacks import Callback, EarlyStopping, LearningRateMonitor

from graph_urpe.cli.messages import CLIError
from graph_urpe.cli.resume_state import RunCheckpoint
from graph_urpe.cli.run import (
    LogsAtCheckpoint,
    RNGStateCheckpoint,
    SharedRunFolder,
    task_of,
    tested_checkpoint,
)
from graph_urpe.cli.time_cues import time_cues
from graph_urpe.data.modules.molecule import CSVDataModule
from graph_urpe.files import (
    check_writable,
    claim_run_folder,
    lock_run_folder,
    remove_stale_temporaries,
    remove_unused_run_folder,
)
from graph_urpe.models.classical_baseline import ClassicalBaseline
from graph_urpe.models.soup import EpochSoup
from graph_urpe.owned import refuse_links

__all__ = ["fit_callbacks", "latest_version", "open_run_folder", "release_run_folders"]

_HELD_LOCKS: list[tuple[str, Any]] = []
"""The run folders and locks (:func:`graph_urpe.files.lock_run_folder`) the command holds."""


def latest_version(folder: str) -> int | None:
    """The highest ``N`` of ``folder/version_<N>`` that holds a ``checkpoints/last.ckpt``
    (:obj:`None` when none does)."""
    found = [int(m.group(1)) for d in (os.listdir(folder) if osp.isdir(folder) else [])
             if (m := re.fullmatch(r"version_(\d+)", d))
             and osp.isfile(osp.join(folder, d, "checkpoints", "last.ckpt"))]
    return max(found) if found else None


def _is_rank_zero() -> bool:
    return os.environ.get("LOCAL_RANK", "0") == "0" and os.environ.get("NODE_RANK", "0") == "0"


def open_run_folder(root: str, name: str, version: int | None,
                    ckpt: str | None) -> tuple[SharedRunFolder, int | None, str | None]:
    """Choose, claim, lock and check a ``fit`` run's folder (see the module docstring).

    Args:
        root (str): the Trainer's ``default_root_dir``.
        name (str): the run's ``name``.
        version (int, optional): ``--version``; :obj:`None`: a new one (or, with
            ``ckpt="last"``, the latest with a ``last.ckpt``).
        ckpt (str, optional): ``--ckpt_path``; ``"last"`` resumes the folder's ``last.ckpt``.

    Returns:
        tuple: the :class:`~graph_urpe.cli.run.SharedRunFolder` (a callback: DDP ranks above 0
        take rank 0's version at setup), the version (:obj:`None` on ranks above 0 of a new
        run) and the checkpoint to resume (``"last"`` replaced by its path).

    Raises:
        CLIError: for ``--ckpt_path last`` without a ``last.ckpt``, a folder that already holds
            a trained run (``--version`` without ``--ckpt_path``), or a checkpoint name that is a
            folder.
        graph_urpe.owned.PlantedLinkError: (rank 0) for a link planted in the run folder.
        OSError: (rank 0) for a folder that cannot be written (e.g. a full disk).
    """
    folder = osp.join(root, name)
    rank_zero = _is_rank_zero()
    if version is None and ckpt == "last":
        version = latest_version(folder)
        if version is None:
            raise CLIError(
                f"--ckpt_path last: no run of {name!r} under {root} has a last.ckpt; start "
                "the run without --ckpt_path, or give --name/--version of the run to resume."
            )
    elif version is None and rank_zero:
        # a new run claims its folder by exclusive creation: parallel runs never share one
        version = claim_run_folder(folder)[0]
    run_folder = SharedRunFolder(folder, version)
    run_dir = run_folder.run_dir
    if rank_zero:
        # one fit per folder (an explicit --version too); then what a killed one left
        # a received run folder: nothing is written through a link planted in it
        refuse_links(run_dir, depth=1, what="run folder")
        for own in ("best.ckpt", "last.ckpt"):
            if osp.isdir(osp.join(run_dir, "checkpoints", own)):
                raise CLIError(f"{osp.join(run_dir, 'checkpoints', own)} is a folder where "
                               "the run keeps its checkpoint file: remove it, or start a new "
                               "version")
        _HELD_LOCKS.append((run_dir, lock_run_folder(run_dir)))
        for part in (run_dir, osp.join(run_dir, "checkpoints")):
            remove_stale_temporaries(part)
        # a full disk is one line here, not a TensorBoard thread's traceback later
        check_writable(osp.join(run_dir, "config.yaml"))
    if ckpt == "last":
        last = osp.join(run_dir, "checkpoints", "last.ckpt")
        if not osp.isfile(last):
            raise CLIError(f"--ckpt_path last: {last} does not exist.")
        ckpt = last
    elif ckpt is None and version is not None \
            and osp.isfile(osp.join(run_dir, "checkpoints", "last.ckpt")):
        raise CLIError(
            f"run folder {run_dir} already holds a trained run: resume it with --ckpt_path "
            "last, or leave out --version to start a new version."
        )
    return run_folder, version, ckpt


def fit_callbacks(config: Any, model: LightningModule, datamodule: LightningDataModule | None,
                  run_folder: SharedRunFolder, user_callbacks: list[Callback]) -> list[Callback]:
    """The callbacks ``fit`` adds to the user's (see the module docstring).

    Args:
        config (Namespace): the ``fit`` subcommand's configuration (``early_stopping_patience``,
            ``classical_baseline``, ``seed_everything``, ``trainer.enable_progress_bar``).
        model (LightningModule): the module (its ``metric_name`` / ``metric_mode``, if any).
        datamodule (LightningDataModule, optional): the data (a CSV one gets the classical
            model).
        run_folder (SharedRunFolder): from :func:`open_run_folder`.
        user_callbacks (list[Callback]): the configuration's own callbacks (the time cues
            leave out a progress bar when one is among them).
    """
    metric = getattr(model, "metric_name", None)
    mode = getattr(model, "metric_mode", "min")
    ckpt_dir = osp.join(run_folder.run_dir, "checkpoints")
    callbacks: list[Callback] = [
        RunCheckpoint(dirpath=ckpt_dir, filename="last", monitor=None, save_top_k=1,
                      save_on_exception=True),
        LearningRateMonitor(logging_interval="step"),
        RNGStateCheckpoint(),
        LogsAtCheckpoint(),
        run_folder,
    ]
    if metric is not None:
        callbacks.insert(0, RunCheckpoint(
            dirpath=ckpt_dir, filename="best", monitor=f"val/{metric}", mode=mode,
            save_top_k=1, auto_insert_metric_name=False))
    patience = config.get("early_stopping_patience")
    if patience is not None and metric is not None:
        callbacks.append(EarlyStopping(monitor=f"val/{metric}", mode=mode, patience=patience))
    if metric is not None and tested_checkpoint(config.get("test_checkpoint"),
                                                task_of(model)) == "soup":
        callbacks.append(EpochSoup())
    if config.get("classical_baseline", True) and isinstance(datamodule, CSVDataModule):
        seed = config.get("seed_everything")
        seed = seed if type(seed) is int and seed >= 0 else 0
        callbacks.append(ClassicalBaseline(seed=seed))
    trainer_cfg = config["trainer"]
    return callbacks + time_cues(trainer_cfg.get("enable_progress_bar"), user_callbacks)


def release_run_folders(failed: bool) -> None:
    """Release the run folders this command locked; with ``failed``, remove a fit's folder that
    holds nothing yet (no empty ``version_N`` left behind)."""
    while _HELD_LOCKS:
        folder, lock = _HELD_LOCKS.pop()
        if failed:
            remove_unused_run_folder(folder)
        if lock is not None:
            lock.close()
