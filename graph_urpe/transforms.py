"""Graph transforms in PyG's form: all-pairs shortest-path distances and paths
(:class:`AddShortestPathDistance`), effective resistances (:class:`AddResistanceDistance`), both
computed once per graph, and the package's tensor layout (:class:`StandardLayout`).

Graphormer (Ying et al., NeurIPS 2021, Sec. 3.1.2 "spatial encoding" and "edge encoding") needs the
shortest-path distance (SPD) between every pair of nodes and, for its edge encoding, the edges along
one shortest path per pair; Graphormer-GD (Zhang, Luo, Wang, He, ICLR 2023) adds the resistance
distance (RD). The reference implementations recompute them for every sample in every epoch. Here
they are computed once, as a ``pre_transform``, with SciPy's compiled routines
(:mod:`scipy.sparse.csgraph`) and NumPy's LAPACK inverse (:mod:`graph_urpe.distances`).

**Pair layout.** A pairwise relation is stored as PyG stores an edge attribute: an index of the
pairs it describes and one value per pair. Every transform here writes (or rewrites, identically)

* ``pair_index``: ``int32`` ``[2, n * n]``, all ordered node pairs ``(i, j)`` in row-major order
  (column ``i * n + j``). Its name contains ``"index"``, so PyG's collate increments it by the
  number of nodes of the preceding graphs, exactly as ``edge_index``; it is shared by every
  relation of the graph (one index, several value vectors, like ``edge_index`` and
  ``edge_attr``). ``int32`` keeps it at 8 bytes per pair (PyG's collate keeps the dtype);
* the relation's values ``[n * n]`` under :obj:`attr_name`, aligned with ``pair_index``.

:func:`graph_urpe.dense.to_dense_pair` scatters a collated batch of them into padded
``[B, N, N]`` tensors on the training device.

**How PyG reads them.** PyG tells node from edge attributes by length alone
(:meth:`~torch_geometric.data.Data.is_node_attr` / ``is_edge_attr``), so the ``n * n`` pairs pass
for node attributes when ``n = 1`` and for edge attributes when the graph has ``E = n * n`` edges
(a complete graph with self-loops, say). No tensor layout avoids this on a plain ``Data`` (any
pair count can equal ``E``), and a ``Data`` subclass would be imposed on every user, so what
depends on it is made exact or loud instead: collation does not (``__cat_dim__`` / ``__inc__``
go by the key's name), the layers scatter by ``pair_index`` in any column order and check it
(:mod:`graph_urpe.batch_checks`), PyG's node-level handling (``subgraph``,
``RemoveIsolatedNodes``, loaders) is exact for ``n = 1`` (``n^2 = n`` for every subset), and
PyG's edge-level handling for ``E = n * n`` (``subgraph``'s edge mask, ``ToUndirected``,
``ToSparseTensor``, ``Data.sort``) either fails inside PyG or leaves pairs that the layers refuse
with the fix: apply these transforms after such edge-level transforms.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.data.datapipes import functional_transform
from torch_geometric.transforms import BaseTransform, Compose

from graph_urpe.constants import PAIR_INDEX, UNREACHABLE
from graph_urpe.distances import (
    FLOYD_WARSHALL_MAX_NODES,
    MAX_NODES,
    resistance_distance_matrix,
    shortest_path_arrays,
)

__all__ = ["FLOYD_WARSHALL_MAX_NODES", "MAX_NODES", "PAIR_INDEX", "PYG_KEYS", "UNREACHABLE",
           "AddResistanceDistance", "AddShortestPathDistance", "StandardLayout", "pair_index", "pair_pre_transform",
           "resistance_distance_matrix", "shortest_path_arrays"]


def pair_index(num_nodes: int) -> torch.Tensor:
    """All ordered pairs of a graph of ``num_nodes`` nodes, row-major, as ``int32`` ``[2, n * n]``
    (column ``i * n + j`` is ``(i, j)``): the ``pair_index`` of the module docstring. A new
    tensor each call; up to 128 nodes a copy of one kept per size (a quarter of the cost of
    building it; at most 5.6 MB kept)."""
    n = int(num_nodes)
    return _small_pair_index(n).clone() if n <= 128 else _build_pair_index(n)


def _build_pair_index(num_nodes: int) -> torch.Tensor:
    nodes = torch.arange(num_nodes, dtype=torch.int32)
    return torch.stack([nodes.repeat_interleave(num_nodes), nodes.repeat(num_nodes)])


_small_pair_index = functools.lru_cache(maxsize=None)(_build_pair_index)


def _num_nodes(data: Data, what: str) -> int:
    n = data.num_nodes
    if n is None:
        raise ValueError(
            "graph has an unknown number of nodes: give it node features `x` or set `num_nodes`"
        )
    if n > MAX_NODES:
        raise ValueError(
            f"graph with {n} nodes is too large for {what} (at most {MAX_NODES} nodes fit the "
            f"int16 storage, and n*n = {n * n} pairs would be stored): filter such graphs out of "
            "the dataset or raise its maximum graph size deliberately"
        )
    return int(n)


#: Keys with a meaning in PyG beyond those :class:`~torch_geometric.data.Data` has as attributes
#: (``x``, ``edge_index``, ``edge_attr``, ``y``, ``pos``, ``batch``, ``num_nodes``, ...): a
#: relation stored under one of them would overwrite it or be misread by PyG.
PYG_KEYS: frozenset[str] = frozenset({
    "ptr", "adj", "adj_t", "edge_label", "node_type", "edge_type", "n_id", "e_id",
    "train_mask", "val_mask", "test_mask", "num_sampled_nodes", "num_sampled_edges",
})


def _check_attr_name(attr_name: str) -> str:
    if not isinstance(attr_name, str) or not attr_name.isidentifier() or attr_name[0] == "_":
        raise ValueError(f"attr_name must be an identifier not starting with '_' (an attribute "
                         f"of the Data object), got {attr_name!r}")
    why = None
    if "index" in attr_name:
        why = "PyG's collate would increment it as a node index"
    elif "batch" in attr_name:
        why = "PyG's collate would increment it as a batch vector"
    elif hasattr(Data, attr_name) or attr_name in PYG_KEYS:
        why = "it is a standard PyG attribute or a member of Data, which it would overwrite or " \
              "be shadowed by"
    if why:
        raise ValueError(f"attr_name {attr_name!r} cannot name a pair relation: {why}; choose "
                         "another name, e.g. 'spd' or 'resistance'")
    return attr_name


def _check_free(data: Data, key: str, dtype: torch.dtype) -> None:
    """Refuse to overwrite an attribute of ``data`` other than this transform's own earlier output:
    a ``dtype`` vector of pair values, aligned with the stored ``pair_index`` or (when another
    transform of a ``Compose`` has just recomputed it, e.g. after a subgraph) of a square length
    that is neither the graph's node nor its edge count."""
    if key not in data:
        return
    value, pairs = data[key], data.get(PAIR_INDEX)
    ours = (isinstance(value, torch.Tensor) and isinstance(pairs, torch.Tensor)
            and value.dtype == dtype and value.dim() == 1)
    if ours and value.numel() != pairs.shape[-1]:
        k = value.numel()
        ours = math.isqrt(k) ** 2 == k and k not in (data.num_nodes, data.num_edges)
    if not ours:
        what = (f"{value.dtype} {list(value.shape)}" if isinstance(value, torch.Tensor)
                else type(value).__name__)
        raise ValueError(f"the graph already has an attribute {key!r} ({what}) that this "
                         f"transform did not store: choose another attr_name, or delete "
                         f"data.{key} first")


@functional_transform("add_shortest_path_distance")
class AddShortestPathDistance(BaseTransform):
    r"""Adds the shortest-path distance (SPD) of every ordered node pair, and optionally one
    shortest path per pair, to the :class:`~torch_geometric.data.Data` object
    (functional name: :obj:`add_shortest_path_distance`), for Graphormer's spatial and edge
    encodings (`Ying et al., NeurIPS 2021 <https://arxiv.org/abs/2106.05234>`_, Eqs. (6)-(7)) and
    URPE's SPD-indexed multiplier (`Luo et al., NeurIPS 2022 <https://arxiv.org/abs/2205.13401>`_,
    Eq. (4) with the relative position replaced by the SPD):

    .. math::
        \mathrm{SPD}(i, j) = \min \{ k : \text{a walk of } k \text{ edges joins } i
        \text{ and } j \}, \qquad \mathrm{SPD}(i, i) = 0.

    Edges are unweighted and treated as undirected (an edge listed in one direction only is used in
    both), as for molecules. Distances and predecessors come from SciPy's compiled
    :func:`~scipy.sparse.csgraph.floyd_warshall` for graphs of at most
    :data:`FLOYD_WARSHALL_MAX_NODES` nodes (about 0.1 ms for a 25-atom molecule, everything
    included) and from its :func:`~scipy.sparse.csgraph.dijkstra` with unit weights on a sparse
    adjacency (O(n (n + E) log n)) for larger graphs. Which shortest path is recorded when there
    are several is up to the routine; every recorded one is a shortest path.

    Sets (see the module docstring for the pair layout):

    * ``pair_index``: ``int32`` ``[2, n * n]``, all ordered pairs, row-major;
    * :obj:`attr_name` (``spd``): ``int16`` ``[n * n]``, ``SPD(i, j)`` for the pair in the same
      column of ``pair_index``; clipped at :obj:`max_distance` when given; :data:`UNREACHABLE`
      (``-1``) if ``j`` cannot be reached from ``i`` (never clipped);
    * ``{attr_name}_pred_index`` (``spd_pred_index``, only if :obj:`paths`): ``int32``
      ``[n * n]``, the node just before ``j`` on the chosen shortest path from ``i`` to ``j``; the
      pair's own ``j`` if ``i == j`` or ``j`` is unreachable (no predecessor). It holds node
      indices, so its name contains ``"index"`` and PyG's collate increments it as ``edge_index``.
      The path is the full shortest path, not truncated by :obj:`max_distance`. Because the graph
      is undirected, the predecessor of ``i`` on the path from ``j`` is the node *after* ``i`` on
      a shortest path from ``i`` to ``j``, which is how
      :func:`graph_urpe.dense.to_dense_path_edges` walks paths. O(n^2) storage, never
      O(n^2 * hops * features).

    Args:
        max_distance (int, optional): if given, distances larger than this are stored as
            :obj:`max_distance` (Graphormer's ``max_dist``). Must be in ``[1, 32767]``. The
            layers read the values as stored: clip at no less than their ``max_distance``.
            (default: :obj:`None`, no clipping)
        paths (bool, optional): also store the predecessors, needed for the multi-hop edge
            encoding. (default: :obj:`True`)
        attr_name (str, optional): name of the distance attribute (and prefix of the predecessor
            attribute); an identifier without ``"index"`` or ``"batch"`` (which PyG's collate
            increments) that is neither a standard PyG key (``x``, ``edge_attr``, ``y``,
            ``pos``, ..., :data:`PYG_KEYS`) nor a member of :class:`~torch_geometric.data.Data`.
            An attribute of that name already on the graph is refused unless it is this
            transform's own earlier output (recomputed). (default: :obj:`"spd"`)

    Shapes:
        - **input:** :obj:`Data` with ``edge_index`` ``[2, E]`` (local node indices in ``[0, n)``)
          and ``num_nodes`` ``n`` (from ``x`` or set explicitly).
        - **output:** the same object with ``pair_index`` ``[2, n * n]``, :obj:`attr_name`
          ``[n * n]`` and (if :obj:`paths`) ``{attr_name}_pred_index`` ``[n * n]`` added, on the
          CPU.

    Raises:
        ValueError: if the graph has more than :data:`MAX_NODES` (32,767) nodes, if its number of
            nodes is unknown, if ``edge_index`` is malformed or points outside ``[0, n)``, or for
            a bad :obj:`attr_name` / :obj:`max_distance`, or an attribute :obj:`attr_name` (or
            ``{attr_name}_pred_index``) already on the graph that is not this transform's.
        TypeError: if ``edge_index`` is not an integer tensor.

    Example:
        >>> from torch_geometric.datasets import ZINC
        >>> ds = ZINC(root, subset=True, pre_transform=AddShortestPathDistance())  # doctest: +SKIP
    """

    def __init__(self, max_distance: int | None = None, paths: bool = True,
                 attr_name: str = "spd") -> None:
        if max_distance is not None and not (
            isinstance(max_distance, (int, np.integer)) and 1 <= max_distance <= MAX_NODES
        ):
            raise ValueError(
                f"max_distance must be None or an integer in [1, {MAX_NODES}], got {max_distance!r}"
            )
        self.attr_name = _check_attr_name(attr_name)
        self.max_distance = None if max_distance is None else int(max_distance)
        self.paths = bool(paths)

    def forward(self, data: Data) -> Data:
        n = _num_nodes(data, type(self).__name__)
        spd, pred = shortest_path_arrays(
            data.edge_index, n, max_distance=self.max_distance, paths=self.paths
        )
        _check_free(data, self.attr_name, torch.int16)
        if self.paths:
            _check_free(data, f"{self.attr_name}_pred_index", torch.int32)
        data[PAIR_INDEX] = pair_index(n)
        data[self.attr_name] = torch.from_numpy(spd.reshape(-1))
        if self.paths:
            # No predecessor (i == j, or j unreachable): the pair's own j, which PyG increments
            # like every node index (a -1 would not survive the increments).
            none = pred < 0
            pred = np.where(none, np.arange(n, dtype=np.int32)[None, :], pred).astype(np.int32)
            data[f"{self.attr_name}_pred_index"] = torch.from_numpy(pred.reshape(-1))
        return data

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}(max_distance={self.max_distance}, "
                f"paths={self.paths}, attr_name={self.attr_name!r})")


@functional_transform("add_resistance_distance")
class AddResistanceDistance(BaseTransform):
    r"""Adds the resistance distance (effective resistance) of every ordered node pair to the
    :class:`~torch_geometric.data.Data` object (functional name:
    :obj:`add_resistance_distance`), the continuous relation of Graphormer-GD (`Zhang et al.,
    ICLR 2023 <https://arxiv.org/abs/2301.09505>`_, Sec. 4), which tells cut vertices and bridges
    apart where the shortest-path distance cannot.

    With every edge a unit resistor, the resistance between ``i`` and ``j`` of the same connected
    component with Laplacian :math:`\mathbf{L} = \mathbf{D} - \mathbf{A}` is

    .. math::
        R(i, j) = (\mathbf{e}_i - \mathbf{e}_j)^{\top} \mathbf{L}^{+} (\mathbf{e}_i - \mathbf{e}_j)
        = L^{+}_{ii} + L^{+}_{jj} - 2 L^{+}_{ij},

    with :math:`\mathbf{L}^{+}` the Moore-Penrose pseudo-inverse of the component's Laplacian
    (Klein and Randic, 1993). It is computed per connected component ``c`` of ``m`` nodes as
    :math:`(\mathbf{L}_c + \mathbf{J}/m)^{-1} = \mathbf{L}_c^{+} + \mathbf{J}/m` (one LAPACK
    inverse; the :math:`\mathbf{J}/m` terms cancel in :math:`R`), in float64. :math:`R` is a
    metric, 0 on the diagonal, equal to the SPD on trees, and at most the SPD.

    Edges are unweighted and undirected (an edge listed in one direction only is used in both;
    duplicate edges and self-loops do not change the simple graph used), as in
    :class:`AddShortestPathDistance`.

    Sets (see the module docstring for the pair layout):

    * ``pair_index``: ``int32`` ``[2, n * n]``, all ordered pairs, row-major;
    * :obj:`attr_name` (``resistance``): ``float32`` ``[n * n]``, :math:`R(i, j)` for the pair in
      the same column of ``pair_index``; :data:`UNREACHABLE` (``-1.0``) for pairs in different
      connected components (resistances are never negative).

    Args:
        attr_name (str, optional): name of the attribute, as for
            :class:`AddShortestPathDistance`. (default: :obj:`"resistance"`)

    Shapes:
        - **input:** :obj:`Data` with ``edge_index`` ``[2, E]`` and ``num_nodes`` ``n``.
        - **output:** the same object with ``pair_index`` ``[2, n * n]`` and :obj:`attr_name`
          ``[n * n]`` added, on the CPU.

    Raises:
        ValueError: as :class:`AddShortestPathDistance` (too many or unknown nodes, a malformed
            ``edge_index``, a bad :obj:`attr_name` or one already taken).

    Example:
        >>> from torch_geometric.transforms import Compose
        >>> pre = Compose([AddShortestPathDistance(), AddResistanceDistance()])
        >>> from torch_geometric.data import Data
        >>> star = Data(edge_index=torch.tensor([[0, 0, 0], [1, 2, 3]]), num_nodes=4)
        >>> pre(star).resistance.view(4, 4)[1].tolist()  # a tree: R equals the SPD
        [1.0, 0.0, 2.0, 2.0]
    """

    def __init__(self, attr_name: str = "resistance") -> None:
        self.attr_name = _check_attr_name(attr_name)

    def forward(self, data: Data) -> Data:
        n = _num_nodes(data, type(self).__name__)
        rd = resistance_distance_matrix(data.edge_index, n)
        _check_free(data, self.attr_name, torch.float32)
        data[PAIR_INDEX] = pair_index(n)
        data[self.attr_name] = torch.from_numpy(rd.reshape(-1))
        return data

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(attr_name={self.attr_name!r})"


class StandardLayout(BaseTransform):
    r"""Reshapes a graph to the tensor layout every dataset of :mod:`graph_urpe.data` yields (PyG's
    ZINC has 1-D ``x``, ``edge_attr`` and ``y``; OGB integer ``y``), so that a collated batch has
    ``y`` ``[B, T]`` whatever the source: 1-D ``x`` -> ``[n, 1]``, 1-D ``edge_attr`` ->
    ``[E, 1]``, ``y`` -> ``torch.float32`` ``[1, T]``. Other attributes are untouched.

    Shapes:
        - **input:** ``x`` ``[n]`` or ``[n, F]``; ``edge_attr`` ``[E]`` or ``[E, F_e]``; ``y``
          scalar, ``[T]`` or ``[1, T]`` (any numeric dtype).
        - **output:** ``x`` ``[n, F]``, ``edge_attr`` ``[E, F_e]``, ``y`` ``float32`` ``[1, T]``.

    Raises:
        ValueError: if ``y`` has more than one row (node-level labels are not graph labels).
    """

    def forward(self, data: Data) -> Data:
        if data.x is not None and data.x.dim() == 1:
            data.x = data.x.view(-1, 1)
        if data.edge_attr is not None and data.edge_attr.dim() == 1:
            data.edge_attr = data.edge_attr.view(-1, 1)
        y = data.y
        if isinstance(y, torch.Tensor):
            if y.dim() == 2 and y.size(0) != 1:
                raise ValueError(
                    f"graph label y must hold one row per graph, got shape {list(y.shape)}"
                )
            data.y = y.reshape(1, -1).to(torch.float32)
        return data


def pair_pre_transform(resistance: bool = False) -> AddShortestPathDistance | Compose:
    """The pre-transform of every graph-urpe dataset: unclipped SPD and predecessors (so one cache
    serves any ``max_distance`` / ``max_hops`` of the model), and with ``resistance`` the
    resistance distance too (models with ``relations`` including ``"resistance"``)."""
    spd = AddShortestPathDistance(max_distance=None, paths=True)
    return Compose([spd, AddResistanceDistance()]) if resistance else spd
