"""Prediction computes only the pairwise relations the network reads (issue 32): for an SPD-only
checkpoint no resistance distance is computed, and its predictions equal those of graphs holding
both relations (what predict, Predictor and fingerprint computed before); a Graphormer-GD network
(SPD and resistance) still gets both."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from test_models_graph import _fit_with_checkpoints, tiny_net, trainer
from torch import nn
from torch_geometric.loader import DataLoader

from graph_urpe import transforms
from graph_urpe.cli.predict import PredictInputs, predict_smiles
from graph_urpe.data.modules.molecule import CSVDataModule
from graph_urpe.data.predict_inputs import featurize_inputs
from graph_urpe.models.ensemble import EnsembleMixin
from graph_urpe.models.graph import GraphPropertyModule
from graph_urpe.models.predictor import Predictor
from graph_urpe.models.record import ModelRecord

SMILES = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "C1CC", "OCCO", "CCN(CC)CC", "Cc1ccncc1"]


@pytest.fixture
def resistance_calls(monkeypatch):
    """Counts the molecules whose resistance distance is computed."""
    calls = []
    real = transforms.resistance_distance_matrix

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(transforms, "resistance_distance_matrix", counted)
    return calls


def _expected(module: GraphPropertyModule) -> np.ndarray:
    """The module's predictions of graphs that hold SPD and resistance (the old featurization),
    computed by hand: featurize, batch, ``predict_outputs``; NaN for the invalid SMILES."""
    graphs, errors = featurize_inputs(SMILES, "zinc", None,
                                      transforms.pair_pre_transform(resistance=True))
    assert all("resistance" in g for g in graphs)
    out = np.full(len(SMILES), np.nan)
    with torch.no_grad():
        for batch in DataLoader(graphs, batch_size=3):
            pred = module.eval().predict_outputs(batch)["prediction"]
            out[batch.sample_id.numpy()] = pred.view(-1).numpy()
    assert sorted(errors) == [3]  # C1CC: unclosed ring
    return out


def test_pair_relations_ask_the_networks():
    spd = tiny_net()
    gd = tiny_net(relations=["spd", "resistance"])
    assert spd.relations == ["spd"] and gd.relations == ["spd", "resistance"]
    ask = EnsembleMixin.pair_relations
    assert ask(SimpleNamespace(members=[spd, spd])) == ("spd",)
    assert ask(SimpleNamespace(members=[spd, gd])) == ("spd", "resistance")
    # A network that does not say what it reads is given every relation.
    assert ask(SimpleNamespace(members=[nn.Linear(2, 2)])) == ("spd", "resistance")


def test_spd_only_checkpoint_predicts_the_same_without_resistance(tmp_path, resistance_calls):
    _model, _dm, ckpt, _ = _fit_with_checkpoints(tmp_path, epochs=1)
    loaded = GraphPropertyModule.load_from_checkpoint(ckpt.last_model_path, model=tiny_net())
    assert loaded.pair_relations() == ("spd",)
    expected = _expected(loaded)
    resistance_calls.clear()

    table = Predictor(loaded, batch_size=2).predict(SMILES)  # Python
    np.testing.assert_allclose(table["target_pred"].to_numpy(float), expected, rtol=1e-5,
                               equal_nan=True)
    fingerprints = Predictor(loaded).fingerprint(SMILES)
    assert (fingerprints["error"] != "").tolist() == [i == 3 for i in range(len(SMILES))]

    csv, out = tmp_path / "inputs.csv", tmp_path / "predictions.csv"  # graph-urpe predict's path
    pd.DataFrame({"smiles": SMILES}).to_csv(csv, index=False)
    dm = CSVDataModule(str(tmp_path / "mols_regression.csv"), featurization="zinc", batch_size=2)
    predict_smiles(trainer(tmp_path), loaded, dm, PredictInputs(csv=str(csv), output=str(out)))
    written = pd.read_csv(out, keep_default_na=False)
    np.testing.assert_allclose(pd.to_numeric(written["target_pred"]).to_numpy(float), expected,
                               rtol=1e-5, equal_nan=True)
    assert resistance_calls == []  # none of the three computed a resistance distance


def test_resistance_network_still_gets_both(resistance_calls):
    torch.manual_seed(0)
    module = GraphPropertyModule(tiny_net(relations=["spd", "resistance"]), record=ModelRecord(featurization="zinc", target_names=["target"]), optimizer=partial(torch.optim.AdamW, lr=1e-3))
    table = Predictor(module).predict(SMILES)
    assert len(resistance_calls) == len(SMILES) - 1  # every valid molecule
    np.testing.assert_allclose(table["target_pred"].to_numpy(float), _expected(module),
                               rtol=1e-5, equal_nan=True)


@pytest.mark.slow  # a CLI fit
def test_fit_stores_the_resistance_the_network_reads(tmp_path, monkeypatch):
    """One switch: the network's ``relations`` decide whether the data store the resistance
    distance at fit (graph_urpe.cli.links.reads_resistance), as they decide it at predict."""
    from graph_urpe.cli import main

    monkeypatch.chdir(tmp_path)
    smiles = SMILES * 3
    pd.DataFrame({"smiles": smiles, "y": np.arange(len(smiles), dtype=float),
                  "split": ["train"] * 15 + ["valid"] * 3 + ["test"] * 3}).to_csv("m.csv",
                                                                                index=False)
    tiny = ["--model.init_args.model.init_args.num_layers", "1",
            "--model.init_args.model.init_args.embed_dim", "16",
            "--model.init_args.model.init_args.num_heads", "2",
            "--model.init_args.model.init_args.ffn_dim", "16",
            "--model.init_args.finetune.pretrained", "null", "--classical_baseline", "false",
            "--trainer.max_epochs", "1", "--test_after_fit", "false",
            "--data.init_args.split", "split", "--data.init_args.target_columns", "[y]"]
    for relations, stored in (("[spd]", False), ("[spd, resistance]", True)):
        root = tmp_path / relations.strip("[]").replace(", ", "-")
        main(["fit", "--config", "csv/template", "--data.init_args.path", "m.csv",
              "--data.init_args.root", str(root), "--name", root.name,
              "--model.init_args.model.init_args.relations", relations, *tiny])
        assert bool(list(root.rglob("graph.resistance.bin"))) is stored, relations
