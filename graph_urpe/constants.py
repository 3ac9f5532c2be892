"""Constants shared by the preprocessing (:mod:`graph_urpe.transforms`) and the layers
(:mod:`graph_urpe.nn`, :mod:`graph_urpe.dense`); the lowest layer both may import."""

UNREACHABLE: int = -1
"""Shortest-path distance (SPD) stored for node pairs in different connected components (no path
between them), and the resistance distance (as ``-1.0``) for the same pairs; distances themselves
are >= 0."""

PAIR_INDEX: str = "pair_index"
"""Attribute holding the ``[2, n * n]`` index of all ordered node pairs of a graph, which every
pairwise relation of :mod:`graph_urpe.transforms` (``spd``, ``resistance``, ...) is aligned with;
PyG's collate increments it like ``edge_index``."""

__all__ = ["PAIR_INDEX", "UNREACHABLE"]
