"""The Lightning callback of ``graph-urpe predict`` (:func:`graph_urpe.cli.predict.predict_smiles`)
that turns one chunk's predictions, gathered over every DDP rank, into the table of its input rows:
:class:`SmilesPredictionWriter`, handed plain values only (the table itself is
:func:`graph_urpe.data.predictions.prediction_table`'s).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch
from lightning.pytorch.callbacks import BasePredictionWriter

from graph_urpe.data.predictions import prediction_table
from graph_urpe.models.metrics import EpochPredictions

__all__ = ["UNCERTAINTY_KEYS", "SmilesPredictionWriter"]

UNCERTAINTY_KEYS = ("std", "lower", "upper")
"""What ``predict_step`` may give beside each prediction (written as ``<target>_<key>``)."""


class SmilesPredictionWriter(BasePredictionWriter):
    """Collects the predictions of one ``trainer.predict`` (all DDP ranks) into the table of its
    input rows (:attr:`table`, the same on every rank): one row per input row, in input order.

    Args:
        frame (pandas.DataFrame): the ``N`` input rows (its index: their input row numbers).
        errors (dict[int, str]): position in ``frame`` -> why it has no prediction.
        warnings (dict[int, str]): position -> why its prediction is doubtful (``warning``).
        target_names (list[str]): ``T`` prediction names (columns ``<name>_pred``).
        progress (callable, optional): called with the number of graphs of each predicted batch
            times the number of ranks (the progress bar's rows; default: :obj:`None`).
    """

    def __init__(self, frame: pd.DataFrame, errors: dict[int, str], warnings: dict[int, str],
                 target_names: list[str], progress: Any = None) -> None:
        super().__init__(write_interval="batch")
        self.frame, self.errors, self.warnings = frame, errors, warnings
        self.target_names = list(target_names)
        self.progress = progress
        self._ids: list[torch.Tensor] = []
        self._preds: list[torch.Tensor] = []
        self._keys: list[str] = ["prediction"]
        self.table: pd.DataFrame | None = None

    def write_on_batch_end(self, trainer, pl_module, prediction, batch_indices, batch, batch_idx,
                           dataloader_idx=0) -> None:
        # The prediction and what the module gives beside it (std, lower, upper), side by side.
        self._keys = [k for k in ("prediction", *UNCERTAINTY_KEYS) if k in prediction]
        self._ids.append(prediction["sample_id"].detach().cpu())
        self._preds.append(torch.cat([prediction[k].detach().float().cpu() for k in self._keys],
                                     dim=-1))
        if self.progress is not None:
            self.progress(len(prediction["sample_id"]) * trainer.world_size)

    def on_predict_epoch_end(self, trainer, pl_module) -> None:
        width = len(self.target_names)
        collector = EpochPredictions(width * len(self._keys)).to(pl_module.device)
        for ids, preds in zip(self._ids, self._preds):
            collector.update(ids, preds, torch.full_like(preds, float("nan")))
        self._ids, self._preds = [], []
        ids, preds, _ = collector.rows()  # gathered over DDP ranks, one row per input
        parts = dict(zip(self._keys, preds.cpu().numpy().reshape(len(ids), -1, width)
                         .transpose(1, 0, 2)))
        # Every rank holds every row: each makes the same table (its counts and errors), and
        # only rank 0 writes it (predict_smiles).
        self.tabulate(ids.cpu().numpy(), parts.pop("prediction"), parts)

    def tabulate(self, rows, predictions, uncertainty: dict | None = None) -> pd.DataFrame:
        """The table (:func:`~graph_urpe.data.predictions.prediction_table`) of ``rows``
        (``[G]`` positions in ``frame``), ``predictions`` ``[G, T]`` and the optional
        ``uncertainty`` ``{"std" | "lower" | "upper": [G, T]}`` (a row whose outputs are broken
        gets its reason in ``error``: :func:`~graph_urpe.data.predictions.output_errors`); its
        ``row`` column holds the input row numbers (``frame.index``)."""
        frame = self.frame.reset_index(drop=True)
        # Broken outputs (not finite, a negative std, an inverted interval) are row errors there.
        table = prediction_table(frame, rows, predictions, self.errors, self.target_names,
                                 self.warnings, uncertainty)
        if "row" not in self.frame.columns:
            table["row"] = self.frame.index.to_numpy()
        self.table = table
        return table
