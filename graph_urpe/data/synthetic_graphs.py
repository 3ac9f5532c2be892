"""Random graphs with identical node features and purely structural targets: the graph analogue
of the synthetic tasks of Luo et al. (NeurIPS 2022, arXiv 2205.13401, Sec. 5.1).

With identical node (and edge) features and no centrality encoding or graph token, the rows of
``softmax(B)`` sum to one, so an RPE Graphormer gives every node of a graph the same output in
every layer and cannot express any node-level structural function, while URPE (``C`` indexed by
the SPD) can: :class:`SyntheticGraphDataset` makes such tasks, ``benchmarks/graph_synthetic.py``
trains on them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import networkx as nx
import numpy as np
import torch
from torch_geometric.data import Data, InMemoryDataset

from graph_urpe.choices import check_choice
from graph_urpe.transforms import AddShortestPathDistance

__all__ = ["DEFAULT_KINDS", "GRAPH_KINDS", "SYNTHETIC_TASKS", "SyntheticGraphDataset",
           "check_graph_options"]

#: Structural tasks of :class:`SyntheticGraphDataset`.
SyntheticGraphTask = Literal["degree", "distance2", "eccentricity", "cut_vertex", "diameter",
                             "pairs_distance2", "has_cut_vertex"]

SYNTHETIC_TASKS: dict[str, str] = {
    "degree": "node",
    "distance2": "node",
    "eccentricity": "node",
    "cut_vertex": "node",
    "diameter": "graph",
    "pairs_distance2": "graph",
    "has_cut_vertex": "graph",
}
"""Task name -> level. Node level: the degree, the number of nodes at distance exactly 2, the
eccentricity (largest distance to another node), whether the node is a cut vertex (1 if removing
it disconnects the graph: biconnectivity, Zhang et al., ICLR 2023). Graph level: the diameter, the number of
unordered node pairs at distance exactly 2, and whether the graph has a cut vertex. All are class labels (the integer value itself)."""

GRAPH_KINDS = ("tree", "erdos_renyi", "bridged")
"""Graph families of :class:`SyntheticGraphDataset`."""

DEFAULT_KINDS = ("tree", "erdos_renyi")
"""The families drawn by default (``"bridged"`` is for the biconnectivity tasks)."""


def check_graph_options(task: str, min_nodes: int, max_nodes: int, kinds: tuple[str, ...]
                        ) -> None:
    """Check the options of a structural task's graphs (:class:`SyntheticGraphDataset` and its
    data module).

    Raises:
        ValueError: an unknown ``task`` or kind, no kind, sizes outside ``2 <= min_nodes <=
            max_nodes``, or ``"bridged"`` graphs with ``min_nodes < 7``.
    """
    check_choice("task", task, SyntheticGraphTask)
    if not 2 <= min_nodes <= max_nodes:
        raise ValueError(f"need 2 <= min_nodes <= max_nodes, got {min_nodes}, {max_nodes}.")
    bad = [k for k in kinds if k not in GRAPH_KINDS]
    if bad or not kinds:
        raise ValueError(f"kinds must be a non-empty subset of {GRAPH_KINDS}, got {kinds!r}.")
    if "bridged" in kinds and min_nodes < 7:
        raise ValueError(f"kind 'bridged' needs min_nodes >= 7, got {min_nodes}.")


def _chorded_cycle(g: nx.Graph, size: int, rng: np.random.Generator) -> list[int]:
    """Add a cycle of ``size`` new nodes with one random chord (size >= 4) to ``g``: a
    2-connected block. Returns its nodes."""
    nodes = list(range(g.number_of_nodes(), g.number_of_nodes() + size))
    nx.add_cycle(g, nodes)
    if size >= 4:
        i = int(rng.integers(size))
        g.add_edge(nodes[i], nodes[(i + int(rng.integers(2, size - 1))) % size])
    return nodes


def _bridged(n: int, rng: np.random.Generator) -> nx.Graph:
    """Two chorded cycles (2-connected blocks ``A`` and ``B``, ``n - 1`` nodes together, at least
    3 each) and a connector node ``c`` adjacent to ``a1`` in ``A`` and ``b1`` in ``B``; with
    probability 1/2 one more edge ``a2 - b2`` (``a2 != a1``, ``b2 != b1``). Without it ``c``,
    ``a1`` and ``b1`` are cut vertices; with it the graph is 2-connected. Node degrees and local
    distances look alike either way, so a model must see whether every path between the blocks
    runs through ``c``: biconnectivity (Zhang et al., ICLR 2023)."""
    size_a = int(rng.integers(3, n - 3))
    g = nx.Graph()
    a = _chorded_cycle(g, size_a, rng)
    b = _chorded_cycle(g, n - 1 - size_a, rng)
    c = g.number_of_nodes()
    i, j = int(rng.integers(len(a))), int(rng.integers(len(b)))
    g.add_edges_from([(c, a[i]), (c, b[j])])
    if rng.random() < 0.5:
        g.add_edge(a[(i + 1 + int(rng.integers(len(a) - 1))) % len(a)],
                   b[(j + 1 + int(rng.integers(len(b) - 1))) % len(b)])
    return g


def _random_graph(kind: str, n: int, rng: np.random.Generator, mean_degree: float) -> nx.Graph:
    """A uniform random labelled tree, a connected Erdős–Rényi ``G(n, p)`` (redrawn until
    connected) with ``p = mean_degree / (n - 1)``, or two blocks joined through a connector node
    (``"bridged"``, :func:`_bridged`; at least 7 nodes)."""
    if kind == "bridged":
        return _bridged(n, rng)
    seed = int(rng.integers(2**31))
    if kind == "tree":
        return nx.random_labeled_tree(n, seed=seed)
    p = min(1.0, mean_degree / (n - 1))
    for attempt in range(1000):
        g = nx.gnp_random_graph(n, p, seed=seed + attempt)
        if nx.is_connected(g):
            return g
    raise RuntimeError(f"no connected G({n}, {p:.3f}) in 1000 draws; raise mean_degree")


def _targets(g: nx.Graph, task: str) -> torch.Tensor:
    dist = dict(nx.all_pairs_shortest_path_length(g))
    nodes = range(g.number_of_nodes())
    if task == "degree":
        values = [g.degree(v) for v in nodes]
    elif task == "distance2":
        values = [sum(1 for d in dist[v].values() if d == 2) for v in nodes]
    elif task == "eccentricity":
        values = [max(dist[v].values()) for v in nodes]
    elif task == "cut_vertex":
        cut = set(nx.articulation_points(g))
        values = [int(v in cut) for v in nodes]
    elif task == "diameter":
        values = [max(max(dist[v].values()) for v in nodes)]
    elif task == "has_cut_vertex":
        values = [int(not nx.is_biconnected(g))]
    else:
        values = [sum(1 for v in nodes for d in dist[v].values() if d == 2) // 2]
    return torch.tensor(values, dtype=torch.long)


class SyntheticGraphDataset(InMemoryDataset):
    r"""Seeded random trees and connected Erdős–Rényi graphs with identical node features and a
    structural classification target, in memory (nothing is written to disk).

    Every node has feature ``x = [0]`` (one category) and every edge ``edge_attr = [0]``, so only
    the structure distinguishes nodes. Graphs alternate between the kinds in ``kinds``; sizes are
    uniform in ``[min_nodes, max_nodes]``. Each graph goes through ``pre_transform`` (default:
    :class:`~graph_urpe.transforms.AddShortestPathDistance`, for Graphormer's encodings).

    Args:
        task (str): one of :data:`SYNTHETIC_TASKS`: ``"degree"``, ``"distance2"``,
            ``"eccentricity"``, ``"cut_vertex"`` (node level), ``"diameter"``,
            ``"pairs_distance2"``, ``"has_cut_vertex"`` (graph level).
        num_graphs (int, optional): number of graphs. (default: :obj:`500`)
        min_nodes (int, optional): smallest graph. (default: :obj:`8`)
        max_nodes (int, optional): largest graph. (default: :obj:`20`)
        kinds (tuple[str], optional): graph families, from :data:`GRAPH_KINDS`.
            (default: :obj:`("tree", "erdos_renyi")`)
        mean_degree (float, optional): expected degree of the Erdős–Rényi graphs.
            (default: :obj:`3.0`)
        seed (int, optional): seed of the generator (same seed, same graphs). (default: :obj:`0`)
        transform (callable, optional): PyG transform applied on access. (default: :obj:`None`)
        pre_transform (callable, optional): applied once per graph. (default:
            :obj:`AddShortestPathDistance()`)

    Attributes:
        level (str): ``"node"`` or ``"graph"``.
        num_classes (int): ``1 + `` the largest label.

    Shapes:
        - each graph: ``x`` ``[n, 1]`` long (zeros), ``edge_index`` ``[2, E]`` (both directions),
          ``edge_attr`` ``[E, 1]`` long (zeros), ``y`` ``[n]`` (node level) or ``[1]`` long,
          ``pair_index`` ``[2, n * n]`` int32, ``spd`` ``[n * n]`` int16, ``spd_pred_index``
          ``[n * n]`` int32

    Raises:
        ValueError: for an unknown ``task`` or kind, or sizes outside ``2 <= min <= max``.
    """

    def __init__(
        self,
        task: SyntheticGraphTask,
        num_graphs: int = 500,
        min_nodes: int = 8,
        max_nodes: int = 20,
        kinds: tuple[str, ...] = DEFAULT_KINDS,
        mean_degree: float = 3.0,
        seed: int = 0,
        transform: Callable | None = None,
        pre_transform: Callable | None = None,
    ) -> None:
        check_graph_options(task, min_nodes, max_nodes, kinds)
        super().__init__(None, transform)
        self.task = task
        self.level = SYNTHETIC_TASKS[task]
        pre = AddShortestPathDistance() if pre_transform is None else pre_transform
        rng = np.random.default_rng(seed)
        data_list = []
        for i in range(num_graphs):
            n = int(rng.integers(min_nodes, max_nodes + 1))
            g = _random_graph(kinds[i % len(kinds)], n, rng, mean_degree)
            edges = torch.tensor(list(g.edges()), dtype=torch.long).t().reshape(2, -1)
            edge_index = torch.cat([edges, edges.flip(0)], dim=1)
            data = Data(
                x=torch.zeros(n, 1, dtype=torch.long),
                edge_index=edge_index,
                edge_attr=torch.zeros(edge_index.shape[1], 1, dtype=torch.long),
                y=_targets(g, task),
                num_nodes=n,
            )
            data_list.append(pre(data))
        self._num_label_classes = int(max(int(d.y.max()) for d in data_list)) + 1
        self.data, self.slices = self.collate(data_list)

    @property
    def num_classes(self) -> int:
        """Number of classes: one more than the largest label."""
        return self._num_label_classes

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({len(self)}, task={self.task!r}, level={self.level!r})"
