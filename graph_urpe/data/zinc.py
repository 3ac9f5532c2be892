"""PyG's ZINC dataset (:class:`torch_geometric.datasets.ZINC`, the "Benchmarking GNNs" subset of
12,000 graphs by default), returned in this package's layout.

For users with internet access PyG downloads it; offline, write the same raw folder with
:mod:`graph_urpe.data.build_pyg_zinc` and PyG reads it without downloading. A folder so built
holds other molecules than ZINC's (by default the embedded ZINC-like set) and says so in its
:data:`STANDIN_MARKER` file, which :func:`zinc_source` reads.
"""

from __future__ import annotations

import os
import os.path as osp
import shutil
import zipfile
from collections.abc import Callable

from torch_geometric.data import Data
from torch_geometric.datasets import ZINC
from torch_geometric.transforms import Compose

from graph_urpe.data.cache import SafeCacheMixin
from graph_urpe.transforms import StandardLayout

RAW_FILES = ("train.pickle", "val.pickle", "test.pickle", "train.index", "val.index", "test.index")
"""The six files PyG's ZINC expects in ``root/raw``."""

_SPLITS = {"train": "train", "valid": "val", "val": "val", "test": "test"}

STANDIN_MARKER = "STANDIN.txt"
"""File in the root of a ZINC folder written by :mod:`graph_urpe.data.build_pyg_zinc`; its text
describes the molecules (e.g. :data:`ZINC_LIKE_STANDIN`)."""

ZINC_LIKE_STANDIN = "ZINC-like molecules in PyG ZINC format (offline stand-in)"
"""Description of a folder built from the embedded ZINC-like molecules."""

PYG_ZINC_SOURCE = "torch_geometric.datasets.ZINC (Benchmarking GNNs ZINC)"
"""Description of a folder PyG downloaded."""


class ZincDownloadError(RuntimeError):
    r"""PyG could not download ZINC (e.g. no network); the one-line message says what to do."""


def zinc_source(root: str) -> str:
    r"""What a ZINC folder holds: the text of its :data:`STANDIN_MARKER` if
    :mod:`graph_urpe.data.build_pyg_zinc` wrote it, else :data:`PYG_ZINC_SOURCE`."""
    marker = osp.join(root, STANDIN_MARKER)
    if osp.exists(marker):
        with open(marker, encoding="utf-8") as f:
            return f.read().strip()
    return PYG_ZINC_SOURCE


def pyg_zinc(
    root: str = "data/zinc",
    split: str = "train",
    subset: bool = True,
    transform: Callable[[Data], Data] | None = None,
    pre_transform: Callable[[Data], Data] | None = None,
    download: bool = True,
    force_reload: bool = False,
) -> ZINC:
    r"""One split of :class:`torch_geometric.datasets.ZINC`, yielding graphs in the package layout.

    Graphs: ``x`` ``torch.long`` ``[n, 1]`` (28 ZINC atom types), ``edge_index`` ``[2, E]``,
    ``edge_attr`` ``torch.long`` ``[E, 1]`` (bond types 1-3), ``y`` ``torch.float32`` ``[1, 1]``
    (constrained solubility), plus what :obj:`pre_transform` adds. PyG's own layout (1-D
    ``edge_attr`` and ``y``) is reshaped on access by :class:`~graph_urpe.transforms.StandardLayout`.

    Args:
        root (str, optional): PyG's root (raw files in ``root/raw``). (default: :obj:`"data/zinc"`)
        split (str, optional): ``"train"``, ``"valid"`` (or ``"val"``) or ``"test"``.
            (default: :obj:`"train"`)
        subset (bool, optional): the 12k subset (10,000/1,000/1,000) instead of full ZINC
            (220,011/24,445/5,000). (default: :obj:`True`)
        transform (Callable, optional): applied on access, after the layout fix. (default: :obj:`None`)
        pre_transform (Callable, optional): applied once at processing, e.g.
            :class:`graph_urpe.transforms.AddShortestPathDistance`. (default: :obj:`None`)
        download (bool, optional): let PyG download missing raw files. (default: :obj:`True`)
        force_reload (bool, optional): process again. (default: :obj:`False`)

    Raises:
        ValueError: for an unknown :obj:`split`.
        FileNotFoundError: if :obj:`download` is false and raw files are missing.
        ZincDownloadError: if the download fails (one line giving the offline builder command);
            a folder the failed download created is removed again.
    """
    if split not in _SPLITS:
        raise ValueError(f"split must be 'train', 'valid' (or 'val') or 'test', got {split!r}")
    missing = [f for f in RAW_FILES if not osp.exists(osp.join(root, "raw", f))]
    if missing and not download:
        raise FileNotFoundError(
            f"PyG ZINC raw files {missing} not found in {osp.join(root, 'raw')}; pass "
            "download=True (needs internet) or write them offline with "
            f"`python -m graph_urpe.data.build_pyg_zinc --root {root}`"
        )
    layout = StandardLayout() if transform is None else Compose([StandardLayout(), transform])
    return SafeZINC(root, subset=subset, split=_SPLITS[split], transform=layout,
                    pre_transform=pre_transform, force_reload=force_reload)


class SafeZINC(SafeCacheMixin, ZINC):
    r""":class:`torch_geometric.datasets.ZINC` with safe cache reads
    (:class:`~graph_urpe.data.cache.SafeCacheMixin`): processed files and ``pre_transform.pt`` /
    ``pre_filter.pt`` are read with ``weights_only=True`` (PyG reads the latter unsafely and retries
    ``*.pt`` unsafely), a cache made with another ``pre_transform`` is refused instead of returned
    stale, and a corrupt processed file is rebuilt with a warning. A failed download raises
    :class:`ZincDownloadError` (one line: the offline builder command) and removes the folders it
    created. Arguments as PyG's ZINC.
    """

    def _download(self) -> None:
        if all(osp.exists(p) for p in self.raw_paths):
            return
        created = [d for d in (self.root, self.raw_dir, osp.join(self.root, "molecules"),
                               osp.join(self.root, "molecules.zip")) if not osp.exists(d)]
        try:
            super()._download()
        except (OSError, zipfile.BadZipFile, EOFError) as exc:  # network (URLError), disk, archive
            for path in created:  # the outer folder first: that removes the inner ones too
                if osp.isdir(path):
                    shutil.rmtree(path, ignore_errors=True)
                elif osp.exists(path):
                    os.remove(path)
            if not created and osp.isdir(self.raw_dir) and not os.listdir(self.raw_dir):
                os.rmdir(self.raw_dir)
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ZincDownloadError(
                f"could not download ZINC into {self.root} ({reason}); offline, write ZINC-like "
                f"molecules in its format with `python -m graph_urpe.data.build_pyg_zinc --root "
                f"{self.root}`, or use the embedded dataset 'zinc-like'"
            ) from None
