"""Numbers of graphs, splits and label statistics of a dataset, as a printable table.

    graph-urpe summarize zinc-like
    graph-urpe summarize ogbg-molhiv --root data
    graph-urpe summarize csv --csv-path my.csv --target-columns logS --split scaffold

(the command is :mod:`graph_urpe.cli.summarize`).

Per-graph edge counts and labels are read without materialising every graph (node counts:
:func:`graph_urpe.data.sampler.graph_sizes`): for PyG
:class:`~torch_geometric.data.InMemoryDataset` objects (and their subsets) from the collated
storage and its ``slices``; other datasets are iterated.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch.utils.data import Dataset
from torch_geometric.data import InMemoryDataset

from graph_urpe.data.families import DatasetSplits
from graph_urpe.data.sampler import graph_sizes
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
    :class:`~graph_urpe.transforms.StandardLayout` (which just reshapes ``y``); with another
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


def summarize(dataset_dict: Mapping[str, Dataset] | DatasetSplits) -> str:
    r"""A text table: per split, the number of graphs, nodes per graph (mean / max), edges per
    graph (mean), and per label column the number of labelled graphs, missing (NaN) labels, mean,
    standard deviation, minimum and maximum (for 0/1 labels the mean is the positive rate).

    Args:
        dataset_dict (Mapping[str, Dataset] or DatasetSplits): split name -> dataset of PyG
            ``Data`` with ``y`` ``[1, T]`` (or ``[T]``), or a :class:`DatasetSplits`, whose name,
            task, metric and refused rows are printed too.

    Returns:
        str: the table (lines separated by ``"\n"``).
    """
    lines = []
    splits = dataset_dict
    if isinstance(dataset_dict, DatasetSplits):
        d = dataset_dict
        f = d.facts
        lines.append(f"{f.name}: {f.task}, {f.num_tasks} task(s), metric {f.metric}, "
                     f"{f.featurization} features; source: {d.source}")
        if d.invalid_rows:
            lines.append(f"refused inputs: {len(d.invalid_rows)} (first: {d.invalid_rows[0]})")
        splits = d.splits
    total = sum(len(ds) for ds in splits.values())
    lines.append(f"{'split':<15}{'graphs':>9}{'share':>8}{'nodes mean':>12}{'nodes max':>11}"
                 f"{'edges mean':>12}")
    labels = {}
    for name, ds in splits.items():
        nodes = torch.from_numpy(graph_sizes(ds))
        edges = graph_edge_counts(ds)
        n = len(ds)
        share = n / total if total else 0.0
        mean_nodes = nodes.float().mean().item() if n else float("nan")
        max_nodes = int(nodes.max()) if n else 0
        mean_edges = edges.float().mean().item() if n else float("nan")
        lines.append(f"{name:<15}{n:>9}{share:>8.1%}{mean_nodes:>12.2f}{max_nodes:>11}"
                     f"{mean_edges:>12.2f}")
        labels[name] = graph_labels(ds)
    lines.append(f"{'split':<15}{'task':>5}{'labelled':>10}{'missing':>9}{'mean':>10}{'std':>10}"
                 f"{'min':>10}{'max':>10}")
    for name, y in labels.items():
        for t in range(y.size(1) if y.dim() == 2 else 0):
            column = y[:, t]
            known = column[~torch.isnan(column)].double()
            stats = [known.mean(), known.std(), known.min(), known.max()] if len(known) > 1 else \
                [known.mean(), torch.tensor(float("nan")), known.min(), known.max()] \
                if len(known) == 1 else [torch.tensor(float("nan"))] * 4
            lines.append(f"{name:<15}{t:>5}{len(known):>10}{len(column) - len(known):>9}"
                         + "".join(f"{float(v):>10.4f}" for v in stats))
    return "\n".join(lines)
