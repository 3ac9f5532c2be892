"""Datasets and batching for graph-urpe.

Molecular graphs (one module per concept): :mod:`~graph_urpe.data.featurize` (SMILES -> graph,
OGB and ZINC features), :mod:`~graph_urpe.data.processing` (many SMILES rows -> graphs, in
parallel), :mod:`~graph_urpe.data.zinc_target` (ZINC's constrained solubility, computed with
RDKit), :mod:`~graph_urpe.data.csv` (your CSV: the dataset, labels, row errors, splits),
:mod:`~graph_urpe.data.zinc` (the embedded ZINC-like default and PyG ZINC),
:mod:`~graph_urpe.data.ogb` (OGB graph property prediction and OGB-LSC PCQM4Mv2),
:mod:`~graph_urpe.data.cache` (safe, self-repairing reads of every processed cache),
:mod:`~graph_urpe.data.families` (load any of them by name), :mod:`~graph_urpe.data.statistics`
(a printable table of a dataset), :mod:`~graph_urpe.data.indexed` (a view whose graphs carry their
index) and :mod:`~graph_urpe.data.predictions` (the prediction table for SMILES inputs).
Offline builders of the OGB, PCQM4Mv2 and PyG ZINC folders are scripts beside the data, not
part of the package: ``datasets/build_*.py`` in a clone. Synthetic graphs: :mod:`~graph_urpe.data.synthetic_graphs`. Batching:
:mod:`~graph_urpe.data.sampler` (and :mod:`~graph_urpe.data.resumable_loader`, the loader that
resumes mid-epoch). Sequences: :mod:`~graph_urpe.data.synthetic_sequences`,
:mod:`~graph_urpe.data.text`.

Submodules are imported explicitly (``from graph_urpe.data.zinc import ZincLikeDataset``), so
importing one dataset does not load RDKit, OGB and every other dependency.
"""
