"""graph_urpe.Predictor (in-memory prediction, the example of docs/tutorials/csv.md) and
graph-urpe fingerprint: equal to graph-urpe predict's table and to the encoder's output computed
by hand."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from rdkit import Chem

from graph_urpe.cli import main
from graph_urpe.data.featurize import smiles_to_graph
from graph_urpe.transforms import AddShortestPathDistance

TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "tutorials" / "csv.md"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny 2-member ensemble with a hidden head layer and sum readout, fitted by the CLI."""
    from tests.test_cli import write_config

    tmp = tmp_path_factory.mktemp("predictor")
    config, runs = write_config(tmp, max_epochs=1)
    cfg = yaml.safe_load(Path(config).read_text())
    cfg["model"]["init_args"]["model"]["init_args"].update(readout="sum", head_hidden_dim=8)
    Path(config).write_text(yaml.safe_dump(cfg))
    main(["fit", "--config", config, "--ensemble_size", "2"])
    return str(runs / "version_0" / "checkpoints" / "last.ckpt"), tmp


def _tutorial_example() -> str:
    text = TUTORIAL.read_text()
    section = text[text.index("## From Python"):]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_tutorial_example_equals_graph_urpe_predict(checkpoint, capsys):
    ckpt, tmp = checkpoint
    code = _tutorial_example().replace("runs/my-csv/version_0/checkpoints/soup.ckpt", ckpt)
    scope: dict = {}
    exec(code, scope)  # noqa: S102  (the tutorial's example, as written there)
    table = scope["table"]
    smiles = [m if isinstance(m, str) else Chem.MolToSmiles(m) for m in scope["molecules"]]
    out = tmp / "pred.csv"
    main(["predict", "--ckpt_path", ckpt, "--smiles", *smiles, "--output", str(out)])
    cli = pd.read_csv(out, keep_default_na=False)
    assert len(table) == len(smiles) == len(cli) and scope["fingerprints"]["error"].iloc[-1]
    for column in ("target_pred", "target_std", "target_lower", "target_upper"):
        ok = table["error"] == ""
        np.testing.assert_allclose(table.loc[ok, column].to_numpy(float),
                                   cli.loc[ok.to_numpy(), column].to_numpy(float), rtol=1e-5)
    assert (table["error"] != "").tolist() == (cli["error"] != "").tolist()


def test_predictor_takes_rdkit_molecules_and_keeps_bad_rows(checkpoint):
    from graph_urpe import Predictor

    model = Predictor.from_checkpoint(checkpoint[0])
    table = model.predict([Chem.MolFromSmiles("CCO"), "not a smiles", None, "CCO"])
    assert table["row"].tolist() == [0, 1, 2, 3]
    assert table["error"][0] == "" and table["error"][1] != "" and "RDKit" in table["error"][2]
    assert table["target_pred"][0] == pytest.approx(table["target_pred"][3])
    assert np.isnan(table["target_pred"][1])
    # One string is not a list of one-character SMILES, nor a table a list of its column names.
    for one in ("CCO", Chem.MolFromSmiles("CCO"), pd.DataFrame({"smiles": ["CCO"]})):
        with pytest.raises(TypeError, match="give a list of SMILES"):
            model.predict(one)


def test_fingerprints_equal_the_encoders_output(checkpoint, tmp_path):
    from graph_urpe import Predictor

    model = Predictor.from_checkpoint(checkpoint[0])
    smiles = ["CCO", "c1ccccc1O", "xx"]
    enc = model.fingerprint(smiles)
    hidden = model.fingerprint(smiles, layer="hidden", member=1)
    assert enc["error"].tolist()[:2] == ["", ""] and enc["error"][2] != ""
    for i, s in enumerate(smiles[:2]):
        graph = AddShortestPathDistance()(smiles_to_graph(s, "zinc"))
        for member, table, layer in ((0, enc, "encoder"), (1, hidden, "hidden")):
            net = model.module.members[member]
            with torch.no_grad():
                nodes, _ = net.encoder(graph.x, graph.edge_index, graph.pair_index,
                                       edge_attr=graph.edge_attr, spd=graph.spd,
                                       spd_pred_index=graph.spd_pred_index)
                pooled = nodes.sum(0)  # sum readout, written out
                lin = net.head.hidden[0]
                expected = pooled if layer == "encoder" else \
                    torch.clamp(lin.weight @ pooled + lin.bias, min=0)
            got = table.filter(like="fp_").iloc[i].to_numpy(np.float32)
            np.testing.assert_allclose(got, expected.numpy(), rtol=1e-4, atol=1e-5)
    assert np.isnan(enc.filter(like="fp_").iloc[2]).all()
    # The command writes the same numbers, rows aligned with the input, CSV and .npz.
    csv = tmp_path / "in.csv"
    pd.DataFrame({"name": ["a", "b", "c"], "smiles": smiles}).to_csv(csv, index=False)
    main(["fingerprint", "--ckpt_path", checkpoint[0], "--csv", str(csv),
          "--output", str(tmp_path / "fp.csv")])
    written = pd.read_csv(tmp_path / "fp.csv", keep_default_na=False)
    assert written.columns[:3].tolist() == ["row", "name", "smiles"]
    assert written["name"].tolist() == ["a", "b", "c"] and written["error"][2] != ""
    np.testing.assert_allclose(written.loc[:1, "fp_0":"fp_15"].to_numpy(float),
                               enc.loc[:1, "fp_0":"fp_15"].to_numpy(float), rtol=1e-5)
    with pytest.raises(SystemExit):  # every row failed: the rows are written, status 2
        main(["fingerprint", "--ckpt_path", checkpoint[0], "--smiles", "xx",
              "--output", str(tmp_path / "fp.npz"), "--layer", "hidden"])
    saved = np.load(tmp_path / "fp.npz")
    assert saved["fingerprints"].shape == (1, 8) and saved["error"][0] != ""
