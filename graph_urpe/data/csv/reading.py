"""Reading a user's CSV file (``fit``'s molecules, ``predict``'s inputs) with one-line errors
that name the file and the fix: a folder, an empty file, a binary or non-UTF-8 file (UTF-16,
Latin-1), a malformed table, or duplicate column names (pandas would silently rename the second
``target`` to ``target.1`` and use the first).

The separator is read from the header line (:func:`csv_format`): commas, or semicolons (the
"CSV" of Excel where the decimal mark is a comma, e.g. German or French settings; then numbers
such as ``-3,25`` are read with a decimal comma) or tabs when the header holds no comma.
"""

from __future__ import annotations

import bz2
import contextlib
import csv
import difflib
import gzip
import io
import lzma
import os
import os.path as osp
import re
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pandas as pd

__all__ = ["check_field_counts", "csv_format", "csv_header", "iter_csv_file", "missing_columns",
           "read_csv_file"]

_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
"""Compressed CSVs pandas reads by their suffix (others, e.g. ``.zip``, are read by pandas)."""


def _refuse_unreadable(path: str) -> None:
    if osp.isdir(path):
        raise ValueError(f"{path} is a folder, not a CSV file: pass the file's path.")
    if not osp.exists(path):
        raise FileNotFoundError(f"{path} not found: pass an existing CSV file.")
    if osp.getsize(path) == 0:
        raise ValueError(f"{path} is empty (0 bytes): it needs a header line naming its columns, "
                         "then one molecule per line.")


def _not_text(path: str, err: UnicodeDecodeError) -> ValueError:
    """One line naming the first byte of ``path`` that is not UTF-8: its CSV line, the byte's
    place in that line (1-based) and in the file (0-based, of the decompressed text). The
    decoder's own position is within the block it was decoding, so the file is read again, line
    by line, to find it."""
    where = f"byte 0x{err.object[err.start]:02x}"
    located = _first_bad_byte(path)
    if located is not None:
        line, column, offset, byte = located
        where = f"byte 0x{byte:02x} on line {line:,}, column {column} (byte {offset:,} of the file)"
    return ValueError(f"{path} is not UTF-8 text ({where}: a binary file, or UTF-16 / Latin-1 "
                      "text): save it as a UTF-8 CSV.")


def _first_bad_byte(path: str) -> tuple[int, int, int, int] | None:
    """``(line, column, offset, byte)`` of the first byte of ``path`` that is not UTF-8, or
    :obj:`None` when it cannot be read again."""
    opener = _OPENERS.get(osp.splitext(path)[1].lower(), open)
    offset = 0
    try:
        with opener(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    return number, err.start + 1, offset + err.start, raw[err.start]
                offset += len(raw)
    except (OSError, EOFError, lzma.LZMAError):
        return None
    return None


_DECIMAL_COMMA = re.compile(r"[-+]?\d+,\d+([eE][-+]?\d+)?")
_DECIMAL_POINT = re.compile(r"[-+]?\d*\.\d+([eE][-+]?\d+)?")


def _first_lines(path: str, count: int) -> list[str]:
    """Up to ``count`` decoded lines from the start of ``path`` (:func:`csv_header` has checked
    that it is readable UTF-8 text)."""
    opener = _OPENERS.get(osp.splitext(path)[1].lower(), open)
    with opener(path, "rb") as handle:
        raw = [handle.readline(1 << 20) for _ in range(count)]
    return [line.decode("utf-8-sig", errors="replace") for line in raw if line]


def _separator(header: str) -> str:
    if "," in header:
        return ","
    return ";" if ";" in header else "\t" if "\t" in header else ","


def csv_format(path: str) -> dict[str, str]:
    r"""How to split a CSV file's lines: its separator, read from the header line (a comma if it
    holds one, else a semicolon, else a tab), and for a semicolon-separated file its decimal
    mark (a comma when the first 100 data lines hold numbers such as ``-3,25`` and none such as
    ``-3.25``).

    Args:
        path (str): the file.

    Returns:
        dict[str, str]: :func:`pandas.read_csv`'s ``sep``, and ``decimal`` when it is a comma.

    Raises:
        FileNotFoundError, ValueError: see :func:`csv_header`.
    """
    csv_header(path)
    lines = _first_lines(path, 101)
    sep = _separator(lines[0])
    if sep != ";":
        return {"sep": sep}
    fields = [f.strip().strip('"') for line in lines[1:] for f in line.rstrip("\r\n").split(sep)]
    comma = any(_DECIMAL_COMMA.fullmatch(f) for f in fields)
    point = any(_DECIMAL_POINT.fullmatch(f) for f in fields)
    return {"sep": sep, "decimal": ","} if comma and not point else {"sep": sep}


def csv_header(path: str) -> list[str]:
    r"""The column names of a CSV file's header line, checked.

    Args:
        path (str): the file.

    Returns:
        list[str]: the names, in order.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: a folder, an empty or binary file, a file that is not UTF-8, a blank header,
            or duplicate column names (one line naming the file and the fix).
    """
    _refuse_unreadable(path)
    opener = _OPENERS.get(osp.splitext(path)[1].lower(), open)
    try:
        with opener(path, "rb") as handle:
            first = handle.readline(1 << 20)
    except (OSError, EOFError, lzma.LZMAError) as err:
        raise ValueError(f"cannot read {path}: {err} (a damaged compressed file?).") from None
    if b"\0" in first:
        raise ValueError(f"{path} holds NUL bytes: a binary file or UTF-16 text, not a CSV; save "
                         "it as a UTF-8 CSV.")
    try:
        line = first.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise _not_text(path, err) from None
    names = next(csv.reader(io.StringIO(line), delimiter=_separator(line)), [])
    if not any(n.strip() for n in names):
        raise ValueError(f"{path} has no header line (its first line is blank): the first line "
                         "must name the columns.")
    twice = sorted(n for n, c in Counter(names).items() if c > 1)
    if twice:
        raise ValueError(f"{path} names the column(s) {twice} more than once: give every column "
                         "its own name (which one is meant would be a guess).")
    return names


@contextlib.contextmanager
def _one_line(path: str) -> Iterator[None]:
    """pandas' decoding and parsing errors of ``path`` as one line naming it."""
    try:
        yield
    except UnicodeDecodeError as err:
        raise _not_text(path, err) from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path} has no header line (only blank content): the first line must "
                         "name the columns.") from None
    except pd.errors.ParserError as err:
        reason = (str(err).strip().splitlines() or [""])[0]
        raise ValueError(f"{path} is not a well-formed CSV ({reason}): every line needs as many "
                         "fields as the header (quote fields holding the separator)."
                         ) from None
    except OSError as err:
        raise ValueError(f"cannot read {path}: {os.strerror(err.errno) if err.errno else err}."
                         ) from None


def check_field_counts(path: str, sep: str) -> None:
    r"""Refuse a CSV file with a line of more or fewer fields than its header, naming its data
    row (0-based, blank lines counted, as ``fit`` and ``predict`` number rows) and its CSV line.
    pandas fills a short line's missing fields with empty cells (a label silently missing) and
    takes a first line with one field too many as an index column (every column shifted): both
    are refused here, before pandas reads the file. A blank line (no field holding text) stays a
    row. One streaming pass with :mod:`csv` (its quoting is pandas' defaults: ``"`` doubled
    inside quotes): 0.6 s per million short lines (pandas then reads them in 0.2 s).

    Args:
        path (str): the file (``.gz`` / ``.bz2`` / ``.xz`` read through their decompressor).
        sep (str): its separator (:func:`csv_format`).

    Raises:
        ValueError: ``"<path> is not a well-formed CSV (row R (CSV line L) has N fields, the
            header M) ..."``, with the fix.
    """
    opener = _OPENERS.get(osp.splitext(path)[1].lower(), open)
    limit = csv.field_size_limit(sys.maxsize)  # a long SMILES is a field like any other
    try:
        with _one_line(path), opener(path, "rt", encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle, delimiter=sep)
            width, end = len(next(reader, [])), reader.line_num
            for row, fields in enumerate(reader):
                start, end = end + 1, reader.line_num
                if len(fields) == width or (len(fields) < width
                                            and not any(map(str.strip, fields))):
                    continue
                raise ValueError(
                    f"{path} is not a well-formed CSV (row {row} (CSV line {start}) has "
                    f"{len(fields)} field{'s' * (len(fields) != 1)}, the header {width}): every "
                    "line needs as many fields as the header (an empty cell is an empty field: "
                    f"{sep.join(['CCO', '', '1'])!r}; quote fields holding the separator).")
    except csv.Error as err:
        raise ValueError(f"{path} is not a well-formed CSV ({err}): save it again as a UTF-8 CSV."
                         ) from None
    finally:
        csv.field_size_limit(limit)


def missing_columns(path: str, named: str, missing: list[str], columns: list[str],
                    fix: str) -> ValueError:
    """The one-line error for columns the header of ``path`` lacks: it names the header's line
    (line 1), its columns, the closest name of each missing one (a case or spelling difference,
    :func:`difflib.get_close_matches`) and the fix.

    Args:
        path (str): the CSV file.
        named (str): what is missing, as the message starts, e.g. ``"SMILES column 'smiles'"``.
        missing (list[str]): the column names not found.
        columns (list[str]): the header's column names.
        fix (str): how to name the right columns, e.g. ``"name it with --smiles_column NAME"``.

    Returns:
        ValueError: ``"<named> not found in the header (line 1) of <path>, whose columns are
        [...]; 'smiles' may be 'SMILES': <fix>"``, to raise.
    """
    folded = {c.casefold(): c for c in columns}
    hints = []
    for name in missing:
        match = folded.get(name.casefold()) or next(
            iter(difflib.get_close_matches(name, columns, n=1, cutoff=0.6)), None)
        if match is not None:
            hints.append(f"; {name!r} may be {match!r}")
    return ValueError(f"{named} not found in the header (line 1) of {path}, whose columns are "
                      f"{list(columns)}{''.join(hints)}: {fix}")


def _check(path: str) -> dict[str, str]:
    """Check ``path`` (:func:`csv_header`, :func:`check_field_counts`); its :func:`csv_format`
    (pandas' defaults for archives pandas opens, whose lines are not counted here)."""
    if osp.splitext(path)[1].lower() in (".zip", ".zst", ".tar"):  # pandas opens these
        _refuse_unreadable(path)
        return {}
    found = csv_format(path)
    check_field_counts(path, found["sep"])
    return found


def read_csv_file(path: str, **kwargs: Any) -> pd.DataFrame:
    r""":func:`pandas.read_csv` of a user's file after :func:`csv_header`'s checks, with its
    separator and decimal mark from :func:`csv_format` (unless given) and its decoding and
    parsing errors turned into one line naming the file.

    Args:
        path (str): the file.
        **kwargs: passed to :func:`pandas.read_csv`.

    Raises:
        FileNotFoundError, ValueError: see :func:`csv_header`; a malformed table.
    """
    kwargs = {**_check(path), **kwargs}
    with _one_line(path):
        return pd.read_csv(path, **kwargs)


def iter_csv_file(path: str, chunksize: int, **kwargs: Any) -> Iterator[pd.DataFrame]:
    r""":func:`read_csv_file` in chunks of at most ``chunksize`` rows, read as they are needed
    (a bad byte far into the file is one line too, when its chunk is read).

    Raises:
        FileNotFoundError, ValueError: as :func:`read_csv_file`.
    """
    kwargs = {**_check(path), **kwargs}
    with _one_line(path), pd.read_csv(path, chunksize=chunksize, **kwargs) as reader:
        yield from reader
