"""``graph-urpe predict`` on SMILES, one straight path: check the output, featurise the inputs as
the checkpoint was trained (:mod:`graph_urpe.data.predict_inputs`), flag inputs outside the
training vocabulary, predict, write one row per input.

* :class:`SmilesPredictionWriter`: the Lightning callback that writes the table
  (:func:`graph_urpe.data.predictions.prediction_table`), handed plain values only;
* :func:`predict_smiles`: the whole path (what ``graph-urpe predict`` runs).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch
from lightning.pytorch.callbacks import BasePredictionWriter

from graph_urpe.data.predict_inputs import vocabulary_warnings
from graph_urpe.data.predictions import prediction_table
from graph_urpe.files import atomic_write_csv
from graph_urpe.models.metrics import EpochPredictions

__all__ = ["SmilesPredictionWriter", "predict_smiles"]


UNCERTAINTY_KEYS = ("std", "lower", "upper")
"""What ``predict_step`` may give beside each prediction (written as ``<target>_<key>``)."""


class SmilesPredictionWriter(BasePredictionWriter):
    """Collects predictions (all DDP ranks) and writes one CSV row per input row.

    Args:
        frame (pandas.DataFrame): the ``N`` input rows.
        errors (dict[int, str]): row -> why it has no prediction.
        warnings (dict[int, str]): row -> why its prediction is doubtful (the ``warning`` column).
        output (str): the CSV to write.
        target_names (list[str]): ``T`` prediction names (columns ``<name>_pred``).
    """

    def __init__(self, frame: pd.DataFrame, errors: dict[int, str], warnings: dict[int, str],
                 output: str, target_names: list[str]) -> None:
        super().__init__(write_interval="batch")
        self.frame, self.errors, self.warnings = frame, errors, warnings
        self.output, self.target_names = output, list(target_names)
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

    def on_predict_epoch_end(self, trainer, pl_module) -> None:
        width = len(self.target_names)
        collector = EpochPredictions(width * len(self._keys)).to(pl_module.device)
        for ids, preds in zip(self._ids, self._preds):
            collector.update(ids, preds, torch.full_like(preds, float("nan")))
        self._ids, self._preds = [], []
        ids, preds, _ = collector.rows()  # gathered over DDP ranks, one row per input
        parts = dict(zip(self._keys, preds.cpu().numpy().reshape(len(ids), -1, width)
                         .transpose(1, 0, 2)))
        if trainer.is_global_zero:
            self.write(ids.cpu().numpy(), parts.pop("prediction"), parts)

    def write(self, rows, predictions, uncertainty: dict | None = None) -> pd.DataFrame:
        """Write the table (``rows`` ``[G]`` input rows, ``predictions`` ``[G, T]``, optional
        ``uncertainty`` ``{"std" | "lower" | "upper": [G, T]}``) and print how many rows were
        predicted, failed and flagged."""
        errors, flagged = self.errors, self.warnings
        self.table = prediction_table(self.frame, rows, predictions, errors, self.target_names,
                                      flagged, uncertainty)
        atomic_write_csv(self.table, self.output)
        total = len(self.table)
        failed = f"{len(errors)} failed (reason in the 'error' column)" if errors else "0 failed"
        warned = (f"; {len(flagged)} outside the training vocabulary (see the 'warning' column)"
                  if flagged else "")
        print(f"\nWrote predictions for {total} input rows to {self.output}: "
              f"{total - len(errors)} predicted, {failed}{warned}.")
        for row, reason in sorted(errors.items())[:10]:
            print(f"  row {row}: {reason}")
        if len(errors) > 10:
            print(f"  ... and {len(errors) - 10} more")
        return self.table


def predict_smiles(trainer: Any, model: Any, datamodule: Any,
                   vocabulary: dict | None = None, **predict_kwargs: Any) -> pd.DataFrame | None:
    """Predict a data module's SMILES inputs and write one row per input (the whole path).

    Checks the output path before any work, featurises the inputs with the model's facts
    (:meth:`~graph_urpe.data.modules.graph.GraphDataModule.prepare_predict`), flags inputs outside
    the training vocabulary, adds the one :class:`SmilesPredictionWriter` to the trainer and runs
    ``trainer.predict``. When no input becomes a graph (Lightning skips the loop on an empty
    loader) the error rows are still written, so no stale output is mistaken for this run's.

    Args:
        trainer (lightning.pytorch.Trainer): the trainer.
        model (GraphPropertyModule): the trained module (its ``featurization``,
            ``max_graph_nodes``, ``dataset_source``, ``target_names``).
        datamodule (GraphDataModule): ``predict_smiles`` / ``predict_csv`` and
            ``predict_output``.
        vocabulary (dict, optional): the training vocabulary (default: :obj:`None`, the model's
            :attr:`training_vocabulary`, restored by ``load_from_checkpoint``).
        **predict_kwargs: more arguments of ``trainer.predict`` (e.g. ``ckpt_path``).

    Returns:
        pandas.DataFrame: the written table (on rank 0; :obj:`None` on other ranks).

    Raises:
        ValueError: no input could be predicted (after writing their error rows), or see
            :meth:`~graph_urpe.data.modules.graph.GraphDataModule.prepare_predict`.
        graph_urpe.files.OutputError: the output path cannot be written.
    """
    datamodule.check_predict_output()
    facts = model.hparams
    featurization = facts.get("featurization")
    datamodule.prepare_predict(featurization, facts.get("max_graph_nodes"),
                               facts.get("dataset_source"))
    if vocabulary is None:
        vocabulary = getattr(model, "training_vocabulary", None)
    writer = SmilesPredictionWriter(
        datamodule.predict_frame, datamodule.predict_errors,
        vocabulary_warnings(datamodule.predict_graphs, vocabulary, featurization),
        datamodule.predict_output, list(model.target_names))
    frame = datamodule.predict_frame
    if not datamodule.predict_graphs:
        if len(frame) and trainer.is_global_zero:
            writer.write(np.zeros(0, dtype=np.int64), np.zeros((0, len(writer.target_names))))
        raise ValueError(
            f"no molecule could be predicted: {len(frame)} input rows"
            + (", all failed (see the 'error' column above)." if len(frame) else
               ": give at least one SMILES (--data.init_args.predict_csv or predict_smiles).")
        )
    trainer.callbacks.append(writer)
    try:
        trainer.predict(model, datamodule=datamodule, return_predictions=False, **predict_kwargs)
    finally:
        trainer.callbacks.remove(writer)
    return writer.table
