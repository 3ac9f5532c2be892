"""Prediction and fingerprints in memory, for scripts and notebooks: load a checkpoint once, then
call it on SMILES or RDKit molecules; nothing is written to disk.

::

    from graph_urpe import Predictor

    model = Predictor.from_checkpoint("runs/my-csv/version_0/checkpoints/last.ckpt")
    table = model.predict(["CCO", "c1ccccc1O"])      # pandas.DataFrame, one row per input
    prints = model.fingerprint(["CCO"])              # the encoder's molecule embedding

The rows are those of ``graph-urpe predict`` (:func:`~graph_urpe.data.predictions.prediction_table`):
``row``, ``smiles``, per target ``<target>_pred`` and (regression) ``<target>_std`` (an
ensemble or a mean-variance head only: a single network has no per-molecule uncertainty),
``<target>_lower``, ``<target>_upper``, then ``error`` (why a row has no prediction) and
``warning`` (outside the training vocabulary, or more atoms than any training molecule); a
checkpoint of a CSV fit makes ``<target>_pred`` (and its interval) the blend of the network and
its classical model (:mod:`graph_urpe.models.blend`) and adds ``<target>_network`` (the
network's own), ``<target>_ecfp_svm`` (and for classification ``<target>_ecfp_rf``),
``nearest_train_similarity`` and ``nearest_train_row`` before ``error``
(:func:`~graph_urpe.models.classical_columns.classical_columns`). The molecules become graphs as
in ``graph-urpe predict`` (:func:`~graph_urpe.data.predict_inputs.model_input_graphs` under
:data:`~graph_urpe.data.budgets.DEFAULT_BUDGETS`: the same molecules accepted and refused, with
the same reasons); the predictions are the
module's own (:meth:`~graph_urpe.models.ensemble.EnsembleMixin.predict_outputs`), so they equal
``graph-urpe predict``'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from graph_urpe.data.budgets import DEFAULT_BUDGETS
from graph_urpe.data.predict_inputs import model_input_graphs, vocabulary_warnings
from graph_urpe.data.predictions import NOT_FINITE, prediction_table
from graph_urpe.models.graph import GraphPropertyModule

__all__ = ["Predictor"]


def _as_smiles(molecules: Sequence[Any]) -> tuple[list[str], dict[int, str]]:
    """SMILES of the inputs (strings as given, RDKit molecules written by RDKit) and the rows
    that are neither."""
    from rdkit import Chem

    if isinstance(molecules, (str, Chem.Mol)) or hasattr(molecules, "columns"):
        raise TypeError(
            f"give a list of SMILES or RDKit molecules, not one {type(molecules).__name__} "
            "(e.g. predict(['CCO']) or predict(frame['smiles'].tolist())).")
    smiles, errors = [], {}
    for i, mol in enumerate(molecules):
        if isinstance(mol, str):
            smiles.append(mol)
        elif isinstance(mol, Chem.Mol):
            smiles.append(Chem.MolToSmiles(mol))
        else:
            smiles.append("")
            errors[i] = (f"not a SMILES string or RDKit molecule: {type(mol).__name__}"
                         + (" (RDKit could not parse it)" if mol is None else ""))
    return smiles, errors


class Predictor:
    r"""A trained graph-urpe model in memory: predictions with uncertainty and fingerprints of
    SMILES strings or RDKit molecules, one output row per input, in input order.

    Args:
        module (GraphPropertyModule): a trained module (put into eval mode here).
        batch_size (int, optional): at most this many molecules per forward pass (size-bucketed
            under :data:`~graph_urpe.data.budgets.DEFAULT_BUDGETS`' cell budget). (default: :obj:`64`)
        classical (ClassicalModel, optional): the checkpoint's classical model
            (:mod:`graph_urpe.models.classical`): its columns in :meth:`predict`.
            (default: :obj:`None`)

    Raises:
        ValueError: (from :meth:`predict` / :meth:`fingerprint`) for a model not trained on
            molecules.
    """

    def __init__(self, module: GraphPropertyModule, batch_size: int = 64,
                 classical: Any = None) -> None:
        self.module = module.eval()
        self.batch_size = int(batch_size)
        self.classical = classical

    @classmethod
    def from_checkpoint(cls, path: str, device: str | torch.device = "cpu",
                        batch_size: int = 64) -> Predictor:
        """Load a ``graph-urpe fit`` checkpoint (checked as every checkpoint is:
        :mod:`graph_urpe.trust`; nothing in it is imported or run).

        Args:
            path (str): the ``.ckpt`` file.
            device (str or torch.device, optional): where the model runs. (default: ``"cpu"``)
            batch_size (int, optional): molecules per forward pass. (default: :obj:`64`)

        Raises:
            FileNotFoundError: ``path`` does not exist.
            graph_urpe.trust.UntrustedFileError: the checkpoint names a class outside the
                allow-list.
        """
        from graph_urpe.models.classical_baseline import classical_from_checkpoint
        from graph_urpe.trust import read_checkpoint

        module = GraphPropertyModule.load_from_checkpoint(path, map_location=device)
        return cls(module, batch_size, classical_from_checkpoint(read_checkpoint(path), path))

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}(targets={self.module.target_names}, "
                f"task={self.module.record.task!r}, members={len(self.module.members)})")

    def _batches(self, molecules: Sequence[Any]):
        """``(frame, errors, warnings, batches)`` of the inputs."""
        smiles, errors = _as_smiles(molecules)
        # graph-urpe predict's path and default budgets: the same molecules accepted and refused.
        budgets = dataclasses.replace(DEFAULT_BUDGETS, batch_size=self.batch_size)
        graphs, failed = model_input_graphs(smiles, self.module, budgets)
        graphs = [g for g in graphs if int(g.sample_id) not in errors]
        errors = {**failed, **errors}
        warnings = vocabulary_warnings(graphs, self.module.training_vocabulary,
                                       self.module.record.featurization)
        frame = pd.DataFrame({"smiles": smiles})
        device = self.module.device
        batches = budgets.loader(graphs) if graphs else []
        return frame, errors, warnings, (b.to(device) for b in batches)

    @torch.inference_mode()
    def predict(self, molecules: Sequence[Any]) -> pd.DataFrame:
        """Predict ``N`` molecules (SMILES strings or RDKit ``Mol``).

        Returns:
            pandas.DataFrame: ``N`` rows in input order (see the module docstring); rows that
            could not be predicted have empty values and the reason in ``error`` (also an output
            that is not finite, a negative std or an inverted interval:
            :func:`~graph_urpe.data.predictions.output_errors`).

        Raises:
            TypeError: ``molecules`` is one string, one molecule or a table, not a sequence of
                molecules.
        """
        frame, errors, warnings, batches = self._batches(molecules)
        rows, parts = [], []
        for batch in batches:
            rows.append(batch.sample_id.cpu())
            parts.append({k: v.float().cpu() for k, v in self.module.predict_outputs(batch).items()})
        names = self.module.target_names
        if not parts:
            table = prediction_table(frame, np.zeros(0, dtype=np.int64),
                                     np.zeros((0, len(names))), errors, names, warnings)
        else:
            values = {k: torch.cat([p[k] for p in parts]).numpy() for k in parts[0]}
            table = prediction_table(frame, torch.cat(rows).numpy(), values.pop("prediction"),
                                     errors, names, warnings, values)
        if self.classical is None:
            return table
        from graph_urpe.models.classical_columns import classical_columns

        return classical_columns(table, frame["smiles"].tolist(), self.classical, names)

    @torch.inference_mode()
    def fingerprint(self, molecules: Sequence[Any], layer: Literal["encoder", "hidden"] = "encoder",
                    member: int = 0) -> pd.DataFrame:
        """Learned fingerprints of ``N`` molecules (:meth:`graph_urpe.nn.Graphormer.embed`).

        Args:
            molecules (Sequence): SMILES strings or RDKit ``Mol``.
            layer (str, optional): ``"encoder"`` (the molecule embedding the head reads) or
                ``"hidden"`` (the head's hidden layer). (default: ``"encoder"``)
            member (int, optional): which member of an ensemble. (default: :obj:`0`)

        Returns:
            pandas.DataFrame: ``N`` rows in input order: ``row``, ``smiles``, ``fp_0`` ...
            ``fp_<D-1>`` (float32; empty where ``error`` is set: also a fingerprint that is not
            finite, from broken weights) and ``error``.

        Raises:
            ValueError: for a member the model does not have, or see
                :meth:`~graph_urpe.nn.Graphormer.embed`.
        """
        members = self.module.members
        if not 0 <= member < len(members):
            raise ValueError(f"member {member} does not exist: this model has {len(members)} "
                             f"(0 to {len(members) - 1}).")
        frame, errors, _, batches = self._batches(molecules)
        rows, vectors = [], []
        for batch in batches:
            rows.append(batch.sample_id.cpu())
            vectors.append(members[member].embed(batch, layer).float().cpu())
        net = members[member]
        if not vectors:  # nothing embedded: the width the network would give
            hidden = getattr(net.head, "hidden", None) if layer == "hidden" else None
            width = net.encoder.embed_dim if layer == "encoder" else \
                (hidden[0].out_features if hidden is not None else 0)
        else:
            width = vectors[0].shape[1]
        values = np.full((len(frame), width), np.nan, dtype=np.float32)
        if vectors:
            embedded, found = torch.cat(rows).numpy(), torch.cat(vectors).numpy()
            finite = np.isfinite(found).all(axis=1)
            values[embedded[finite]] = found[finite]
            errors = {**errors, **{int(r): NOT_FINITE.format(what="fingerprint")
                                   for r in embedded[~finite]}}
        table = pd.DataFrame(values, columns=[f"fp_{i}" for i in range(width)])
        table.insert(0, "smiles", frame["smiles"])
        table.insert(0, "row", np.arange(len(frame)))
        table["error"] = [errors.get(i, "") for i in range(len(frame))]
        return table
