"""Every dataset of the package as a family (:class:`DatasetFamily`): its facts (task, label
columns, featurization, metric, :class:`~graph_urpe.data.facts.DatasetFacts`), stated once and known without reading any
graph, and how it builds its splits (:class:`DatasetSplits`). The data modules of
:mod:`graph_urpe.data.modules.molecule` each hold one family; :func:`load_dataset` finds one by name
(``graph-urpe summarize``).

Names:

* ``zinc-like``: the embedded 12k ZINC-like set (:class:`~graph_urpe.data.zinc.ZincLikeDataset`),
  ZINC or OGB featurization (``featurization``), MAE. Always available offline.
* ``zinc`` / ``zinc-full``: PyG's ZINC subset / full (:func:`~graph_urpe.data.zinc.pyg_zinc`), ZINC
  featurization, MAE; a folder written offline by ``datasets/build_pyg_zinc.py`` holds
  other molecules and its :attr:`DatasetSplits.source` says so.
* ``ogbg-*`` (e.g. ``ogbg-molhiv``): OGB graph property prediction
  (:func:`~graph_urpe.data.ogb.ogb_graphprop_dataset`), OGB featurization, OGB's metric.
* ``pcqm4mv2``: OGB-LSC PCQM4Mv2 (:class:`~graph_urpe.data.ogb.PCQM4Mv2Dataset`), MAE; splits
  ``train``, ``valid``, ``test-dev``, ``test-challenge`` (test labels hidden).
* ``pcqm4mv2-qm9``: the offline QM9 stand-in in the same format (under ``root/pcqm4mv2_qm9``); its
  hidden test-dev labels are restored in an extra ``test`` split.
* ``csv``: your own CSV (:class:`~graph_urpe.data.csv.dataset.SmilesCSVDataset`).

With :obj:`max_graph_nodes`, graphs of the loaded datasets that are larger are refused: in strict mode an
error names each (split, index, size); otherwise they leave their split together with their labels
and are reported (warning and :attr:`DatasetSplits.invalid_rows`), never dropped silently.
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import os.path as osp
import warnings
from collections.abc import Callable, Sequence

import pandas as pd
import torch
from torch.utils.data import Dataset
from torch_geometric.data import Data
from torch_geometric.transforms import Compose

from graph_urpe.choices import check_choice
from graph_urpe.data.csv.dataset import SmilesCSVDataset
from graph_urpe.data.csv.labels import CSVTask
from graph_urpe.data.csv.row_errors import InvalidRowsError, RowError
from graph_urpe.data.facts import DatasetFacts, default_metric
from graph_urpe.data.featurize import Featurization
from graph_urpe.data.ogb import (
    PCQM4Mv2Dataset,
    StandinTestLabels,
    ogb_graphprop_dataset,
    ogb_master,
    release_source,
)
from graph_urpe.data.sampler import graph_sizes
from graph_urpe.data.zinc import PYG_ZINC_SOURCE, ZincLikeDataset, pyg_zinc, zinc_source

DATASET_NAMES = ("zinc-like", "zinc", "zinc-full", "ogbg-<name>", "pcqm4mv2", "pcqm4mv2-qm9", "csv")


@dataclasses.dataclass
class DatasetSplits:
    r"""A dataset ready for training: its splits and what a model and metric need to know.

    Args:
        facts (DatasetFacts): name, task, label columns, featurization, metric
            (:class:`~graph_urpe.data.facts.DatasetFacts`).
        splits (dict[str, Dataset]): split name -> dataset of PyG ``Data`` in the package layout
            (``train``, ``valid``, ``test``; PCQM4Mv2 also ``test-dev``, ``test-challenge``).
        invalid_rows (list[RowError]): inputs that were refused (invalid SMILES, too large).
        source (str): where the data come from, one line, for summaries, logs and checkpoint
            hyperparameters; an offline stand-in says so (e.g. ``"ZINC-like molecules in PyG ZINC
            format (offline stand-in)"``, :func:`graph_urpe.data.zinc.zinc_source`).
        official (bool): the data are the benchmark's official release (a download), not an
            offline rebuild or stand-in: only then can a metric be a leaderboard number.
        split_membership (Callable, optional): where every source row went, for a user's file.
        invalid_rows_path (str, optional): the file listing :attr:`invalid_rows`, for a user's
            file.
    """

    facts: DatasetFacts
    splits: dict[str, Dataset]
    invalid_rows: list[RowError] = dataclasses.field(default_factory=list)
    source: str = ""
    official: bool = False
    split_membership: Callable[[], pd.DataFrame] | None = None
    invalid_rows_path: str | None = None


@dataclasses.dataclass(frozen=True)
class LoadOptions:
    r"""How any dataset family is built (the arguments of :func:`load_dataset` other than the
    family's own).

    Args:
        root (str): data folder; each dataset lives in its own subfolder (``zinc_like``;
            ``zinc``, holding PyG's subset and full ZINC; OGB's ``ogbg_*`` and ``pcqm4m-v2``;
            ``pcqm4mv2_qm9``; ``csv/<file stem>``).
        transform (Callable, optional): applied on access.
        pre_transform (Callable, optional): applied once and cached, e.g.
            :class:`graph_urpe.transforms.AddShortestPathDistance`.
        max_graph_nodes (int, optional): refuse larger graphs (see the module docstring).
        strict (bool): errors instead of skipped rows/graphs.
        download (bool): allow PyG/OGB to download ZINC, OGB and PCQM4Mv2 data (else offline:
            build folders with the builders).
        num_workers (int, optional): processing workers where supported.
    """

    root: str = "data"
    transform: Callable[[Data], Data] | None = None
    pre_transform: Callable[[Data], Data] | None = None
    max_graph_nodes: int | None = None
    strict: bool = False
    download: bool = False
    num_workers: int | None = None


class DatasetFamily(abc.ABC):
    r"""One dataset family: its :attr:`facts`, stated once when it is created (without reading
    any graph), and :meth:`load`, which builds its splits with those facts."""

    facts: DatasetFacts

    @abc.abstractmethod
    def load(self, options: LoadOptions) -> DatasetSplits:
        """Build (first call: process and cache on disk) or load the splits.

        Raises:
            ValueError: for too-large graphs in strict mode or unusable inputs.
            FileNotFoundError: if the data are not available offline and downloads are off.
        """


def _index_split(family: DatasetFamily, full, source: str) -> DatasetSplits:
    idx = full.get_idx_split()
    splits = {part: full[idx[part]] for part in ("train", "valid", "test")}
    return DatasetSplits(family.facts, splits, list(getattr(full, "invalid_rows", [])), source)


class ZincLikeFamily(DatasetFamily):
    """``zinc-like``: :class:`~graph_urpe.data.zinc.ZincLikeDataset`, regression, MAE, with the
    given ``featurization`` (``"ogb"`` or ``"zinc"``)."""

    def __init__(self, featurization: Featurization = "ogb") -> None:
        check_choice("featurization", featurization, Featurization)
        self.facts = DatasetFacts("zinc-like", "regression", 1, featurization, "mae",
                                  target_names=("target",))

    def load(self, options: LoadOptions) -> DatasetSplits:
        o = options
        full = ZincLikeDataset(osp.join(o.root, "zinc_like"), split=None, transform=o.transform,
                               pre_transform=o.pre_transform, max_graph_nodes=o.max_graph_nodes,
                               strict=o.strict, num_workers=o.num_workers,
                               featurization=self.facts.featurization)
        return _index_split(self, full, "embedded ZINC-like 12k (MOSES molecules)")


class PyGZincFamily(DatasetFamily):
    """``zinc`` (``subset=True``) / ``zinc-full``: :func:`~graph_urpe.data.zinc.pyg_zinc`, ZINC
    features, regression, MAE."""

    def __init__(self, subset: bool = True) -> None:
        self.facts = DatasetFacts("zinc" if subset else "zinc-full", "regression", 1, "zinc",
                                  "mae", target_names=("target",))

    def load(self, options: LoadOptions) -> DatasetSplits:
        o = options
        folder = osp.join(o.root, "zinc")
        splits = {part: pyg_zinc(folder, split=part, subset=self.facts.name == "zinc",
                                 transform=o.transform, pre_transform=o.pre_transform,
                                 download=o.download)
                  for part in ("train", "valid", "test")}
        source = zinc_source(folder)
        result = DatasetSplits(self.facts, splits, source=source,
                               official=source == PYG_ZINC_SOURCE)
        return _refuse_large(result, o.max_graph_nodes, o.strict)


class OGBFamily(DatasetFamily):
    """``ogbg-*``: :func:`~graph_urpe.data.ogb.ogb_graphprop_dataset` with OGB's split; task
    count, type and metric from OGB's metadata (:func:`~graph_urpe.data.ogb.ogb_master`)."""

    def __init__(self, name: str) -> None:
        meta = ogb_master(name)
        task = "classification" if "classification" in meta["task type"] else "regression"
        self.facts = DatasetFacts(name, task, int(meta["num tasks"]), "ogb",
                                  str(meta["eval metric"]), evaluator=name)

    def load(self, options: LoadOptions) -> DatasetSplits:
        o, name = options, self.facts.name
        full = ogb_graphprop_dataset(name, o.root, transform=o.transform,
                                     pre_transform=o.pre_transform, download=o.download)
        source, official = release_source(full.root, f"ogb.graphproppred {name}")
        result = _index_split(self, full, source)
        result.official = official
        mapping = osp.join(full.root, "mapping", "mol.csv.gz")
        return _refuse_large(result, o.max_graph_nodes, o.strict, _smiles_column(mapping, o.max_graph_nodes))


class PCQM4Mv2Family(DatasetFamily):
    """``pcqm4mv2`` / ``pcqm4mv2-qm9`` (``standin=True``): OGB-LSC PCQM4Mv2 or its offline QM9
    stand-in, regression, MAE, OGB's evaluator; the stand-in's hidden test-dev labels are restored
    in an extra ``test`` split."""

    def __init__(self, standin: bool = False) -> None:
        self.standin = standin
        self.facts = DatasetFacts("pcqm4mv2-qm9" if standin else "pcqm4mv2", "regression", 1,
                                  "ogb", "mae", evaluator="pcqm4mv2",
                                  target_names=("homolumogap",))

    def load(self, options: LoadOptions) -> DatasetSplits:
        o = options
        folder = osp.join(o.root, "pcqm4mv2_qm9") if self.standin else o.root
        full = PCQM4Mv2Dataset(folder, transform=o.transform, pre_transform=o.pre_transform,
                               num_workers=o.num_workers, download=o.download and not self.standin)
        idx = full.get_idx_split()
        splits = {part: full[idx[part]] for part in idx}
        if self.standin:
            labelled = copy.copy(full)
            restore = StandinTestLabels(folder)
            labelled.transform = restore if full.transform is None else \
                Compose([restore, full.transform])
            splits["test"] = labelled[idx["test-dev"]]
        source, official = release_source(osp.join(folder, "pcqm4m-v2"), "ogb.lsc PCQM4Mv2")
        result = DatasetSplits(self.facts, splits, source=source, official=official)
        data_csv = osp.join(full.raw_dir, "data.csv.gz")
        return _refuse_large(result, o.max_graph_nodes, o.strict, _smiles_column(data_csv, o.max_graph_nodes))


class CSVFamily(DatasetFamily):
    """``csv``: your own CSV (:class:`~graph_urpe.data.csv.dataset.SmilesCSVDataset`, whose
    arguments these are); MAE for regression, ROC-AUC for classification."""

    def __init__(self, csv_path: str, smiles_column: str = "smiles",
                 target_columns: str | Sequence[str] = "target", task: CSVTask = "regression",
                 split: str = "random", featurization: Featurization = "ogb",
                 seed: int = 0) -> None:
        check_choice("task", task, CSVTask)
        check_choice("featurization", featurization, Featurization)
        self.csv_path = csv_path
        self.smiles_column = smiles_column
        self.target_columns = [target_columns] if isinstance(target_columns, str) \
            else list(target_columns)
        self.split = split
        self.seed = seed
        self.facts = DatasetFacts("csv", task, len(self.target_columns), featurization,
                                  default_metric(task),
                                  target_names=tuple(self.target_columns),
                                  smiles_column=smiles_column)

    def load(self, options: LoadOptions) -> DatasetSplits:
        o, f = options, self.facts
        stem = osp.basename(self.csv_path).split(".")[0]
        full = SmilesCSVDataset(osp.join(o.root, "csv", stem), self.csv_path, self.smiles_column,
                                self.target_columns, task=f.task, split=self.split,
                                seed=self.seed, featurization=f.featurization,
                                max_graph_nodes=o.max_graph_nodes, strict=o.strict, num_workers=o.num_workers,
                                transform=o.transform, pre_transform=o.pre_transform)
        result = _index_split(self, full, osp.abspath(self.csv_path))  # named absolute
        result.split_membership = full.split_membership
        result.invalid_rows_path = full.invalid_rows_path
        return result


def dataset_family(name: str, csv_path: str | None = None, smiles_column: str = "smiles",
                   target_columns: str | Sequence[str] = "target", task: str = "regression",
                   split: str = "random", featurization: str = "ogb",
                   seed: int = 0) -> DatasetFamily:
    r"""The family of a dataset name (the table behind :func:`load_dataset` and
    ``graph-urpe summarize``).

    Args:
        name (str): one of :data:`DATASET_NAMES` (``ogbg-<name>``: any OGB graph dataset).
        featurization (str, optional): for ``zinc-like`` and ``csv``. (default: ``"ogb"``)
        csv_path, smiles_column, target_columns, task, split, seed: for ``csv``, see
            :class:`~graph_urpe.data.csv.dataset.SmilesCSVDataset`.

    Raises:
        ValueError: unknown name or options.
    """
    if name == "zinc-like":
        return ZincLikeFamily(featurization)
    if name in ("zinc", "zinc-full"):
        return PyGZincFamily(subset=name == "zinc")
    if name.startswith("ogbg-"):
        return OGBFamily(name)
    if name in ("pcqm4mv2", "pcqm4mv2-qm9"):
        return PCQM4Mv2Family(standin=name == "pcqm4mv2-qm9")
    if name == "csv":
        if csv_path is None:
            raise ValueError("dataset 'csv' needs csv_path")
        return CSVFamily(csv_path, smiles_column, target_columns, task, split, featurization, seed)
    raise ValueError(f"unknown dataset {name!r}; known: {DATASET_NAMES}")


def load_dataset(
    name: str,
    root: str = "data",
    transform: Callable[[Data], Data] | None = None,
    pre_transform: Callable[[Data], Data] | None = None,
    max_graph_nodes: int | None = None,
    strict: bool = False,
    download: bool = False,
    num_workers: int | None = None,
    **family_options,
) -> DatasetSplits:
    r"""Loads a dataset by name (see the module docstring) with its splits:
    ``dataset_family(name, **family_options).load(LoadOptions(root, ...))``.

    Args:
        name (str): one of :data:`DATASET_NAMES`, see :func:`dataset_family`.
        root, transform, pre_transform, max_graph_nodes, strict, download, num_workers: see
            :class:`LoadOptions`. (default: ``"data"``, no transforms, no limit, not strict,
            offline, automatic workers)
        **family_options: ``featurization`` (``zinc-like``, ``csv``) and the options of ``csv``,
            see :func:`dataset_family`.

    Raises:
        ValueError: unknown name or options; too-large graphs in strict mode.
        FileNotFoundError: if the data are not available offline and :obj:`download` is false.
    """
    options = LoadOptions(root, transform, pre_transform, max_graph_nodes, strict, download, num_workers)
    return dataset_family(name, **family_options).load(options)


def _smiles_column(path: str, max_graph_nodes: int | None) -> list[str] | None:
    """The ``smiles`` column of an OGB mapping / data file, read only when sizes are checked."""
    if max_graph_nodes is None or not osp.exists(path):
        return None
    frame = pd.read_csv(path)
    return frame["smiles"].tolist() if "smiles" in frame.columns else None


def _refuse_large(result: DatasetSplits, max_graph_nodes: int | None, strict: bool,
                  smiles: list[str] | None = None) -> DatasetSplits:
    if max_graph_nodes is None:
        return result
    refused: list[RowError] = []
    for part, dataset in result.splits.items():
        nodes = torch.from_numpy(graph_sizes(dataset))
        large = torch.nonzero(nodes > max_graph_nodes).view(-1)
        if len(large) == 0:
            continue
        index = list(dataset.indices()) if hasattr(dataset, "indices") else range(len(dataset))
        for position in large.tolist():
            text = smiles[index[position]] if smiles is not None else \
                str(getattr(dataset[position], "smiles", ""))
            refused.append(RowError(
                int(index[position]), text,
                f"{part} graph {position} (dataset index {index[position]}) has "
                f"{int(nodes[position])} nodes > max_graph_nodes={max_graph_nodes}"))
        result.splits[part] = dataset[torch.nonzero(nodes <= max_graph_nodes).view(-1)]
    if refused:
        if strict:
            raise InvalidRowsError(refused, sum(len(d) for d in result.splits.values()),
                                   result.facts.name)
        warnings.warn(f"{result.facts.name}: {len(refused)} graphs larger than max_graph_nodes={max_graph_nodes} "
                      f"left their splits with their labels: "
                      + "; ".join(e.reason for e in refused[:5]), stacklevel=3)
        result.invalid_rows = result.invalid_rows + refused
    return result
