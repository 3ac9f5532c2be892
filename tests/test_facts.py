"""The facts a data module states and the statistics it hands the model
(:mod:`graph_urpe.data.facts`), checked against hand-worked values."""

import pytest
import torch

from graph_urpe.data.facts import DatasetFacts, GraphData, TrainingStatistics
from graph_urpe.data.featurize import ZINC_ATOM_CATEGORIES
from graph_urpe.data.modules.graph import BatchedGraphDataModule
from graph_urpe.models import GraphPropertyModule
from graph_urpe.models.objective import Objective
from graph_urpe.models.record import ModelRecord
from graph_urpe.nn import Graphormer


def test_facts_fill_target_names_and_categories():
    one = DatasetFacts("zinc-like", "regression", 1, "zinc", "mae")
    assert one.target_names == ("y",)
    assert one.atom_categories == (ZINC_ATOM_CATEGORIES,) and one.bond_categories == (4,)
    three = DatasetFacts("csv", "classification", 3, "ogb", "rocauc")
    assert three.target_names == ("y0", "y1", "y2") and len(three.atom_categories) == 9
    classes = DatasetFacts("degree", "multiclass", 12, None, "accuracy", atom_categories=(1,),
                           bond_categories=(1,))
    assert classes.target_names == ("y",)  # one class label, not 12 columns
    with pytest.raises(ValueError, match="give a featurization or atom_categories"):
        DatasetFacts("mine", "regression", 1, None, "mae")


class _NoFacts(BatchedGraphDataModule):
    """A user's data module that states no facts (yet)."""


def test_the_protocol_check_computes_nothing():
    module = _NoFacts()
    assert isinstance(module, GraphData)  # methods only: `facts` is not evaluated
    with pytest.raises(NotImplementedError, match="must state its data's facts"):
        _ = module.facts


def test_training_statistics_set_the_standardisation_and_the_source():
    net = Graphormer(num_tasks=2, atom_categories=[5], bond_categories=[3], num_layers=1,
                     embed_dim=8, num_heads=2)
    module = GraphPropertyModule(net)
    module.use_training_statistics(TrainingStatistics([1.0, -2.0], [0.5, 4.0], None, "my.csv"))
    assert module.target_mean.tolist() == [1.0, -2.0] and module.target_std.tolist() == [0.5, 4.0]
    assert module.record.dataset_source == "my.csv"
    with pytest.raises(ValueError, match="statistics of 1 label columns for a module of 2"):
        module.use_training_statistics(TrainingStatistics([0.0], [1.0], None, "x"))
    classifier = GraphPropertyModule(net, record=ModelRecord(task="classification"), objective=Objective(pos_weight="balanced"))
    classifier.use_training_statistics(TrainingStatistics([0.25, 0.5], [1.0, 1.0], None, "x"))
    torch.testing.assert_close(classifier.bce_pos_weight, torch.tensor([3.0, 1.0]))
