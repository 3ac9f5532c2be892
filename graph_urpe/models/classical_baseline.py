r"""The classical model in every CSV fit: a Lightning callback that fits it, scores it and keeps
it in the checkpoint (the columns ``predict`` writes from it: :mod:`.classical_columns`).

:class:`ClassicalBaseline` (added by ``graph-urpe fit`` for a
:class:`~graph_urpe.data.modules.molecule.CSVDataModule`; ``--classical_baseline false`` leaves
it out) fits :class:`~graph_urpe.models.classical.ClassicalModel` (ECFP4, Tanimoto kernel, SVR /
Platt-scaled SVC, C by 5-fold cross-validation; for classification a random forest on ECFP4
beside the SVC) on the training rows at ``on_fit_start``, and logs each member's scores with the
network's own metric functions (:func:`~graph_urpe.models.metrics.epoch_metrics`) as
``val/<metric>_classical`` (the SVM; once, at the first validation) and
``test/<metric>_classical``, and the forest's as ``val|test/<metric>_forest``
(:data:`MEMBER_METRICS`; ``metrics.csv``; the fit summary shows them beside the network's,
named by :data:`METHOD_NAMES` and :data:`FOREST_NAME`). Above :data:`MAX_TRAIN_MOLECULES`
training molecules it is skipped with one line (its Gram matrix grows as N²). Its state (plain
arrays) is checked on restore (:meth:`ClassicalBaseline.state_difference`).

**Applicability domain** (:mod:`graph_urpe.models.applicability`): the threshold on the
similarity to the nearest training molecule, chosen on the validation rows at ``on_fit_start``
(:func:`~graph_urpe.models.applicability.similarity_threshold`); ``predict`` warns below it.

**Blend** (:mod:`graph_urpe.models.blend`; for classification a pool of standardised logits,
:mod:`graph_urpe.models.logit_pool`): the weights and factors per column (regression: the
blend's uncertainty; classification: the pool's scales and Platt sigmoid) fitted on the
validation predictions of each checkpoint at the end of its validation, before it is written
(``blend_weight``, ``blend_calibration``). ``test`` uses the blend the tested checkpoint stored,
so ``test_predictions.csv`` is what ``predict`` writes with it (fitted anew only without a
checkpoint). Logged as ``val|test/<metric>_blend`` (a column without a classical model: the
network's; regression also ``test/coverage95_blend``, ``test/nll_blend``). ``predict`` writes
the blend as ``<target>_pred`` and the network's own as ``<target>_network`` (section 25a of
benchmarks/README.md: on six public sets the blend is at least as good as the network on test).
Under several processes (DDP) the test rows are gathered from every rank and the blend's
validation scores are not logged again at test.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import pandas as pd
import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.utilities import rank_zero_info

from graph_urpe.data.fingerprints import ecfp4
from graph_urpe.models import blend as mix
from graph_urpe.models import logit_pool as pool
from graph_urpe.models.applicability import (
    ERROR_RATIO,
    count_outside_domain,
    row_errors,
    similarity_threshold,
)
from graph_urpe.models.calibration import calibration_metrics
from graph_urpe.models.classical import ClassicalModel
from graph_urpe.models.classical_columns import NETWORK, classical_columns
from graph_urpe.models.classical_state import state_problem
from graph_urpe.models.metrics import epoch_metrics

__all__ = ["ERROR_RATIO", "FOREST_NAME", "MAX_TRAIN_MOLECULES", "MEMBER_METRICS", "METHOD_NAMES",
           "NETWORK", "ClassicalBaseline", "classical_columns", "classical_from_checkpoint",
           "count_outside_domain", "row_errors", "similarity_threshold", "split_molecules"]

MAX_TRAIN_MOLECULES = 20_000
"""Above this many training molecules the classical model is skipped (one line says so)."""

METHOD_NAMES = {"regression": "ECFP4 Tanimoto SVR", "classification": "ECFP4 Tanimoto SVC"}
"""How the summary names the classical model's SVM."""

FOREST_NAME = "ECFP4 random forest"
"""How the summary names the classical model's random forest (classification)."""

MEMBER_METRICS = {"svm": "_classical", "forest": "_forest"}
"""The suffix of each member's metrics (``val|test/<metric>_classical`` for the SVM,
``_forest`` for the random forest)."""


def split_molecules(split: Any, num_tasks: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The SMILES, labels and CSV rows of a split of a
    :class:`~graph_urpe.data.csv.dataset.SmilesCSVDataset` (read from its columns, no graph
    is loaded).

    Returns:
        tuple: ``N`` SMILES; ``[N, num_tasks]`` float64 labels (NaN = missing); ``[N]`` int64
        CSV data rows.
    """
    idx = np.asarray(split.indices(), dtype=np.int64)
    data = split._data
    labels = data.y.view(-1, num_tasks).double().numpy()[idx]
    rows = data.row.view(-1).long().numpy()[idx]
    return [str(data.smiles[int(i)]) for i in idx], labels, rows


def _interval_scores(blended: dict[str, np.ndarray], std: np.ndarray, target: np.ndarray,
                     per_molecule: bool) -> dict[str, float]:
    """The blend's uncertainty scores on labelled rows
    (:func:`~graph_urpe.models.calibration.calibration_metrics`, with its z-scaled std
    :obj:`std` ``[N, T]``), named as the network's: ``coverage95``, ``nll`` and, with
    :obj:`per_molecule` uncertainty, ``spearman``."""
    mean, lower, upper = (torch.as_tensor(blended[k]) for k in ("prediction", "lower", "upper"))
    scores = calibration_metrics(mean, torch.as_tensor(std), lower, upper,
                                 torch.as_tensor(target))
    out = {"coverage95": scores["coverage"], "nll": scores["nll"]}
    return {**out, "spearman": scores["spearman"]} if per_molecule else out


def _scores(model: ClassicalModel, pred: np.ndarray, target: np.ndarray) -> dict[str, float]:
    """:func:`epoch_metrics` of predictions ``[N, T]`` (columns without a model left out)."""
    target = np.where(np.isnan(pred), np.nan, target)
    values = epoch_metrics(torch.from_numpy(np.nan_to_num(pred)), torch.from_numpy(target),
                           model.task)
    return {k: v for k, v in values.items() if "/" not in k}


def _member_scores(model: ClassicalModel, pred: np.ndarray, target: np.ndarray
                   ) -> dict[str, float]:
    """Each member's :func:`_scores` from its predictions ``pred`` ``[N, T, K]``, named
    ``<metric><suffix>`` (:data:`MEMBER_METRICS`)."""
    return {f"{key}{MEMBER_METRICS[member]}": value
            for k, member in enumerate(model.members)
            for key, value in _scores(model, pred[..., k], target).items()}


class ClassicalBaseline(Callback):
    r"""Fits, scores and stores the classical model of a CSV fit (see the module docstring).

    Args:
        seed (int, optional): seed of the cross-validation folds. (default: :obj:`0`)
        max_train_molecules (int, optional): skip above this many training molecules.
            (default: :data:`MAX_TRAIN_MOLECULES`)

    Attributes:
        model (ClassicalModel or None): the fitted model (:obj:`None`: skipped, or not yet fit).
        cpu_seconds (float): process CPU seconds of fingerprints, fit, validation and threshold.
    """

    def __init__(self, seed: int = 0, max_train_molecules: int = MAX_TRAIN_MOLECULES) -> None:
        self.seed, self.max_train_molecules = seed, max_train_molecules
        self.model: ClassicalModel | None = None
        self.cpu_seconds = 0.0
        self._val_scores: dict[str, float] | None = None
        self._val_logged = False
        self._val: tuple[np.ndarray, np.ndarray] | None = None  # classical predictions, labels
        self._captured: tuple[np.ndarray, torch.Tensor] | None = None
        self._blend_scores: dict[str, dict[str, float]] = {}  # stage -> metric -> value
        self.tested: ClassicalModel | None = None
        """The model with the tested checkpoint's blend (set at ``test``)."""
        self._stored: ClassicalModel | None = None  # the tested checkpoint's blend
        self.tested_outputs: tuple[torch.Tensor, torch.Tensor] | None = None
        """The blend's test predictions and labels ``[n, T]`` of the labelled test rows (set at
        ``test``; the summary's bootstrap interval is the blend's)."""

    @staticmethod
    def _splits(trainer: Trainer) -> dict:
        data = trainer.datamodule
        return {**data.load().splits, **(getattr(data, "splits", None) or {})}

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Fit the model on the training rows (unless restored from a checkpoint), score it on
        the validation rows and choose the applicability threshold."""
        if self.model is not None:
            return
        task, tasks = pl_module.record.task, pl_module.num_labels
        splits = self._splits(trainer)
        if len(splits["train"]) > self.max_train_molecules:
            rank_zero_info(
                f"Classical model skipped: {len(splits['train'])} training molecules, above "
                f"its cap of {self.max_train_molecules} (its kernel grows as N^2); "
                "--classical_baseline false turns it off.")
            return
        start = time.process_time()
        smiles, labels, rows = split_molecules(splits["train"], tasks)
        model = ClassicalModel.fit(ecfp4(smiles), labels, rows, task, self.seed)
        smiles, target, _ = split_molecules(splits["valid"], tasks)
        pred, similarity, _ = model.predict_with_neighbours(ecfp4(smiles))
        model.similarity_threshold = similarity_threshold(similarity,
                                                          row_errors(pred[..., 0], target, model))
        self._val_scores = _member_scores(model, pred, target) if len(smiles) else None
        self._val = pred, target
        # no validation yet (n = 0): NO_EVIDENCE_WEIGHT; a column without a model: the network
        model.blend_weight = mix.blend_weights(pred[:0, :, 0], pred[:0], target[:0], task,
                                               self._modelled(model))
        self.model, self.cpu_seconds = model, time.process_time() - start
        chosen = ", ".join(f"{e['C']:g}" for e in model.tasks) + (": 0 is no model, a column "
            "whose training labels are all alike" if any(e["C"] == 0 for e in model.tasks) else "")
        trees = "" if model.forests is None else " and a random forest of " + ", ".join(
            str(f.num_trees if f else 0) for f in model.forests) + " trees"
        rank_zero_info(f"Classical model ({METHOD_NAMES[task]}{trees}) fitted on {len(rows)} "
                       f"training molecules (C = {chosen}) in {self.cpu_seconds:.1f} CPU s; "
                       "--classical_baseline false turns it off.")

    def _log(self, pl_module: LightningModule, stage: str, scores: dict[str, float]) -> None:
        for key, value in scores.items():
            pl_module.log(f"{stage}/{key}", value, sync_dist=False)

    @staticmethod
    def _modelled(model: ClassicalModel) -> np.ndarray:
        return np.array([e["C"] > 0 for e in model.tasks])

    def _classical_val(self, trainer: Trainer) -> tuple[np.ndarray, np.ndarray]:
        """The members' predictions ``[N, T, K]`` and the labels ``[N, T]`` of the validation
        rows (once)."""
        if self._val is None:
            smiles, target, _ = split_molecules(self._splits(trainer)["valid"],
                                                len(self.model.tasks))
            self._val = self.model.predict(ecfp4(smiles)), target
        return self._val

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Log ``val/<metric>_classical`` once (its value does not change); keep the network's
        validation rows (read before the module's own epoch end clears them) for the blend."""
        if trainer.sanity_checking or self.model is None:
            return
        ids, pred, _ = pl_module.epoch_predictions["val"].rows()
        self._captured = ids.cpu().numpy(), pred  # [means or logits, variances]
        if self._val_logged or self._val_scores is None:
            return
        self._log(pl_module, "val", self._val_scores)
        self._val_logged = True

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """The blend's weights (and for regression its uncertainty factors) of the checkpoint
        about to be written, from its validation predictions (classification: the module's
        ``predict_values`` path, sigmoid of the Platt-scaled logits, with the Platt fit of this
        validation; regression: the network's interval with the calibration of this
        validation, as its ``predict_step`` writes it)."""
        if self._captured is None:
            return
        (ids, pred), self._captured = self._captured, None
        members, target = self._classical_val(trainer)
        network = self._network_outputs(pl_module, ids, pred, target.shape)
        self.model.blend_weight, self.model.blend_calibration = self._fit_blend(network, members,
                                                                                target)

    def _network_outputs(self, pl_module: LightningModule, ids: np.ndarray, pred: torch.Tensor,
                         shape: tuple[int, int]) -> dict[str, np.ndarray]:
        """The network's outputs as its ``predict_step`` gives them, from an epoch's collected
        rows ``pred`` (``[means or logits, variances]``) of the samples ``ids``, in a
        ``[N, T]`` array per output (NaN for a sample not collected)."""
        tasks = len(self.model.tasks)
        if self.model.task == "classification":
            outputs = {"prediction": torch.sigmoid(pl_module.platt_logits(pred[:, :tasks]))}
        else:
            _, lower, upper = pl_module.calibrated(pred[:, :tasks], pred[:, tasks:2 * tasks])
            outputs = {"prediction": pred[:, :tasks], "lower": lower, "upper": upper}
        network: dict[str, np.ndarray] = {}
        for key, value in outputs.items():
            network[key] = np.full(shape, np.nan)
            network[key][ids] = value.double().cpu().numpy()
        return network

    def _fit_blend(self, network: dict[str, np.ndarray], members: np.ndarray,
                   target: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``(weight [T, 1 + K], calibration)`` from validation outputs (the members'
        predictions ``[N, T, K]``): regression's linear blend and its uncertainty factors ``[2,
        T]``, classification's pool of standardised logits and its factors
        (:func:`~graph_urpe.models.logit_pool.fit_pool`)."""
        if self.model.task == "classification":
            return pool.fit_pool(network["prediction"], members, target,
                                 self._modelled(self.model))
        weight = mix.blend_weights(network["prediction"], members, target, self.model.task,
                                   self._modelled(self.model))
        return weight, mix.fit_blend_calibration(mix.blend(network["prediction"], members, weight),
                                                 network, target)

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """The blend the tested checkpoint stored at its validation (its weights and factors, so
        that the test scores what ``predict`` writes with that checkpoint), fitted again from its
        validation predictions only for weights without a stored blend (``test`` of the
        module's current weights); and its validation scores (one process: under several,
        each rank holds a part of the validation rows and they are not predicted again). The
        test rows are scored at the test epoch's end (:meth:`on_test_epoch_end`)."""
        self._blend_scores, self.tested, self.tested_outputs = {}, None, None
        self._stored = None
        splits = self._splits(trainer)
        if self.model is None or len(splits.get("test") or ()) == 0:
            return
        self._stored = self._stored_blend(trainer)
        if trainer.world_size > 1:
            return
        members, target = self._classical_val(trainer)
        network = mix.network_predictions(trainer, pl_module,
                                          trainer.datamodule.val_dataloader(), len(target))
        if self._stored is None:
            weight, calibration = self._fit_blend(network, members, target)
            self._stored = dataclasses.replace(self.model, blend_weight=weight,
                                               blend_calibration=calibration)
        self._blend_scores = {"val": _scores(self.model, pool.checkpoint_outputs(
            self.model.task, network, members, self._stored.blend_weight,
            self._stored.blend_calibration)["prediction"], target)}

    def _score_test(self, network: dict[str, np.ndarray], members: np.ndarray,
                    target: np.ndarray, tested: ClassicalModel) -> None:
        """The blend's test scores (regression: and its interval's), its test outputs for the
        summary and :meth:`test_columns`, from the network's and the members' (``[N, T, K]``)
        test outputs and the tested checkpoint's blend (:obj:`tested`)."""
        weight, calibration = tested.blend_weight, tested.blend_calibration
        blended = pool.checkpoint_outputs(self.model.task, network, members, weight, calibration)
        scores = _scores(self.model, blended["prediction"], target)
        if self.model.task == "regression" and calibration is not None:
            scores.update(_interval_scores(blended, mix.blend_std(network, calibration), target,
                                           "std" in network))
        self._blend_scores["test"] = scores
        self.tested = tested
        labelled = ~np.isnan(target).all(1)
        self.tested_outputs = (torch.from_numpy(blended["prediction"][labelled]),
                               torch.from_numpy(target[labelled]))

    def _stored_blend(self, trainer: Trainer) -> ClassicalModel | None:
        """The tested checkpoint's classical model with its blend, or :obj:`None`."""
        from graph_urpe.trust import read_checkpoint

        path = trainer.ckpt_path
        if not path:
            return None
        stored = classical_from_checkpoint(read_checkpoint(path), path)
        return stored if stored is not None and stored.blend_weight is not None else None

    def on_test_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Log ``test/<metric>_classical`` on the data module's test rows, and the blend's
        ``val|test/<metric>_blend`` from the rows this test epoch collected (regression also
        its interval's: ``test/coverage95_blend``, ``test/nll_blend``, and with per-molecule
        uncertainty ``test/spearman_blend``)."""
        if self.model is None:
            return
        test = self._splits(trainer).get("test")
        if test is None or len(test) == 0:
            return
        smiles, target, _ = split_molecules(test, len(self.model.tasks))
        members = self.model.predict(ecfp4(smiles))
        self._log(pl_module, "test", _member_scores(self.model, members, target))
        stored, self._stored = self._stored, None
        if stored is not None:  # the test rows this epoch collected (gathered from every rank)
            ids, pred, _ = pl_module.epoch_predictions["test"].rows()
            network = self._network_outputs(pl_module, ids.cpu().numpy(), pred, target.shape)
            self._score_test(network, members, target, stored)
        for stage, scores in self._blend_scores.items():
            for key, value in scores.items():
                pl_module.log(f"{stage}/{key}{mix.SUFFIX}", value, sync_dist=False)

    def test_columns(self, table: pd.DataFrame, targets: list[str]) -> pd.DataFrame:
        """``test_predictions.csv`` with the columns ``predict`` writes from the tested
        checkpoint (:func:`classical_columns`: the blend of :attr:`tested` as ``<target>_pred``,
        ``<target>_network``, ``<target>_ecfp_svm`` (and ``_ecfp_rf``), the nearest training
        molecule; without a tested blend the network's prediction and the classical model's
        columns); the table unchanged without a classical model or a ``smiles`` column.

        Args:
            table (pandas.DataFrame): the test table
                (:func:`~graph_urpe.cli.fit_report.test_prediction_table`), with ``smiles`` and
                ``<target>_pred`` columns.
            targets (list[str]): the label names.

        Returns:
            pandas.DataFrame: a new table (or ``table``).
        """
        if self.model is None or "smiles" not in table.columns:
            return table
        model = self.tested or dataclasses.replace(self.model, blend_weight=None,
                                                   blend_calibration=None)
        return classical_columns(table, table["smiles"].astype(str).tolist(), model, targets)

    def state_dict(self) -> dict[str, Any]:
        """The fitted model's plain arrays (:meth:`ClassicalModel.state_dict`), ``{}`` if none."""
        return self.model.state_dict() if self.model is not None else {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a fitted model (checked: :meth:`ClassicalModel.from_state`)."""
        self.model = ClassicalModel.from_state(state_dict) if state_dict else None

    @staticmethod
    def state_difference(found: Any) -> str | None:
        """How a checkpoint's state differs from what this version writes, or :obj:`None`
        (used by :func:`~graph_urpe.cli.resume_state.training_state_difference`)."""
        if isinstance(found, dict) and not found:
            return None
        return state_problem(found)


def classical_from_checkpoint(checkpoint: dict, path: str) -> ClassicalModel | None:
    """The classical model a checkpoint (read by :func:`graph_urpe.trust.read_checkpoint`)
    holds in its callbacks' states, checked (:meth:`ClassicalModel.from_state`), or :obj:`None`.

    Raises:
        graph_urpe.trust.ReceivedFileError: a state that is not what this version writes (one
            line naming the file and the entry).
    """
    from graph_urpe.trust import ReceivedFileError

    states = checkpoint.get("callbacks")
    state = states.get(ClassicalBaseline.__qualname__) if isinstance(states, dict) else None
    if state is None or (isinstance(state, dict) and not state):
        return None
    try:
        return ClassicalModel.from_state(state)
    except ValueError as err:
        raise ReceivedFileError(path, f"{err}; it was changed or written by another version: "
                                "use a checkpoint this version's `graph-urpe fit` wrote") from None
