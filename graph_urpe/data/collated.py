"""Reading one attribute of every graph of an in-memory PyG dataset from its collated storage,
without building any graph (label statistics, the training vocabulary).

PyG's :class:`~torch_geometric.data.InMemoryDataset` keeps all graphs in one collated ``Data``
(its storage ``_data``, PyG's private name, fenced by ``tests/test_private_apis.py``) and
``slices`` (per attribute, the row bounds of each graph); a subset keeps its graphs'
``indices()``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import InMemoryDataset

__all__ = ["collated_counts", "collated_rows"]


def collated_counts(dataset: Any, key: str) -> Tensor | None:
    r"""How many rows of attribute ``key`` each graph of ``dataset`` has (its node count for
    ``"x"``), in dataset order, from the collated storage's slices.

    Args:
        dataset: a PyG :class:`~torch_geometric.data.InMemoryDataset`, or an indexed subset of
            one (``dataset[idx]``).
        key (str): an attribute stored per graph along dimension 0.

    Returns:
        Tensor or None: ``int64`` ``[number of graphs]``; :obj:`None` for another kind of dataset
        or an attribute it does not store.
    """
    if not isinstance(dataset, InMemoryDataset):
        return None
    slices = dataset.slices
    if slices is None or key not in slices or getattr(dataset._data, key, None) is None:
        return None
    bounds = slices[key]
    index = dataset.indices()
    index = index.long() if isinstance(index, Tensor) else \
        torch.as_tensor(np.asarray(index, dtype=np.int64))
    return (bounds[index + 1] - bounds[index]).long()


def collated_rows(dataset: Any, key: str, start: int = 0, stop: int | None = None
                  ) -> Tensor | None:
    r"""The rows of attribute ``key`` of graphs ``start`` to ``stop`` of ``dataset`` (all by
    default), concatenated in dataset order, gathered from the collated storage in one indexing
    operation.

    The gather builds ``int64`` row indices as long as its result (8 bytes a row, and two
    temporaries of that size): a caller reading a whole large split (1.27 M molecules: 66 M bond
    rows, 1.6 GB of indices) reads it in ranges of graphs instead.

    Args:
        dataset: a PyG :class:`~torch_geometric.data.InMemoryDataset`, or an indexed subset of
            one (``dataset[idx]``).
        key (str): an attribute stored per graph along dimension 0 (``"y"``, ``"x"``,
            ``"edge_attr"``).
        start (int, optional): the first graph, a position in dataset order. (default: :obj:`0`)
        stop (int, optional): one past the last. (default: :obj:`None`: the end)

    Returns:
        Tensor or None: ``[sum of those graphs' rows, ...]`` as stored (no transform applied);
        :obj:`None` for another kind of dataset or an attribute it does not store.
    """
    if not isinstance(dataset, InMemoryDataset):
        return None
    slices = dataset.slices
    storage = dataset._data  # PyG's collated storage
    if slices is None or key not in slices or getattr(storage, key, None) is None:
        return None
    bounds = slices[key]
    index = dataset.indices()
    index = index.long() if isinstance(index, Tensor) else \
        torch.as_tensor(np.asarray(index, dtype=np.int64))
    index = index[start:stop]
    begin = bounds[index]
    length = bounds[index + 1] - begin
    # Row r of graph g is storage row begin[g] + r: one gather for the graphs asked for.
    rows = torch.repeat_interleave(begin - torch.cumsum(length, 0) + length, length)
    return getattr(storage, key)[rows + torch.arange(int(length.sum()))]
