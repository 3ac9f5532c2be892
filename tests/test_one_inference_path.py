"""One path from SMILES to a trained model's input (issue 40 item 2): ``graph-urpe predict``,
``Predictor.predict`` / ``Predictor.fingerprint``, ``graph-urpe fingerprint`` and
``graph-urpe explain`` accept and refuse the same molecules with the same reasons
(:func:`graph_urpe.data.predict_inputs.model_input_graphs`), under the same default budgets
(:data:`graph_urpe.data.budgets.DEFAULT_BUDGETS`); a Graphormer-GD checkpoint (SPD and
resistance distance) predicts the same values through the CLI and the Predictor."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from graph_urpe.cli import main
from graph_urpe.data.budgets import DEFAULT_BUDGETS, BatchBudgets
from graph_urpe.data.sampler import DEFAULT_MAX_CELLS

LIMIT = 8
"""The fit's ``max_graph_nodes``: every training molecule has at most 7 atoms."""
NORMAL, CHARGED, INVALID, OVERSIZE = "CCO", "C[N+](C)(C)C", "C1CC", "CCCCCCCCCCCC"
INPUTS = [NORMAL, CHARGED, INVALID, OVERSIZE, NORMAL]


def _fit(tmp: Path, network: dict | None = None, data: dict | None = None) -> str:
    """A tiny one-epoch CSV fit (OGB features: a charged nitrogen is in the vocabulary)."""
    from tests.test_cli import write_config

    config, runs = write_config(tmp, max_epochs=1)
    cfg = yaml.safe_load(Path(config).read_text())
    cfg["data"]["init_args"].update(featurization="ogb", **(data or {}))
    cfg["model"]["init_args"]["model"]["init_args"].update(network or {})
    Path(config).write_text(yaml.safe_dump(cfg))
    main(["fit", "--config", config])
    return str(runs / "version_0" / "checkpoints" / "last.ckpt")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("one_path")
    return _fit(tmp, data={"max_graph_nodes": LIMIT}), tmp


def _errors(table: pd.DataFrame) -> dict[int, str]:
    """``{row: reason}`` of the rows with an error."""
    return {int(r): str(e) for r, e in zip(table["row"], table["error"]) if str(e)}


def test_default_budgets_are_the_data_modules_and_limit_one_graph_per_batch():
    from graph_urpe.data.modules.molecule import CSVDataModule, ZincLikeDataModule

    default = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs"
                              / "default.yaml").read_text())["data"]["init_args"]
    # predict's data module without --data options: default.yaml's values over the class's.
    assert BatchBudgets.of(ZincLikeDataModule(**default)) == DEFAULT_BUDGETS
    assert BatchBudgets.of(CSVDataModule(path="x.csv")) == DEFAULT_BUDGETS
    # one graph of n nodes takes n nodes and n^2 cells of a batch: 1448^2 <= 2^21 < 1449^2
    assert DEFAULT_BUDGETS.node_limit(None) == 1448
    assert 1448**2 <= DEFAULT_MAX_CELLS < 1449**2
    assert DEFAULT_BUDGETS.node_limit(30) == 30
    assert BatchBudgets(max_nodes_per_batch=20, max_cells_per_batch=None).node_limit(30) == 20
    assert BatchBudgets(max_cells_per_batch=99, max_graph_nodes=12).node_limit(30) == math.isqrt(99)
    assert BatchBudgets(max_cells_per_batch=None, max_graph_nodes=12).node_limit(None) == 12
    assert BatchBudgets(max_cells_per_batch=None).node_limit(None) is None


def test_every_inference_path_accepts_and_refuses_the_same_molecules(checkpoint, tmp_path):
    pytest.importorskip("captum")
    from graph_urpe import Predictor

    ckpt, _ = checkpoint
    main(["predict", "--ckpt_path", ckpt, "--smiles", *INPUTS,
          "--output", str(tmp_path / "pred.csv")])
    predicted = _errors(pd.read_csv(tmp_path / "pred.csv", keep_default_na=False))
    # The reasons, independently: RDKit cannot parse the unclosed ring, and the 12-carbon chain
    # is above the fit's max_graph_nodes; the charged and the plain molecules are predicted.
    assert sorted(predicted) == [2, 3]
    assert "SMILES" in predicted[2]
    assert predicted[3] == f"graph has 12 nodes > max_graph_nodes={LIMIT}"

    model = Predictor.from_checkpoint(ckpt)
    assert _errors(model.predict(INPUTS)) == predicted
    assert _errors(model.fingerprint(INPUTS)) == predicted

    main(["fingerprint", "--ckpt_path", ckpt, "--smiles", *INPUTS,
          "--output", str(tmp_path / "fp.csv")])
    assert _errors(pd.read_csv(tmp_path / "fp.csv", keep_default_na=False)) == predicted

    main(["explain", "--ckpt_path", ckpt, "--smiles", *INPUTS, "--steps", "4",
          "--out", str(tmp_path / "why")])
    explained = pd.read_csv(tmp_path / "why" / "attributions.csv", keep_default_na=False)
    assert _errors(explained) == predicted
    assert sorted(set(explained["row"][explained["error"] == ""])) == [0, 1, 4]


def test_graphormer_gd_predicts_the_same_through_the_cli_and_the_predictor(tmp_path):
    from graph_urpe import Predictor
    from graph_urpe.data.predict_inputs import model_input_graphs

    ckpt = _fit(tmp_path, network={"relations": ["spd", "resistance"]},
                data={"resistance": True})
    # No node limit at fit: the default cell budget's (2^21 cells: 1448 nodes) is predict's and
    # the Predictor's alike.
    smiles = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "C1CC", "C[N+](C)(C)C", "C" * 1449]
    model = Predictor.from_checkpoint(ckpt)
    assert model.module.record.max_graph_nodes is None
    assert model.module.pair_relations() == ("spd", "resistance")
    graphs, errors = model_input_graphs(smiles, model.module)
    assert sorted(errors) == [3, 5] and all("resistance" in g and "spd" in g for g in graphs)
    assert errors[5] == "graph has 1449 nodes > max_graph_nodes=1448"
    main(["predict", "--ckpt_path", ckpt, "--smiles", *smiles,
          "--output", str(tmp_path / "pred.csv")])
    cli = pd.read_csv(tmp_path / "pred.csv", keep_default_na=False)
    table = model.predict(smiles)
    assert _errors(table) == _errors(cli) == errors
    ok = (table["error"] == "").to_numpy()
    np.testing.assert_allclose(table.loc[ok, "target_pred"].to_numpy(float),
                               cli.loc[ok, "target_pred"].to_numpy(float), rtol=1e-5)
