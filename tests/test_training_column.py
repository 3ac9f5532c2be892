"""What a checkpoint remembers of its training file for the commands that read molecules: the
SMILES column (``predict``, ``fingerprint`` and ``explain`` read it when none is given), and the
node limit (a larger ``--data.init_args.max_graph_nodes`` at ``predict`` is said to have no
effect, not ignored silently)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from graph_urpe.cli import main

SMILES = ["CCO", "CCN", "CCCC", "c1ccccc1", "CC(=O)O", "CCOC", "c1ccncc1", "CC(C)O", "OCCO",
          "CC#N", "C1CCCCC1", "CCCl"]
LONG = "C" * 16  # 16 heavy atoms, over the training limit of 12


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> str:
    """A one-epoch fit on a CSV whose SMILES column is ``mol``, with ``max_graph_nodes`` 12."""
    tmp = tmp_path_factory.mktemp("fit")
    split = ["train"] * 8 + ["valid"] * 2 + ["test"] * 2
    pd.DataFrame({"mol": SMILES, "logS": [len(s) / 4 for s in SMILES], "split": split}).to_csv(
        tmp / "mols.csv", index=False)
    config = {
        "name": "tiny",
        "trainer": {"accelerator": "cpu", "max_epochs": 1, "enable_progress_bar": False,
                    "enable_model_summary": False, "num_sanity_val_steps": 0,
                    "default_root_dir": str(tmp / "runs")},
        "model": {"init_args": {"model": {"init_args": {
            "num_layers": 1, "embed_dim": 16, "num_heads": 2, "ffn_dim": 16, "max_hops": 4,
            "max_distance": 8, "max_degree": 6}}}},
        "data": {"class_path": "graph_urpe.data.modules.CSVDataModule",
                 "init_args": {"path": str(tmp / "mols.csv"), "smiles_column": "mol",
                               "target_columns": ["logS"], "split": "split",
                               "featurization": "zinc", "root": str(tmp / "data"),
                               "batch_size": 4, "max_graph_nodes": 12}},
    }
    (tmp / "tiny.yaml").write_text(yaml.safe_dump(config))
    torch.set_num_threads(1)
    main(["fit", "--config", str(tmp / "tiny.yaml"), "--test_after_fit", "false"])
    return str(tmp / "runs" / "tiny" / "version_0" / "checkpoints" / "last.ckpt")


@pytest.mark.slow  # a CLI fit
def test_checkpoint_keeps_the_training_smiles_column_as_plain_data(checkpoint):
    hparams = torch.load(checkpoint, weights_only=True)["hyper_parameters"]
    assert hparams["record"]["smiles_column"] == "mol" and hparams["record"]["max_graph_nodes"] == 12


@pytest.mark.slow
def test_predict_reads_the_training_column_by_default_and_an_explicit_one_wins(
        checkpoint, tmp_path, capsys):
    pd.DataFrame({"mol": ["CCO", LONG], "note": ["a", "b"]}).to_csv(tmp_path / "new.csv",
                                                                    index=False)
    main(["predict", "--ckpt_path", checkpoint, "--csv", str(tmp_path / "new.csv"),
          "--output", str(tmp_path / "out.csv"), "--data.init_args.max_graph_nodes", "100"])
    err = capsys.readouterr().err
    assert ("Warning: --data.init_args.max_graph_nodes 100 is above the model's limit, 12 nodes "
            "(its training's, kept in the checkpoint)") in err
    out = pd.read_csv(tmp_path / "out.csv", keep_default_na=False)
    assert out["mol"].tolist() == ["CCO", LONG] and out["note"].tolist() == ["a", "b"]
    assert out["error"][0] == "" and "16 nodes > max_graph_nodes=12" in out["error"][1]

    # An explicit column wins over the checkpoint's; a limit not above the model's says nothing.
    pd.DataFrame({"smiles": ["CCN"]}).to_csv(tmp_path / "other.csv", index=False)
    main(["predict", "--ckpt_path", checkpoint, "--csv", str(tmp_path / "other.csv"),
          "--smiles_column", "smiles", "--output", str(tmp_path / "other_out.csv"),
          "--data.init_args.max_graph_nodes", "12"])
    assert "Warning" not in capsys.readouterr().err
    assert pd.read_csv(tmp_path / "other_out.csv")["smiles"].tolist() == ["CCN"]


@pytest.mark.slow
def test_fingerprint_reads_the_training_column_by_default(checkpoint, tmp_path):
    from graph_urpe.models.predictor import Predictor

    pd.DataFrame({"mol": ["CCO", "c1ccccc1"]}).to_csv(tmp_path / "new.csv", index=False)
    assert main(["fingerprint", "--ckpt_path", checkpoint, "--csv", str(tmp_path / "new.csv"),
                 "--output", str(tmp_path / "fp.csv")]) in (0, None)
    table = pd.read_csv(tmp_path / "fp.csv")
    expected = Predictor.from_checkpoint(checkpoint).fingerprint(["CCO", "c1ccccc1"])
    columns = [c for c in table.columns if c.startswith("fp_")]
    assert table["mol"].tolist() == ["CCO", "c1ccccc1"]
    np.testing.assert_allclose(table[columns].to_numpy(), expected[columns].to_numpy(dtype=float),
                               rtol=1e-5, atol=1e-6)
