"""Sample ids of batches: the rows that epoch metrics de-duplicate and order by (graph-level:
the dataset index; node-level: :func:`node_sample_ids`)."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["NODE_ID_STRIDE", "node_sample_ids", "row_ids", "sample_ids"]

NODE_ID_STRIDE = 2**32
"""Node ids of node-level epoch metrics: ``sample_id * NODE_ID_STRIDE + local node index``
(:func:`node_sample_ids`). Any stride above the largest graph makes the ids unique; a fixed one
needs no host read of the batch's largest graph and decodes as ``divmod(id, NODE_ID_STRIDE)``. It
leaves room for ``2**31`` graphs of up to ``2**32`` nodes in ``int64``."""


def sample_ids(batch) -> Tensor:
    """The ``sample_id`` of every graph of ``batch``: ``[B]`` int64.

    Raises:
        ValueError: if the batch has no ``sample_id``.
    """
    ids = batch.get("sample_id")
    if ids is None:
        raise ValueError(
            "batch has no `sample_id`: wrap the dataset in graph_urpe.data.indexed.IndexedDataset "
            "(the GraphDataModules do), so epoch metrics can de-duplicate and order samples."
        )
    return torch.as_tensor(ids).view(-1)


def node_sample_ids(batch) -> Tensor:
    r"""A unique id for every node of a batch, the rows of node-level epoch metrics:
    ``sample_id[graph] * NODE_ID_STRIDE + index of the node in its graph``.

    Repeated graphs (the DDP sampler pads ranks by repeating batches) repeat their node ids, so
    :class:`~graph_urpe.models.metrics.EpochPredictions` counts every node once. Computed on the
    batch's device without a host read (one gather of ``ptr``).

    Args:
        batch (Batch): a PyG batch with ``sample_id`` ``[B]`` (from
            :class:`~graph_urpe.data.indexed.IndexedDataset`), ``batch`` ``[num_nodes]`` and ``ptr``
            ``[B + 1]`` (one :class:`~torch_geometric.data.Data`: all nodes in graph 0).

    Returns:
        Tensor: ``[num_nodes]`` int64; ``divmod(id, NODE_ID_STRIDE)`` gives
        ``(sample_id, local index)``.

    Raises:
        ValueError: if the batch has no ``sample_id``.
    """
    vec, ptr = batch.get("batch"), batch.get("ptr")
    device = next(t.device for t in (vec, ptr, batch.get("edge_index"), batch.get("x"),
                                     batch.get("sample_id"), torch.zeros(0))
                  if isinstance(t, Tensor))
    ids = torch.as_tensor(sample_ids(batch), device=device).long()
    num_nodes = batch.num_nodes
    if vec is None:
        vec = torch.zeros(num_nodes, dtype=torch.long, device=device)
    if ptr is None:
        ptr = torch.zeros(1, dtype=torch.long, device=device)
    local = torch.arange(num_nodes, device=device) - ptr[vec]
    return ids[vec] * NODE_ID_STRIDE + local


def row_ids(batch, level: str) -> Tensor:
    """Ids ``[R]`` (int64) of a network's output rows: :func:`sample_ids` per graph
    (``level="graph"``), :func:`node_sample_ids` per node (``level="node"``)."""
    return node_sample_ids(batch) if level == "node" else sample_ids(batch)
