"""graph-urpe: Universal RPE-based (URPE) attention for graphs and sequences.

URPE attention (Luo et al., NeurIPS 2022, arXiv 2205.13401, Eq. 4) multiplies the row-stochastic
RPE attention matrix element-wise by a learnable relation-indexed matrix ``C``::

    Attn(X) = (softmax(Q K^T / sqrt(d) + B) ⊙ C) V

Subpackages: :mod:`graph_urpe.nn` (layers), :mod:`graph_urpe.data` (datasets, batching,
data modules: :mod:`graph_urpe.data.modules`), :mod:`graph_urpe.models` (Lightning modules: the
training logic), :mod:`graph_urpe.cli` (the ``graph-urpe`` command and its subcommands).
``graph_urpe.Predictor`` (:mod:`graph_urpe.models.predictor`): a trained checkpoint in memory,
predicting SMILES or RDKit molecules from Python (imported on first use: ``import graph_urpe``
alone loads neither torch nor Lightning).
"""

__version__ = "0.1.0"

__all__ = ["Predictor", "__version__"]


def __getattr__(name: str):
    if name == "Predictor":
        from graph_urpe.models.predictor import Predictor

        return Predictor
    raise AttributeError(f"module 'graph_urpe' has no attribute {name!r}")
