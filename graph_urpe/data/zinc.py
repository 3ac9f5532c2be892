"""ZINC: the embedded ZINC-like default dataset and PyG's ZINC, both returned in this package's
layout.

* :class:`ZincLikeDataset`: 12,000 real ZINC molecules (from MOSES) with the ZINC benchmark's
  constrained-solubility target, split 10,000 / 1,000 / 1,000 like the ZINC subset. The CSV ships
  with the package (``graph_urpe/data/embedded/zinc_like_12k.csv.gz``); how it was made
  (``datasets/build_zinc_like.py``), its provenance and licences are in ``datasets/README.md``.
* :func:`pyg_zinc`: PyG's ZINC dataset (:class:`torch_geometric.datasets.ZINC`, the "Benchmarking
  GNNs" subset of 12,000 graphs by default). For users with internet access PyG downloads it;
  offline, write the same raw folder with ``datasets/build_pyg_zinc.py`` and PyG reads it
  without downloading. A folder so built holds other molecules than ZINC's (by default the
  embedded ZINC-like set) and says so in its :data:`STANDIN_MARKER` file, which
  :func:`zinc_source` reads.
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
from graph_urpe.data.csv.dataset import SmilesCSVDataset
from graph_urpe.transforms import StandardLayout

EMBEDDED_ZINC_LIKE = osp.join(osp.dirname(osp.abspath(__file__)), "embedded", "zinc_like_12k.csv.gz")
"""Path of the embedded CSV (columns ``smiles, target, split, moses_row``)."""

_ZINC_LIKE_SPLITS = {"train": "train", "valid": "valid", "val": "valid", "test": "test"}


class ZincLikeDataset(SmilesCSVDataset):
    r"""The embedded ZINC-like 12k dataset, as a PyG :class:`~torch_geometric.data.InMemoryDataset`
    processed once and cached.

    Graphs: ``x`` ``torch.long`` (ZINC featurization: ``[n, 1]`` ZINC atom type ids,
    :data:`graph_urpe.data.featurize.ZINC_ATOM_TYPES`; OGB: ``[n, 9]``), ``edge_index`` ``[2, E]``,
    ``edge_attr`` ``torch.long`` (ZINC: ``[E, 1]``, 1 single, 2 double, 3 triple; OGB:
    ``[E, 3]``), ``y`` ``torch.float32`` ``[1, 1]``
    (constrained solubility, dimensionless, see :mod:`graph_urpe.data.zinc_target`), ``smiles``,
    ``row`` (row of the embedded CSV), plus what :obj:`pre_transform` adds.

    Args:
        root (str, optional): folder for processed files. (default: :obj:`"data/zinc_like"`)
        split (str, optional): ``"train"`` (10,000), ``"valid"`` (or ``"val"``, 1,000), ``"test"``
            (1,000) or :obj:`None` for all 12,000 (then use :meth:`get_idx_split`).
            (default: :obj:`"train"`)
        transform (Callable, optional): applied on every access. (default: :obj:`None`)
        pre_transform (Callable, optional): applied once, e.g.
            :class:`graph_urpe.transforms.AddShortestPathDistance`. (default: :obj:`None`)
        max_graph_nodes (int, optional): refuse larger graphs (largest here: 26 atoms).
            (default: :obj:`None`)
        strict (bool, optional): fail instead of skipping unusable rows. (default: :obj:`False`)
        num_workers (int, optional): worker processes for processing. (default: :obj:`None`, auto)
        featurization (str, optional): ``"zinc"`` (ZINC's 28 atom types, as the ZINC benchmark)
            or ``"ogb"`` (OGB's atom and bond features: any molecule RDKit parses).
            (default: :obj:`"zinc"`)
        csv_path (str, optional): another CSV in the same format (e.g. one rebuilt with
            ``datasets/build_zinc_like.py``). (default: the embedded file)
        force_reload (bool, optional): process again. (default: :obj:`False`)
        log (bool, optional): print progress. (default: :obj:`True`)

    Raises:
        ValueError: for an unknown :obj:`split` (and see :class:`SmilesCSVDataset`).
    """

    def __init__(
        self,
        root: str = "data/zinc_like",
        split: str | None = "train",
        transform: Callable[[Data], Data] | None = None,
        pre_transform: Callable[[Data], Data] | None = None,
        max_graph_nodes: int | None = None,
        strict: bool = False,
        num_workers: int | None = None,
        csv_path: str = EMBEDDED_ZINC_LIKE,
        featurization: str = "zinc",
        force_reload: bool = False,
        log: bool = True,
    ) -> None:
        if split is not None and split not in _ZINC_LIKE_SPLITS:
            raise ValueError(f"split must be 'train', 'valid' (or 'val'), 'test' or None, got {split!r}")
        super().__init__(
            root, csv_path, smiles_column="smiles", target_columns=["target"], task="regression",
            split="split", featurization=featurization, max_graph_nodes=max_graph_nodes, strict=strict,
            num_workers=num_workers, transform=transform, pre_transform=pre_transform,
            force_reload=force_reload, log=log,
        )
        self.split_name = None if split is None else _ZINC_LIKE_SPLITS[split]
        if self.split_name is not None:
            # Restrict this object to one split, as InMemoryDataset.index_select does on a copy.
            self._indices = self.get_idx_split()[self.split_name].tolist()

    def __repr__(self) -> str:
        part = "all" if self.split_name is None else self.split_name
        return f"{self.__class__.__name__}({len(self)}, split={part!r})"


RAW_FILES = ("train.pickle", "val.pickle", "test.pickle", "train.index", "val.index", "test.index")
"""The six files PyG's ZINC expects in ``root/raw``."""

_PYG_SPLITS = {"train": "train", "valid": "val", "val": "val", "test": "test"}

STANDIN_MARKER = "STANDIN.txt"
"""File in the root of a ZINC folder written by ``datasets/build_pyg_zinc.py``; its text
describes the molecules (e.g. :data:`ZINC_LIKE_STANDIN`)."""

ZINC_LIKE_STANDIN = "ZINC-like molecules in PyG ZINC format (offline stand-in)"
"""Description of a folder built from the embedded ZINC-like molecules."""

PYG_ZINC_SOURCE = "torch_geometric.datasets.ZINC (Benchmarking GNNs ZINC)"
"""Description of a folder PyG downloaded."""


class ZincDownloadError(RuntimeError):
    r"""PyG could not download ZINC (e.g. no network); the one-line message says what to do."""


def zinc_source(root: str) -> str:
    r"""What a ZINC folder holds: the text of its :data:`STANDIN_MARKER` if
    ``datasets/build_pyg_zinc.py`` wrote it, else :data:`PYG_ZINC_SOURCE`."""
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
    if split not in _PYG_SPLITS:
        raise ValueError(f"split must be 'train', 'valid' (or 'val') or 'test', got {split!r}")
    missing = [f for f in RAW_FILES if not osp.exists(osp.join(root, "raw", f))]
    if missing and not download:
        raise FileNotFoundError(
            f"PyG ZINC raw files {missing} not found in {osp.join(root, 'raw')}; pass "
            "download=True (needs internet) or write them offline with "
            f"`python datasets/build_pyg_zinc.py --root {root}`"
        )
    layout = StandardLayout() if transform is None else Compose([StandardLayout(), transform])
    return SafeZINC(root, subset=subset, split=_PYG_SPLITS[split], transform=layout,
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
                f"molecules in its format with `python datasets/build_pyg_zinc.py --root "
                f"{self.root}`, or use the embedded dataset 'zinc-like'"
            ) from None
