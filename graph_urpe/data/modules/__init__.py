"""Lightning data modules: loaders and the dataset facts they hand to the model.

* :mod:`graph_urpe.data.modules.graph`: the graph bases (:class:`GraphDataModule` over a dataset
  family, :class:`BatchedGraphDataModule` for in-memory sets);
* :mod:`graph_urpe.data.modules.molecule`: ZINC-like, PyG ZINC, OGB, PCQM4Mv2 and your CSV;
* :mod:`graph_urpe.data.modules.synthetic_graph`: the synthetic structural graph tasks;
* :mod:`graph_urpe.data.modules.sequence`: the paper's synthetic sequence tasks and language
  modelling;
* :mod:`graph_urpe.data.modules.submission`: OGB's PCQM4Mv2 submission file after ``test``.
"""

from graph_urpe.data.modules.graph import BatchedGraphDataModule, GraphDataModule
from graph_urpe.data.modules.molecule import (
    CSVDataModule,
    OGBDataModule,
    PCQM4Mv2DataModule,
    ZINCDataModule,
    ZincLikeDataModule,
)
from graph_urpe.data.modules.synthetic_graph import SyntheticGraphDataModule

__all__ = [
    "BatchedGraphDataModule",
    "CSVDataModule",
    "GraphDataModule",
    "OGBDataModule",
    "PCQM4Mv2DataModule",
    "SyntheticGraphDataModule",
    "ZINCDataModule",
    "ZincLikeDataModule",
]
