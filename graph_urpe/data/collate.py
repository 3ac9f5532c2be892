"""Batching graphs in fewer Python calls: PyG's :meth:`Batch.from_data_list` for plain
:class:`~torch_geometric.data.Data` graphs, with the same result.

PyG's collate adds each graph's node offset to its index attributes one graph at a time (a
tensor addition per graph and attribute: ``edge_index``, ``pair_index``, ``spd_pred_index``) and
builds the ``batch`` vector from one tensor per graph; for a batch of 64 molecules that is most of
the 3.6 CPU ms a training batch cost to collate (``benchmarks/README.md`` section 18).
:func:`collate_graphs` concatenates each attribute once and adds all offsets in one vectorised
addition. The :class:`~torch_geometric.data.Batch` it returns equals PyG's: every attribute
(values and dtypes), ``batch`` / ``ptr``, ``num_nodes`` and the ``_slice_dict`` / ``_inc_dict``
that :meth:`~torch_geometric.data.Batch.get_example` and
:meth:`~torch_geometric.data.Batch.to_data_list` read (``tests/test_collate.py``). Anything
outside the plain case (another graph class, attributes that are not dense CPU tensors, numbers
or texts, index attributes whose offsets are tensors, a DataLoader worker, where PyG writes into
shared memory) is left to PyG.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import get_worker_info
from torch_geometric.data import Batch, Data
from torch_geometric.loader.dataloader import Collater

__all__ = ["GraphCollater", "collate_graphs"]


def _offsets(key: str, values: list[Tensor], graphs: Sequence[Data], stores: list,
             nodes: list[int]) -> list[int] | None:
    """What PyG's ``Data.__inc__`` adds to each graph's ``key`` (the node count for index
    attributes, 0 for the rest), or :obj:`None` for offsets that are not integers."""
    if "batch" in key:  # PyG: the largest value + 1, per graph
        repeats = [g.__inc__(key, v, s) for g, v, s in zip(graphs, values, stores)]
        return repeats if all(isinstance(r, int) for r in repeats) else None
    if "index" in key or key == "face":
        return nodes
    return [0] * len(values)


def collate_graphs(graphs: Sequence[Data]) -> Batch | None:
    r"""``Batch.from_data_list(graphs)`` in one concatenation and one offset addition per
    attribute, or :obj:`None` where the graphs are outside the plain case (see the module
    docstring) and PyG must batch them.

    Args:
        graphs (Sequence[Data]): the graphs of one batch, all of class
            :class:`~torch_geometric.data.Data`, each with the attributes of the first (as PyG
            reads them); each attribute a dense CPU tensor, a number or a string.

    Returns:
        Batch or None: equal to ``Batch.from_data_list(graphs)``.
    """
    if not graphs or get_worker_info() is not None:
        return None
    first = graphs[0]
    if any(type(g) is not Data for g in graphs):
        return None
    stores = [g._store for g in graphs]
    count = len(graphs)
    nodes = [s.num_nodes or 0 for s in stores]
    out = Batch(_base_cls=Data)
    out.stores_as(first)
    out_store = out._store
    slice_dict: dict[str, Tensor] = {}
    inc_dict: dict[str, Tensor | None] = {}
    for key in stores[0]:  # the first graph's attributes, in its order (as PyG)
        values = [s[key] for s in stores]
        if key == "num_nodes":
            out_store._num_nodes = values
            out_store.num_nodes = sum(values)
            continue
        if key == "ptr":
            continue
        elem = values[0]
        if isinstance(elem, str):  # PyG keeps the texts as a list
            out_store[key] = values
            slice_dict[key] = torch.arange(count + 1)
            inc_dict[key] = None
            continue
        if isinstance(elem, (int, float)):  # numbers (sample_id): one tensor, as PyG makes it
            repeats = _offsets(key, values, graphs, stores, nodes)
            if repeats is None:
                return None
            value = torch.tensor(values)
            incs = torch.tensor(list(accumulate(repeats[:-1], initial=0)))
            if int(incs[-1]) != 0:
                if value.dtype == torch.bool:
                    return None
                value.add_(incs)
            out_store[key] = value
            slice_dict[key] = torch.arange(count + 1)
            inc_dict[key] = incs
            continue
        # PyG's branch is chosen by the first value: a dense CPU tensor of the base class
        # (not PyG's Index / EdgeIndex); then every value must be one
        if type(elem) is not Tensor or elem.layout != torch.strided or elem.is_cuda \
                or elem.is_nested or any(type(v) is not Tensor for v in values):
            return None
        cat_dim = first.__cat_dim__(key, elem, stores[0])
        if cat_dim is None or elem.dim() == 0:
            values = [v.unsqueeze(0) for v in values]
            cat_dim = 0
        dim = cat_dim % values[0].dim()
        sizes = [v.shape[dim] for v in values]
        repeats = _offsets(key, values, graphs, stores, nodes)
        if repeats is None:
            return None  # offsets as tensors: PyG's general case
        slices = torch.tensor(list(accumulate(sizes, initial=0)))
        incs = torch.tensor(list(accumulate(repeats[:-1], initial=0)))
        slice_dict[key] = slices
        inc_dict[key] = incs
        value = torch.cat(values, dim=dim)
        if int(incs[-1]) != 0:  # what PyG adds graph by graph, in one addition
            if value.dtype == torch.bool or value.is_complex():
                return None
            shape = [1] * value.dim()
            shape[dim] = -1
            # PyG adds a 0-dimensional int64 offset: the result keeps the value's dtype
            step = torch.repeat_interleave(incs, slices.diff()).to(value.dtype)
            value = value + step.view(shape)
        out_store[key] = value
    if out_store.can_infer_num_nodes:
        counts = torch.tensor(nodes)
        out_store.batch = torch.repeat_interleave(torch.arange(count), counts)
        out_store.ptr = torch.tensor(list(accumulate(nodes, initial=0)))
    out._num_graphs = count
    out._slice_dict = slice_dict
    out._inc_dict = inc_dict
    return out


class GraphCollater(Collater):
    """PyG's :class:`~torch_geometric.loader.dataloader.Collater` that batches plain graphs with
    :func:`collate_graphs` (PyG's own batching for everything else).

    Args:
        *args, **kwargs: those of PyG's ``Collater``.
    """

    def __call__(self, batch: list[Any]) -> Any:
        if batch and type(batch[0]) is Data and not self.follow_batch and not self.exclude_keys:
            out = collate_graphs(batch)
            if out is not None:
                return out
        return super().__call__(batch)
