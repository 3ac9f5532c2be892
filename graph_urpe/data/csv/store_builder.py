r"""How a :class:`~graph_urpe.data.csv.dataset.SmilesCSVDataset` processes its CSV: the file read
(one-line errors for a missing column or no data row), its rows featurized :obj:`chunk_rows` at a
time by worker processes into the dataset's column store
(:class:`~graph_urpe.data.store_writer.GraphStoreWriter`; a killed run resumes after its last
completed chunk), the unusable rows listed, the split made and the store finished.
"""

from __future__ import annotations

import functools
import json
import os.path as osp
import sys

import pandas as pd
from tqdm.auto import tqdm

from graph_urpe.data.csv.labels import label_matrix
from graph_urpe.data.csv.reading import missing_columns, read_csv_file
from graph_urpe.data.csv.row_errors import RowError, handle_row_errors
from graph_urpe.data.csv.splits import column_split, random_split, scaffold_split
from graph_urpe.data.processing import (
    PROGRESS_MIN_ITEMS,
    resolve_num_workers,
    rows_to_columns,
    task_runner,
)
from graph_urpe.data.store import StringColumn
from graph_urpe.data.store_writer import GraphStoreWriter
from graph_urpe.files import atomic_write

__all__ = ["TASK_ROWS", "CSVStoreBuilder"]

TASK_ROWS = 1000
"""Most rows per task handed to one worker process (one message each way)."""


class CSVStoreBuilder:
    r"""Mixin of :class:`~graph_urpe.data.csv.dataset.SmilesCSVDataset`: its :meth:`process`
    (see the module docstring). It reads the dataset's options (``csv_path``, ``smiles_column``,
    ``target_columns``, ``task``, ``split``, ``split_fractions``, ``seed``, ``featurization``,
    ``max_graph_nodes``, ``strict``, ``num_workers``, ``chunk_rows``, ``pre_transform``,
    ``log``), its cache ``key`` and ``config``, ``processed_dir``, ``invalid_rows_path`` and
    ``_resume`` (whether the completed chunks of an interrupted run are kept).
    """

    def _read_frame(self) -> pd.DataFrame:
        # Blank lines stay rows (skipped as empty SMILES, listed), so row r is CSV line r + 2.
        frame = read_csv_file(self.csv_path, dtype={self.smiles_column: str},
                              skip_blank_lines=False)
        if self.smiles_column not in frame.columns:
            raise missing_columns(
                self.csv_path, f"SMILES column {self.smiles_column!r}", [self.smiles_column],
                list(frame.columns),
                "set the SMILES column: smiles_column=NAME (CLI: --data.init_args.smiles_column "
                "NAME)")
        missing = [c for c in self.target_columns if c not in frame.columns]
        if missing:
            raise missing_columns(
                self.csv_path, f"label columns {missing}", missing, list(frame.columns),
                "set the label columns: target_columns=[...] (CLI: "
                "--data.init_args.target_columns '[NAME, ...]')")
        if len(frame) == 0:
            raise ValueError(
                f"{self.csv_path} has a header ({list(frame.columns)}) but no data rows: add one "
                "molecule per line below it"
            )
        return frame

    def process(self) -> None:
        """PyG's :meth:`~torch_geometric.data.Dataset.process`: the CSV read, featurized into the
        store, split and the store finished (see the module docstring)."""
        frame = self._read_frame()
        if self.split not in ("random", "scaffold") and self.split not in frame.columns:
            raise ValueError(
                f"split must be 'random', 'scaffold' or a column of {self.csv_path} (columns: "
                f"{list(frame.columns)}), got {self.split!r}"
            )
        labels = label_matrix(frame, self.target_columns, self.task, source=self.csv_path)
        smiles = frame[self.smiles_column].tolist()
        named = frame[self.split].tolist() if self.split in frame.columns else None
        total = len(frame)
        del frame
        writer = self._featurize(smiles, labels)
        errors = [RowError(int(r), s, reason) for r, s, reason in zip(
            writer.read("error.row").values.tolist(), _texts(writer, "error.smiles"),
            _texts(writer, "error.reason"))]
        handle_row_errors(errors, total, self.csv_path, self.invalid_rows_path, self.strict)
        if "num_nodes" not in writer.columns:
            raise ValueError(f"no usable molecule in {self.csv_path}; see {self.invalid_rows_path}")
        count = writer.columns["num_nodes"]["graphs"]
        if self.split == "random":
            split = random_split(count, self.split_fractions, self.seed)
        elif self.split == "scaffold":
            scaffolds = _texts(writer, "scaffold")
            split = scaffold_split(scaffolds, self.split_fractions, scaffolds=scaffolds)
        else:
            split = column_split([named[r] for r in writer.read("graph.row").values.tolist()],
                                 column=self.split)
        for name, idx in split.items():
            writer.append(f"split.{name}", idx.numpy(), [len(idx)])
        writer.finish({"config": self.config})
        with atomic_write(osp.join(self.processed_dir, "config.json"), "w") as f:
            json.dump({**self.config, "csv_path": self.csv_path}, f, indent=2)

    def _featurize(self, smiles: list, labels) -> GraphStoreWriter:
        """Featurizes the rows :attr:`chunk_rows` at a time into the store, resuming after the
        last chunk an earlier, interrupted run wrote with the same options."""
        writer = GraphStoreWriter(self.processed_dir, resume=self._resume)
        done = {"key": self.key, "chunk_rows": self.chunk_rows}
        if {k: writer.committed.get(k) for k in done} != done:
            writer = GraphStoreWriter(self.processed_dir)
        start, total = writer.committed.get("rows", 0), len(smiles)
        if start and self.log:
            print(f"Processing {osp.basename(self.csv_path)}: resuming: {start:,} of {total:,} "
                  f"rows already processed (kept per completed chunk of {self.chunk_rows:,} "
                  "rows)", file=sys.stderr, flush=True)
        workers = resolve_num_workers(self.num_workers, total - start)
        task_rows = max(1, min(TASK_ROWS, self.chunk_rows // (4 * max(workers, 1))))
        fn = functools.partial(
            rows_to_columns, featurization=self.featurization,
            max_graph_nodes=self.max_graph_nodes, pre_transform=self.pre_transform,
            canonical=True, scaffold=self.split == "scaffold")
        show = self.log and total >= PROGRESS_MIN_ITEMS
        with (tqdm(total=total, initial=start, desc=f"Processing {osp.basename(self.csv_path)}",
                   disable=not show, file=sys.stderr, unit="mol", smoothing=0.1) as bar,
              task_runner(workers) as run):
            for begin in range(start, total, self.chunk_rows):
                end = min(total, begin + self.chunk_rows)
                tasks = [[(r, smiles[r], labels[r]) for r in range(a, min(end, a + task_rows))]
                         for a in range(begin, end, task_rows)]
                for task, blocks in zip(tasks, run(fn, tasks)):
                    for block in blocks:
                        writer.append(*block)
                    bar.update(len(task))
                writer.commit({**done, "rows": end})
        return writer


def _texts(writer: GraphStoreWriter, name: str) -> StringColumn:
    column = writer.read(name)
    return StringColumn(column.values, column.slices)
