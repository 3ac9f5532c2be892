"""Your own molecules: a PyG dataset from a CSV file with a SMILES column and label columns."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import os.path as osp
import warnings
from collections.abc import Callable, Sequence

import pandas as pd
import torch
from torch_geometric.data import Data, InMemoryDataset

from graph_urpe.choices import check_choice
from graph_urpe.data.cache import CorruptCacheError, SafeCacheMixin
from graph_urpe.data.csv.checks import (
    warn_constant_labels,
    warn_duplicate_smiles,
    warn_lopsided_split,
)
from graph_urpe.data.csv.labels import CSVTask
from graph_urpe.data.csv.row_errors import InvalidRowsError, RowError, read_row_errors
from graph_urpe.data.csv.store_builder import CSVStoreBuilder
from graph_urpe.data.featurize import Featurization
from graph_urpe.data.processing import check_max_graph_nodes
from graph_urpe.data.store import MANIFEST, read_store
from graph_urpe.data.stored_graphs import StoredGraphs
from graph_urpe.files import exclusive_lock

MIN_TRAIN_LABELS = 5
"""Fewest observed labels per label column in the training split: with fewer, the training mean and
standard deviation (used to standardise regression targets) and any fit are meaningless."""

CACHE_FORMAT = 7
"""Version of what processing stores and refuses; part of the cache key, so caches written by
code with other checks (format 1 accepted infinite labels; format 2 dropped blank lines, shifting
the row numbers after them; format 3 had no ``canonical_keys.pt``; format 4 was one pickled
``data.pt`` held in memory; format 5 had no checksums; format 6 read a SMILES with whitespace
inside as the text before it, ``"CC\\nO"`` as ``CC``, and a line with fewer fields than the
header as missing labels) are processed again."""

CHUNK_ROWS = 50_000
"""Default rows featurized and written to disk at a time (about 0.5 GB of peak memory with the
shortest paths of MOSES-sized molecules; ``benchmarks/README.md`` section 16c)."""


class SmilesCSVDataset(SafeCacheMixin, CSVStoreBuilder, InMemoryDataset):
    r"""Molecular graphs and labels from a CSV file (one molecule per row), processed once and cached.

    Each graph is a :class:`~torch_geometric.data.Data` with ``x`` ``torch.long`` ``[n, F]`` and
    ``edge_attr`` ``torch.long`` ``[E, F_e]`` from :obj:`featurization` (see
    :mod:`graph_urpe.data.featurize`; ``"ogb"``: ``F = 9``, ``F_e = 3``; ``"zinc"``: ``F = F_e =
    1``), ``edge_index`` ``[2, E]`` (both directions), ``y`` ``torch.float32`` ``[1, T]`` (NaN =
    missing label, kept), ``smiles`` (str), ``row`` (int: the CSV data row, 0-based, header
    excluded: the line of the file is ``row + 2``; it is the source row the user sees, also after
    rows are skipped), plus what :obj:`pre_transform` adds (e.g. ``pair_index``, ``spd``,
    ``spd_pred_index``).
    :meth:`split_membership` tells, for every data row of the file, its split or why it was
    skipped.

    Rows whose SMILES is invalid, whose molecule cannot be featurized, or whose graph has more than
    :obj:`max_graph_nodes` nodes are skipped together with their labels; a warning gives the count and the
    list is written to ``<processed_dir>/invalid_rows.csv`` (also :attr:`invalid_rows`). With
    :obj:`strict`, such rows make processing fail with
    :class:`~graph_urpe.data.csv.row_errors.InvalidRowsError` listing every one of them.

    Processing runs once; the result is stored under ``root/processed/<key>/`` where ``<key>``
    hashes the CSV content and every option that changes the graphs (featurization, columns, task,
    split and its fractions and seed, :obj:`max_graph_nodes`, ``repr(pre_transform)``, the
    :data:`CACHE_FORMAT`), so changing any of them processes again instead of returning stale
    graphs, and a second run with the same options does no graph work. :obj:`strict` is checked
    against the cache instead: a cache that skipped rows is refused in strict mode (listing them).

    **At scale.** Rows are featurized :obj:`chunk_rows` at a time (by worker processes, each
    returning its rows' graphs as NumPy arrays, see
    :func:`~graph_urpe.data.processing.rows_to_columns`) and appended to a column store on disk
    (:mod:`graph_urpe.data.store`, :mod:`graph_urpe.data.stored_graphs`), so the memory of
    processing is bounded by a chunk, not by the file. A run that is killed resumes per completed
    chunk: the next run with the same options keeps every chunk of :obj:`chunk_rows` rows that was
    written whole, says so (``resuming: N of M rows already processed``) and starts its progress
    bar there; rows of the unfinished chunk are processed again (with the default
    :data:`CHUNK_ROWS`, a file of fewer rows starts from the first row). Processes that open the
    same cache at once (two fits, DDP ranks) take turns on a lock file beside the processed folder
    (``processed/<key>.lock``): one processes, the others wait, then read its finished cache. The store is plain arrays and JSON (nothing pickled, nothing in it can run code),
    opened as copy-on-write memory maps: the dataset keeps PyG's collated ``_data`` + ``slices``
    layout, its pages are file-backed and loaded on first touch, and processes on one machine
    (DDP ranks) share one copy through the page cache. :meth:`get` separates a graph on every
    call and keeps none. ``pair_index`` is stored only for graphs whose pairs are not the
    canonical all-pairs index (:func:`graph_urpe.transforms.pair_index`), rebuilt on access for
    the others. A truncated, changed (every file's CRC-32 is checked at every load) or
    inconsistent store file (:class:`~graph_urpe.data.cache.CorruptCacheError`) is rebuilt with a
    warning naming it, as is the partial store of a killed run that fails its checks; a
    pickled ``pre_transform.pt`` placed in the folder is refused
    (:class:`~graph_urpe.data.cache.UnsafeCacheError`), never run.

    Args:
        root (str): folder for the processed files.
        csv_path (str): the CSV file (any pandas-readable CSV, optionally compressed).
        smiles_column (str, optional): column with SMILES. (default: :obj:`"smiles"`)
        target_columns (str or Sequence[str], optional): label column(s); ``T`` = their number.
            (default: :obj:`"target"`)
        task (str, optional): ``"regression"`` or ``"classification"`` (labels 0/1/empty).
            (default: :obj:`"regression"`)
        split (str, optional): ``"random"`` (seeded), ``"scaffold"`` (Murcko scaffolds, OGB style)
            or the name of a column holding ``train``/``valid``/``test`` per row.
            (default: :obj:`"random"`)
        split_fractions (Sequence[float], optional): train/valid/test fractions for ``"random"``
            and ``"scaffold"``. (default: ``(0.8, 0.1, 0.1)``)
        seed (int, optional): seed of the random split. (default: :obj:`0`)
        featurization (str, optional): ``"ogb"`` or ``"zinc"``. (default: :obj:`"ogb"`)
        max_graph_nodes (int, optional): refuse graphs with more nodes (reported like invalid rows).
            (default: :obj:`None`, no limit)
        strict (bool, optional): fail on any unusable row instead of skipping it.
            (default: :obj:`False`)
        min_train_labels (int, optional): refuse a label column with fewer observed labels in
            the training split (checked on every load). (default: :data:`MIN_TRAIN_LABELS`)
        num_workers (int, optional): worker processes for processing (0 = none).
            (default: :obj:`None`, automatic: see
            :func:`~graph_urpe.data.processing.resolve_num_workers`)
        transform (Callable, optional): applied on every access. (default: :obj:`None`)
        pre_transform (Callable, optional): applied once before saving, e.g.
            :class:`graph_urpe.transforms.AddShortestPathDistance`. (default: :obj:`None`)
        force_reload (bool, optional): process again even if cached. (default: :obj:`False`)
        log (bool, optional): print progress. (default: :obj:`True`)
        chunk_rows (int, optional): rows featurized and written to disk at a time (the unit of
            processing memory and of resuming after a kill: only completed chunks are kept).
            (default: :data:`CHUNK_ROWS`)

    Raises:
        FileNotFoundError: if :obj:`csv_path` does not exist.
        ValueError: if :obj:`csv_path` is a folder.
        ValueError: for unknown options; an empty (0-byte) or header-only file; missing columns
            (the message names the option to set); non-numeric or infinite labels, a label column
            without any value, classification labels other than 0/1; a bad split column; no
            usable row at all; a label column with fewer than :obj:`min_train_labels` labels in
            the training split (naming the column and the counts); a label column named twice;
            :obj:`chunk_rows` < 1.
        InvalidRowsError: in :obj:`strict` mode, if a row cannot be used.
        UnsafeCacheError: if a pickled record in the processed folder holds non-allow-listed
            objects.

    Example:
        >>> ds = SmilesCSVDataset("data/my", "my.csv", "smiles", ["logS"],
        ...                       pre_transform=AddShortestPathDistance())  # doctest: +SKIP
        >>> split = ds.get_idx_split(); train = ds[split["train"]]  # doctest: +SKIP
    """

    def __init__(
        self,
        root: str,
        csv_path: str,
        smiles_column: str = "smiles",
        target_columns: str | Sequence[str] = "target",
        task: CSVTask = "regression",
        split: str = "random",
        split_fractions: Sequence[float] = (0.8, 0.1, 0.1),
        seed: int = 0,
        featurization: Featurization = "ogb",
        max_graph_nodes: int | None = None,
        strict: bool = False,
        num_workers: int | None = None,
        min_train_labels: int = MIN_TRAIN_LABELS,
        transform: Callable[[Data], Data] | None = None,
        pre_transform: Callable[[Data], Data] | None = None,
        force_reload: bool = False,
        log: bool = True,
        chunk_rows: int = CHUNK_ROWS,
    ) -> None:
        if osp.isdir(csv_path):
            raise ValueError(f"{csv_path} is a folder, not a CSV file: pass the file's path.")
        if not osp.isfile(csv_path):
            raise FileNotFoundError(f"CSV file not found: {csv_path}")
        check_choice("task", task, CSVTask)
        check_choice("featurization", featurization, Featurization)
        max_graph_nodes = check_max_graph_nodes(max_graph_nodes)
        self.csv_path = osp.abspath(csv_path)
        self.smiles_column = smiles_column
        self.target_columns = [target_columns] if isinstance(target_columns, str) \
            else list(target_columns)
        twice = sorted({c for c in self.target_columns if self.target_columns.count(c) > 1})
        if twice:
            raise ValueError(f"target_columns names {', '.join(map(repr, twice))} more than once: "
                             "give each label column once.")
        self.task = task
        self.split = split
        self.split_fractions = tuple(float(f) for f in split_fractions)
        self.seed = int(seed)
        self.featurization = featurization
        self.max_graph_nodes = max_graph_nodes
        self.strict = bool(strict)
        self.num_workers = num_workers
        if int(min_train_labels) < 1:
            raise ValueError(f"min_train_labels must be >= 1, got {min_train_labels}")
        self.min_train_labels = int(min_train_labels)
        if int(chunk_rows) < 1:
            raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
        self.chunk_rows = int(chunk_rows)
        self._resume = not force_reload
        self.config = {
            "format": CACHE_FORMAT,
            "csv_sha256": _sha256(self.csv_path),
            "smiles_column": smiles_column,
            "target_columns": self.target_columns,
            "task": task,
            "split": split,
            "split_fractions": self.split_fractions if split in ("random", "scaffold") else None,
            "seed": self.seed if split == "random" else None,
            "featurization": featurization,
            "max_graph_nodes": self.max_graph_nodes,
            "pre_transform": repr(pre_transform),
        }
        key = json.dumps(self.config, sort_keys=True).encode()
        self.key = hashlib.sha256(key).hexdigest()[:16]
        super().__init__(root, transform, pre_transform, None, log=log, force_reload=force_reload)
        columns, = self._read_cache([self.processed_dir], reader=self._read_own_store)
        self._graphs = StoredGraphs(columns, self.processed_paths[0])
        self._data, self.slices = self._graphs.data, self._graphs.slices
        self._split_idx = {name: torch.from_numpy(columns[f"split.{name}"].values)
                           for name in ("train", "valid", "test")}
        self._canonical_keys = columns["canonical_key"].values
        self._check_train_labels()
        if self.strict and self.invalid_rows:
            # A cache made without strict holds the rows that strict refuses: refuse them now.
            skipped = self.invalid_rows
            raise InvalidRowsError(skipped, len(self) + len(skipped), self.csv_path)

    @property
    def num_tasks(self) -> int:
        """Number of label columns ``T``."""
        return len(self.target_columns)

    @property
    def processed_dir(self) -> str:
        return osp.join(self.root, "processed", self.key)

    @property
    def raw_file_names(self) -> list[str]:
        return []

    @property
    def processed_file_names(self) -> list[str]:
        return [MANIFEST]

    def len(self) -> int:
        return len(self._graphs)

    def get(self, idx: int) -> Data:
        r"""Graph :obj:`idx` from the memory-mapped store (:meth:`StoredGraphs.get
        <graph_urpe.data.stored_graphs.StoredGraphs.get>`: kept after its first read, as PyG's
        :meth:`~torch_geometric.data.InMemoryDataset.get` keeps it, only in a store small enough
        for all its graphs)."""
        return self._graphs.get(idx)

    @property
    def invalid_rows_path(self) -> str:
        """The CSV listing the rows skipped at processing (``row, line, smiles, reason``)."""
        return osp.join(self.processed_dir, "invalid_rows.csv")

    @property
    def invalid_rows(self) -> list[RowError]:
        """The rows skipped at processing (empty if none)."""
        return read_row_errors(self.invalid_rows_path)

    def get_idx_split(self) -> dict[str, torch.Tensor]:
        r"""``{"train", "valid", "test"}`` -> ``torch.long`` indices into the full dataset."""
        return {k: v.clone() for k, v in self._split_idx.items()}

    def split_membership(self) -> pd.DataFrame:
        r"""Where every data row of the CSV went, to audit or reuse the split.

        Returns:
            pandas.DataFrame: one line per CSV data row, sorted by ``row`` (int, 0-based data row
            index, header excluded; the CSV line is ``row + 2``), with ``smiles`` (str), ``split``
            (``"train"``, ``"valid"``, ``"test"`` or ``"skipped"``) and ``reason`` (why a row was
            skipped, e.g. ``"invalid SMILES: ..."``; ``""`` for kept rows).
        """
        data = self._data
        rows = data.row.view(-1).tolist()
        smiles = list(data.smiles)
        split = [""] * len(rows)
        for name, idx in self._split_idx.items():
            for i in idx.tolist():
                split[i] = name
        skipped = self.invalid_rows
        frame = pd.DataFrame({
            "row": rows + [e.row for e in skipped],
            "smiles": smiles + [e.smiles for e in skipped],
            "split": split + ["skipped"] * len(skipped),
            "reason": [""] * len(rows) + [e.reason for e in skipped],
        })
        return frame.sort_values("row", kind="stable").reset_index(drop=True)

    def _check_train_labels(self) -> None:
        """Refuses label columns with fewer than :attr:`min_train_labels` labels in training;
        warns (one line each) for a scaffold split far from its fractions, a constant label
        column and duplicate SMILES within a split (:mod:`graph_urpe.data.csv.checks`)."""
        y = self._data.y.view(-1, self.num_tasks)
        train = self._split_idx["train"]
        if self.split == "scaffold":
            warn_lopsided_split({name: len(idx) for name, idx in self._split_idx.items()},
                                self.split_fractions, self.csv_path)
        for t, column in enumerate(self.target_columns):
            observed = int((~torch.isnan(y[:, t])).sum())
            in_train = int((~torch.isnan(y[train, t])).sum())
            if in_train < self.min_train_labels:
                raise ValueError(
                    f"label column {column!r} of {self.csv_path} has {in_train} labels in the "
                    f"training split ({len(train)} molecules; {observed} labels in all "
                    f"{len(y)} usable molecules), fewer than the minimum {self.min_train_labels}"
                    "; add labelled rows, drop the column, or change the split"
                )
        warn_constant_labels(y, train, self.target_columns, self.csv_path)
        warn_duplicate_smiles(self._data.smiles, self._split_idx, self.csv_path,
                              keys=self._canonical_keys)

    def _cache_lock(self) -> contextlib.AbstractContextManager:
        path = osp.join(self.root, "processed", f"{self.key}.lock")
        return exclusive_lock(path, f"Waiting for another process to finish processing "
                                    f"{osp.basename(self.csv_path)} (lock {path})" if self.log else "")

    def _run_process(self) -> None:
        # The pre_transform is part of the cache key (and config.json): no pickled record.
        os.makedirs(self.processed_dir, exist_ok=True)
        try:
            self.process()
        except CorruptCacheError as exc:
            if not self._resume:
                raise
            # The partial store of an earlier run fails its checks: start it again.
            warnings.warn(f"{exc}; processing {self.csv_path} again from the first row",
                          stacklevel=2)
            self._resume = False
            self.process()

    def _read_own_store(self, folder: str) -> dict:
        """The store's columns (:func:`~graph_urpe.data.store.read_store`) when its ``store.json``
        records this CSV's SHA-256 and these options; a store built from another file or with
        other options (copied into this key's folder) is a :class:`CorruptCacheError`, so it is
        rebuilt from the CSV with a warning, never used. The CRC-32s of the store find damage,
        not deliberate changes: a store is trusted like the CSV it was built from."""
        columns, meta = read_store(folder)
        recorded = meta.get("config") if isinstance(meta, dict) else None
        if json.dumps(recorded, sort_keys=True) != json.dumps(self.config, sort_keys=True):
            raise CorruptCacheError(osp.join(folder, MANIFEST), "it was built from another CSV "
                                    f"or with other options than {self.csv_path} with these "
                                    "options (its recorded SHA-256 and options differ)")
        return columns

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({len(self)}, csv={osp.basename(self.csv_path)!r}, "
                f"featurization={self.featurization!r}, tasks={self.num_tasks})")


def _sha256(path: str) -> str:
    """Hex SHA-256 digest of a file (the cache key of its contents)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
