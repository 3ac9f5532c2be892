"""Your own molecules from a CSV file, one concept per module:
:mod:`~graph_urpe.data.csv.dataset` (:class:`~graph_urpe.data.csv.dataset.SmilesCSVDataset`, the
dataset), :mod:`~graph_urpe.data.csv.labels` (label columns -> float matrix, bad values refused),
:mod:`~graph_urpe.data.csv.row_errors` (rows that cannot become a graph: reported, skipped or
refused), :mod:`~graph_urpe.data.csv.splits` (seeded random, Murcko-scaffold and column splits) and
:mod:`~graph_urpe.data.csv.checks` (warnings: a constant label column, duplicate SMILES in a split).

Labels, row errors and splits also serve the offline builders and the other datasets. Submodules are
imported explicitly, so reading labels does not load RDKit.
"""
