"""PyG graphs in a column store (:mod:`graph_urpe.data.store`): a list of
:class:`~torch_geometric.data.Data` to columns (in the worker that made them), and the columns
back to PyG's collated ``_data`` + ``slices`` layout, memory-mapped, with one graph at a time
separated on access.

Each attribute ``key`` of the graphs is column ``graph.<key>``, laid out as PyG's
:class:`~torch_geometric.data.InMemoryDataset` collates it (``increment=False``: node indices stay
local to their graph), so :func:`torch_geometric.data.separate.separate` reads it back unchanged;
texts (``smiles``) are a string column; the node counts are column ``num_nodes``.

An attribute that is a pure function of the node count (:data:`DERIVED`: ``pair_index``, all
ordered pairs, half of a molecule's cache with the shortest paths) is stored only for the graphs
whose value differs from the function's: column ``derived.<key>`` (``uint8`` per graph) says
which graphs get it rebuilt on access, ``graph.<key>`` holds the others' blocks (empty for the
rest). Checked graph by graph, so a ``pre_transform`` that leaves another ``pair_index`` is stored
as it is.

**Kept graphs.** PyG's :class:`~torch_geometric.data.InMemoryDataset` keeps every graph it has
separated and returns shallow copies of it (``copy.copy``: 5 us a molecule against 37 us to cut
it out again), which would hold all 1.58 M MOSES graphs after one epoch (about 10 KB each). Here
graphs are kept the same way only while all of them fit :data:`CACHE_BYTES` (estimated before
the first read: :data:`GRAPH_OBJECT_BYTES` each plus their rebuilt ``pair_index``): datasets of a
few ten thousand molecules and fewer, where the cutting is a visible share of a fit (FreeSolv:
1.1 CPU s of about 30); larger ones are cut out at every access and hold nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.data.collate import collate

from graph_urpe.data.cache import CorruptCacheError
from graph_urpe.data.store import Column, StringColumn, encode_strings
from graph_urpe.transforms import pair_index

DERIVED: dict[str, Callable[[int], torch.Tensor]] = {"pair_index": pair_index}
"""Attributes stored only where they differ from a function of the graph's node count."""

NARROW: dict[str, np.dtype] = {"x": np.dtype(np.uint8), "edge_attr": np.dtype(np.uint8),
                               "edge_index": np.dtype(np.int32)}
"""Integer attributes stored in a narrower dtype than the graphs carry and read back in theirs
(``int64``): molecule features fit a byte (OGB's largest vocabulary is the 119 atomic numbers,
ZINC's 28 atom types), node indices local to a graph fit ``int32``. An OGB molecule of 13 atoms:
3.7 KB of stored columns with the shortest paths and resistance distances, 2.0 KB narrowed."""

GRAPH = "graph."
"""Prefix of the columns holding graph attributes."""

CACHE_BYTES: int = 256 * 2**20
"""Graphs read from a store are kept (as PyG keeps them) while all of them are estimated to fit
this many bytes (see the module docstring)."""

GRAPH_OBJECT_BYTES: int = 12 * 1024
"""Estimated memory of one kept graph besides its rebuilt ``pair_index``: the
:class:`~torch_geometric.data.Data`, its storage and about ten tensor views (measured: 10 KB of
resident memory a FreeSolv molecule)."""

ColumnBlocks = tuple[str, np.ndarray, np.ndarray, int, str]
"""``(name, values, counts, cat_dim, kind)``: the argument of
:meth:`~graph_urpe.data.store_writer.GraphStoreWriter.append` for some graphs."""


def _derived_blocks(graphs: Sequence[Data], key: str) -> list[ColumnBlocks]:
    """Removes :obj:`key` from the graphs; the blocks of ``derived.<key>`` and the kept values."""
    rebuild = DERIVED[key]
    flags = np.zeros(len(graphs), dtype=np.uint8)
    kept, counts = [], np.zeros(len(graphs), dtype=np.int64)
    first = graphs[0][key]
    d = graphs[0].__cat_dim__(key, first) % first.dim()
    for i, graph in enumerate(graphs):
        value = graph[key]
        del graph[key]
        canonical = rebuild(int(graph.num_nodes))
        if value.dtype == canonical.dtype and torch.equal(value, canonical):
            flags[i] = 1
        else:
            kept.append(value.numpy())
            counts[i] = value.shape[d]
    empty = np.empty(first.shape[:d] + (0,) + first.shape[d + 1:], dtype=first.numpy().dtype)
    values = np.concatenate(kept, axis=d) if kept else empty
    return [(f"derived.{key}", flags, np.ones(len(graphs), dtype=np.int64), 0, "array"),
            (GRAPH + key, values, counts, d, "array")]


def _narrowed(key: str, value: torch.Tensor) -> np.ndarray:
    """``value`` as stored: in its :data:`NARROW` dtype when it has one and is a wider integer.

    Raises:
        ValueError: for values outside the narrow dtype's range.
    """
    array = value.numpy()
    narrow = NARROW.get(key)
    if narrow is None or value.dtype == torch.bool or value.is_floating_point() \
            or value.is_complex() or array.dtype.itemsize <= narrow.itemsize:
        return array
    info = np.iinfo(narrow)
    if array.size and (int(array.min()) < info.min or int(array.max()) > info.max):
        raise ValueError(
            f"graph attribute {key!r} holds values in [{int(array.min())}, {int(array.max())}], "
            f"outside {narrow} ({info.min} to {info.max}), the dtype a stored dataset keeps it in: "
            "categorical features beyond a byte are not a featurization of this package")
    return array.astype(narrow)


def graphs_to_columns(graphs: Sequence[Data]) -> list[ColumnBlocks]:
    r"""The column blocks of some graphs (PyG's collate, ``increment=False``, turned into NumPy
    arrays and per-graph counts), for :class:`~graph_urpe.data.store_writer.GraphStoreWriter`.

    :data:`DERIVED` attributes are removed from the graphs (see the module docstring);
    :data:`NARROW` ones are stored narrowed.

    Args:
        graphs (Sequence[Data]): graphs with the same attributes (at least one).

    Returns:
        list: ``(name, values, counts, cat_dim, kind)`` per column.

    Raises:
        ValueError: for an attribute that is neither a tensor, a number nor a text per graph,
            or a :data:`NARROW` one with values outside its narrow dtype.
    """
    n = len(graphs)
    blocks: list[ColumnBlocks] = [
        ("num_nodes", np.fromiter((g.num_nodes for g in graphs), dtype=np.int64, count=n),
         np.ones(n, dtype=np.int64), 0, "array")]
    for key in DERIVED:
        if key in graphs[0]:
            blocks += _derived_blocks(graphs, key)
    data, slices, _ = collate(Data, data_list=graphs, increment=False, add_batch=False)
    for key in slices:
        value = data[key]
        counts = np.diff(slices[key].numpy()).astype(np.int64)
        if isinstance(value, torch.Tensor):
            cat_dim = data.__cat_dim__(key, value)
            d = 0 if cat_dim is None else cat_dim % value.dim()
            blocks.append((GRAPH + key, _narrowed(key, value), counts, d, "array"))
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            blob, lengths = encode_strings(value)
            blocks.append((GRAPH + key, blob, lengths, 0, "str"))
        else:
            raise ValueError(f"graph attribute {key!r} holds {type(value[0]).__name__} values; "
                             "a stored dataset keeps tensors, numbers and texts only")
    return blocks


class StoredGraphs:
    r"""The graph columns of a store in PyG's collated layout: :attr:`data` (one
    :class:`~torch_geometric.data.Data` whose attributes are the concatenated tensors, each a
    view of a memory map, and texts as :class:`~graph_urpe.data.store.StringColumn`) and
    :attr:`slices` (per attribute, ``int64`` ``[N + 1]``), as an
    :class:`~torch_geometric.data.InMemoryDataset` holds them.

    Args:
        columns (dict[str, Column]): the columns of :func:`~graph_urpe.data.store.read_store`.
        source (str): the store's manifest, for errors.

    Raises:
        CorruptCacheError: naming :obj:`source`, if the columns do not describe the same graphs.
    """

    def __init__(self, columns: dict[str, Column], source: str) -> None:
        if "num_nodes" not in columns:
            raise CorruptCacheError(source, "no num_nodes column")
        self.num_nodes = columns["num_nodes"].values
        counts = {name: len(c.slices) - 1 for name, c in columns.items()
                  if name.startswith((GRAPH, "derived.")) or name == "num_nodes"}
        if len(set(counts.values())) > 1:
            raise CorruptCacheError(source, f"columns of different graph counts: {counts}")
        self.data = Data()
        self.slices: dict[str, torch.Tensor] = {}
        self.derived: dict[str, tuple[np.ndarray, Column]] = {}
        for name, column in columns.items():
            if not name.startswith(GRAPH):
                continue
            key = name.removeprefix(GRAPH)
            if key in DERIVED:
                if f"derived.{key}" not in columns:
                    raise CorruptCacheError(source, f"no derived.{key} column")
                self.derived[key] = (columns[f"derived.{key}"].values, column)
            elif column.kind == "str":
                self.data[key] = StringColumn(column.values, column.slices)
                self.slices[key] = torch.arange(len(column.slices), dtype=torch.long)
            else:
                self.data[key] = torch.from_numpy(column.values)
                self.slices[key] = torch.from_numpy(column.slices)
        # key -> (values, NumPy slices, axis or None to index, dtype to read it in or None),
        # what get() cuts graphs with (a NARROW attribute is read back as int64)
        self._cut: dict[str, tuple] = {}
        for key, value in self.data.to_dict().items():
            if isinstance(value, torch.Tensor):
                cat_dim = self.data.__cat_dim__(key, value)
                widen = torch.int64 if key in NARROW and value.dtype != torch.int64 else None
                self._cut[key] = (value, self.slices[key].numpy(),
                                  None if cat_dim is None else cat_dim % value.dim(), widen)
            else:
                self._cut[key] = (value, None, None, None)
        sizes = self.num_nodes.astype(np.int64)
        kept = len(sizes) * GRAPH_OBJECT_BYTES + 8 * int((sizes * sizes).sum())
        self._kept: list[Data | None] | None = [None] * len(sizes) if kept <= CACHE_BYTES \
            else None

    def __len__(self) -> int:
        return len(self.num_nodes)

    def get(self, idx: int) -> Data:
        r"""Graph :obj:`idx` (its tensors are views of the memory maps), as
        :func:`torch_geometric.data.separate.separate` cuts it out of :attr:`data` (without
        decrementing), read from the NumPy slices: about 35 us a molecule, a quarter of
        :func:`~torch_geometric.data.separate.separate`'s time. In a store small enough to keep
        its graphs (:data:`CACHE_BYTES`), a shallow copy of the graph kept at its first read,
        as :meth:`torch_geometric.data.InMemoryDataset.get` returns."""
        if self._kept is not None and self._kept[idx] is not None:
            return copy.copy(self._kept[idx])
        values = {}
        for key, (value, bounds, cat_dim, widen) in self._cut.items():
            if cat_dim is None:
                values[key] = value[idx]  # texts; tensors PyG stacked (cat_dim None)
            else:
                start = int(bounds[idx])
                values[key] = value.narrow(cat_dim, start, int(bounds[idx + 1]) - start)
                if widen is not None:
                    values[key] = values[key].to(widen)
        n = int(self.num_nodes[idx])
        values["num_nodes"] = n
        for key, (rebuilt, column) in self.derived.items():
            if rebuilt[idx]:
                values[key] = DERIVED[key](n)
            else:
                index = [slice(None)] * column.values.ndim
                index[column.cat_dim] = slice(int(column.slices[idx]),
                                              int(column.slices[idx + 1]))
                values[key] = torch.from_numpy(np.ascontiguousarray(column.values[tuple(index)]))
        data = Data()
        # Filled as PyG's storage holds attributes (its private mapping, fenced by
        # tests/test_private_apis.py): setting them one by one costs 12 us each in PyG 2.8
        # (every set looks up a cache attribute through an AttributeError).
        data._store._mapping.update(values)
        if self._kept is not None:
            self._kept[idx] = copy.copy(data)
        return data
