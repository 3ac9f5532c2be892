"""OGB graph property prediction datasets (``ogbg-mol*`` and others) through OGB's own
:class:`ogb.graphproppred.PygGraphPropPredDataset`, working under PyTorch >= 2.6 and offline.

OGB 1.3.6 loads its processed file with a bare ``torch.load``, which fails under PyTorch's
``weights_only=True`` default; :func:`graph_urpe.data.safe_load.allow_ogb_torch_load` allow-lists
the PyG classes involved (never ``weights_only=False``). Offline, write a dataset folder with
:mod:`graph_urpe.data.build_ogb`; OGB then reads it without downloading.
"""

from __future__ import annotations

import os.path as osp
import re
from collections.abc import Callable

import pandas as pd
import torch
from ogb.graphproppred import PygGraphPropPredDataset
from torch_geometric.data import Data
from torch_geometric.transforms import Compose

from graph_urpe.data.layout import StandardLayout
from graph_urpe.data.safe_load import allow_ogb_torch_load


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
    """The folder OGB uses for :obj:`name` under :obj:`root` (``ogbg-molhiv`` -> ``ogbg_molhiv``)."""
    return osp.join(root, "_".join(name.split("-")))


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
    missing label and is cast on access by :class:`~graph_urpe.data.layout.StandardLayout`).

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
    check_cached_pre_transform(osp.join(folder, "processed"), pre_transform)
    allow_ogb_torch_load()
    layout = StandardLayout() if transform is None else Compose([StandardLayout(), transform])
    return PygGraphPropPredDataset(name, root=root, transform=layout, pre_transform=pre_transform)


def check_cached_pre_transform(processed_dir: str, pre_transform: Callable | None) -> None:
    r"""Refuses a processed cache made with another ``pre_transform`` (OGB's datasets cannot be
    told to reprocess; PyG would only warn and return the stale graphs).

    Raises:
        ValueError: if ``processed_dir/pre_transform.pt`` records a different ``repr``; the message
            says which folder to delete.
    """
    path = osp.join(processed_dir, "pre_transform.pt")
    if not osp.exists(path):
        return
    cached = torch.load(path, weights_only=True)  # a string
    # PyG records str(pre_transform) with memory addresses removed (torch_geometric's _repr).
    wanted = "None" if pre_transform is None else re.sub(
        r"(<.*?)\s.*(>)", r"\1\2", str(pre_transform))
    if cached != wanted:
        raise ValueError(
            f"{processed_dir} was processed with pre_transform {cached}, not {wanted}; delete "
            "that folder to process the raw files again with the new pre_transform"
        )
