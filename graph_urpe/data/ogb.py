"""OGB datasets through OGB's own classes, working under PyTorch >= 2.6 and offline: graph property
prediction (``ogbg-mol*`` and others, :class:`ogb.graphproppred.PygGraphPropPredDataset`) and
PCQM4Mv2 (OGB-LSC, :class:`ogb.lsc.PygPCQM4Mv2Dataset`).

OGB 1.3.6 loads its processed file with a bare ``torch.load``, which fails under PyTorch's
``weights_only=True`` default; :mod:`graph_urpe.data.cache` allow-lists the PyG classes involved
(never ``weights_only=False``), checks the cache's record files safely and names a refused file.
Offline, write a graph property dataset folder with ``datasets/build_ogb.py``; OGB then
reads it without downloading.

PCQM4Mv2: HOMO-LUMO gap regression, in eV, on OGB's folder format, with parallel processing, the
official evaluator, and test-dev submission files. The real data set (3,746,620 molecules) is
downloaded by OGB when internet is available. Offline, ``datasets/build_pcqm4mv2.py``
writes a stand-in in the same format from QM9.
"""

from __future__ import annotations

import glob
import os
import os.path as osp
import sys
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch
from ogb.graphproppred import PygGraphPropPredDataset
from ogb.lsc import PCQM4Mv2Evaluator, PygPCQM4Mv2Dataset
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform, Compose
from tqdm.auto import tqdm

from graph_urpe.data.cache import SafeCacheMixin, ogb_safe_construction, safe_torch_load
from graph_urpe.data.csv.row_errors import InvalidRowsError
from graph_urpe.data.processing import molecules_to_graphs
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
                f"`python datasets/build_ogb.py --name {name} --root {root}` or pass "
                "download=True"
            )
    layout = StandardLayout() if transform is None else Compose([StandardLayout(), transform])
    return OGBGraphPropDataset(name, root=root, transform=layout, pre_transform=pre_transform)


def release_source(folder: str, official: str) -> tuple[str, bool]:
    r"""Where an OGB folder's data come from: ``(text, is_official)``. A folder written offline
    (a rebuild or stand-in, whose ``RELEASE_v*.txt`` says ``offline``) is described by that file's
    text; any other folder is OGB's download, described by :obj:`official`."""
    for path in sorted(glob.glob(osp.join(folder, "RELEASE_v*.txt"))):
        with open(path, encoding="utf-8") as f:
            text = f.read().strip()
        if "offline" in text.lower():
            return text.splitlines()[0], False
    return official, True


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


PCQM4MV2_SPLITS = ("train", "valid", "test-dev", "test-challenge")
"""Keys of ``get_idx_split()``; test-dev and test-challenge labels are hidden (NaN)."""

SUBMISSION_SIZES = {"test-dev": 147_037, "test-challenge": 147_432}
"""Molecules of the real PCQM4Mv2's hidden splits (what a submission file must contain)."""

STANDIN_LABELS = "standin_test_labels.csv.gz"
"""File (in ``<root>/pcqm4m-v2``) with the hidden test labels of an offline stand-in."""


class PCQM4Mv2Dataset(SafeCacheMixin, PygPCQM4Mv2Dataset):
    r"""OGB's :class:`~ogb.lsc.PygPCQM4Mv2Dataset` with parallel processing and the package layout.

    Same folder (``root/pcqm4m-v2``: ``raw/data.csv.gz`` with ``idx, smiles, homolumogap``;
    ``split_dict.pt``), same graphs (:func:`ogb.utils.smiles2graph`) and same checks as OGB's
    ``process()``, but the SMILES are featurized and :obj:`pre_transform` is applied in
    :obj:`num_workers` processes (3.7 M molecules take hours serially), and OGB's ``torch.load``
    is made to work under PyTorch >= 2.6 by allow-listing PyG's classes. Cache files are read
    safely (:class:`~graph_urpe.data.cache.SafeCacheMixin`): a file holding non-allow-listed
    objects is refused naming it, a corrupt processed file is rebuilt with a warning.

    Graphs: ``x`` ``torch.long`` ``[n, 9]``, ``edge_index`` ``[2, E]``, ``edge_attr``
    ``torch.long`` ``[E, 3]``, ``y`` ``torch.float32`` ``[1, 1]`` (gap in eV; NaN on test-dev and
    test-challenge), ``row`` (index in ``data.csv.gz``), plus what :obj:`pre_transform` adds.

    Args:
        root (str, optional): parent of the ``pcqm4m-v2`` folder. (default: :obj:`"data"`)
        transform (Callable, optional): applied on access after the layout fix.
            (default: :obj:`None`)
        pre_transform (Callable, optional): applied once at processing. (default: :obj:`None`)
        num_workers (int, optional): processing workers. (default: :obj:`None`, auto)
        download (bool, optional): let OGB download a missing dataset (about 60 MB compressed).
            (default: :obj:`True`)

    Raises:
        FileNotFoundError: if :obj:`download` is false and the folder is incomplete.
        InvalidRowsError: if a SMILES of the folder cannot be featurized (split indices refer to
            rows, so no row can be skipped).
        ValueError: if the folder's labels break PCQM4Mv2's conventions (labels on train/valid,
            NaN on test-dev/test-challenge).
    """

    def __init__(self, root: str = "data", transform: Callable[[Data], Data] | None = None,
                 pre_transform: Callable[[Data], Data] | None = None,
                 num_workers: int | None = None, download: bool = True) -> None:
        folder = osp.join(root, "pcqm4m-v2")
        if not download:
            needed = [osp.join(folder, "RELEASE_v1.txt"), osp.join(folder, "raw", "data.csv.gz"),
                      osp.join(folder, "split_dict.pt")]
            missing = [p for p in needed if not osp.exists(p)]
            if missing:
                raise FileNotFoundError(
                    f"PCQM4Mv2 not available offline under {root} (missing {missing}); build the "
                    "QM9 stand-in with `python datasets/build_pcqm4mv2.py --root "
                    f"{root}` or, for the real PCQM4Mv2, pass download=True"
                )
        self.num_workers = num_workers
        layout = StandardLayout() if transform is None else Compose([StandardLayout(), transform])
        processed = osp.join(folder, "processed", "geometric_data_processed.pt")
        with ogb_safe_construction([processed]):
            super().__init__(root=root, transform=layout, pre_transform=pre_transform)

    def get_idx_split(self) -> dict[str, torch.Tensor]:
        r"""``{"train", "valid", "test-dev", "test-challenge"}`` -> ``torch.long`` indices, read
        from ``split_dict.pt`` with :func:`~graph_urpe.data.cache.safe_torch_load`."""
        split = safe_torch_load(osp.join(self.root, "split_dict.pt"))
        return {k: torch.as_tensor(v, dtype=torch.long) for k, v in split.items()}

    def process(self) -> None:
        frame = pd.read_csv(osp.join(self.raw_dir, "data.csv.gz"))
        graphs, errors = molecules_to_graphs(
            frame["smiles"].tolist(), frame["homolumogap"].to_numpy(), featurization="ogb",
            pre_transform=self.pre_transform, keep_smiles=False, num_workers=self.num_workers,
            desc="Processing PCQM4Mv2",
        )
        if errors:
            raise InvalidRowsError(errors, len(frame), osp.join(self.raw_dir, "data.csv.gz"))
        gaps = frame["homolumogap"].to_numpy()
        split = self.get_idx_split()
        for name in PCQM4MV2_SPLITS:
            idx = split[name].numpy()
            hidden = name.startswith("test")
            wrong = ~np.isnan(gaps[idx]) if hidden else np.isnan(gaps[idx])
            if wrong.any():
                raise ValueError(
                    f"{int(wrong.sum())} molecules of split {name!r} "
                    f"{'have' if hidden else 'lack'} a label (row {int(idx[wrong][0])}); PCQM4Mv2 "
                    "keeps test-dev/test-challenge labels hidden (NaN) and labels all others"
                )
        torch.save(self.collate(graphs), self.processed_paths[0])  # OGB's (data, slices) format

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({len(self)})"


def save_submission(y_pred: torch.Tensor | np.ndarray, dir_path: str, mode: str = "test-dev",
                    standin: bool = False) -> str:
    r"""Writes a PCQM4Mv2 submission file with OGB's ``PCQM4Mv2Evaluator.save_test_submission``
    (``y_pred_pcqm4m-v2_<mode>.npz``, one ``float32`` array ``y_pred``).

    OGB's writer accepts only the real split sizes (:data:`SUBMISSION_SIZES`); predictions of an
    offline stand-in (:obj:`standin`) are written in the same format under a name that cannot be
    mistaken for a submission (``y_pred_pcqm4m-v2_<mode>_standin.npz``).

    Args:
        y_pred (Tensor or ndarray): predicted gaps (eV), ``[N]`` (or ``[N, 1]``), in the order of
            ``get_idx_split()[mode]``.
        dir_path (str): output folder (created).
        mode (str, optional): ``"test-dev"`` or ``"test-challenge"``. (default: ``"test-dev"``)
        standin (bool, optional): the predictions are of an offline stand-in.
            (default: :obj:`False`)

    Returns:
        str: path of the written file.

    Raises:
        ValueError: for an unknown :obj:`mode`, NaN or infinite predictions, or (real data) a
            count other than OGB's (e.g. a test cut by ``limit_test_batches``).
    """
    if mode not in SUBMISSION_SIZES:
        raise ValueError(f"mode must be one of {sorted(SUBMISSION_SIZES)}, got {mode!r}")
    if isinstance(y_pred, torch.Tensor):
        y_pred = y_pred.detach().cpu().numpy()
    array = np.asarray(y_pred, dtype=np.float32).reshape(-1)
    if not np.isfinite(array).all():
        raise ValueError(f"{mode} predictions contain NaN or infinite values")
    if standin:
        os.makedirs(dir_path, exist_ok=True)
        path = osp.join(dir_path, f"y_pred_pcqm4m-v2_{mode}_standin.npz")
        np.savez_compressed(path, y_pred=array)  # OGB's format; OGB's writer checks the size
        return path
    if array.shape != (SUBMISSION_SIZES[mode],):
        raise ValueError(
            f"a PCQM4Mv2 {mode} submission holds {SUBMISSION_SIZES[mode]} predictions, got "
            f"{array.size}; predict the whole get_idx_split()[{mode!r}] of the real dataset"
        )
    PCQM4Mv2Evaluator().save_test_submission({"y_pred": array}, dir_path, mode=mode)
    return osp.join(dir_path, f"y_pred_pcqm4m-v2_{mode}.npz")


class StandinTestLabels(BaseTransform):
    r"""Puts back the hidden test label of a graph of an offline stand-in (``y`` ``[1, 1]`` from
    ``standin_test_labels.csv.gz``, looked up by the graph's ``row``); other graphs are unchanged.

    Args:
        root (str): parent of the stand-in's ``pcqm4m-v2`` folder.

    Raises:
        FileNotFoundError: if the folder is not a stand-in.
    """

    def __init__(self, root: str) -> None:
        path = osp.join(root, "pcqm4m-v2", STANDIN_LABELS)
        if not osp.exists(path):
            raise FileNotFoundError(f"{path} not found: only the offline stand-in has test labels")
        frame = pd.read_csv(path)
        self.root = root
        self.labels = dict(zip(frame["idx"].tolist(), frame["homolumogap"].tolist()))

    def forward(self, data: Data) -> Data:
        gap = self.labels.get(int(data.row))
        if gap is not None:
            data.y = torch.tensor([[gap]], dtype=torch.float32)
        return data

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.root!r})"
