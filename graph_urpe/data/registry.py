"""One entry point to every dataset of the package, by name, with its splits and metadata.

Names:

* ``zinc-like``: the embedded 12k ZINC-like set (:class:`~graph_urpe.data.zinc.ZincLikeDataset`),
  ZINC or OGB featurisation (``featurization``), MAE. Always available offline.
* ``zinc`` / ``zinc-full``: PyG's ZINC subset / full (:func:`~graph_urpe.data.zinc.pyg_zinc`), ZINC
  featurisation, MAE; a folder written offline by ``datasets/build_pyg_zinc.py`` holds
  other molecules and its :attr:`DatasetSplits.source` says so.
* ``ogbg-*`` (e.g. ``ogbg-molhiv``): OGB graph property prediction
  (:func:`~graph_urpe.data.ogb.ogb_graphprop_dataset`), OGB featurisation, OGB's metric.
* ``pcqm4mv2``: OGB-LSC PCQM4Mv2 (:class:`~graph_urpe.data.ogb.PCQM4Mv2Dataset`), MAE; splits
  ``train``, ``valid``, ``test-dev``, ``test-challenge`` (test labels hidden).
* ``pcqm4mv2-qm9``: the offline QM9 stand-in in the same format (under ``root/pcqm4mv2_qm9``); its
  hidden test-dev labels are restored in an extra ``test`` split.
* ``csv``: your own CSV (:class:`~graph_urpe.data.csv.dataset.SmilesCSVDataset`).

With :obj:`max_nodes`, graphs of the loaded datasets that are larger are refused: in strict mode an
error names each (split, index, size); otherwise they leave their split together with their labels
and are reported (warning and :attr:`DatasetSplits.invalid_rows`), never dropped silently.
"""

from __future__ import annotations

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

from graph_urpe.data.csv.dataset import SmilesCSVDataset
from graph_urpe.data.csv.row_errors import InvalidRowsError, RowError
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
        name (str): the registry name.
        splits (dict[str, Dataset]): split name -> dataset of PyG ``Data`` in the package layout
            (``train``, ``valid``, ``test``; PCQM4Mv2 also ``test-dev``, ``test-challenge``).
        task (str): ``"regression"`` or ``"classification"`` (binary, labels 0./1.).
        num_tasks (int): label columns ``T`` (``y`` is ``[1, T]`` per graph).
        featurization (str): ``"zinc"`` (``x`` ``[n, 1]`` with 28 atom types, ``edge_attr``
            ``[E, 1]`` with bond types 1-3) or ``"ogb"`` (``x`` ``[n, 9]``, ``edge_attr`` ``[E, 3]``,
            see :func:`ogb.utils.features.get_atom_feature_dims`).
        metric (str): the benchmark's metric: ``"mae"``, ``"rocauc"``, ``"ap"``, ``"rmse"``, ...
        invalid_rows (list[RowError]): inputs that were refused (invalid SMILES, too large).
        source (str): where the data come from, one line, for summaries, logs and checkpoint
            hyperparameters; an offline stand-in says so (e.g. ``"ZINC-like molecules in PyG ZINC
            format (offline stand-in)"``, :func:`graph_urpe.data.zinc.zinc_source`).
        official (bool): the data are the benchmark's official release (a download), not an
            offline rebuild or stand-in: only then can a metric be a leaderboard number.
    """

    name: str
    splits: dict[str, Dataset]
    task: str
    num_tasks: int
    featurization: str
    metric: str
    invalid_rows: list[RowError] = dataclasses.field(default_factory=list)
    source: str = ""
    official: bool = False
    split_membership: Callable[[], pd.DataFrame] | None = None


def load_dataset(
    name: str,
    root: str = "data",
    transform: Callable[[Data], Data] | None = None,
    pre_transform: Callable[[Data], Data] | None = None,
    max_nodes: int | None = None,
    strict: bool = False,
    download: bool = False,
    num_workers: int | None = None,
    csv_path: str | None = None,
    smiles_column: str = "smiles",
    target_columns: str | Sequence[str] = "target",
    task: str = "regression",
    split: str = "random",
    featurization: str = "ogb",
    seed: int = 0,
) -> DatasetSplits:
    r"""Loads a dataset by name (see the module docstring) with its splits.

    Args:
        name (str): one of :data:`DATASET_NAMES` (``ogbg-<name>``: any OGB graph dataset).
        root (str, optional): data folder; each dataset lives in its own subfolder
            (``zinc_like``; ``zinc``, holding PyG's subset and full ZINC; OGB's ``ogbg_*`` and
            ``pcqm4m-v2``; ``pcqm4mv2_qm9``; ``csv/<file stem>``). (default: :obj:`"data"`)
        transform (Callable, optional): applied on access. (default: :obj:`None`)
        pre_transform (Callable, optional): applied once and cached, e.g.
            :class:`graph_urpe.transforms.AddShortestPathDistance`. (default: :obj:`None`)
        max_nodes (int, optional): refuse larger graphs (see the module docstring).
            (default: :obj:`None`)
        strict (bool, optional): errors instead of skipped rows/graphs. (default: :obj:`False`)
        download (bool, optional): allow PyG/OGB to download ZINC, OGB and PCQM4Mv2 data.
            (default: :obj:`False`: offline, build folders with the builders)
        num_workers (int, optional): processing workers where supported. (default: :obj:`None`)
        csv_path, smiles_column, target_columns, task, split, featurization, seed: for ``csv``,
            see :class:`~graph_urpe.data.csv.dataset.SmilesCSVDataset`.

    Raises:
        ValueError: unknown name or options; too-large graphs in strict mode.
        FileNotFoundError: if the data are not available offline and :obj:`download` is false.
    """
    if name == "zinc-like":
        full = ZincLikeDataset(osp.join(root, "zinc_like"), split=None, transform=transform,
                               pre_transform=pre_transform, max_nodes=max_nodes, strict=strict,
                               num_workers=num_workers, featurization=featurization)
        return _from_idx_split(name, full, "regression", 1, featurization, "mae",
                               "embedded ZINC-like 12k (MOSES molecules)")
    if name in ("zinc", "zinc-full"):
        sub = name == "zinc"
        splits = {part: pyg_zinc(osp.join(root, "zinc"), split=part,
                                 subset=sub, transform=transform, pre_transform=pre_transform,
                                 download=download)
                  for part in ("train", "valid", "test")}
        source = zinc_source(osp.join(root, "zinc"))
        result = DatasetSplits(name, splits, "regression", 1, "zinc", "mae", source=source,
                               official=source == PYG_ZINC_SOURCE)
        return _refuse_large(result, max_nodes, strict)
    if name.startswith("ogbg-"):
        meta = ogb_master(name)
        full = ogb_graphprop_dataset(name, root, transform=transform,
                                     pre_transform=pre_transform, download=download)
        kind = "classification" if "classification" in meta["task type"] else "regression"
        source, official = release_source(full.root, f"ogb.graphproppred {name}")
        result = _from_idx_split(name, full, kind, int(meta["num tasks"]), "ogb",
                                 meta["eval metric"], source)
        result.official = official
        mapping = osp.join(full.root, "mapping", "mol.csv.gz")
        return _refuse_large(result, max_nodes, strict, _smiles_column(mapping, max_nodes))
    if name in ("pcqm4mv2", "pcqm4mv2-qm9"):
        folder = root if name == "pcqm4mv2" else osp.join(root, "pcqm4mv2_qm9")
        full = PCQM4Mv2Dataset(folder, transform=transform, pre_transform=pre_transform,
                               num_workers=num_workers, download=download and name == "pcqm4mv2")
        idx = full.get_idx_split()
        splits = {part: full[idx[part]] for part in idx}
        if name == "pcqm4mv2-qm9":
            labelled = copy.copy(full)
            restore = StandinTestLabels(folder)
            labelled.transform = restore if full.transform is None else \
                Compose([restore, full.transform])
            splits["test"] = labelled[idx["test-dev"]]
        source, official = release_source(osp.join(folder, "pcqm4m-v2"), "ogb.lsc PCQM4Mv2")
        result = DatasetSplits(name, splits, "regression", 1, "ogb", "mae", source=source,
                               official=official)
        data_csv = osp.join(full.raw_dir, "data.csv.gz")
        return _refuse_large(result, max_nodes, strict, _smiles_column(data_csv, max_nodes))
    if name == "csv":
        if csv_path is None:
            raise ValueError("dataset 'csv' needs csv_path")
        stem = osp.basename(csv_path).split(".")[0]
        full = SmilesCSVDataset(osp.join(root, "csv", stem), csv_path, smiles_column,
                                target_columns, task=task, split=split, seed=seed,
                                featurization=featurization, max_nodes=max_nodes, strict=strict,
                                num_workers=num_workers, transform=transform,
                                pre_transform=pre_transform)
        result = _from_idx_split(name, full, task, full.num_tasks, featurization,
                                 "mae" if task == "regression" else "rocauc", csv_path)
        result.split_membership = full.split_membership
        return result
    raise ValueError(f"unknown dataset {name!r}; known: {DATASET_NAMES}")


def _from_idx_split(name, full, task, num_tasks, featurization, metric, source) -> DatasetSplits:
    idx = full.get_idx_split()
    splits = {part: full[idx[part]] for part in ("train", "valid", "test")}
    invalid = list(getattr(full, "invalid_rows", []))
    return DatasetSplits(name, splits, task, num_tasks, featurization, metric, invalid, source)


def _smiles_column(path: str, max_nodes: int | None) -> list[str] | None:
    """The ``smiles`` column of an OGB mapping / data file, read only when sizes are checked."""
    if max_nodes is None or not osp.exists(path):
        return None
    frame = pd.read_csv(path)
    return frame["smiles"].tolist() if "smiles" in frame.columns else None


def _refuse_large(result: DatasetSplits, max_nodes: int | None, strict: bool,
                  smiles: list[str] | None = None) -> DatasetSplits:
    if max_nodes is None:
        return result
    refused: list[RowError] = []
    for part, dataset in result.splits.items():
        nodes = torch.from_numpy(graph_sizes(dataset))
        large = torch.nonzero(nodes > max_nodes).view(-1)
        if len(large) == 0:
            continue
        index = list(dataset.indices()) if hasattr(dataset, "indices") else range(len(dataset))
        for position in large.tolist():
            text = smiles[index[position]] if smiles is not None else \
                str(getattr(dataset[position], "smiles", ""))
            refused.append(RowError(
                int(index[position]), text,
                f"{part} graph {position} (dataset index {index[position]}) has "
                f"{int(nodes[position])} nodes > max_nodes={max_nodes}"))
        result.splits[part] = dataset[torch.nonzero(nodes <= max_nodes).view(-1)]
    if refused:
        if strict:
            raise InvalidRowsError(refused, sum(len(d) for d in result.splits.values()),
                                   result.name)
        warnings.warn(f"{result.name}: {len(refused)} graphs larger than max_nodes={max_nodes} "
                      f"left their splits with their labels: "
                      + "; ".join(e.reason for e in refused[:5]), stacklevel=3)
        result.invalid_rows = result.invalid_rows + refused
    return result
