"""What a ``fit`` run leaves in its folder and prints at the end.

* :class:`AtomicCheckpointIO`: checkpoints written under a temporary name and renamed, so a full
  disk or a kill never leaves a truncated ``last.ckpt``;
* :class:`RNGStateCheckpoint` and :class:`ExactResumeFitLoop`: a resumed run trains exactly the
  steps of the uninterrupted one;
* :func:`write_run_outputs`: ``test_predictions.csv`` (source row, SMILES, targets and
  predictions of every test molecule, in the labels' units), ``splits.csv`` (the split of every
  source row, skipped rows with their reason) and ``figures/``;
* :func:`print_fit_summary`: how training ended (epochs done of planned; stopped by the time
  limit, early stopping or an interrupt, and what that means), the test metrics and whether they
  are leaderboard numbers (:mod:`graph_urpe.cli.leaderboard`), the run folder.
"""

from __future__ import annotations

import csv
import os.path as osp
import random
from typing import Any

import numpy as np
import pandas as pd
import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch import LightningDataModule, LightningModule, Trainer
from lightning.pytorch.callbacks import Callback, EarlyStopping, Timer
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.loggers.logger import rank_zero_experiment
from lightning.pytorch.loops import _FitLoop, _Loop
from lightning.pytorch.trainer.states import TrainerFn

from graph_urpe.files import atomic_save, atomic_write_csv
from graph_urpe.models.calibration import SUMMARY_LABELS as UNCERTAINTY_LABELS
from graph_urpe.models.metrics import METRICS
from graph_urpe.trust import read_checkpoint

SMALL_TEST_SPLIT = 20
"""Below this many test graphs the end-of-fit summary warns that the test metrics say little."""

__all__ = [
    "AtomicCheckpointIO",
    "ExactResumeFitLoop",
    "LogsAtCheckpoint",
    "RNGStateCheckpoint",
    "RunCSVLogger",
    "how_training_ended",
    "print_fit_summary",
    "test_prediction_table",
    "use_exact_resume",
    "write_run_outputs",
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

    def load_checkpoint(self, path, map_location: Any = None,
                        weights_only: bool | None = None) -> dict[str, Any]:
        return dict(read_checkpoint(str(path), map_location or "cpu"))


class RNGStateCheckpoint(Callback):
    """Stores the random-number generators' states in every checkpoint and restores them on
    resume, so a resumed run draws the same dropout masks as the uninterrupted one (the batch
    order is a function of the sampler's seed and the epoch; the place within the epoch is the
    training loader's state, :class:`graph_urpe.data.sampler.ResumableDataLoader`).

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
        version, state, gauss = state_dict["python"]
        random.setstate((version, tuple(state), gauss))
        name, keys, *rest = state_dict["numpy"]
        np.random.set_state((name, keys.numpy().astype(np.uint32), *rest))
        torch.set_rng_state(state_dict["torch"])
        if "cuda" in state_dict and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state_dict["cuda"])


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
        if self._experiment is None and self.resume:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _KeepingWriter(log_dir=self.log_dir)
        return super().experiment


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


def how_training_ended(trainer: Trainer) -> str:
    """One sentence: epochs done of planned and why training stopped.

    Args:
        trainer (Trainer): after ``fit``.
    """
    done = trainer.current_epoch
    planned = trainer.max_epochs
    of = f"{done} of {planned} epochs" if planned and planned > 0 else f"{done} epochs"
    if trainer.interrupted:
        epoch = f"epoch {done + 1} of {planned}" if planned and planned > 0 else f"epoch {done + 1}"
        return (f"interrupted at step {trainer.global_step}, in {epoch} ({done} complete); "
                "last.ckpt holds the state at the interrupt: resume with --ckpt_path last.")
    for cb in trainer.callbacks:
        if isinstance(cb, EarlyStopping) and cb.stopped_epoch > 0:
            return (f"stopped early by EarlyStopping on {cb.monitor} after {of} (no improvement "
                    f"for {cb.patience} validations).")
        if getattr(cb, "stop_reason", None):  # a callback that says why it stopped the run
            return f"stopped after {of}: {cb.stop_reason}."
        if isinstance(cb, Timer) and cb.time_remaining() is not None and cb.time_remaining() <= 0:
            return (f"stopped by the time limit (trainer.max_time) after {of}: the learning-rate "
                    "schedule did not finish, so the result is worse than a full run; raise "
                    "max_time or lower max_epochs (the schedule follows max_epochs).")
    if trainer.max_steps and trainer.max_steps > 0 and trainer.global_step >= trainer.max_steps:
        return f"finished: reached max_steps={trainer.max_steps} ({of})."
    return f"finished the planned schedule: {of}."


def test_prediction_table(model: LightningModule, test_split: Any) -> pd.DataFrame | None:
    """The rows of ``test_predictions.csv``: one per test graph (node level: per test node).

    Columns: ``row`` (the graph's source row: the 0-based data row of the user's file, or its
    index in the dataset), ``smiles`` (when the graphs carry it), at node level ``node`` (the node's index in
    its graph), then per target ``T``: ``T`` (label; empty = missing) and ``T_pred`` (prediction
    in the labels' units; a probability for classification; the predicted class for multi-class,
    followed by ``T_prob_<k>``, the probability of class ``k``); regression: ``T_std``,
    ``T_lower``, ``T_upper`` (calibrated on the validation split; the 95 % interval).

    Args:
        model (LightningModule): a :class:`~graph_urpe.models.graph.GraphPropertyModule` after
            ``test``; its ``test_outputs`` holds ``(ids [R], outputs [R, num_outputs],
            labels [R, num_outputs])`` as collected (node level: ids from
            :func:`~graph_urpe.models.sample_ids.node_sample_ids`).
        test_split (Dataset): the test graphs the ids index.

    Returns:
        pandas.DataFrame or None: ``R`` rows sorted by id; None if the model holds no test
        outputs.
    """
    from graph_urpe.models.sample_ids import NODE_ID_STRIDE

    outputs = getattr(model, "test_outputs", None)
    if outputs is None or test_split is None:
        return None
    ids, pred, target = (t.detach().cpu() for t in outputs)
    order = torch.argsort(ids)
    ids, pred, target = ids[order], pred[order].float(), target[order]
    task = model.hparams.task
    node_level = getattr(model, "level", "graph") == "node"
    graph_ids = torch.div(ids, NODE_ID_STRIDE, rounding_mode="floor") if node_level else ids
    rows, smiles = {}, {}
    for i in torch.unique(graph_ids).tolist():
        graph = test_split[i]
        rows[i] = int(graph.row) if "row" in graph else i
        smiles[i] = graph.smiles if "smiles" in graph else ""
    table: dict[str, Any] = {"row": [rows[i] for i in graph_ids.tolist()]}
    if any(smiles.values()):
        table["smiles"] = [smiles[i] for i in graph_ids.tolist()]
    if node_level:
        table["node"] = (ids - graph_ids * NODE_ID_STRIDE).numpy()
    if task == "multiclass":
        name = model.target_names[0]
        prob = torch.softmax(pred, dim=-1)
        table[name] = target[:, 0].long().numpy()
        table[f"{name}_pred"] = prob.argmax(-1).numpy()
        for k in range(prob.shape[1]):
            table[f"{name}_prob_{k}"] = prob[:, k].numpy()
        return pd.DataFrame(table)
    if task == "classification":
        pred = torch.sigmoid(pred)
    # Regression: the calibrated std and 95 % interval (GraphPropertyModule.calibrated).
    extra = dict(zip(("std", "lower", "upper"), (
        t.detach().cpu()[order].float() for t in getattr(model, "test_uncertainty", None) or ())))
    for t, name in enumerate(model.target_names):
        table[name] = target[:, t].numpy()
        table[f"{name}_pred"] = pred[:, t].numpy()
        for key, values in extra.items():
            table[f"{name}_{key}"] = values[:, t].numpy()
    return pd.DataFrame(table)


def write_run_outputs(
    trainer: Trainer, model: LightningModule, datamodule: LightningDataModule, run_dir: str
) -> list[str]:
    """Write the test predictions, the split membership and the figures into ``run_dir``.

    ``test_predictions.csv``: see :func:`test_prediction_table`; ``splits.csv``: the data
    module's ``split_membership()``; ``figures/``: :func:`graph_urpe.viz.plot_run` (when
    matplotlib is installed).

    Args:
        trainer (Trainer): after ``test``.
        model (LightningModule): a :class:`~graph_urpe.models.graph.GraphPropertyModule` after
            ``test``.
        datamodule (LightningDataModule): the graph data module.
        run_dir (str): the run folder.

    Returns:
        list[str]: the files written.
    """
    written = []
    table = test_prediction_table(model, getattr(datamodule, "splits", {}).get("test"))
    if table is not None:
        path = osp.join(run_dir, "test_predictions.csv")
        atomic_write_csv(table, path)
        written.append(path)
    membership = getattr(datamodule, "split_membership", None)
    frame = membership() if callable(membership) else None
    if isinstance(frame, pd.DataFrame):
        path = osp.join(run_dir, "splits.csv")
        atomic_write_csv(frame, path)
        written.append(path)
    try:
        from graph_urpe.viz import plot_run
    except ImportError:  # matplotlib is an optional extra
        return written
    try:
        written += [str(p) for p in plot_run(run_dir, task=model.hparams.get("task"))]
    except ValueError as err:  # nothing to draw yet (e.g. a run shorter than log_every_n_steps)
        print(f"figures skipped: {err}")
    return written


def _format(value: float) -> str:
    return "nan" if value is None or not np.isfinite(value) else f"{value:.4f}"


LOSS_LABELS = {"l1": "L1", "mse": "MSE", "mve": "Gaussian NLL", "bce": "BCE",
               "cross_entropy": "cross-entropy"}
"""How the summary names each training loss (``GraphPropertyModule.loss_name``)."""


def unlabelled_test_graphs(model: LightningModule) -> int:
    """How many graphs of ``model.test_outputs`` have no label at all (NaN in every column;
    masked by the metrics); 0 without test outputs or at node level."""
    outputs = getattr(model, "test_outputs", None)
    if outputs is None or getattr(model, "level", "graph") != "graph":
        return 0
    return int(torch.isnan(outputs[2]).all(dim=1).sum())


def metric_interval_line(model: LightningModule, seeds_command: str | None = None) -> str | None:
    """The summary's line on how much the monitored test metric could vary with the test graphs:
    its 95 % bootstrap interval (:func:`~graph_urpe.models.uncertainty.bootstrap_interval`) over
    the graphs of ``model.test_outputs`` that have a label, then :obj:`seeds_command` (the
    command that measures the spread over seeds) if given; :obj:`None` at node level, for test
    splits over :data:`~graph_urpe.models.uncertainty.MAX_BOOTSTRAP_CELLS` labels, or where it is
    undefined."""
    from graph_urpe.models.uncertainty import MAX_BOOTSTRAP_CELLS, bootstrap_interval

    outputs = getattr(model, "test_outputs", None)
    if outputs is None or getattr(model, "level", "graph") != "graph":
        return None
    _, pred, target = outputs
    if target.numel() > MAX_BOOTSTRAP_CELLS:
        return None
    metric = model.metric_name
    labelled = ~torch.isnan(target).all(dim=1)  # graphs with at least one label
    pred, target = pred[labelled], target[labelled]
    interval = bootstrap_interval(pred, target, model.hparams.task, metric)
    if interval is None:
        return None
    label = METRICS[metric].label
    return (f"Test {label} 95% interval over the {pred.shape[0]} labelled test graphs (bootstrap): "
            f"{interval[0]:.4f} to {interval[1]:.4f}"
            + (f". The spread over training seeds: {seeds_command}" if seeds_command else ""))


def print_fit_summary(trainer: Trainer, metrics: dict[str, float] | None, run_dir: str,
                      record: dict[str, Any] | None = None, resume: str | None = None,
                      tested_checkpoint: str | None = None, seeds_command: str | None = None
                      ) -> None:
    """Print the end-of-``fit`` summary (see the module docstring). Every path in it is absolute.

    Args:
        trainer (Trainer): after ``fit`` (and ``test``).
        metrics (dict, optional): the test results (``test/<metric>``), :obj:`None` if the run
            was not tested.
        run_dir (str): the run folder.
        record (dict, optional): a :func:`~graph_urpe.cli.leaderboard.leaderboard_record`: says
            whether the test metric is a leaderboard number (default: :obj:`None`).
        resume (str, optional): the command that resumes the run, printed after an interrupt
            (default: :obj:`None`).
        tested_checkpoint (str, optional): the checkpoint file the test metrics are from, marked
            in the checkpoint lines (default: :obj:`None`).
        seeds_command (str, optional): the ``graph-urpe seeds`` command that repeats this run
            over seeds, printed after the test metric's interval (default: :obj:`None`).
    """
    run_dir = osp.abspath(run_dir)
    lines = ["", "=" * 72, f"Training {how_training_ended(trainer)}"]
    if metrics:
        shown = {k[5:]: v for k, v in metrics.items()
                 if k.startswith("test/") and "/" not in k[5:]
                 and k[5:] not in ("num_graphs", "num_nodes")}
        order = [*METRICS, "baseline_accuracy", "loss", *UNCERTAINTY_LABELS]
        labels = {**{m: info.label for m, info in METRICS.items()}, "loss": "loss",
                  "baseline_accuracy": "accuracy of the majority class (baseline)",
                  **UNCERTAINTY_LABELS}
        module = trainer.lightning_module
        hparams = getattr(module, "hparams", {})
        loss = getattr(module, "loss_name", None)
        if loss is not None:
            # The training objective; regression: in the standardised units it is optimised in.
            scaled = hparams.get("task") == "regression" and hparams.get("standardize")
            labels["loss"] = (f"loss ({LOSS_LABELS.get(loss, loss)}"
                              f"{' of standardised targets' if scaled else ''})")
        for key in sorted(shown, key=lambda k: order.index(k) if k in order else len(order)):
            label = labels.get(key, key.upper())
            lines.append(f"Test {label}: {_format(shown[key])}")
        weights = getattr(module, "pos_weight_summary", None)
        if callable(weights) and weights():
            lines.append(weights())
        interval = metric_interval_line(module, seeds_command)
        if interval:
            lines.append(interval)
        if record is not None:
            lines.append(record["note"])
        tested = metrics.get("test/num_graphs")
        unlabelled = unlabelled_test_graphs(module)
        if unlabelled and tested is not None:
            lines.append(f"Test graphs without any label: {unlabelled} of {int(tested)} "
                         "(masked: the metrics are over the labelled ones).")
        if tested is not None and tested - unlabelled < SMALL_TEST_SPLIT:
            lines.append(
                f"Warning: the test split holds only {int(tested - unlabelled)} labelled "
                "graph(s): these metrics say little. Use more data, or a split with a larger test "
                "part (e.g. --data.init_args.split random on a small file)."
            )
    elif metrics is not None:
        tested_checkpoint = None
        lines.append("No test metrics: the test split is empty. Use more data, or a split with "
                     "a test part (e.g. --data.init_args.split random on a small file).")
    dm = trainer.datamodule
    loaded = getattr(dm, "loaded", None)
    invalid = getattr(loaded, "invalid_rows", None) or []
    if invalid:
        where = getattr(loaded, "invalid_rows_path", None)
        lines.append(f"Skipped rows: {len(invalid)}" + (f" (listed in {where})" if where else "")
                     + "; see splits.csv for each row's fate.")
    # Read the files, not the callbacks: testing best.ckpt restores the callbacks' states of
    # the moment best.ckpt was written.
    tested_ckpt = osp.abspath(tested_checkpoint) if tested_checkpoint else None
    for cb in trainer.checkpoint_callbacks:
        if cb.monitor is not None and cb.best_model_path:
            best = osp.abspath(cb.best_model_path)
            mark = ", tested" if best == tested_ckpt else ""
            lines.append(f"Best checkpoint: {best}  ({cb.monitor}{mark})")
    last = osp.join(run_dir, "checkpoints", "last.ckpt")
    if osp.isfile(last):
        mark = "tested; " if last == tested_ckpt else ""
        lines.append(f"Last checkpoint: {last}  ({mark}resume with --ckpt_path last)")
    if resume and trainer.interrupted:
        lines.append(f"Resume: {resume}")
    lines.append(f"Run folder: {run_dir}  (TensorBoard: tensorboard --logdir {osp.dirname(run_dir)})")
    lines.append("=" * 72)
    print("\n".join(lines))
