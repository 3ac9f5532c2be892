"""PyG-style layers for URPE attention (Luo et al., NeurIPS 2022, arXiv 2205.13401).

What researchers import: the attention core :func:`~graph_urpe.nn.functional.urpe_attention`,
:class:`MultiheadURPEAttention`, relation tables (:class:`RelationEmbedding`), and the graph and
sequence models built from them. No training code lives here.
"""

from graph_urpe.nn.attention import MultiheadURPEAttention
from graph_urpe.nn.encoders import CategoricalEncoder, DegreeEncoder
from graph_urpe.nn.functional import urpe_attention
from graph_urpe.nn.graphormer import Graphormer, GraphormerLayer, graph_relation_ids
from graph_urpe.nn.relations import (
    RelationEmbedding,
    num_relative_positions,
    relative_position_ids,
)
from graph_urpe.nn.transformer import SequenceTransformer, TransformerLayer, TransformerLM

__all__ = [
    "CategoricalEncoder",
    "DegreeEncoder",
    "Graphormer",
    "GraphormerLayer",
    "MultiheadURPEAttention",
    "RelationEmbedding",
    "SequenceTransformer",
    "TransformerLM",
    "TransformerLayer",
    "graph_relation_ids",
    "num_relative_positions",
    "relative_position_ids",
    "urpe_attention",
]
