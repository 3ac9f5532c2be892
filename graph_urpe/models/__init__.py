"""Lightning modules: the training logic (as Chemprop's ``chemprop/models``).

* :class:`~graph_urpe.models.graph.GraphPropertyModule`: graph- or node-level property
  prediction with a :class:`~graph_urpe.nn.Graphormer` (regression, binary / multi-task and
  multi-class classification; fine-tuning from a checkpoint's encoder, :mod:`.finetune`);
* the sequence modules of :mod:`graph_urpe.models.sequence` (the paper's synthetic tasks, language
  modelling);
* :mod:`graph_urpe.models.optim` (weight-decay groups, the warm-up + decay schedule),
  :mod:`graph_urpe.models.metrics` (masked losses, epoch metrics exact under DDP),
  :mod:`graph_urpe.models.sample_ids` (the ids that de-duplicate them),
  :mod:`graph_urpe.models.uncertainty` (bootstrap intervals of a test metric),
  :mod:`graph_urpe.models.ensemble` (deep ensembles, mean-variance outputs),
  :mod:`graph_urpe.models.calibration` (uncertainty calibrated on the validation split and scored
  on the test split);
* :class:`~graph_urpe.models.predictor.Predictor`: a checkpoint in memory, predicting SMILES or
  RDKit molecules from Python (also ``graph_urpe.Predictor``).

The data modules are in :mod:`graph_urpe.data.modules`, the commands in :mod:`graph_urpe.cli`.
"""

from graph_urpe.models.finetune import Finetune
from graph_urpe.models.graph import GraphPropertyModule
from graph_urpe.models.objective import Objective
from graph_urpe.models.record import ModelRecord

__all__ = ["Finetune", "GraphPropertyModule", "ModelRecord", "Objective"]
