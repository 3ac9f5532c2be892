"""Byte-reproducible gzip-compressed CSV files.

Builders in :mod:`graph_urpe.data` write CSV files that are committed or compared between runs, so
the bytes must not depend on the time or file name: gzip headers normally embed both. These
helpers write with ``mtime=0`` and an empty stored name, so running a builder twice gives identical
files.
"""

from __future__ import annotations

import gzip
import io
import os

import pandas as pd


def write_csv_gz(frame: pd.DataFrame, path: str | os.PathLike, header: bool = True,
                 float_format: str | None = None) -> None:
    r"""Writes :obj:`frame` as a deterministic gzip-compressed CSV (no index column).

    Args:
        frame (pandas.DataFrame): the table to write.
        path (str or os.PathLike): output file (``.csv.gz``); parent folders are created.
        header (bool, optional): write the column names as the first line; OGB's raw files have no
            header. (default: :obj:`True`)
        float_format (str, optional): ``%``-format for floats, e.g. ``"%.10g"``.
            (default: :obj:`None`, pandas' shortest round-trip representation)
    """
    text = frame.to_csv(index=False, header=header, float_format=float_format, lineterminator="\n")
    write_bytes_gz(text.encode("utf-8"), path)


def write_bytes_gz(payload: bytes, path: str | os.PathLike) -> None:
    r"""Gzip-compresses :obj:`payload` into :obj:`path` with a fixed header (``mtime=0``, no name).

    Args:
        payload (bytes): uncompressed content.
        path (str or os.PathLike): output file; parent folders are created.
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as gz:
        gz.write(payload)
    with open(path, "wb") as f:
        f.write(buffer.getvalue())
