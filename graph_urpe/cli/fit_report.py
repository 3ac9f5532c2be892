"""What a ``fit`` run writes after training and prints at the end.

* :func:`write_run_outputs`: ``test_predictions.csv`` (source row, SMILES, targets and
  predictions of every test molecule, in the labels' units), ``splits.csv`` (the split of every
  source row, skipped rows with their reason) and ``figures/``;
* :func:`print_fit_summary`: how training ended (epochs done of planned; stopped by the time
  limit, early stopping or an interrupt, and what that means), the test metrics with their
  bootstrap interval (:mod:`graph_urpe.cli.summary_lines`) and calibration, whether they are
  leaderboard numbers (:mod:`graph_urpe.cli.leaderboard`), the run folder; then
  :func:`check_test_outputs` refuses test outputs that are not finite (exit status 2, one line).
"""

from __future__ import annotations

import math
import os.path as osp
from typing import Any

import numpy as np
import pandas as pd
import torch
from lightning.pytorch import LightningDataModule, LightningModule, Trainer
from lightning.pytorch.callbacks import EarlyStopping, Timer

from graph_urpe.cli.run import task_of
from graph_urpe.cli.summary_lines import (
    metric_interval_line,
    pos_weight_line,
    sigma_floor_line,
    tested_note,
    unlabelled_test_graphs,
)
from graph_urpe.data.modules.graph import BatchedGraphDataModule, GraphDataModule
from graph_urpe.files import atomic_write_csv
from graph_urpe.models.blend import SUFFIX
from graph_urpe.models.calibration import SUMMARY_LABELS as UNCERTAINTY_LABELS
from graph_urpe.models.classical_baseline import (
    FOREST_NAME,
    MEMBER_METRICS,
    METHOD_NAMES,
    ClassicalBaseline,
)
from graph_urpe.models.metrics import METRICS
from graph_urpe.models.soup import EpochSoup

SMALL_TEST_SPLIT = 20
"""Below this many test graphs the end-of-fit summary warns that the test metrics say little."""

__all__ = [
    "check_test_outputs",
    "how_training_ended",
    "print_fit_summary",
    "test_prediction_table",
    "write_run_outputs",
]


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
    followed by ``T_prob_<k>``, the probability of class ``k``); regression: ``T_std`` (only
    with a per-molecule uncertainty: an ensemble or a mean-variance head), ``T_lower``,
    ``T_upper`` (calibrated on the validation split; the 95 % interval).

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
    task = model.record.task
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
    extra = {key: t.detach().cpu()[order].float()
             for key, t in (getattr(model, "test_uncertainty", None) or {}).items()}
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

    ``test_predictions.csv``: see :func:`test_prediction_table`, with the columns ``predict``
    writes from the classical model of a CSV fit (:meth:`ClassicalBaseline.test_columns
    <graph_urpe.models.classical_baseline.ClassicalBaseline.test_columns>`); ``splits.csv``: the data
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
    graph_data = isinstance(datamodule, BatchedGraphDataModule)
    table = test_prediction_table(model, datamodule.splits.get("test") if graph_data else None)
    baseline = next((cb for cb in trainer.callbacks if isinstance(cb, ClassicalBaseline)), None)
    if table is not None and baseline is not None:  # predict's classical and blend columns
        table = baseline.test_columns(table, list(model.target_names))
    if table is not None:
        path = osp.join(run_dir, "test_predictions.csv")
        atomic_write_csv(table, path)
        written.append(path)
    frame = datamodule.split_membership() if isinstance(datamodule, GraphDataModule) else None
    if isinstance(frame, pd.DataFrame):
        path = osp.join(run_dir, "splits.csv")
        atomic_write_csv(frame, path)
        written.append(path)
    try:
        from graph_urpe.viz import plot_run
    except ImportError:  # matplotlib is an optional extra
        return written
    try:
        written += [str(p) for p in plot_run(run_dir, task=task_of(model))]
    except ValueError as err:  # nothing to draw yet (e.g. a run shorter than log_every_n_steps)
        print(f"figures skipped: {err}")
    return written


NO_PER_MOLECULE_UNCERTAINTY = (
    "Test per-molecule uncertainty: none (a single network: its std would be the validation "
    "RMSE on every molecule, so no <target>_std is written and the 95% intervals have one "
    "width). For one: --ensemble_size 5 (a deep ensemble) or --model.init_args.objective.loss mve (a "
    "mean-variance head)")
"""The summary's line for a regression model without a per-molecule uncertainty."""


def _format(value: float) -> str:
    return "nan" if value is None or not np.isfinite(value) else f"{value:.4f}"


LOSS_LABELS = {"l1": "L1", "mse": "MSE", "mve": "Gaussian NLL", "bce": "BCE",
               "cross_entropy": "cross-entropy"}
"""How the summary names each training loss (``GraphPropertyModule.loss_name``)."""


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

    Raises:
        ValueError: after the summary, test outputs that are not finite
            (:func:`check_test_outputs`).
    """
    run_dir = osp.abspath(run_dir)
    lines = ["", "=" * 72, f"Training {how_training_ended(trainer)}"]
    if metrics:
        shown = {k[5:]: v for k, v in metrics.items()
                 if k[:5] == "test/" and "/" not in k[5:]
                 and not k.endswith((*MEMBER_METRICS.values(), SUFFIX))
                 and k[5:] not in ("num_graphs", "num_nodes")}
        members = {member: {k[5:-len(suffix)]: v for k, v in metrics.items()
                            if k.startswith("test/") and k.endswith(suffix)}
                   for member, suffix in MEMBER_METRICS.items()}
        classical = members["svm"]
        order = [*METRICS, "baseline_accuracy", "loss", *UNCERTAINTY_LABELS]
        labels = {**{m: info.label for m, info in METRICS.items()}, "loss": "loss",
                  "baseline_accuracy": "accuracy of the majority class (baseline)",
                  **UNCERTAINTY_LABELS}
        module = trainer.lightning_module
        task = task_of(module)
        loss = getattr(module, "loss_name", None)
        if loss is not None:
            # The training objective; regression: in the standardised units it is optimised in.
            scaled = task == "regression" and module.objective.standardize
            labels["loss"] = (f"loss ({LOSS_LABELS.get(loss, loss)}"
                              f"{' of standardised targets' if scaled else ''}"
                              f"{', network' if tested_note(trainer.callbacks) else ''})")
        for key in sorted(shown, key=lambda k: order.index(k) if k in order else len(order)):
            label = labels.get(key, key.upper())
            value = _format(shown[key])
            if key.endswith("spearman") and value == "nan":
                value = "n/a (the std is the same for every molecule, or under 3 labels)"
            blend, note = metrics.get(f"test/{key}{SUFFIX}"), tested_note(trainer.callbacks)
            parts = [f"{value} (network)"] if key in classical or (
                blend is not None and note) else [value]
            if key in classical:  # the classical model's and the blend's (ClassicalBaseline)
                method = METHOD_NAMES.get(task, "classical")
                parts.append(f"{_format(classical[key])} ({method})")
                if key in members["forest"]:
                    parts.append(f"{_format(members['forest'][key])} ({FOREST_NAME})")
            if blend is not None and note:  # the blend is predict's <target>_pred
                parts.insert(0, f"{_format(blend)} (prediction: {note})")
            value = " | ".join(parts)
            lines.append(f"Test {label}: {value}")
        if "coverage95" in shown and getattr(module, "per_molecule_uncertainty", True) is False:
            lines.append(NO_PER_MOLECULE_UNCERTAINTY)
        lines += [line for line in (sigma_floor_line(module), pos_weight_line(module)) if line]
        blended = next((c.tested_outputs for c in trainer.callbacks
                        if getattr(c, "tested_outputs", None) is not None), None)
        interval = metric_interval_line(module, seeds_command, blended)
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
    loaded = dm.loaded if isinstance(dm, GraphDataModule) else None
    invalid = loaded.invalid_rows if loaded is not None else []
    if invalid:
        where = loaded.invalid_rows_path
        lines.append(f"Skipped rows: {len(invalid)}"
                     + (f" (listed in {osp.abspath(where)})" if where else "")
                     + "; see splits.csv for each row's fate.")
    # Read the files, not the callbacks: testing best.ckpt restores the callbacks' states of
    # the moment best.ckpt was written.
    tested_ckpt = osp.abspath(tested_checkpoint) if tested_checkpoint else None
    for cb in trainer.checkpoint_callbacks:
        if cb.monitor is not None and cb.best_model_path:
            best = osp.abspath(cb.best_model_path)
            mark = ", tested" if best == tested_ckpt else ""
            lines.append(f"Best checkpoint: {best}  ({cb.monitor}{mark})")
    soup = osp.join(run_dir, "checkpoints", "soup.ckpt")
    if osp.isfile(soup):
        mark = ", tested" if soup == tested_ckpt else ""
        kept = next((cb for cb in trainer.callbacks if isinstance(cb, EpochSoup)), None)
        which = (f"epochs {', '.join(str(e) for e in sorted(kept.epochs))} (from 0, as in "
                 f"metrics.csv) by {kept.monitor}"
                 if kept is not None and kept.epochs else "the best epochs")
        if kept is not None and kept.entries and kept.validated is not None:
            which += (f"; its {kept.monitor} {kept.validated:.4f}, the best epoch's "
                      f"{kept.entries[0][0]:.4f}")
        lines.append(f"Soup checkpoint: {soup}  (the mean of the weights of {which}{mark})")
    last = osp.join(run_dir, "checkpoints", "last.ckpt")
    if osp.isfile(last):
        mark = "tested; " if last == tested_ckpt else ""
        lines.append(f"Last checkpoint: {last}  ({mark}resume with --ckpt_path last)")
    if resume and trainer.interrupted:
        lines.append(f"Resume: {resume}")
    lines.append(f"Run folder: {run_dir}  (TensorBoard: tensorboard --logdir {osp.dirname(run_dir)})")
    lines.append("=" * 72)
    print("\n".join(lines))
    if metrics:
        check_test_outputs(trainer.lightning_module, metrics, run_dir)


def check_test_outputs(model: LightningModule, metrics: dict[str, float], run_dir: str) -> None:
    """Refuse a test whose outputs are not finite: the test loss, or a test prediction or
    variance (``model.test_outputs``), NaN or infinite. A metric that is undefined on the split
    (R2 of one label, ROC-AUC of one class) is NaN from finite outputs and is not refused. Labels
    near float32's limit (``3e38``) overflow once standardised and gave NaN metrics with exit
    status 0.

    Args:
        model (LightningModule): after ``test`` (its ``test_outputs``: ``(ids [R], outputs
            [R, num_outputs], labels [R, num_outputs])``, where it has them).
        metrics (dict[str, float]): the test results (``test/<metric>``).
        run_dir (str): the run folder (its ``test_predictions.csv`` is named).

    Raises:
        ValueError: one line naming the metrics that are not finite, how many test rows have
            outputs that are not finite, the largest label and the fix.
    """
    outputs = getattr(model, "test_outputs", None)
    _, pred, target = outputs if outputs is not None else (None, torch.zeros(0, 1),
                                                           torch.zeros(0, 1))
    pred, target = pred.detach().float().cpu(), target.detach().double().cpu()
    broken_rows = int((~torch.isfinite(pred)).any(dim=1).sum()) if len(pred) else 0
    loss = metrics.get("test/loss", 0.0)
    if broken_rows == 0 and math.isfinite(loss):
        return
    names = sorted(k[5:] for k, v in metrics.items()
                   if k.startswith("test/") and not math.isfinite(v))
    labels = target[~torch.isnan(target)].abs()
    largest = f"; the largest |label| is {float(labels.max()):.3g}" if len(labels) else ""
    raise ValueError(
        f"the test metrics are not finite ({', '.join(names)}): {broken_rows} of {len(pred)} "
        f"test rows have predictions that are not finite (see "
        f"{osp.join(run_dir, 'test_predictions.csv')}){largest}. Labels near float32's limit "
        "(3.4e38) overflow once standardised: rescale them (e.g. their log or other units) and "
        "fit again; otherwise training diverged: lower the learning rate.")
