"""What ``predict`` needs from the data side: the input table, its graphs featurized as the
checkpoint was trained, and the training vocabulary that flags inputs outside it.

* :func:`read_predict_inputs`: the input table;
* :func:`model_input_graphs`: its graphs as a loaded model reads them, the one path of
  ``graph-urpe predict``, :class:`~graph_urpe.Predictor` (and ``graph-urpe fingerprint``) and
  ``graph-urpe explain`` (rows that cannot become a graph get an error instead, never dropped);
  :func:`featurize_inputs` is its featurization step;
* :func:`training_vocabulary` (at ``fit``, stored in the checkpoint as plain lists) and
  :func:`vocabulary_warnings`: atom / bond feature values never seen in training (an element, a
  charge, a bond type: salts, metals, exotic elements), and molecules with more atoms than any
  training molecule (a 160-atom peptide predicted from FreeSolv's molecules of at most 24).

The command that runs the prediction and writes the table is :mod:`graph_urpe.cli.predict`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import torch

from graph_urpe.data.budgets import DEFAULT_BUDGETS, BatchBudgets
from graph_urpe.data.collated import collated_counts, collated_rows
from graph_urpe.data.csv.reading import iter_csv_file, missing_columns, read_csv_file
from graph_urpe.data.processing import molecules_to_graphs
from graph_urpe.transforms import pair_pre_transform

__all__ = [
    "featurize_inputs",
    "iter_predict_inputs",
    "model_input_graphs",
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


def read_predict_inputs(csv: str | None, smiles: list[str] | None,
                        smiles_column: str) -> pd.DataFrame:
    """The input table: ``csv`` as text (no NA parsing), or one column of
    ``smiles``.

    Raises:
        ValueError: neither is given, ``smiles`` holds a list written as one string (quotes or
            commas: ``--smiles '["CCO", "NO"]'``), the CSV lacks ``smiles_column``, or it cannot
            be read
            (:func:`~graph_urpe.data.csv.reading.read_csv_file`: a folder, empty, not UTF-8,
            duplicate column names).
    """
    if csv is not None:
        # Blank lines stay rows (an empty SMILES, reported), so row r is CSV line r + 2.
        frame = read_csv_file(csv, dtype={smiles_column: str}, keep_default_na=False,
                              skip_blank_lines=False)
        if smiles_column not in frame.columns:
            raise missing_columns(csv, f"column {smiles_column!r}", [smiles_column],
                                  list(frame.columns), "name yours with --smiles_column NAME.")
        return frame
    if smiles is not None:
        listed = [s for s in smiles if any(c in s for c in "\"',")]
        if listed:  # no SMILES holds a quote or a comma
            raise ValueError(
                f"--smiles {listed[0]!r} is not a SMILES: give the SMILES separated by spaces, "
                "each quoted for the shell, e.g. --smiles CCO 'c1ccccc1O' (not a list).")
        return pd.DataFrame({smiles_column: list(smiles)})
    raise ValueError(
        f"nothing to predict: pass --csv FILE (with a {smiles_column!r} column) or --smiles "
        "(SMILES strings)."
    )


def iter_predict_inputs(csv: str | None, smiles: list[str] | None,
                        smiles_column: str, chunk_rows: int) -> Iterator[pd.DataFrame]:
    """The input table of :func:`read_predict_inputs` in consecutive chunks of at most
    ``chunk_rows`` rows, a CSV read chunk by chunk (never whole). Each chunk keeps its rows'
    input numbers as its index (``frame.index``: 0-based data rows of the whole input).

    Raises:
        ValueError: as :func:`read_predict_inputs`.
    """
    if csv is None:
        frame = read_predict_inputs(None, smiles, smiles_column)
        for start in range(0, len(frame), chunk_rows):
            yield frame.iloc[start:start + chunk_rows]
        return
    for frame in iter_csv_file(csv, chunk_rows, dtype={smiles_column: str},
                               keep_default_na=False, skip_blank_lines=False):
        if smiles_column not in frame.columns:
            raise missing_columns(csv, f"column {smiles_column!r}", [smiles_column],
                                  list(frame.columns), "name yours with --smiles_column NAME.")
        yield frame


def featurize_inputs(smiles: list[str], featurization: str | None, max_graph_nodes: int | None,
                     pre_transform: Any = None, processing_workers: int | None = None,
                     dataset_source: str | None = None) -> tuple[list, dict[int, str]]:
    """Graphs of the inputs, featurized as the model was trained, with ``sample_id`` = input row:
    the featurization step of :func:`model_input_graphs`, which chooses ``max_graph_nodes`` and
    ``pre_transform`` for a loaded model (predict through it).

    Args:
        smiles (list[str]): ``N`` SMILES.
        featurization (str): the model's ``"ogb"`` / ``"zinc"`` (:obj:`None`: not a molecular model).
        max_graph_nodes (int, optional): larger molecules get an error.
        pre_transform (callable, optional): applied to every graph (the training data's, e.g.
            :func:`~graph_urpe.transforms.pair_pre_transform`).
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
        smiles, featurization=featurization, max_graph_nodes=max_graph_nodes,
        pre_transform=pre_transform, keep_smiles=False, num_workers=processing_workers,
    )
    for graph in graphs:
        graph.sample_id = int(graph.row)
    return graphs, {e.row: e.reason for e in errors}


def model_input_graphs(smiles: list[str], model: Any, budgets: BatchBudgets = DEFAULT_BUDGETS,
                       processing_workers: int | None = None) -> tuple[list, dict[int, str]]:
    """The graphs of ``smiles`` as ``model`` reads them, and why the other rows have none: the
    one path from SMILES to a trained model's input, so ``graph-urpe predict``,
    :class:`~graph_urpe.Predictor` (``predict``, ``fingerprint``, ``graph-urpe fingerprint``) and
    ``graph-urpe explain`` accept and refuse the same molecules with the same reasons.

    * featurized as the model was trained (its ``featurization``; :func:`featurize_inputs`);
    * molecules above the node limit
      (:meth:`~graph_urpe.data.budgets.BatchBudgets.node_limit`) of the model's
      ``max_graph_nodes`` get an error row;
    * the pair relations its networks read
      (:meth:`~graph_urpe.models.ensemble.EnsembleMixin.pair_relations`: the shortest-path
      distance, and the resistance distance for a Graphormer-GD network, 0.4-0.8 CPU ms a
      molecule, only then) computed on every graph
      (:func:`~graph_urpe.transforms.pair_pre_transform`).

    Args:
        smiles (list[str]): ``N`` SMILES.
        model (GraphPropertyModule): the loaded model (its ``record``: ``featurization``,
            ``max_graph_nodes``, ``dataset_source``; its :meth:`pair_relations`).
        budgets (BatchBudgets, optional): the batch budgets in force (``graph-urpe predict``: its
            data module's, :meth:`BatchBudgets.of <graph_urpe.data.budgets.BatchBudgets.of>`).
            (default: :data:`~graph_urpe.data.budgets.DEFAULT_BUDGETS`)
        processing_workers (int, optional): worker processes (default: automatic).

    Returns:
        tuple: the graphs (``torch_geometric.data.Data``, ``sample_id`` = input row) and
        ``{row: reason}`` for the rows without a graph.

    Raises:
        ValueError: the model was not trained on molecules.
    """
    record = model.record
    return featurize_inputs(
        smiles, record.featurization, budgets.node_limit(record.max_graph_nodes),
        pair_pre_transform("resistance" in model.pair_relations()), processing_workers,
        record.dataset_source)


def _columns_seen(values: torch.Tensor) -> list[list[int]]:
    values = values.view(values.size(0), -1) if values.dim() > 1 else values.view(-1, 1)
    return [torch.unique(values[:, c]).tolist() for c in range(values.size(1))]


VOCABULARY_GRAPHS = 65_536
"""Graphs whose rows :func:`training_vocabulary` gathers at a time (its peak memory: about 1.3 M
atom and 2.9 M bond rows of MOSES-sized molecules, 0.1 GB of indices)."""


def training_vocabulary(split: Any) -> dict[str, Any] | None:
    """The atom and bond feature values seen in a training split, per feature column, and its
    largest molecule's atom count.

    Reads the collated storage of an in-memory PyG dataset, :data:`VOCABULARY_GRAPHS` graphs
    at a time (no per-graph objects; bounded memory for a million-molecule split); any other
    dataset is walked graph by graph.

    Args:
        split: the training split (PyG dataset with integer ``x`` ``[n, F]`` and ``edge_attr``
            ``[E, F']``).

    Returns:
        dict: ``{"atom": F lists, "bond": F' lists}`` of sorted ints and ``"max_atoms"`` (the
        most nodes of one training graph; 0 for an empty split): plain data, stored in the
        checkpoint; :obj:`None` if the graphs have no integer atom features.
    """
    sizes = collated_counts(split, "x")
    if sizes is not None:  # VOCABULARY_GRAPHS graphs at a time: bounded index memory
        blocks = ({key: collated_rows(split, key, start, start + VOCABULARY_GRAPHS)
                   for key in ("x", "edge_attr")}
                  for start in range(0, max(len(split), 1), VOCABULARY_GRAPHS))
    else:
        graphs = [split[i] for i in range(len(split))]
        blocks = iter([{key: torch.cat([getattr(g, key) for g in graphs])
                        for key in ("x", "edge_attr")
                        if graphs and getattr(graphs[0], key, None) is not None}])
        sizes = torch.tensor([int(g.num_nodes) for g in graphs], dtype=torch.long)
    seen: dict[str, list[set]] = {}
    for block in blocks:
        x = block.get("x")
        if x is None or x.is_floating_point():
            return None
        for kind, key in (("atom", "x"), ("bond", "edge_attr")):
            values = block.get(key)
            if values is not None and (len(values) or kind == "atom"):
                columns = _columns_seen(values)
                seen.setdefault(kind, [set() for _ in columns])
                for known, new in zip(seen[kind], columns):
                    known.update(new)
    return {"atom": [sorted(c) for c in seen.get("atom", [])],
            "bond": [sorted(c) for c in seen.get("bond", [])],
            "max_atoms": int(sizes.max()) if len(sizes) else 0}


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
    """``{row: warning}`` for inputs with atom or bond feature values never seen in training, or
    with more atoms than any training molecule.

    Args:
        graphs (list): graphs with ``sample_id`` (the input row), ``x`` and ``edge_attr``.
        vocabulary (dict, optional): :func:`training_vocabulary` of the checkpoint (:obj:`None`:
            a checkpoint written before it was stored; nothing is flagged; one without
            ``max_atoms``, written before sizes were stored: no size is flagged).
        featurization (str, optional): ``"ogb"`` / ``"zinc"`` (names the features).

    Returns:
        dict[int, str]: e.g. ``"outside the training vocabulary: element Cu, formal charge +1"``,
        ``"larger than every training molecule: 160 atoms (training: at most 24)"``, or both
        joined by ``"; "``.
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
        parts = ["outside the training vocabulary: " + ", ".join(unseen)] if unseen else []
        largest = vocabulary.get("max_atoms")
        if largest and int(graph.num_nodes) > largest:
            parts.append(f"larger than every training molecule: {int(graph.num_nodes)} atoms "
                         f"(training: at most {largest})")
        if parts:
            warnings[int(graph.sample_id)] = "; ".join(parts)
    return warnings
