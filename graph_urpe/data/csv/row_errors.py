"""Rows of an input table that cannot become a graph: invalid SMILES, unknown atom types, graphs
larger than the configured maximum.

Every such row is reported by its row number and SMILES text. A training dataset skips them (the
labels go with their graphs, so nothing is misaligned), warns with the count and writes the full
list to a CSV file; with ``strict=True`` it refuses the whole input instead. A column value that
is not allowed (a non-numeric label, an unknown split name) is refused by
:func:`refuse_values`, naming its first rows.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from graph_urpe.files import atomic_write_csv

REPORT_COLUMNS = ("row", "line", "smiles", "reason")

SHOWN_SMILES = 40
"""Messages show at most this many characters of a SMILES (the report file holds all)."""


@dataclasses.dataclass(frozen=True)
class RowError:
    r"""One input row that was not turned into a graph.

    Args:
        row (int): 0-based position of the row in the input table (header excluded).
        smiles (str): the SMILES text as given.
        reason (str): what is wrong, e.g. ``"invalid SMILES: ..."`` or
            ``"graph has 45 nodes > max_graph_nodes=40"``.
    """

    row: int
    smiles: str
    reason: str

    @property
    def line(self) -> int:
        """1-based line number in a CSV file with one header line."""
        return self.row + 2

    def __str__(self) -> str:
        smiles = self.smiles if len(self.smiles) <= SHOWN_SMILES else (
            f"{self.smiles[:SHOWN_SMILES]}... ({len(self.smiles)} characters)")
        return f"row {self.row} (CSV line {self.line}) {smiles!r}: {self.reason}"


def refuse_values(rows: Sequence[int], values: Sequence, head: str, kind: str, tail: str) -> None:
    r"""Raise ``"<head> <n> <kind> (row i (CSV line i + 2): value, ...)<tail>"`` when ``rows`` is
    not empty (rows of a CSV file with one header line, as :class:`RowError` numbers them).

    Args:
        rows (Sequence[int]): 0-based positions of the refused cells; the first 10 are shown.
        values (Sequence): the column's values, indexed by row (shown with :func:`repr`).
        head (str): what comes before the count, e.g. ``"label column 'y' of data.csv has"``.
        kind (str): what the refused values are, in the plural, e.g. ``"non-numeric values"``
            (its last ``s`` dropped for one value).
        tail (str): the rest, usually the fix, e.g. ``"; leave a cell empty"``.

    Raises:
        ValueError: if ``rows`` is not empty.
    """
    if len(rows):
        first = np.asarray(rows[:10])
        shown = ", ".join(f"row {i} (CSV line {i + 2}): {v!r}" for i, v in
                          zip(first.tolist(), np.asarray(values, dtype=object)[first].tolist()))
        kind = kind.removesuffix("s") if len(rows) == 1 else kind
        raise ValueError(f"{head} {len(rows)} {kind} ({shown}){tail}")


class SkippedRowsWarning(UserWarning):
    """Warned when rows of an input were skipped (not in strict mode): their count, the first
    few, and the report file that lists them all."""


class InvalidRowsError(ValueError):
    r"""Raised in strict mode when some rows cannot be turned into graphs; :attr:`errors` lists
    them all."""

    def __init__(self, errors: Sequence[RowError], total: int, source: str):
        self.errors = list(errors)
        shown = "\n  ".join(str(e) for e in self.errors[:20])
        more = f"\n  ... and {len(self.errors) - 20} more" if len(self.errors) > 20 else ""
        super().__init__(
            f"{len(self.errors)} of {total} rows of {source} cannot be used:\n  {shown}{more}\n"
            "Fix or remove these rows, or run without strict mode to skip them (they are then "
            "listed in invalid_rows.csv)."
        )


def write_row_errors(errors: Sequence[RowError], path: str | os.PathLike) -> None:
    r"""Writes the rows as a CSV with columns ``row, line, smiles, reason`` (header only if
    none), atomically (:func:`graph_urpe.files.atomic_write_csv`: a link at ``path`` is replaced,
    never written through)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    frame = pd.DataFrame(
        [(e.row, e.line, e.smiles, e.reason) for e in errors], columns=list(REPORT_COLUMNS)
    )
    atomic_write_csv(frame, os.fspath(path), index=False)


def read_row_errors(path: str | os.PathLike) -> list[RowError]:
    r"""Reads a file written by :func:`write_row_errors` (an empty list if it does not exist)."""
    if not os.path.exists(path):
        return []
    frame = pd.read_csv(path, keep_default_na=False, dtype={"smiles": str, "reason": str})
    return [RowError(int(r), s, reason) for r, s, reason in
            zip(frame["row"], frame["smiles"], frame["reason"])]


def handle_row_errors(errors: Sequence[RowError], total: int, source: str, report_path: str,
                      strict: bool) -> None:
    r"""Applies the bad-row policy: always writes :obj:`report_path`; then raises
    :class:`InvalidRowsError` if :obj:`strict` and there are errors, else warns
    (:class:`SkippedRowsWarning`) with the count, the first three rows and the report's absolute
    path.

    Args:
        errors (Sequence[RowError]): the rows that failed.
        total (int): number of rows in the input.
        source (str): name of the input for messages (e.g. a file path).
        report_path (str): CSV file listing the failed rows (written even when empty, so an empty
            report proves that nothing was skipped).
        strict (bool): refuse the input instead of skipping the rows.

    Raises:
        InvalidRowsError: if :obj:`strict` and :obj:`errors` is not empty.
    """
    write_row_errors(errors, report_path)
    if not errors:
        return
    if strict:
        raise InvalidRowsError(errors, total, source)
    first = "; ".join(str(e) for e in errors[:3])
    more = f"; and {len(errors) - 3} more" if len(errors) > 3 else ""
    warnings.warn(
        f"skipped {len(errors)} of {total} rows of {source} (with their labels): {first}{more}. "
        f"Full list: {os.path.abspath(report_path)} (and splits.csv in a fit's run folder).",
        SkippedRowsWarning,
        stacklevel=3,
    )
