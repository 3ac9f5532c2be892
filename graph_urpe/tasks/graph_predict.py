"""Prediction from SMILES, one straight path: read the inputs, featurise them as the checkpoint was
trained, flag inputs outside the training vocabulary, write one row per input.

* :func:`read_predict_inputs` and :func:`featurize_inputs`: the input table and its graphs (rows
  that cannot become a graph get an error instead, never dropped);
* :func:`training_vocabulary` (at ``fit``, stored in the checkpoint as plain lists) and
  :func:`vocabulary_warnings`: atom / bond feature values never seen in training (an element, a
  charge, a bond type: salts, metals, exotic elements);
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

from graph_urpe.data.predictions import prediction_table
from graph_urpe.data.processing import molecules_to_graphs
from graph_urpe.files import atomic_write_csv
from graph_urpe.tasks.metrics import EpochPredictions

__all__ = [
    "SmilesPredictionWriter",
    "featurize_inputs",
    "predict_smiles",
    "read_predict_inputs",
    "training_vocabulary",
    "vocabulary_warnings",
]

_ATOM_FEATURES = {
    "ogb": ("element", "chirality", "degree", "formal charge", "hydrogen count",
            "radical electrons", "hybridisation", "aromaticity", "ring membership"),
    "zinc": ("atom type",),
}
_BOND_FEATURES = {"ogb": ("bond type", "bond stereo", "conjugation"), "zinc": ("bond type",)}


def read_predict_inputs(predict_csv: str | None, predict_smiles: list[str] | None,
                        smiles_column: str) -> pd.DataFrame:
    """The input table: ``predict_csv`` as text (no NA parsing), or one column of
    ``predict_smiles``.

    Raises:
        ValueError: neither is given, or the CSV lacks ``smiles_column``.
    """
    if predict_csv is not None:
        # Blank lines stay rows (an empty SMILES, reported), so row r is CSV line r + 2.
        frame = pd.read_csv(predict_csv, dtype={smiles_column: str}, keep_default_na=False,
                            skip_blank_lines=False)
        if smiles_column not in frame.columns:
            raise ValueError(
                f"column {smiles_column!r} not found in {predict_csv}; available: "
                f"{list(frame.columns)} (set --data.init_args.smiles_column)."
            )
        return frame
    if predict_smiles is not None:
        return pd.DataFrame({smiles_column: list(predict_smiles)})
    raise ValueError(
        "nothing to predict: pass --data.init_args.predict_csv FILE (with a "
        f"{smiles_column!r} column) or --data.init_args.predict_smiles '[SMILES, ...]'."
    )


def featurize_inputs(smiles: list[str], featurization: str | None, max_nodes: int | None,
                     pre_transform: Any = None, processing_workers: int | None = None,
                     dataset_source: str | None = None) -> tuple[list, dict[int, str]]:
    """Graphs of the inputs, featurised as the model was trained, with ``sample_id`` = input row.

    Args:
        smiles (list[str]): ``N`` SMILES.
        featurization (str): the model's ``"ogb"`` / ``"zinc"`` (:obj:`None`: not a molecular model).
        max_nodes (int, optional): larger molecules get an error.
        pre_transform (callable, optional): applied to every graph (the training data's, e.g.
            :func:`~graph_urpe.tasks.graph_data.spd_pre_transform`).
        processing_workers (int, optional): worker processes (default: automatic).
        dataset_source (str, optional): the model's data, named when it is not molecular.

    Returns:
        tuple: the graphs (``torch_geometric.data.Data``, ``sample_id`` = input row) and
        ``{row: reason}`` for the rows without a graph.

    Raises:
        ValueError: the model was not trained on molecules.
    """
    if featurization is None:
        raise ValueError(
            "this model was not trained on molecules"
            + (f" (its data: {dataset_source})" if dataset_source else "")
            + ", so it cannot predict SMILES: predict with a checkpoint trained on a "
            "molecular dataset (ZINC, OGB, PCQM4Mv2 or a SMILES CSV)."
        )
    graphs, errors = molecules_to_graphs(
        smiles, featurization=featurization, max_nodes=max_nodes,
        pre_transform=pre_transform, keep_smiles=False, num_workers=processing_workers,
    )
    for graph in graphs:
        graph.sample_id = int(graph.row)
    return graphs, {e.row: e.reason for e in errors}


def _columns_seen(values: torch.Tensor) -> list[list[int]]:
    values = values.view(values.size(0), -1) if values.dim() > 1 else values.view(-1, 1)
    return [torch.unique(values[:, c]).tolist() for c in range(values.size(1))]


def training_vocabulary(split: Any) -> dict[str, list[list[int]]] | None:
    """The atom and bond feature values seen in a training split, per feature column.

    Reads the collated storage of an in-memory PyG dataset (one pass over its tensors, no
    per-graph objects); any other dataset is walked graph by graph.

    Args:
        split: the training split (PyG dataset with integer ``x`` ``[n, F]`` and ``edge_attr``
            ``[E, F']``).

    Returns:
        dict: ``{"atom": F lists, "bond": F' lists}`` of sorted ints (plain data, stored in the
        checkpoint), or :obj:`None` if the graphs have no integer atom features.
    """
    data, slices = getattr(split, "_data", None), getattr(split, "slices", None)
    if data is not None and slices is not None and "x" in slices:
        indices = getattr(split, "_indices", None)
        idx = (torch.arange(len(slices["x"]) - 1) if indices is None
               else torch.as_tensor(list(indices) if not torch.is_tensor(indices) else indices))
        parts = {}
        for key in ("x", "edge_attr"):
            if key not in slices or getattr(data, key, None) is None:
                continue
            bounds = slices[key]
            lengths = bounds[idx + 1] - bounds[idx]
            starts = torch.repeat_interleave(bounds[idx] - torch.cumsum(lengths, 0) + lengths,
                                             lengths)
            rows = torch.arange(int(lengths.sum())) + starts
            parts[key] = getattr(data, key)[rows]
    else:
        graphs = [split[i] for i in range(len(split))]
        parts = {key: torch.cat([getattr(g, key) for g in graphs])
                 for key in ("x", "edge_attr") if graphs and getattr(graphs[0], key, None) is not None}
    x = parts.get("x")
    if x is None or x.is_floating_point():
        return None
    edges = parts.get("edge_attr")
    return {"atom": _columns_seen(x),
            "bond": _columns_seen(edges) if edges is not None and len(edges) else []}


def _describe(kind: str, featurization: str, column: int, value: int) -> str:
    names = (_ATOM_FEATURES if kind == "atom" else _BOND_FEATURES).get(featurization, ())
    name = names[column] if column < len(names) else f"{kind} feature {column}"
    if featurization == "zinc":
        from graph_urpe.data.featurize import ZINC_ATOM_TYPES, ZINC_BOND_TYPES

        table = ZINC_ATOM_TYPES if kind == "atom" else ZINC_BOND_TYPES
        names_of = {v: k for k, v in table.items()}
        if value in names_of:
            return f"{name} {names_of[value]}"
    if featurization == "ogb":
        # OGB's features are positions in its value lists: name the value, not the position.
        from ogb.utils.features import allowable_features

        lists = list(allowable_features.values())[(0 if kind == "atom" else 9) + column:]
        values = lists[0] if lists else []
        if 0 <= value < len(values):
            shown = values[value]
            if kind == "atom" and column == 0 and isinstance(shown, int):
                from rdkit import Chem

                shown = Chem.GetPeriodicTable().GetElementSymbol(shown)
            elif isinstance(shown, int) and name == "formal charge":
                shown = f"{shown:+d}"
            return f"{name} {shown}"
    return f"{name} {value}"


def vocabulary_warnings(graphs: list, vocabulary: dict | None,
                        featurization: str | None) -> dict[int, str]:
    """``{row: warning}`` for inputs with atom or bond feature values never seen in training.

    Args:
        graphs (list): graphs with ``sample_id`` (the input row), ``x`` and ``edge_attr``.
        vocabulary (dict, optional): :func:`training_vocabulary` of the checkpoint (:obj:`None`:
            a checkpoint written before it was stored; nothing is flagged).
        featurization (str, optional): ``"ogb"`` / ``"zinc"`` (names the features).

    Returns:
        dict[int, str]: e.g. ``"outside the training vocabulary: element Cu, formal charge 1"``.
    """
    if not vocabulary:
        return {}
    seen = {kind: [set(col) for col in vocabulary.get(kind, [])] for kind in ("atom", "bond")}
    warnings: dict[int, str] = {}
    for graph in graphs:
        unseen: list[str] = []
        for kind, key in (("atom", "x"), ("bond", "edge_attr")):
            values = getattr(graph, key, None)
            if values is None or not seen[kind] or not len(values):
                continue
            values = values.view(values.size(0), -1)
            for c, known in enumerate(seen[kind][:values.size(1)]):
                for value in sorted(set(values[:, c].tolist()) - known):
                    unseen.append(_describe(kind, featurization or "", c, value))
        if unseen:
            warnings[int(graph.sample_id)] = ("outside the training vocabulary: "
                                              + ", ".join(unseen))
    return warnings


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
        self.table: pd.DataFrame | None = None

    def write_on_batch_end(self, trainer, pl_module, prediction, batch_indices, batch, batch_idx,
                           dataloader_idx=0) -> None:
        self._ids.append(prediction["sample_id"].detach().cpu())
        self._preds.append(prediction["prediction"].detach().float().cpu())

    def on_predict_epoch_end(self, trainer, pl_module) -> None:
        collector = EpochPredictions(len(self.target_names)).to(pl_module.device)
        for ids, preds in zip(self._ids, self._preds):
            collector.update(ids, preds, torch.full_like(preds, float("nan")))
        self._ids, self._preds = [], []
        ids, preds, _ = collector.rows()  # gathered over DDP ranks, one row per input
        if trainer.is_global_zero:
            self.write(ids.cpu().numpy(), preds.cpu().numpy())

    def write(self, rows, predictions) -> pd.DataFrame:
        """Write the table (``rows`` ``[G]`` input rows, ``predictions`` ``[G, T]``) and print
        how many rows were predicted, failed and flagged."""
        errors, flagged = self.errors, self.warnings
        self.table = prediction_table(self.frame, rows, predictions, errors, self.target_names,
                                      flagged)
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
    (:meth:`~graph_urpe.tasks.graph_data.GraphDataModule.prepare_predict`), flags inputs outside
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
            :meth:`~graph_urpe.tasks.graph_data.GraphDataModule.prepare_predict`.
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
