"""Per-graph edge counts and labels of a dataset without materialising every graph (node counts:
:func:`graph_urpe.data.sampler.graph_sizes`).

For PyG :class:`~torch_geometric.data.InMemoryDataset` objects (and their subsets) the numbers are
read from the collated storage and its ``slices``; other datasets are iterated.
"""

from __future__ import annotations

import torch
from torch.utils.data import Dataset
from torch_geometric.data import InMemoryDataset

from graph_urpe.transforms import StandardLayout


def _storage(dataset: Dataset):
    if isinstance(dataset, InMemoryDataset):
        data, slices = dataset._data, dataset.slices  # collated storage, PyG's documented layout
        if data is not None and slices is not None:
            return data, slices, torch.as_tensor(list(dataset.indices()), dtype=torch.long)
    return None


def graph_edge_counts(dataset: Dataset) -> torch.Tensor:
    r"""Number of (directed) edges of every graph, in dataset order: ``torch.long``
    ``[len(dataset)]``."""
    storage = _storage(dataset)
    if storage is not None:
        _, slices, idx = storage
        if "edge_index" in slices:
            return (slices["edge_index"][1:] - slices["edge_index"][:-1])[idx]
    return torch.tensor([g.num_edges for g in dataset], dtype=torch.long)


def graph_labels(dataset: Dataset) -> torch.Tensor:
    r"""Graph labels as a ``torch.float32`` ``[len(dataset), T]`` matrix (NaN = missing).

    Reads the stored ``y`` when the dataset has no ``transform`` or only
    :class:`~graph_urpe.data.layout.StandardLayout` (which just reshapes ``y``); with another
    transform (which may change labels) every graph is built. One label row per graph is assumed,
    as in every dataset of :mod:`graph_urpe.data`.
    """
    transform = getattr(dataset, "transform", None)
    storage = _storage(dataset) if transform is None or isinstance(transform, StandardLayout) \
        else None
    if storage is not None:
        data, slices, idx = storage
        if "y" in slices and data.y is not None:
            counts = slices["y"][1:] - slices["y"][:-1]
            if bool((counts == 1).all()):
                return data.y.reshape(len(counts), -1)[idx].to(torch.float32)
    rows = [g.y.reshape(1, -1).to(torch.float32) for g in dataset]
    return torch.cat(rows) if rows else torch.empty(0, 0)
