"""Lightning modules (training logic) and data modules (loaders, dataset facts).

* :class:`~graph_urpe.tasks.graph.GraphPropertyModule` with the graph data modules of
  :mod:`graph_urpe.tasks.molecule_data` (ZINC-like, PyG ZINC, OGB, PCQM4Mv2, your CSV; bases in
  :mod:`graph_urpe.tasks.graph_data`) and the synthetic structural graph tasks
  (:mod:`graph_urpe.tasks.synthetic_graph_data`, node- or graph-level);
* the sequence modules of :mod:`graph_urpe.tasks.sequence` / :mod:`graph_urpe.tasks.sequence_data`;
* :mod:`graph_urpe.tasks.optim` (weight-decay groups, the warm-up + decay schedule),
  :mod:`graph_urpe.tasks.metrics` (masked losses, epoch metrics exact under DDP),
  :mod:`graph_urpe.tasks.run` (what a run writes and prints).
"""

from graph_urpe.tasks.graph import GraphPropertyModule
from graph_urpe.tasks.graph_data import BatchedGraphDataModule, GraphDataModule
from graph_urpe.tasks.molecule_data import (
    CSVDataModule,
    OGBDataModule,
    PCQM4Mv2DataModule,
    ZINCDataModule,
    ZincLikeDataModule,
)
from graph_urpe.tasks.synthetic_graph_data import SyntheticGraphDataModule

__all__ = [
    "BatchedGraphDataModule",
    "CSVDataModule",
    "GraphDataModule",
    "GraphPropertyModule",
    "OGBDataModule",
    "PCQM4Mv2DataModule",
    "SyntheticGraphDataModule",
    "ZINCDataModule",
    "ZincLikeDataModule",
]
