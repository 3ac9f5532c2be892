"""A folder of plain arrays, written chunk by chunk and read back as memory maps: the on-disk form
of a processed graph dataset that does not fit in memory.

A store is a set of named **columns**. A column is the concatenation, along one axis (its
``cat_dim``), of one block per graph, exactly as PyG's collate concatenates an attribute of a list
of graphs (``x`` along dimension 0, ``edge_index`` along dimension 1), plus ``slices`` ``[N + 1]``
(the bounds of every graph's block along that axis), as in PyG's
:class:`~torch_geometric.data.InMemoryDataset`. A column of strings is a byte column (the UTF-8
texts one after the other) whose slices are the texts' offsets.

On disk every column is one raw little-endian file ``<name>.bin`` (C order) and one
``<name>.slices.bin`` (``int64``); ``store.json`` (written last, atomically) names each column's
dtype, shape, axis and kind and each file's size in bytes and CRC-32 (computed while the chunks are
appended, see :func:`zlib.crc32`). Nothing is pickled: the files are bytes
and JSON, read with :class:`numpy.memmap` in copy-on-write mode (``mode="c"``), so the pages are
file-backed (not anonymous memory), loaded on first touch, and processes on one machine that open
the same store (DDP ranks, loader workers) share one copy through the page cache.

Writing (:class:`~graph_urpe.data.store_writer.GraphStoreWriter`) appends every chunk's blocks
to the files and resumes after a kill from its last commit.

Reading (:func:`read_store`) checks every file against ``store.json`` (size, then CRC-32 in one
streaming pass over all files) and every column's slices (start 0, non-decreasing, end at the
column's length), so a truncated, changed or inconsistent store is refused with
:class:`~graph_urpe.data.cache.CorruptCacheError` naming the file (the files are data only: nothing
in them is run). The CRC-32 pass reads the whole store (about 0.35-0.55 CPU s per GB with the
files in the page cache, 0.65-2 CPU s per GB from disk, measured 2026-12-02 on a shared 2-core
machine), so it is done once: after a full check passes, ``verified.json`` records the manifest's
SHA-256 and every file's ``os.stat`` identity (device, inode, size, modification and change times
in nanoseconds), as git's index records the files it hashed; a later open whose manifest and files
still have that identity checks sizes and slices only. Anything that writes a file changes its
change time (which no program can set back), and a copied, moved, replaced or touched file has
another identity, so it is checked in full again; so is a file whose change time is not older than
``verified.json`` itself (it may have been written in the same tick of the file system's clock,
after the check: git's "racy" entries). ``verified.json`` is a cache of a check, never trusted
beyond the identities it names (a missing, unreadable or hostile one means a full check).
A folder that cannot be written is checked in full at every open.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import os.path as osp
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graph_urpe.data.cache import CorruptCacheError
from graph_urpe.files import OutputError, atomic_write
from graph_urpe.owned import own_name, refuse_links

STORE_FORMAT = 2
"""Version of the layout of ``store.json`` and the files it names (1 had no checksums)."""

READ_BLOCK = 16 << 20
"""Bytes read at a time when checksumming a file."""

MANIFEST = "store.json"
PROGRESS = "progress.json"
VERIFIED = "verified.json"
"""The record of the last full check of a store's files (their identity: module docstring)."""


@dataclass
class Column:
    r"""One column of a store, as read by :func:`read_store`.

    Attributes:
        values (numpy.ndarray): the concatenated blocks (a copy-on-write memory map; a plain
            empty array when the column is empty), ``dtype`` and shape as stored.
        slices (numpy.ndarray): ``int64`` ``[N + 1]``, graph ``i``'s block is
            ``values`` from ``slices[i]`` to ``slices[i + 1]`` along :attr:`cat_dim`.
        cat_dim (int): the axis the blocks are concatenated along.
        kind (str): ``"array"`` or ``"str"`` (UTF-8 texts, see :class:`StringColumn`).
    """

    values: np.ndarray
    slices: np.ndarray
    cat_dim: int
    kind: str


class StringColumn(Sequence):
    r"""The texts of a string column, read on access (nothing decoded up front).

    Args:
        blob (numpy.ndarray): ``uint8``, the UTF-8 texts one after the other.
        offsets (numpy.ndarray): ``int64`` ``[N + 1]``, text ``i`` is ``blob[offsets[i]:
            offsets[i + 1]]``.
    """

    def __init__(self, blob: np.ndarray, offsets: np.ndarray) -> None:
        self.blob, self.offsets = blob, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = int(index)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"text {index} of {len(self)}")
        return self.blob[self.offsets[i]:self.offsets[i + 1]].tobytes().decode("utf-8")

    def __repr__(self) -> str:
        return f"StringColumn({len(self)})"


def encode_strings(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    r"""``(blob, counts)``: ``uint8`` UTF-8 bytes of :obj:`texts` one after the other and the
    ``int64`` byte count of each (the block of a string column)."""
    encoded = [t.encode("utf-8") for t in texts]
    counts = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), counts


def refuse_links_at(folder: str) -> None:
    """A store folder, its parent (``processed/``, which graph-urpe makes) and its files are no
    symbolic links (:class:`~graph_urpe.owned.LinkRefusedError` otherwise)."""
    parent = osp.dirname(osp.abspath(folder))
    if osp.islink(parent):
        refuse_links(parent, depth=0, what="data root")
    refuse_links(folder, depth=0, what="processed-data store")


def column_spec_ok(name: object, spec: object) -> bool:
    """A column entry of ``progress.json`` / ``store.json`` as :meth:`GraphStoreWriter.append
    <graph_urpe.data.store_writer.GraphStoreWriter.append>` writes it: a plain name, a known
    kind, a NumPy dtype, non-negative integer sizes."""
    if own_name(name) is None or not isinstance(spec, dict):
        return False
    shape, d = spec.get("shape"), spec.get("cat_dim")
    if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape) or \
            not isinstance(d, int) or not 0 <= d < max(len(shape), 1) or \
            spec.get("kind") not in ("array", "str") or \
            not isinstance(spec.get("graphs"), int) or spec["graphs"] < 0:
        return False
    if spec.get("parts") not in (1, math.prod(shape[:d])):
        return False
    try:
        np.dtype(spec.get("dtype"))
    except TypeError:
        return False
    return isinstance(spec.get("dtype"), str)


def write_json(path: str, value: dict) -> None:
    """Writes :obj:`value` as JSON to :obj:`path`, atomically (``progress.json``,
    ``store.json``, ``verified.json``)."""
    with atomic_write(path, "w") as handle:
        json.dump(value, handle)


def read_json(path: str) -> dict | None:
    """The JSON object in :obj:`path`, or :obj:`None` for a file that is missing, unreadable,
    not JSON or not an object."""
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _identity(folder: str, manifest_path: str, sizes: dict[str, int]) -> dict:
    """What ``verified.json`` records after a full check (see the module docstring): the
    manifest's SHA-256 and each file's ``[device, inode, size, mtime_ns, ctime_ns]``."""
    def stat(path: str) -> list[int]:
        info = os.stat(path, follow_symlinks=False)
        return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]

    with open(manifest_path, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    return {"manifest_sha256": digest, "manifest": stat(manifest_path),
            "files": {path: stat(osp.join(folder, path)) for path in sorted(sizes)}}


def _verified(stamp_path: str, identity: dict) -> bool:
    """Whether ``verified.json`` records :obj:`identity` and was written after every file last
    changed: a file whose change time is not older than the record could have been written in
    the same tick of the file system's clock after the check (git's "racy" entries)."""
    try:
        written = os.stat(stamp_path, follow_symlinks=False).st_mtime_ns
    except OSError:
        return False
    changed = [identity["manifest"][4], *(entry[4] for entry in identity["files"].values())]
    return max(changed) < written and read_json(stamp_path) == identity


def file_crc32(path: str) -> int:
    """CRC-32 (:func:`zlib.crc32`) of a file's bytes, read :data:`READ_BLOCK` at a time."""
    crc = 0
    with open(path, "rb") as handle:
        while block := handle.read(READ_BLOCK):
            crc = zlib.crc32(block, crc)
    return crc


def _memmap(path: str, dtype: str, shape: Sequence[int]) -> np.ndarray:
    if math.prod(shape) == 0:
        return np.zeros(shape, dtype=dtype)
    # A plain ndarray over the map (which it keeps open): indexing a np.memmap costs 2 us more.
    return np.memmap(path, dtype=np.dtype(dtype), mode="c", shape=tuple(shape)).view(np.ndarray)


def open_column(folder: str, name: str, spec: dict) -> Column:
    """Column :obj:`name` of the store in :obj:`folder`, as its entry :obj:`spec` of
    ``store.json`` / ``progress.json`` describes it, memory-mapped; its slices checked to cover
    its values (:class:`~graph_urpe.data.cache.CorruptCacheError` otherwise)."""
    path = osp.join(folder, f"{name}.bin")
    graphs, d = int(spec["graphs"]), int(spec["cat_dim"])
    slices = _memmap(osp.join(folder, f"{name}.slices.bin"), "<i8", [graphs + 1])
    values = _memmap(path, spec["dtype"], spec["shape"])
    ends = slices[[0, -1]] if graphs else np.zeros(2, dtype=np.int64)
    if ends[0] != 0 or ends[1] != spec["shape"][d] or (np.diff(slices) < 0).any():
        raise CorruptCacheError(osp.join(folder, f"{name}.slices.bin"),
                                f"column {name!r}: its slices do not cover its values")
    return Column(values, slices, d, spec["kind"])


def read_store(folder: str) -> tuple[dict[str, Column], dict]:
    r"""Opens a finished store (see the module docstring).

    Args:
        folder (str): the store's folder.

    Returns:
        ``(columns, meta)``: every column by name, and the ``meta`` given to
        :meth:`GraphStoreWriter.finish <graph_urpe.data.store_writer.GraphStoreWriter.finish>`.

    Raises:
        FileNotFoundError: if ``store.json`` does not exist (no finished store).
        CorruptCacheError: naming the file, for an unreadable ``store.json``, a missing file or
            one of another size than recorded, one of another CRC-32 (checked unless
            ``verified.json`` records the files' present identity), or slices that do not cover
            their column.
    """
    refuse_links_at(folder)
    manifest_path = osp.join(folder, MANIFEST)
    if not osp.exists(manifest_path):
        raise FileNotFoundError(f"no finished store in {folder} ({MANIFEST} is missing)")
    manifest = read_json(manifest_path)
    if manifest is None or manifest.get("format") != STORE_FORMAT or not isinstance(
            manifest.get("columns"), dict) or not isinstance(manifest.get("sizes"), dict) or \
            not isinstance(manifest.get("crcs"), dict) or set(manifest["crcs"]) != set(
                manifest["sizes"]) or not all(
                column_spec_ok(n, spec) for n, spec in manifest["columns"].items()) or not all(
                own_name(path) == path for path in manifest["sizes"]):
        raise CorruptCacheError(manifest_path, "not a readable store manifest")
    for path, size in manifest["sizes"].items():
        full = osp.join(folder, path)
        actual = osp.getsize(full) if osp.isfile(full) else None
        if actual != size:
            raise CorruptCacheError(full, f"{actual} bytes, the manifest says {size}"
                                    if actual is not None else "missing")
    identity = _identity(folder, manifest_path, manifest["sizes"])
    if not _verified(osp.join(folder, VERIFIED), identity):
        for path, crc in manifest["crcs"].items():
            full = osp.join(folder, path)
            if file_crc32(full) != crc:
                raise CorruptCacheError(full, "its bytes changed: CRC-32 differs from the "
                                        "manifest's")
        try:
            write_json(osp.join(folder, VERIFIED), identity)
        except OutputError:
            pass  # a folder this user cannot write: the full check again at the next open
    try:
        columns = {name: open_column(folder, name, spec)
                   for name, spec in manifest["columns"].items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptCacheError(manifest_path, f"{type(exc).__name__}: {exc}") from None
    return columns, manifest.get("meta", {})
