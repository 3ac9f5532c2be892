"""graph-urpe: Universal RPE-based (URPE) attention for graphs and sequences.

URPE attention (Luo et al., NeurIPS 2022, arXiv 2205.13401, Eq. 4) multiplies the row-stochastic
RPE attention matrix element-wise by a learnable relation-indexed matrix ``C``::

    Attn(X) = (softmax(Q K^T / sqrt(d) + B) ⊙ C) V

Subpackages: :mod:`graph_urpe.nn` (layers), :mod:`graph_urpe.data` (datasets, batching,
data modules: :mod:`graph_urpe.data.modules`), :mod:`graph_urpe.models` (Lightning modules: the
training logic), :mod:`graph_urpe.cli` (the ``graph-urpe`` command and its subcommands).
"""

__version__ = "0.1.0"
