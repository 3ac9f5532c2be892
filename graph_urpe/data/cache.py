"""Reading processed dataset caches back safely: ``torch.load(weights_only=True)`` with an allow-list,
on every dataset of :mod:`graph_urpe.data`, and a clear answer for a damaged cache.

A processed cache (``data.pt``, ``split.pt``, ``pre_transform.pt``, ...) is a pickle, and unpickling
an arbitrary pickle runs arbitrary code. PyG 2.8's :class:`~torch_geometric.data.Dataset` reads
``pre_transform.pt`` / ``pre_filter.pt`` with ``weights_only=False``, and
:func:`torch_geometric.io.fs.torch_load` (used by ``InMemoryDataset.load``) retries ``data.pt``
with ``weights_only=False`` when the safe load fails; OGB 1.3.6 uses a bare ``torch.load``.
:class:`SafeCacheMixin` replaces PyG's ``_process`` and ``load`` so that every file is read with
:func:`safe_torch_load`; OGB's own reads run under :func:`ogb_safe_construction`, which checks
that PyTorch's default is the safe load and names the file when one is refused. Nothing here
turns ``weights_only`` off.

Outcomes of reading a cache file:

* a file holding anything but allow-listed classes (:data:`SAFE_GLOBALS`): :class:`UnsafeCacheError`
  naming the file, nothing executed, nothing rebuilt (the file is evidence; delete it yourself);
* a truncated or empty file: :class:`CorruptCacheError`; :class:`SafeCacheMixin` then warns once,
  deletes the processed files and processes the raw data again.
"""

from __future__ import annotations

import contextlib
import os
import os.path as osp
import pickle
import warnings
import zipfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
from torch_geometric.data.storage import GlobalStorage

RECORD_FILES = ("pre_transform.pt", "pre_filter.pt")
"""Files PyG writes into ``processed_dir`` recording ``repr(pre_transform)`` / ``repr(pre_filter)``."""


def _numpy_array_globals() -> list:
    """Classes the safe unpickler needs to rebuild a pickled ``numpy.ndarray`` of int64/float."""
    try:
        from numpy._core.multiarray import _reconstruct  # NumPy >= 2
    except ImportError:  # pragma: no cover - NumPy 1.x
        from numpy.core.multiarray import _reconstruct
    return [_reconstruct, np.ndarray, np.dtype, type(np.dtype(np.int64)),
            type(np.dtype(np.float64)), type(np.dtype(np.float32))]


SAFE_GLOBALS = [Data, DataEdgeAttr, DataTensorAttr, GlobalStorage, *_numpy_array_globals()]
"""Classes allowed in a cache file besides tensors and Python containers: PyG's
:class:`~torch_geometric.data.Data` and its storages, and NumPy arrays (OGB's split dictionaries)."""


class UnsafeCacheError(pickle.UnpicklingError):
    r"""A cache file holds objects outside :data:`SAFE_GLOBALS` (possibly a tampered file); it was
    not unpickled. :attr:`path` names the file."""

    def __init__(self, path: str, detail: str = "") -> None:
        self.path = path
        # PyTorch's text advises retrying with weights_only=False: keep only the line that names
        # the refused object (e.g. "Unsupported global: GLOBAL os.system").
        named = [line.strip() for line in detail.splitlines() if "global" in line.lower()]
        first = f" ({named[0]})" if named else ""
        super().__init__(
            f"refusing to load {path}: it holds objects that are not plain tensors or PyG "
            f"data{first}; it may have been tampered with. Nothing in it was run. Delete the file "
            "(or its processed folder) to rebuild the cache from the raw data."
        )


class CorruptCacheError(RuntimeError):
    r"""A cache file cannot be read (truncated, empty, not a PyTorch file). :attr:`path` names it."""

    def __init__(self, path: str, detail: str = "") -> None:
        self.path = path
        first = detail.strip().splitlines()[0] if detail.strip() else "unreadable"
        super().__init__(f"dataset cache file {path} is corrupt ({first})")


def allow_safe_globals() -> None:
    r"""Allow-lists :data:`SAFE_GLOBALS` process-wide with
    :func:`torch.serialization.add_safe_globals` (idempotent), for loaders that call ``torch.load``
    themselves (OGB's datasets)."""
    torch.serialization.add_safe_globals(SAFE_GLOBALS)


def safe_torch_load(path: str) -> Any:
    r"""``torch.load(path, weights_only=True, map_location="cpu")`` with :data:`SAFE_GLOBALS`
    allowed for this call (a :func:`torch.serialization.safe_globals` context).

    Raises:
        UnsafeCacheError: if the file holds any other class or callable (nothing is executed).
        CorruptCacheError: if the file is empty, truncated or not a PyTorch file.
        FileNotFoundError: if it does not exist.
        PermissionError: if it cannot be read.
    """
    if not osp.exists(path):
        raise FileNotFoundError(f"dataset cache file {path} does not exist")
    # Only the classes not yet allowed: leaving the context removes what it added, and would
    # otherwise remove PyG's own process-wide registrations (e.g. Data) too.
    present = set(torch.serialization.get_safe_globals())
    extra = [g for g in SAFE_GLOBALS if g not in present]
    try:
        with torch.serialization.safe_globals(extra):
            return torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as exc:
        if "weights only" in str(exc).lower() or "weights_only" in str(exc):
            raise UnsafeCacheError(path, str(exc)) from None
        raise CorruptCacheError(path, str(exc)) from None
    except PermissionError:
        raise
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError, KeyError) as exc:
        # A truncated zip: RuntimeError or OSError(EINVAL) from PyTorch's reader; empty: EOFError.
        raise CorruptCacheError(path, f"{type(exc).__name__}: {exc}") from None


def check_zip_cache(path: str) -> None:
    r"""Cheap integrity check of a ``torch.save`` file without unpickling it: the zip central
    directory must be readable (a truncated or empty file fails).

    Raises:
        CorruptCacheError: naming the file.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise CorruptCacheError(path, f"{type(exc).__name__}: {exc}") from None


def pyg_repr(obj: Any) -> str:
    """``repr`` PyG records for a pre-transform / pre-filter (memory addresses removed), as
    ``torch_geometric.data.dataset._repr`` computes it."""
    import re

    return "None" if obj is None else re.sub(r"(<.*?)\s.*(>)", r"\1\2", str(obj))


def check_records(processed_dir: str, pre_transform: Callable | None,
                  pre_filter: Callable | None = None) -> bool:
    r"""Checks ``pre_transform.pt`` / ``pre_filter.pt`` of a processed folder with
    :func:`safe_torch_load`.

    Returns:
        bool: :obj:`False` if a record file is corrupt (it is deleted, with a warning: process
        again), else :obj:`True`.

    Raises:
        UnsafeCacheError: if a record holds anything but allow-listed objects.
        ValueError: if a record names another transform / filter than the given one (the cached
            graphs would be stale); the message says which folder to delete.
    """
    ok = True
    for name, fn in zip(RECORD_FILES, (pre_transform, pre_filter)):
        path = osp.join(processed_dir, name)
        if not osp.exists(path):
            continue
        try:
            recorded = safe_torch_load(path)
        except CorruptCacheError as exc:
            warnings.warn(f"{exc}; it will be rebuilt", stacklevel=3)
            os.remove(path)
            ok = False
            continue
        if recorded != pyg_repr(fn):
            what = name.removesuffix(".pt")
            raise ValueError(
                f"{processed_dir} was processed with {what} {recorded}, not {pyg_repr(fn)}; delete "
                f"that folder (or pass force_reload=True where available) to process again"
            )
    return ok


class SafeCacheMixin:
    r"""For PyG :class:`~torch_geometric.data.Dataset` subclasses (put it first in the bases):
    every processed file is read with :func:`safe_torch_load`, a corrupt cache is rebuilt with a
    warning, and a cache made with another ``pre_transform`` is refused (:func:`check_records`).

    Replaces PyG 2.8's ``Dataset._process`` (same steps, safe reads) and
    ``InMemoryDataset.load``; adds :meth:`_read_cache` for extra files (e.g. ``split.pt``).
    Checking and processing run under :meth:`_cache_lock` (none by default).
    """

    def _cache_lock(self) -> contextlib.AbstractContextManager:
        """Held while the cache is checked, processed or rebuilt: a subclass returns a lock
        shared with other processes so that they never write one cache at once."""
        return contextlib.nullcontext()

    def _process(self) -> None:
        with self._cache_lock():
            fresh = bool(getattr(self, "force_reload", False))
            records_ok = fresh or check_records(self.processed_dir, self.pre_transform,
                                                self.pre_filter)
            if not fresh and records_ok and self.processed_paths and all(
                    osp.exists(p) for p in self.processed_paths):
                return
            self._run_process()

    def _run_process(self) -> None:
        os.makedirs(self.processed_dir, exist_ok=True)
        self.process()
        torch.save(pyg_repr(self.pre_transform), osp.join(self.processed_dir, RECORD_FILES[0]))
        torch.save(pyg_repr(self.pre_filter), osp.join(self.processed_dir, RECORD_FILES[1]))

    def _read_cache(self, paths: Sequence[str],
                    reader: Callable[[str], Any] = safe_torch_load) -> list[Any]:
        r"""Reads processed files with :obj:`reader`; if one is corrupt, takes
        :meth:`_cache_lock` and reads them again (another process may have rebuilt them); if
        still corrupt, warns (naming the file), deletes the processed files, processes again and
        reads the new files.

        Args:
            paths (Sequence[str]): the files.
            reader (Callable, optional): reads one file; raises :class:`CorruptCacheError` for a
                damaged one. (default: :func:`safe_torch_load`)

        Raises:
            UnsafeCacheError: if a file holds non-allow-listed objects (never rebuilt silently).
        """
        try:
            return [reader(p) for p in paths]
        except CorruptCacheError:
            with self._cache_lock():
                try:
                    return [reader(p) for p in paths]
                except CorruptCacheError as exc:
                    warnings.warn(f"{exc}; rebuilding the processed dataset", stacklevel=3)
                for p in self.processed_paths:
                    if osp.exists(p):
                        os.remove(p)
                self._run_process()
                return [reader(p) for p in paths]

    def load(self, path: str, data_cls: type = Data) -> None:
        r"""Safe replacement of :meth:`torch_geometric.data.InMemoryDataset.load`."""
        (out,) = self._read_cache([path])
        self._set_data(out, path, data_cls)

    def _set_data(self, out: Any, path: str, data_cls: type = Data) -> None:
        """Installs the ``(data_dict, slices[, data_cls])`` tuple read from :obj:`path`."""
        if not isinstance(out, tuple) or len(out) not in (2, 3):
            raise CorruptCacheError(path, "not a PyG InMemoryDataset file")
        data, self.slices = out[0], out[1]
        if len(out) == 3:
            data_cls = out[2]
        self.data = data_cls.from_dict(data) if isinstance(data, dict) else data


def require_safe_default_load() -> None:
    r"""Refuses to run a third-party loader that calls ``torch.load`` without ``weights_only``
    (OGB) when the environment makes that call unsafe.

    Raises:
        RuntimeError: if ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` is set to a true value.
    """
    if os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0").lower() in ("1", "y", "yes", "true"):
        raise RuntimeError(
            "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD is set, which would make OGB's dataset loading "
            "unpickle arbitrary code; unset it to load this dataset"
        )


@contextlib.contextmanager
def ogb_safe_construction(cache_files: Sequence[str]) -> Iterator[None]:
    r"""Context for constructing an OGB dataset (whose ``torch.load`` calls use PyTorch's default,
    ``weights_only=True``): checks that default (:func:`require_safe_default_load`), allow-lists
    :data:`SAFE_GLOBALS`, deletes corrupt :obj:`cache_files` (with a warning; OGB rebuilds them)
    and turns a refused unpickling into :class:`UnsafeCacheError` naming the files.
    """
    require_safe_default_load()
    allow_safe_globals()
    for path in cache_files:
        if osp.exists(path):
            try:
                check_zip_cache(path)
            except CorruptCacheError as exc:
                warnings.warn(f"{exc}; rebuilding it", stacklevel=3)
                os.remove(path)
    try:
        yield
    except pickle.UnpicklingError as exc:
        if isinstance(exc, UnsafeCacheError):
            raise
        names = " or ".join(p for p in cache_files if osp.exists(p)) or "an OGB cache file"
        raise UnsafeCacheError(names, str(exc)) from None
