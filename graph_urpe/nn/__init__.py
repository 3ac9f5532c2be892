"""PyG-style layers for URPE attention (Luo et al., NeurIPS 2022, arXiv 2205.13401).

What researchers import: the attention core :func:`~graph_urpe.nn.functional.urpe_attention`,
:class:`MultiheadURPEAttention`, relation tables (:class:`RelationEmbedding`), and the graph and
sequence models built from them. No training code lives here.
"""

from graph_urpe.nn.attention import MultiheadURPEAttention
from graph_urpe.nn.functional import urpe_attention
from graph_urpe.nn.relations import (
    RelationEmbedding,
    num_relative_positions,
    relative_position_ids,
)
from graph_urpe.nn.transformer import SequenceTransformer, TransformerLayer, TransformerLM

__all__ = [
    "MultiheadURPEAttention",
    "RelationEmbedding",
    "SequenceTransformer",
    "TransformerLM",
    "TransformerLayer",
    "num_relative_positions",
    "relative_position_ids",
    "urpe_attention",
]
