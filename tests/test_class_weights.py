"""Imbalanced classification: positive-class weights in the BCE loss (``pos_weight``), from the
training labels (``"balanced"``) or given, checked against a hand-written weighted loss."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest
import torch
import yaml

from graph_urpe.cli import main
from graph_urpe.data.modules import CSVDataModule
from graph_urpe.models import GraphPropertyModule
from graph_urpe.models.metrics import balanced_pos_weight, masked_loss
from graph_urpe.models.objective import Objective
from graph_urpe.models.record import ModelRecord
from graph_urpe.nn import Graphormer


def naive_weighted_bce(logits, labels, weights):
    """Mean of -[w y log s(x) + (1 - y) log(1 - s(x))] over the labelled entries, one by one."""
    total, count = 0.0, 0
    for row_x, row_y in zip(logits, labels):
        for task, (x, y) in enumerate(zip(row_x, row_y)):
            if math.isnan(y):
                continue
            s = 1.0 / (1.0 + math.exp(-x))
            total -= weights[task] * y * math.log(s) + (1 - y) * math.log(1 - s)
            count += 1
    return total / count


def test_weighted_bce_equals_the_hand_written_loss():
    logits = [[0.3, -1.2], [2.0, 0.5], [-0.7, 0.9], [1.1, -0.4]]
    labels = [[1.0, 0.0], [0.0, float("nan")], [1.0, 1.0], [1.0, 0.0]]
    weights = [3.0, 0.5]
    got = masked_loss(torch.tensor(logits), torch.tensor(labels), "bce", torch.tensor(weights))
    assert got.item() == pytest.approx(naive_weighted_bce(logits, labels, weights), rel=1e-6)
    # All weights 1: the plain BCE.
    assert masked_loss(torch.tensor(logits), torch.tensor(labels), "bce",
                       torch.ones(2)).item() == pytest.approx(
        masked_loss(torch.tensor(logits), torch.tensor(labels), "bce").item(), rel=1e-6)
    with pytest.raises(ValueError, match="one value per task"):
        masked_loss(torch.tensor(logits), torch.tensor(labels), "bce", torch.ones(3))
    with pytest.raises(ValueError, match="with loss 'bce'"):
        masked_loss(torch.tensor(logits), torch.tensor(labels), "l1", torch.ones(2))


def test_balanced_weights_are_negatives_over_positives():
    # 1 positive of 4, 3 of 4, none, all: 3, 1/3, and 1 where there is nothing to balance.
    assert balanced_pos_weight([0.25, 0.75, 0.0, 1.0]) == pytest.approx([3.0, 1 / 3, 1.0, 1.0])


def test_pos_weight_is_refused_where_it_does_not_fit():
    net = Graphormer(num_tasks=2, atom_categories=[8], bond_categories=[4], num_layers=1,
                     embed_dim=8, num_heads=2)
    with pytest.raises(ValueError, match="leave pos_weight unset"):
        GraphPropertyModule(net, record=ModelRecord(task="regression"), objective=Objective(pos_weight=[1.0, 2.0]))
    with pytest.raises(ValueError, match="give 2 positive number"):
        GraphPropertyModule(net, record=ModelRecord(task="classification"), objective=Objective(pos_weight=[1.0]))
    with pytest.raises(ValueError, match="give 2 positive number"):
        GraphPropertyModule(net, record=ModelRecord(task="classification"), objective=Objective(pos_weight=[1.0, -2.0]))
    with pytest.raises(ValueError, match="pos_weight must be one of"):
        GraphPropertyModule(net, record=ModelRecord(task="classification"), objective=Objective(pos_weight="auto"))


SMILES = [
    "CCO", "CCN", "CCCC", "c1ccccc1", "CC(=O)O", "CCOC", "c1ccncc1", "CC(C)O",
    "OCCO", "CC#N", "C1CCCCC1", "CCCl", "Cc1ccccc1", "COC(=O)C", "NCCN", "CCS",
]


def test_fit_balances_the_training_labels_and_reports_them(tmp_path, capsys, monkeypatch,
                                                           one_thread):
    monkeypatch.chdir(tmp_path)
    # Task a: 2 positives among the 10 training rows (one of them unlabelled: 2 of 9);
    # task b: 7 of 10. The validation / test rows hold both classes of both tasks.
    a = [1, 0, 0, 1, 0, 0, 0, 0, float("nan"), 0, 1, 0, 1, 0, 1, 0]
    b = [1, 1, 1, 0, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1]
    split = ["train"] * 10 + ["valid"] * 3 + ["test"] * 3
    csv = tmp_path / "mols.csv"
    pd.DataFrame({"smiles": SMILES, "a": a, "b": b, "split": split}).to_csv(csv, index=False)
    config = {
        "name": "weighted",
        "trainer": {"accelerator": "cpu", "max_epochs": 1, "enable_progress_bar": False,
                    "enable_model_summary": False, "num_sanity_val_steps": 0,
                    "default_root_dir": str(tmp_path / "runs")},
        "model": {"init_args": {
            "objective": {"pos_weight": "balanced"},
            "model": {"init_args": {"num_layers": 1, "embed_dim": 16, "num_heads": 2,
                                    "ffn_dim": 16, "max_hops": 4, "max_distance": 8,
                                    "max_degree": 6}},
        }},
        "data": {"class_path": "graph_urpe.data.modules.CSVDataModule",
                 "init_args": {"path": str(csv), "split": "split", "featurization": "zinc",
                               "task": "classification", "target_columns": ["a", "b"],
                               "root": str(tmp_path / "data"), "batch_size": 4}},
    }
    path = tmp_path / "weighted.yaml"
    path.write_text(yaml.safe_dump(config))
    main(["fit", "--config", str(path)])
    out = capsys.readouterr().out
    assert ("Positive-class weights in the BCE loss (balanced: n_negative / n_positive of the "
            "training labels): a 3.5, b 0.429") in out
    best = tmp_path / "runs" / "weighted" / "version_0" / "checkpoints" / "best.ckpt"
    model = GraphPropertyModule.load_from_checkpoint(str(best))
    assert model.bce_pos_weight.tolist() == pytest.approx([7 / 2, 3 / 7])
    # The test loss the summary prints is the weighted BCE of the checkpoint's test logits.
    dm = CSVDataModule(str(csv), target_columns=["a", "b"], task="classification",
                       split="split", featurization="zinc", root=str(tmp_path / "data"),
                       batch_size=4)
    dm.setup("test")
    model.eval()
    logits, labels = [], []
    with torch.no_grad():
        for batch in dm.test_dataloader():
            logits += model(batch).tolist()
            labels += batch.y.view(-1, 2).tolist()
    expected = naive_weighted_bce(logits, labels, [7 / 2, 3 / 7])
    printed = float(re.search(r"Test loss \(BCE, network\): ([0-9.]+)", out).group(1))
    assert printed == pytest.approx(expected, abs=1e-4)
