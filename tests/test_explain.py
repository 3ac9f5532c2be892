"""``graph-urpe explain``: integrated-gradients attributions over the atom embeddings. A model
trained on the count of sulfonyl groups (S(=O)=O) attributes its prediction to those atoms."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
import yaml
from rdkit import Chem

from graph_urpe.cli import main
from graph_urpe.cli.configs import CONFIG_DIR
from graph_urpe.data.predict_inputs import featurize_inputs
from graph_urpe.models import GraphPropertyModule
from graph_urpe.transforms import pair_pre_transform
from graph_urpe.viz import atom_attributions

SULFONYL = Chem.MolFromSmarts("S(=O)=O")


def sulfonyl_atoms(smiles: str) -> set[int]:
    mol = Chem.MolFromSmiles(smiles)
    return {i for match in mol.GetSubstructMatches(SULFONYL) for i in match}


@pytest.fixture(scope="module")
def sulfonyl_model(tmp_path_factory):
    """A 2-layer URPE-Graphormer trained 30 epochs on 400 ZINC molecules (the shipped ZINC-like
    set; half hold a sulfonyl group) to count their sulfonyl groups; its checkpoint and test
    SMILES."""
    tmp = tmp_path_factory.mktemp("explain")
    zinc = pd.read_csv(CONFIG_DIR.parent / "data" / "embedded" / "zinc_like_12k.csv.gz")
    with_group, without = [], []
    for smiles in zinc["smiles"]:
        mol = Chem.MolFromSmiles(smiles)
        if mol.GetNumAtoms() <= 24:
            count = len(mol.GetSubstructMatches(SULFONYL))
            (with_group if count else without).append((smiles, count))
        if len(with_group) >= 200 and len(without) >= 200:
            break
    rows = with_group[:200] + without[:200]
    frame = pd.DataFrame(rows, columns=["smiles", "sulfonyl"]).sample(frac=1.0, random_state=0)
    frame["split"] = ["train"] * 300 + ["valid"] * 50 + ["test"] * 50
    frame.to_csv(tmp / "sulfonyl.csv", index=False)
    config = {
        "name": "sulfonyl", "seed_everything": 0,
        "trainer": {"accelerator": "cpu", "max_epochs": 30, "enable_progress_bar": False,
                    "enable_model_summary": False, "num_sanity_val_steps": 0,
                    "default_root_dir": str(tmp / "runs"), "log_every_n_steps": 5},
        "model": {"init_args": {
            "model": {"init_args": {"num_layers": 2, "embed_dim": 32, "num_heads": 4,
                                    "ffn_dim": 32, "readout": "sum"}},
            "optimizer": {"init_args": {"lr": 3e-3}},
            "lr_scheduler": {"init_args": {"warmup_fraction": 0.1}},
        }},
        "data": {"class_path": "graph_urpe.data.modules.CSVDataModule",
                 "init_args": {"path": str(tmp / "sulfonyl.csv"), "target_columns": ["sulfonyl"],
                               "split": "split", "root": str(tmp / "data"), "batch_size": 32}},
    }
    (tmp / "sulfonyl.yaml").write_text(yaml.safe_dump(config))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        main(["fit", "--config", str(tmp / "sulfonyl.yaml"), "--test_after_fit", "false"])
    finally:
        torch.set_num_threads(threads)
    run = tmp / "runs" / "sulfonyl" / "version_0"
    return str(run / "checkpoints" / "best.ckpt"), frame[frame["split"] == "test"]["smiles"]


def test_attributions_point_at_the_counted_group(sulfonyl_model, one_thread):
    ckpt, test_smiles = sulfonyl_model
    module = GraphPropertyModule.load_from_checkpoint(ckpt, map_location="cpu",
                                                      weights_only=True).eval()
    smiles = [s for s in test_smiles if sulfonyl_atoms(s)]
    assert len(smiles) >= 10
    graphs, errors = featurize_inputs(smiles, "ogb", None, pair_pre_transform())
    assert not errors
    explained = 0
    for text, graph in zip(smiles, graphs):
        result = atom_attributions(module, graph, steps=50)
        group = sorted(sulfonyl_atoms(text))
        count = len(Chem.MolFromSmiles(text).GetSubstructMatches(SULFONYL))
        if abs(result.prediction - count) > 0.2:
            continue  # a molecule the model got wrong: its explanation says nothing here
        explained += 1
        # The atom that raises the prediction most is one of the group's, and the group's atoms
        # raise it more on average than the rest of the molecule's.
        assert int(result.atoms.argmax()) in group, text
        others = [i for i in range(graph.num_nodes) if i not in group]
        mean_in, mean_out = float(result.atoms[group].mean()), float(result.atoms[others].mean())
        assert mean_in > mean_out + 0.03, (text, mean_in, mean_out)
    assert explained >= 0.8 * len(smiles)  # the model learned the count


def test_attributions_add_up_to_the_prediction_minus_the_baseline(sulfonyl_model, one_thread):
    ckpt, test_smiles = sulfonyl_model
    module = GraphPropertyModule.load_from_checkpoint(ckpt, map_location="cpu",
                                                      weights_only=True).eval()
    from torch_geometric.data import Batch

    graphs, _ = featurize_inputs(list(test_smiles)[:5], "ogb", None, pair_pre_transform())
    for graph in graphs:
        result = atom_attributions(module, graph, steps=50)
        batch = Batch.from_data_list([graph])
        with torch.no_grad():
            prediction = float(module.predict_values(batch)[0, 0])
            # The baseline, computed here: the atom encoder's output zeroed by a hook.
            encoder = module.model.encoder.atom_encoder
            handle = encoder.register_forward_hook(lambda _m, _i, out: torch.zeros_like(out))
            try:
                baseline = float(module.predict_values(batch)[0, 0])
            finally:
                handle.remove()
        assert result.prediction == pytest.approx(prediction, abs=1e-5)
        assert result.baseline == pytest.approx(baseline, abs=1e-5)
        assert float(result.atoms.sum()) == pytest.approx(prediction - baseline, abs=2e-3)
        assert result.atoms.shape == (graph.num_nodes,)


def test_explain_command_writes_a_figure_per_molecule_and_the_numbers(sulfonyl_model, tmp_path,
                                                                      capsys, one_thread):
    ckpt, _ = sulfonyl_model
    smiles = ["CS(=O)(=O)c1ccccc1", "not a molecule", "CCO", "C"]  # one atom: highlighted
    main(["explain", "--ckpt_path", ckpt, "--smiles", *smiles, "--out", str(tmp_path / "why")])
    out = capsys.readouterr().out
    assert "Explained 3 of 4 molecules (1 failed" in out
    table = pd.read_csv(tmp_path / "why" / "attributions.csv", keep_default_na=False)
    assert sorted(set(table["row"])) == [0, 1, 2, 3]
    assert table[table["row"] == 1]["error"].str.len().gt(0).all()
    first = table[table["row"] == 0]
    assert first["atom"].astype(int).tolist() == list(range(10))
    assert first["element"].tolist() == ["C", "S", "O", "O"] + ["C"] * 6
    assert int(first["attribution"].astype(float).idxmax()) == first.index[1]  # the S atom
    for row in (0, 2, 3):
        png = (tmp_path / "why" / f"row{row}_sulfonyl.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit):  # an unknown target: one line, exit 2
        main(["explain", "--ckpt_path", ckpt, "--smiles", "CCO", "--target", "logS",
              "--out", str(tmp_path / "why")])
    assert "the model's targets are sulfonyl" in capsys.readouterr().err
