"""Constants shared by the preprocessing (:mod:`graph_urpe.transforms`) and the layers
(:mod:`graph_urpe.nn`, :mod:`graph_urpe.dense`); the lowest layer both may import."""

UNREACHABLE: int = -1
"""Shortest-path distance (SPD) stored for node pairs in different connected components (no path
between them); :func:`graph_urpe.dense.to_dense_spd` also puts it in padded cells. Distances
themselves are >= 0."""

__all__ = ["UNREACHABLE"]
