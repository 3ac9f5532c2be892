"""``graph-urpe plot`` (graph_urpe.cli.plot.main) on run folders and checkpoints."""

from __future__ import annotations

import lightning
import numpy as np
import pandas as pd
import pytest
import torch

pytest.importorskip("matplotlib")  # the optional plotting extra; .[dev] installs it, so CI runs these
from PIL import Image

from graph_urpe.cli.plot import default_out_dir, main
from graph_urpe.models.graph import GraphPropertyModule
from graph_urpe.models.record import ModelRecord
from graph_urpe.viz.relations import relation_tables_figure, relation_tables_from_state_dict

SMILES = "CC(=O)Nc1ccc(O)cc1"


def write_checkpoint(path, **kw):
    """A checkpoint of a tiny URPE Graphormer (ZINC features) in the format ``graph-urpe fit``
    writes: the network's class path and arguments in the hyperparameters."""
    from lightning.pytorch.core.mixins.hparams_mixin import _given_hyperparameters_context

    from graph_urpe.nn import Graphormer

    torch.manual_seed(0)
    net_args = {"num_layers": 2, "embed_dim": 16, "num_heads": 4, "ffn_dim": 16,
                "max_distance": 5, "num_tasks": 1, "atom_categories": [28], "bond_categories": [4]}
    net_args.update(kw)
    hparams = {"_class_path": "graph_urpe.models.graph.GraphPropertyModule",
               "model": {"class_path": "graph_urpe.nn.Graphormer", "init_args": net_args},
               "task": "regression", "featurization": "zinc"}
    with _given_hyperparameters_context(hparams, "lightning.pytorch.cli.instantiate_module"):
        module = GraphPropertyModule(Graphormer(**net_args), record=ModelRecord(featurization="zinc"))
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams),
                "pytorch-lightning_version": lightning.__version__}, path)
    return module


def is_png(path):
    assert path.stat().st_size > 0
    with Image.open(path) as im:
        return im.format == "PNG" and im.width > 100


def test_run_folder(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    steps = np.arange(8)
    pd.DataFrame({"epoch": steps // 4, "step": steps, "train/loss": np.linspace(1, 0.5, 8),
                  "lr-AdamW": np.linspace(1e-3, 0, 8)}).to_csv(run / "metrics.csv", index=False)
    pd.DataFrame({"row": [0, 1, 2], "smiles": ["C", "O", "N"], "y": [0.0, 1.0, 2.0],
                  "y_pred": [0.1, 1.2, 1.7]}).to_csv(run / "test_predictions.csv", index=False)
    assert main([str(run)]) == 0
    printed = capsys.readouterr().out
    for name in ("learning_curves.png", "parity.png"):
        assert is_png(run / "figures" / name)
        assert f"wrote {run / 'figures' / name}" in printed
    assert main([str(run), "--out", str(tmp_path / "o"), "--task", "regression"]) == 0
    assert is_png(tmp_path / "o" / "parity.png")


def test_checkpoint_tables_and_attention(tmp_path, capsys):
    ckpt = tmp_path / "run" / "checkpoints" / "best.ckpt"
    module = write_checkpoint(ckpt, multiplier_per_layer=True)
    assert default_out_dir(ckpt) == tmp_path / "run" / "figures"
    assert main([str(ckpt), "--smiles", SMILES, "--layer", "-1", "--head", "3"]) == 0
    out = tmp_path / "run" / "figures"
    assert is_png(out / "relation_tables.png")
    assert is_png(out / "attention_layer1_head3.png")
    assert "attention_layer1_head3.png" in capsys.readouterr().out
    # The tables read from the checkpoint file are the module's (per layer: [L, R, H]).
    tables = relation_tables_from_state_dict(
        torch.load(ckpt, weights_only=True)["state_dict"], {"num_heads": 4}
    )
    weight = module.model.encoder.multiplier.weight.detach()
    torch.testing.assert_close(tables.multiplier[1], weight[:-1, 4:8])
    assert len(relation_tables_figure(*tables[:3]).axes) == 4


def test_custom_model_loader(tmp_path):
    ckpt = tmp_path / "m.ckpt"
    module = write_checkpoint(ckpt)
    calls = []

    def loader(path):
        calls.append(path)
        return module.model, "zinc"

    assert main([str(ckpt), "--smiles", SMILES, "--layer", "0"], load_model=loader) == 0
    assert calls == [ckpt]
    assert is_png(tmp_path / "figures" / "attention_layer0_head0.png")


@pytest.mark.parametrize(
    "args, message",
    [
        (["{missing}"], "neither a run folder nor a checkpoint"),
        (["{bad}"], "corrupt, truncated or not a PyTorch checkpoint"),
        (["{ckpt}", "--smiles", SMILES, "--layer", "2"], "--layer 2 is out of range"),
        (["{ckpt}", "--smiles", SMILES, "--head", "4"], "--head 4 is out of range"),
        (["{ckpt}", "--smiles", "[Na+].[Cl-]"], "not one of the 28 ZINC atom types"),
        (["{ckpt_none}"], "no relation table"),
        (["{empty}"], "neither metrics.csv"),
        (["{empty}", "--smiles", "C"], "--smiles needs a checkpoint"),
    ],
)
def test_user_errors_are_one_line(tmp_path, capsys, args, message):
    paths = {"missing": tmp_path / "nope", "bad": tmp_path / "bad.ckpt", "ckpt": tmp_path / "m.ckpt",
             "ckpt_none": tmp_path / "none.ckpt", "empty": tmp_path / "empty"}
    paths["bad"].write_bytes(b"not a checkpoint")
    paths["empty"].mkdir()
    write_checkpoint(paths["ckpt"])
    write_checkpoint(paths["ckpt_none"], attention="none")
    assert main([a.format(**paths) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("graph-urpe plot: error:") and message in err
    assert err.count("\n") == 1
