"""Writing a store (:mod:`graph_urpe.data.store`: a folder of plain arrays, one file per column)
chunk by chunk, resumable after a kill.

Writing appends every chunk's blocks to the files; :meth:`GraphStoreWriter.commit` records the
files' sizes in ``progress.json``, so a writer started again after a kill truncates the files to
the last commit (checking the kept bytes against the CRC-32s recorded then: a mismatch starts
the store again, with a warning) and continues from there. A column concatenated along an axis
``d > 0`` (e.g. ``[2, E]``) is written as ``prod(shape[:d])`` part files, one per leading index,
joined into the C-order file when the store is finished.
"""

from __future__ import annotations

import errno
import math
import os
import os.path as osp
import warnings
import zlib
from collections.abc import Sequence

import numpy as np

from graph_urpe.data.cache import CorruptCacheError
from graph_urpe.data.store import (
    MANIFEST,
    PROGRESS,
    READ_BLOCK,
    STORE_FORMAT,
    VERIFIED,
    Column,
    column_spec_ok,
    encode_strings,
    file_crc32,
    open_column,
    read_json,
    refuse_links_at,
    write_json,
)
from graph_urpe.files import OutputError
from graph_urpe.owned import open_no_follow

__all__ = ["GraphStoreWriter"]


class GraphStoreWriter:
    r"""Writes a store (:mod:`graph_urpe.data.store`) chunk by chunk (see the module docstring).

    Args:
        folder (str): where the files go (created).
        resume (bool, optional): continue after the last :meth:`commit` of an earlier writer on
            this folder when its ``progress.json`` is readable, truncating every file to the
            committed size; else (or without one) start empty, removing earlier files.
            (default: :obj:`False`)

    Attributes:
        committed (dict): the ``info`` of the last commit (``{}`` for a fresh store).
    """

    def __init__(self, folder: str, resume: bool = False) -> None:
        self.folder = folder
        os.makedirs(folder, exist_ok=True)
        refuse_links_at(folder)
        self.columns: dict[str, dict] = {}
        self.committed: dict = {}
        self.crcs: dict[str, int] = {}
        state = read_json(osp.join(folder, PROGRESS)) if resume else None
        if state is not None and state.get("format") == STORE_FORMAT and self._restore(state):
            return
        for name in os.listdir(folder):
            if name.endswith(".bin") or name in (PROGRESS, MANIFEST, VERIFIED):
                path = osp.join(folder, name)
                if osp.isdir(path):
                    raise OutputError(errno.EISDIR, f"{path} is a folder where the processed-data "
                                      "store keeps a file: remove it, or use a fresh data root")
                os.remove(path)
        self.columns, self.committed, self.crcs = {}, {}, {}

    def _restore(self, state: dict) -> bool:
        """Truncates every file to its committed size; :obj:`False` if ``progress.json`` is not
        one this writer wrote (a file name that is not one of its columns' plain base names, a
        malformed column), a file is missing, a link or shorter, or the kept bytes do not match
        the committed CRC-32 (with a warning naming the file)."""
        columns, sizes, crcs = state.get("columns"), state.get("sizes"), state.get("crcs")
        if not isinstance(columns, dict) or not isinstance(sizes, dict) or \
                not isinstance(crcs, dict) or set(crcs) != set(sizes) or \
                not isinstance(state.get("info"), dict):
            return False
        if not all(column_spec_ok(name, spec) for name, spec in columns.items()):
            return False
        self.columns = columns
        expected = {path for name in columns for path in self._files(name)}
        if set(sizes) != expected or not all(
                isinstance(sizes[p], int) and isinstance(crcs[p], int) for p in expected):
            return False
        for path, size in sizes.items():
            full = osp.join(self.folder, path)
            if osp.islink(full) or not osp.isfile(full) or osp.getsize(full) < size:
                return False
        for path, size in sizes.items():
            full = osp.join(self.folder, path)
            with open_no_follow(full, "r+b") as handle:
                handle.truncate(size)
            if file_crc32(full) != crcs[path]:
                warnings.warn(f"dataset cache file {full} does not match the checksum of its "
                              "last completed chunk; processing starts again from the first row",
                              stacklevel=3)
                return False
        self.committed, self.crcs = state["info"], dict(crcs)
        return True

    def _write(self, path: str, data: bytes, mode: str = "ab") -> None:
        """Writes (appends) :obj:`data` to file :obj:`path` of the folder, updating its CRC-32."""
        with open_no_follow(osp.join(self.folder, path), mode) as handle:
            handle.write(data)
        self.crcs[path] = zlib.crc32(data, self.crcs.get(path, 0) if mode == "ab" else 0)

    def _files(self, name: str) -> list[str]:
        spec = self.columns[name]
        parts = spec["parts"]
        return [f"{name}.slices.bin"] + ([f"{name}.bin"] if parts == 1 else
                                         [f"{name}.part{k}.bin" for k in range(parts)])

    def append(self, name: str, values: np.ndarray, counts: np.ndarray, cat_dim: int = 0,
               kind: str = "array") -> None:
        r"""Appends the blocks of some graphs to column :obj:`name` (created on first use).

        Args:
            name (str): the column (a file name stem: letters, digits, ``_``, ``-``, ``.``).
            values (numpy.ndarray): their blocks concatenated along :obj:`cat_dim`.
            counts (numpy.ndarray): ``int64`` ``[n]``, each graph's block length along it.
            cat_dim (int, optional): the axis. (default: :obj:`0`)
            kind (str, optional): ``"array"`` or ``"str"``. (default: :obj:`"array"`)

        Raises:
            ValueError: if the counts do not add up to the values' length along :obj:`cat_dim`,
                or the dtype or the other axes differ from the column's first blocks.
        """
        values = np.ascontiguousarray(values)
        counts = np.asarray(counts, dtype=np.int64)
        d = cat_dim % values.ndim
        if int(counts.sum()) != values.shape[d]:
            raise ValueError(f"column {name!r}: counts add up to {int(counts.sum())}, the values "
                             f"have {values.shape[d]} along axis {d}")
        other = [s for i, s in enumerate(values.shape) if i != d]
        spec = self.columns.get(name)
        if spec is None:
            spec = {"dtype": values.dtype.str, "shape": list(values.shape[:d]) + [0] + list(
                values.shape[d + 1:]), "cat_dim": d, "kind": kind,
                "parts": math.prod(values.shape[:d]), "graphs": 0}
            self.columns[name] = spec
            self._write(f"{name}.slices.bin", np.zeros(1, dtype=np.int64).tobytes(), "wb")
            for path in self._files(name)[1:]:
                self._write(path, b"", "wb")
        if values.dtype.str != spec["dtype"] or other != [s for i, s in enumerate(
                spec["shape"]) if i != spec["cat_dim"]] or d != spec["cat_dim"]:
            raise ValueError(
                f"attribute {name!r} changes from {spec['dtype']} {spec['shape']} (axis "
                f"{spec['cat_dim']}) to {values.dtype.str} {list(values.shape)} (axis {d}) "
                "between graphs: every graph must have the same attributes, dtypes and "
                "trailing shapes")
        start = spec["shape"][d]
        self._write(f"{name}.slices.bin", (start + np.cumsum(counts)).astype(np.int64).tobytes())
        leading = values.reshape(spec["parts"], -1) if spec["parts"] > 1 else [values]
        for path, block in zip(self._files(name)[1:], leading):
            self._write(path, np.ascontiguousarray(block).tobytes())
        spec["shape"][d] = start + values.shape[d]
        spec["graphs"] += len(counts)

    def append_strings(self, name: str, texts: Sequence[str]) -> None:
        """Appends one text per graph to the string column :obj:`name`."""
        blob, counts = encode_strings(texts)
        self.append(name, blob, counts, kind="str")

    def commit(self, info: dict) -> None:
        r"""Records the files' sizes and CRC-32s and :obj:`info` (JSON data: e.g. the rows done)
        in ``progress.json``: a writer resumed later starts from here."""
        sizes, crcs = self._sizes()
        state = {"format": STORE_FORMAT, "columns": self.columns, "sizes": sizes, "crcs": crcs,
                 "info": info}
        write_json(osp.join(self.folder, PROGRESS), state)
        self.committed = info

    def _sizes(self) -> tuple[dict[str, int], dict[str, int]]:
        paths = [path for name in self.columns for path in self._files(name)]
        return ({path: osp.getsize(osp.join(self.folder, path)) for path in paths},
                {path: self.crcs[path] for path in paths})

    def read(self, name: str) -> Column:
        """A committed or finished column, read back (e.g. to compute a split from it)."""
        self._join_parts(name)
        return open_column(self.folder, name, self.columns[name])

    def _join_parts(self, name: str) -> None:
        spec = self.columns[name]
        if spec["parts"] == 1:
            return
        target, crc = osp.join(self.folder, f"{name}.bin"), 0
        with open_no_follow(target, "wb") as out:
            for path in self._files(name)[1:]:
                full, part_crc = osp.join(self.folder, path), 0
                with open(full, "rb") as part:
                    while block := part.read(READ_BLOCK):
                        out.write(block)
                        crc, part_crc = zlib.crc32(block, crc), zlib.crc32(block, part_crc)
                if part_crc != self.crcs[path]:
                    raise CorruptCacheError(full, "its CRC-32 is not the one recorded when it "
                                            "was written")
        for path in self._files(name)[1:]:
            os.remove(osp.join(self.folder, path))
            del self.crcs[path]
        spec["parts"] = 1
        self.crcs[f"{name}.bin"] = crc

    def finish(self, meta: dict) -> None:
        r"""Joins part files and writes ``store.json`` (with :obj:`meta`, JSON data) last: from
        then on :func:`~graph_urpe.data.store.read_store` opens the store; ``progress.json`` is
        removed."""
        for name in self.columns:
            self._join_parts(name)
        sizes, crcs = self._sizes()
        manifest = {"format": STORE_FORMAT, "columns": self.columns, "sizes": sizes,
                    "crcs": crcs, "meta": meta}
        write_json(osp.join(self.folder, MANIFEST), manifest)
        progress = osp.join(self.folder, PROGRESS)
        if osp.exists(progress):
            os.remove(progress)
