"""Lightning modules (training logic) and data modules (loaders, dataset facts).

* :class:`~graph_urpe.tasks.graph.GraphPropertyModule` with the graph data modules of
  :mod:`graph_urpe.tasks.graph_data` (ZINC-like, PyG ZINC, OGB, PCQM4Mv2, your CSV);
* the sequence modules of :mod:`graph_urpe.tasks.sequence` / :mod:`graph_urpe.tasks.sequence_data`;
* :mod:`graph_urpe.tasks.optim` (weight-decay groups, the warm-up + decay schedule),
  :mod:`graph_urpe.tasks.metrics` (masked losses, epoch metrics exact under DDP),
  :mod:`graph_urpe.tasks.run` (what a run writes and prints).
"""

from graph_urpe.tasks.graph import GraphPropertyModule
from graph_urpe.tasks.graph_data import (
    CSVDataModule,
    GraphDataModule,
    OGBDataModule,
    PCQM4Mv2DataModule,
    ZINCDataModule,
    ZincLikeDataModule,
)

__all__ = [
    "CSVDataModule",
    "GraphDataModule",
    "GraphPropertyModule",
    "OGBDataModule",
    "PCQM4Mv2DataModule",
    "ZINCDataModule",
    "ZincLikeDataModule",
]
