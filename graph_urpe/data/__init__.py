"""Datasets and batching for graph-urpe.

Molecular graphs (one module per concept): :mod:`~graph_urpe.data.featurize` (SMILES -> graph,
OGB and ZINC features), :mod:`~graph_urpe.data.zinc_target` (ZINC's constrained solubility),
:mod:`~graph_urpe.data.csv.dataset` (your CSV), :mod:`~graph_urpe.data.zinc` (embedded
default), :mod:`~graph_urpe.data.zinc` (PyG ZINC), :mod:`~graph_urpe.data.ogb` (OGB),
:mod:`~graph_urpe.data.ogb` (OGB-LSC PCQM4Mv2), offline builders ``build_*``,
:mod:`~graph_urpe.data.cache` (safe, self-repairing reads of every processed cache),
:mod:`~graph_urpe.data.registry` (load any of them by name), :mod:`~graph_urpe.data.summary` and
:mod:`~graph_urpe.data.indexed` (a view whose graphs carry their index).
Batching: :mod:`~graph_urpe.data.sampler`. Sequences: :mod:`~graph_urpe.data.synthetic`,
:mod:`~graph_urpe.data.text`.

Submodules are imported explicitly (``from graph_urpe.data.zinc import ZincLikeDataset``), so
importing one dataset does not load RDKit, OGB and every other dependency.
"""
