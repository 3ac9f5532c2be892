"""Constants shared by preprocessing (:mod:`graph_urpe.transforms`) and the models
(:mod:`graph_urpe.nn`, :mod:`graph_urpe.dense`), so that neither imports the other."""

UNREACHABLE: int = -1
"""SPD value of node pairs with no path between them (they lie in different connected components),
as stored in ``spd`` by :class:`graph_urpe.transforms.AddShortestPathDistance`; also the value
:func:`graph_urpe.dense.to_dense_spd` puts in padded cells. Distances themselves are >= 0."""
