"""The Lightning callback that writes predictions for SMILES inputs (the table itself:
:func:`graph_urpe.data.predictions.prediction_table`): one output row per input row, in input
order, failed rows with their reason; the count of failed rows is printed. Nothing is dropped.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch
from lightning.pytorch.callbacks import BasePredictionWriter

from graph_urpe.data.predictions import prediction_table
from graph_urpe.files import atomic_write_csv
from graph_urpe.tasks.metrics import EpochPredictions

__all__ = ["SmilesPredictionWriter"]


class SmilesPredictionWriter(BasePredictionWriter):
    """Collects predictions (all DDP ranks) and writes the data module's ``predict_output`` CSV.

    Args:
        datamodule: a :class:`~graph_urpe.tasks.graph_data.GraphDataModule`; its predict frame,
            failed rows and output path are read when the epoch ends.
    """

    def __init__(self, datamodule: Any) -> None:
        super().__init__(write_interval="batch")
        self.datamodule = datamodule
        self._ids: list[torch.Tensor] = []
        self._preds: list[torch.Tensor] = []
        self.table: pd.DataFrame | None = None

    def write_on_batch_end(self, trainer, pl_module, prediction, batch_indices, batch, batch_idx,
                           dataloader_idx=0) -> None:
        self._ids.append(prediction["sample_id"].detach().cpu())
        self._preds.append(prediction["prediction"].detach().float().cpu())

    def on_predict_epoch_end(self, trainer, pl_module) -> None:
        dm = self.datamodule
        num_tasks = int(pl_module.num_labels)
        collector = EpochPredictions(num_tasks).to(pl_module.device)
        for ids, preds in zip(self._ids, self._preds):
            collector.update(ids, preds, torch.full_like(preds, float("nan")))
        self._ids, self._preds = [], []
        ids, preds, _ = collector.rows()  # gathered over DDP ranks, one row per input
        if not trainer.is_global_zero:
            return
        errors = dm.predict_errors
        self.table = prediction_table(
            dm.predict_frame, ids.cpu().numpy(), preds.cpu().numpy(), errors,
            list(pl_module.target_names),
        )
        path = dm.predict_output
        atomic_write_csv(self.table, path)
        total = len(self.table)
        failed = f"{len(errors)} failed (reason in the 'error' column)" if errors else "0 failed"
        print(f"\nWrote predictions for {total} input rows to {path}: "
              f"{total - len(errors)} predicted, {failed}.")
        for row, reason in sorted(errors.items())[:10]:
            print(f"  row {row}: {reason}")
        if len(errors) > 10:
            print(f"  ... and {len(errors) - 10} more")
