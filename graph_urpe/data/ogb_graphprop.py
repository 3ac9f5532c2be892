"""OGB graph property prediction datasets (``ogbg-mol*`` and others) through OGB's own
:class:`ogb.graphproppred.PygGraphPropPredDataset`, working under PyTorch >= 2.6 and offline.

OGB 1.3.6 loads its processed file with a bare ``torch.load``, which fails under PyTorch's
``weights_only=True`` default; :mod:`graph_urpe.data.cache` allow-lists the PyG classes involved
(never ``weights_only=False``), checks the cache's record files safely and names a refused file.
Offline, write a dataset folder with
:mod:`graph_urpe.data.build_ogb`; OGB then reads it without downloading.
"""

from __future__ import annotations

import os.path as osp
import sys
from collections.abc import Callable

import pandas as pd
import torch
from ogb.graphproppred import PygGraphPropPredDataset
from torch_geometric.data import Data
from torch_geometric.transforms import Compose
from tqdm.auto import tqdm

from graph_urpe.data.cache import SafeCacheMixin, ogb_safe_construction
from graph_urpe.transforms import StandardLayout


def ogb_master(name: str) -> pd.Series:
    r"""OGB's metadata row (``ogb/graphproppred/master.csv``) for dataset :obj:`name`: ``num
    tasks``, ``eval metric``, ``task type``, ``version``, ``add_inverse_edge``, ...

    Raises:
        ValueError: if OGB does not know :obj:`name` (lists the known names).
    """
    import ogb.graphproppred

    path = osp.join(osp.dirname(ogb.graphproppred.__file__), "master.csv")
    master = pd.read_csv(path, index_col=0, keep_default_na=False)
    if name not in master:
        raise ValueError(f"unknown OGB graph property dataset {name!r}; known: {list(master)}")
    return master[name]


def ogb_folder(name: str, root: str) -> str:
    """The folder OGB uses for :obj:`name` under :obj:`root` (``ogbg-molhiv`` -> ``ogbg_molhiv``,
    or ``ogbg_molhiv_pyg`` if that older download folder exists, as OGB itself decides)."""
    folder = osp.join(root, "_".join(name.split("-")))
    return folder + "_pyg" if osp.exists(folder + "_pyg") else folder


def ogb_graphprop_dataset(
    name: str,
    root: str = "data",
    transform: Callable[[Data], Data] | None = None,
    pre_transform: Callable[[Data], Data] | None = None,
    download: bool = True,
) -> PygGraphPropPredDataset:
    r"""OGB's :class:`~ogb.graphproppred.PygGraphPropPredDataset`, yielding graphs in the package
    layout; use ``dataset.get_idx_split()`` (``train``/``valid``/``test``) and
    :class:`ogb.graphproppred.Evaluator` (``Evaluator(name)``) as usual.

    Graphs (molecular datasets): ``x`` ``torch.long`` ``[n, 9]``, ``edge_index`` ``[2, E]``,
    ``edge_attr`` ``torch.long`` ``[E, 3]`` (OGB features), ``y`` ``torch.float32`` ``[1, T]``
    (classification labels 0./1., NaN = missing; OGB's own ``y`` is ``long`` when a dataset has no
    missing label and is cast on access by :class:`~graph_urpe.transforms.StandardLayout`).

    Args:
        name (str): OGB dataset name, e.g. ``"ogbg-molhiv"``.
        root (str, optional): folder holding OGB dataset folders. (default: :obj:`"data"`)
        transform (Callable, optional): applied on access after the layout fix.
            (default: :obj:`None`)
        pre_transform (Callable, optional): applied once when OGB processes the raw files.
            (default: :obj:`None`)
        download (bool, optional): let OGB download a missing dataset. (default: :obj:`True`)

    Raises:
        ValueError: for a name OGB does not know.
        FileNotFoundError: if :obj:`download` is false and the folder (with its ``RELEASE_v*.txt``
            version marker and raw files) is incomplete; the message gives the builder command.
    """
    meta = ogb_master(name)
    folder = ogb_folder(name, root)
    if not download:
        release = osp.join(folder, f"RELEASE_v{meta['version']}.txt")
        needed = [release, osp.join(folder, "raw", "edge.csv.gz")]
        missing = [p for p in needed if not osp.exists(p)]
        if missing:
            raise FileNotFoundError(
                f"{name} is not available offline under {root} (missing {missing}); build it with "
                f"`python -m graph_urpe.data.build_ogb --name {name} --root {root}` or pass "
                "download=True"
            )
    layout = StandardLayout() if transform is None else Compose([StandardLayout(), transform])
    return OGBGraphPropDataset(name, root=root, transform=layout, pre_transform=pre_transform)


class OGBGraphPropDataset(SafeCacheMixin, PygGraphPropPredDataset):
    r"""OGB's :class:`~ogb.graphproppred.PygGraphPropPredDataset` with safe cache reads
    (:class:`~graph_urpe.data.cache.SafeCacheMixin`): ``pre_transform.pt`` / ``pre_filter.pt`` are
    read with ``weights_only=True`` (PyG reads them unsafely), a cache made with another
    ``pre_transform`` is refused, a corrupt processed file is rebuilt with a warning, and a
    processed file or ``split_dict.pt`` holding non-allow-listed objects is refused with
    :class:`~graph_urpe.data.cache.UnsafeCacheError` naming it. Arguments as OGB's.
    """

    def __init__(self, name: str, root: str = "data", transform: Callable | None = None,
                 pre_transform: Callable | None = None) -> None:
        processed = osp.join(ogb_folder(name, root), "processed", "geometric_data_processed.pt")
        with ogb_safe_construction([processed]):
            super().__init__(name, root=root, transform=transform, pre_transform=pre_transform)

    def process(self) -> None:
        # OGB applies pre_transform (e.g. the SPD of 41k molecules) with no progress report.
        pre = self.pre_transform
        if pre is None:
            return super().process()
        with tqdm(desc=f"pre_transform of {self.name}", unit="graph", file=sys.stderr) as bar:
            self.pre_transform = _Progress(pre, bar)
            try:
                super().process()
            finally:
                self.pre_transform = pre

    def get_idx_split(self, split_type: str | None = None) -> dict[str, torch.Tensor]:
        r"""OGB's split: ``{"train", "valid", "test"}`` -> ``torch.long`` indices."""
        kind = self.meta_info["split"] if split_type is None else split_type
        cached = osp.join(self.root, "split", kind, "split_dict.pt")
        with ogb_safe_construction([cached]):
            return super().get_idx_split(split_type)

class _Progress:
    """Calls a transform and advances a progress bar."""

    def __init__(self, fn: Callable[[Data], Data], bar: tqdm) -> None:
        self.fn, self.bar = fn, bar

    def __call__(self, data: Data) -> Data:
        out = self.fn(data)
        self.bar.update(1)
        return out
