"""PyG-style layers for URPE attention (Luo et al., NeurIPS 2022, arXiv 2205.13401).

What researchers import: the attention core :func:`~graph_urpe.nn.functional.urpe_attention`,
:class:`MultiheadURPEAttention`, relation ids and tables (:class:`RelationEmbedding`,
:func:`graph_relation_ids`, :func:`relative_position_ids`; continuous relations through
:class:`GaussianBasisEmbedding`, evaluated once per :func:`distinct_values`), the Transformer
layer (:class:`TransformerLayer`, :class:`GraphormerLayer` with Graphormer's defaults; dense), the
graph layer :class:`URPEGraphConv` in PyG's sparse layout, the feature encoders, the dense
helpers of :mod:`graph_urpe.dense` (re-exported here), and the graph and sequence models built
from them. No training code lives here, and nothing from the data side.
"""

from graph_urpe.dense import from_dense_batch, to_dense_pair, to_dense_path_edges
from graph_urpe.nn.attention import MultiheadURPEAttention
from graph_urpe.nn.continuous import (
    ContinuousRelations,
    DistinctValues,
    GaussianBasisEmbedding,
    distinct_values,
    gather_heads,
)
from graph_urpe.nn.conv import URPEGraphConv
from graph_urpe.nn.encoders import CategoricalEncoder, DegreeEncoder, MultiHopEdgeEncoder
from graph_urpe.nn.functional import urpe_attention
from graph_urpe.nn.graphormer import GraphormerEncoder
from graph_urpe.nn.graphormer_model import Graphormer
from graph_urpe.nn.heads import GraphHead
from graph_urpe.nn.relations import (
    RelationEmbedding,
    graph_relation_ids,
    num_graph_relations,
    num_relative_positions,
    relative_position_ids,
)
from graph_urpe.nn.transformer import SequenceTransformer, TransformerLM
from graph_urpe.nn.transformer_layer import GraphormerLayer, TransformerLayer

__all__ = [
    "CategoricalEncoder",
    "ContinuousRelations",
    "DegreeEncoder",
    "DistinctValues",
    "GaussianBasisEmbedding",
    "GraphHead",
    "Graphormer",
    "GraphormerEncoder",
    "GraphormerLayer",
    "MultiHopEdgeEncoder",
    "MultiheadURPEAttention",
    "RelationEmbedding",
    "SequenceTransformer",
    "TransformerLM",
    "TransformerLayer",
    "URPEGraphConv",
    "distinct_values",
    "from_dense_batch",
    "gather_heads",
    "graph_relation_ids",
    "num_graph_relations",
    "num_relative_positions",
    "relative_position_ids",
    "to_dense_pair",
    "to_dense_path_edges",
    "urpe_attention",
]
