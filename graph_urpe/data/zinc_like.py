"""The embedded default dataset: 12,000 real ZINC molecules (from MOSES) with the ZINC benchmark's
constrained-solubility target, split 10,000 / 1,000 / 1,000 like the ZINC subset.

The CSV ships with the package (``graph_urpe/data/embedded/zinc_like_12k.csv.gz``); how it was made
(``datasets/build_zinc_like.py``), its provenance and licences are in ``datasets/README.md``.
"""

from __future__ import annotations

import os.path as osp
from collections.abc import Callable

from torch_geometric.data import Data

from graph_urpe.data.smiles_dataset import SmilesCSVDataset

EMBEDDED_ZINC_LIKE = osp.join(osp.dirname(osp.abspath(__file__)), "embedded", "zinc_like_12k.csv.gz")
"""Path of the embedded CSV (columns ``smiles, target, split, moses_row``)."""

_SPLITS = {"train": "train", "valid": "valid", "val": "valid", "test": "test"}


class ZincLikeDataset(SmilesCSVDataset):
    r"""The embedded ZINC-like 12k dataset, as a PyG :class:`~torch_geometric.data.InMemoryDataset`
    processed once and cached.

    Graphs: ``x`` ``torch.long`` (ZINC featurisation: ``[n, 1]`` ZINC atom type ids,
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
        max_nodes (int, optional): refuse larger graphs (largest here: 26 atoms).
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
        max_nodes: int | None = None,
        strict: bool = False,
        num_workers: int | None = None,
        csv_path: str = EMBEDDED_ZINC_LIKE,
        featurization: str = "zinc",
        force_reload: bool = False,
        log: bool = True,
    ) -> None:
        if split is not None and split not in _SPLITS:
            raise ValueError(f"split must be 'train', 'valid' (or 'val'), 'test' or None, got {split!r}")
        super().__init__(
            root, csv_path, smiles_column="smiles", target_columns=["target"], task="regression",
            split="split", featurization=featurization, max_nodes=max_nodes, strict=strict,
            num_workers=num_workers, transform=transform, pre_transform=pre_transform,
            force_reload=force_reload, log=log,
        )
        self.split_name = None if split is None else _SPLITS[split]
        if self.split_name is not None:
            # Restrict this object to one split, as InMemoryDataset.index_select does on a copy.
            self._indices = self.get_idx_split()[self.split_name].tolist()

    def __repr__(self) -> str:
        part = "all" if self.split_name is None else self.split_name
        return f"{self.__class__.__name__}({len(self)}, split={part!r})"
