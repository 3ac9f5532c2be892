"""What a graph data module needs to predict SMILES: the inputs, featurised as the checkpoint was
trained, in chunks, and their loader.

:class:`SmilesPredictionMixin` is mixed into :class:`~graph_urpe.data.modules.graph.GraphDataModule`
(which holds the options ``predict_smiles`` / ``predict_csv``, ``smiles_column``,
``predict_output``, ``predict_chunk_rows``); ``graph-urpe predict``
(:mod:`graph_urpe.cli.predict`) drives it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pandas as pd
from torch_geometric.loader import DataLoader

from graph_urpe.data.predict_inputs import (
    featurize_inputs,
    iter_predict_inputs,
    read_predict_inputs,
)
from graph_urpe.files import check_writable
from graph_urpe.transforms import pair_pre_transform

__all__ = ["SmilesPredictionMixin"]


class SmilesPredictionMixin:
    """Prediction from SMILES for a graph data module (see the module docstring)."""

    def _predict_limit(self, trained_limit: int | None) -> int | None:
        limits = [trained_limit, self.max_graph_nodes, self.max_nodes_per_batch]
        if self.max_cells_per_batch is not None:
            limits.append(math.isqrt(self.max_cells_per_batch))
        limits = [v for v in limits if v is not None]
        return min(limits) if limits else None

    def prepare_predict(self, featurization: str | None, max_graph_nodes: int | None = None,
                        dataset_source: str | None = None,
                        frame: pd.DataFrame | None = None) -> None:
        """Read and featurise the inputs to predict as the model was trained: fills
        :attr:`predict_frame` (``N`` input rows), :attr:`predict_graphs` and
        :attr:`predict_errors` (row -> reason). ``graph-urpe predict`` calls it with the
        checkpoint's facts before ``trainer.predict``; call it yourself in Python.

        Args:
            featurization (str): the model's ``"ogb"`` / ``"zinc"``.
            max_graph_nodes (int, optional): the model's node limit (larger inputs get an error).
            dataset_source (str, optional): the model's data (named if it is not molecular).
            frame (pandas.DataFrame, optional): these input rows instead of all of
                ``predict_csv`` / ``predict_smiles`` (one chunk of :meth:`predict_chunks`;
                rows numbered from 0 within it). (default: :obj:`None`)

        Raises:
            ValueError: no inputs, a CSV without the SMILES column, or a non-molecular model.
        """
        if frame is None:
            frame = read_predict_inputs(self.predict_csv, self.predict_smiles, self.smiles_column)
        graphs, errors = featurize_inputs(
            frame[self.smiles_column].tolist(), featurization,
            # Both relations, whichever the checkpoint's network reads (its relations may differ
            # from this module's `resistance`): about 1 ms more CPU per molecule.
            self._predict_limit(max_graph_nodes), pair_pre_transform(resistance=True),
            self.processing_workers,
            dataset_source)
        self.predict_frame, self.predict_graphs, self.predict_errors = frame, graphs, errors

    def predict_chunks(self) -> Iterator[pd.DataFrame]:
        """The input rows in chunks of at most :attr:`predict_chunk_rows`, read as they are
        needed (a CSV is never held whole; :func:`~graph_urpe.data.predict_inputs.
        iter_predict_inputs`)."""
        return iter_predict_inputs(self.predict_csv, self.predict_smiles, self.smiles_column,
                                   self.predict_chunk_rows)

    def _setup_predict(self) -> None:
        if self.predict_frame is None:
            raise ValueError(
                "call datamodule.prepare_predict(featurization, max_graph_nodes) with the model's "
                "facts before trainer.predict (graph-urpe predict does it)."
            )

    def predict_dataloader(self) -> DataLoader:
        graphs = self.predict_graphs
        sizes = [g.num_nodes for g in graphs]
        return self._loader(graphs, shuffle=False, sizes=sizes, indexed=False)

    def check_predict_output(self) -> None:
        """Fail before any work if :attr:`predict_output` cannot be written.

        Raises:
            graph_urpe.files.OutputError: naming the path and the cause.
        """
        check_writable(self.predict_output)

