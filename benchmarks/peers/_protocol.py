"""What the peer benchmark's driver and its two workers share: the molecule format and the loop.

Pure NumPy and the standard library, so that it imports in both virtual environments (graph-urpe's
and the one with Hugging Face ``transformers``) without either package.

* :func:`to_hf_item`: one molecule in the input format of ``transformers``' Graphormer
  (``preprocess_item`` of ``models/deprecated/graphormer/collating_graphormer.py``, the layout of
  the OGB / Hugging Face graph datasets): ``node_feat``, ``edge_index``, ``edge_attr``,
  ``num_nodes``, ``y``. The *raw* integer features go in unchanged; Graphormer's
  ``convert_to_single_emb`` adds its own per-column offsets and padding shifts.
* :func:`pack` / :func:`unpack`: many such molecules as a few flat arrays, the file
  (``numpy.savez``, read back with ``allow_pickle=False``) that the driver hands to the workers.
* :func:`serve`: the workers' command loop, one JSON object per line on stdin and stdout.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["pack", "serve", "to_hf_item", "unpack"]


def to_hf_item(x, edge_index, edge_attr, y) -> dict:
    """One molecule as ``transformers``' Graphormer expects it before ``preprocess_item``.

    Args:
        x: ``[n, F]`` integer node features (a NumPy array or a CPU tensor), or ``[n]``.
        edge_index: ``[2, E]`` integer, both directions of every bond.
        edge_attr: ``[E, Fe]`` integer edge features, or ``[E]``.
        y: the graph's regression target(s), ``[T]`` or ``[1, T]`` float.

    Returns:
        dict: ``node_feat`` ``[n, F]`` int64, ``edge_index`` ``[2, E]`` int64, ``edge_attr``
        ``[E, Fe]`` int64, ``num_nodes`` (int), ``y`` (list of ``T`` floats; Graphormer's
        collator concatenates these into ``labels``).

    Raises:
        ValueError: if ``edge_index`` is not ``[2, E]``, ``edge_attr`` has not ``E`` rows, an edge
            names a node outside ``0 .. n - 1``, or a feature is negative (Graphormer's offsets
            assume ids ``>= 0``).
    """
    node_feat = np.asarray(x, dtype=np.int64)
    node_feat = node_feat[:, None] if node_feat.ndim == 1 else node_feat
    edge_index = np.asarray(edge_index, dtype=np.int64)
    edge_attr = np.asarray(edge_attr, dtype=np.int64)
    edge_attr = edge_attr[:, None] if edge_attr.ndim == 1 else edge_attr
    n = node_feat.shape[0]
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must be [2, E], got shape {edge_index.shape}.")
    if edge_attr.shape[0] != edge_index.shape[1]:
        raise ValueError(
            f"edge_attr has {edge_attr.shape[0]} rows for {edge_index.shape[1]} edges; give one "
            "row of bond features per directed edge."
        )
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= n):
        raise ValueError(f"edge_index names nodes outside 0..{n - 1}.")
    if (node_feat.size and node_feat.min() < 0) or (edge_attr.size and edge_attr.min() < 0):
        raise ValueError("node and edge features must be non-negative integer ids.")
    return {
        "node_feat": node_feat,
        "edge_index": edge_index,
        "edge_attr": edge_attr,
        "num_nodes": int(n),
        "y": [float(v) for v in np.asarray(y, dtype=np.float64).reshape(-1)],
    }


def pack(items: Sequence[dict]) -> dict[str, np.ndarray]:
    """Concatenate :func:`to_hf_item` dicts into flat arrays (for ``numpy.savez``).

    Returns:
        dict: ``node_feat`` ``[sum n, F]``, ``edge_index`` ``[2, sum E]`` (per-graph node ids),
        ``edge_attr`` ``[sum E, Fe]``, ``num_nodes`` ``[G]``, ``num_edges`` ``[G]``, ``y``
        ``[G, T]`` float64.
    """
    return {
        "node_feat": np.concatenate([it["node_feat"] for it in items]),
        "edge_index": np.concatenate([it["edge_index"] for it in items], axis=1),
        "edge_attr": np.concatenate([it["edge_attr"] for it in items]),
        "num_nodes": np.array([it["num_nodes"] for it in items], dtype=np.int64),
        "num_edges": np.array([it["edge_index"].shape[1] for it in items], dtype=np.int64),
        "y": np.array([it["y"] for it in items], dtype=np.float64),
    }


def unpack(arrays) -> list[dict]:
    """Inverse of :func:`pack`: the list of per-molecule dicts (arrays are copies)."""
    node_off = np.concatenate([[0], np.cumsum(arrays["num_nodes"])])
    edge_off = np.concatenate([[0], np.cumsum(arrays["num_edges"])])
    items = []
    for g in range(len(arrays["num_nodes"])):
        e0, e1 = edge_off[g], edge_off[g + 1]
        items.append({
            "node_feat": np.array(arrays["node_feat"][node_off[g]:node_off[g + 1]]),
            "edge_index": np.array(arrays["edge_index"][:, e0:e1]),
            "edge_attr": np.array(arrays["edge_attr"][e0:e1]),
            "num_nodes": int(arrays["num_nodes"][g]),
            "y": [float(v) for v in arrays["y"][g]],
        })
    return items


def serve(handlers: dict[str, Callable[..., dict]]) -> None:
    """Answer commands until ``{"cmd": "quit"}`` or end of input.

    Each input line is a JSON object ``{"cmd": NAME, **kwargs}``; the reply is one JSON line,
    ``handlers[NAME](**kwargs)`` (a dict), or ``{"error": message}`` for an unknown command.
    Exceptions propagate (the worker dies, and the driver shows its stderr).
    """
    for line in sys.stdin:
        msg = json.loads(line)
        cmd = msg.pop("cmd")
        if cmd == "quit":
            return
        reply = handlers[cmd](**msg) if cmd in handlers else {"error": f"unknown command {cmd!r}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
