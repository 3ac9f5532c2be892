"""Checkpoints and run folders a user receives are data: nothing they name is imported or run.

Every hostile file writes a marker file if any of its code runs; each test asserts the marker does
not exist and that the one-line error names the file and the refused class.
"""

from __future__ import annotations

import functools
import io
import pickle
import re
from pathlib import Path

import pytest
import torch
import yaml
from lightning.pytorch import Trainer
from lightning.pytorch.cli import LightningCLI

from graph_urpe.cli import main
from graph_urpe.cli.lightning_cli import GraphURPECLI
from graph_urpe.cli.plot import main as plot_main
from graph_urpe.models.graph import GraphPropertyModule
from graph_urpe.trust import UntrustedFileError, allowed_class, check_file_config
from tests.test_cli import write_config

REPO = Path(__file__).resolve().parents[1]

NETWORK = {"class_path": "graph_urpe.nn.Graphormer",
           "init_args": {"num_tasks": 1, "atom_categories": [30], "bond_categories": [5],
                         "num_layers": 2, "embed_dim": 16, "num_heads": 2, "ffn_dim": 16,
                         "max_hops": 4, "max_distance": 8, "max_degree": 6, "dropout": 0.0}}


def _sequential(marker: Path) -> dict:
    """PyG's Sequential evaluates the text after ``->`` in ``input_args``: it writes ``marker``."""
    payload = f"x -> __import__('pathlib').Path({str(marker)!r}).write_text('ran')"
    return {"class_path": "torch_geometric.nn.Sequential",
            "init_args": {"input_args": payload, "modules": []}}


def _checkpoint(path: Path, network: dict, **extra) -> Path:
    hparams = {"_class_path": "graph_urpe.models.graph.GraphPropertyModule",
               "_instantiator": "lightning.pytorch.cli.instantiate_module",
               "model": network, "task": "regression", "featurization": "zinc", **extra}
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {}, "hyper_parameters": hparams, "epoch": 0, "global_step": 0,
                "pytorch-lightning_version": "2.6.6"}, path)
    return path


@pytest.fixture
def evil(tmp_path, monkeypatch):
    """(hostile checkpoint, marker, importable module that writes the marker when imported)."""
    marker = tmp_path / "MARKER"
    (tmp_path / "evilmod.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\n"
        "import torch\nclass Net(torch.nn.Module):\n    def __init__(self, **kw):\n"
        "        super().__init__()\n        self.num_tasks = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return _checkpoint(tmp_path / "evil.ckpt", _sequential(marker)), marker


def _refused(capsys, args, name):
    with pytest.raises(SystemExit) as info:
        main(args)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert name in err and "refusing" in err, err
    return err


@pytest.mark.parametrize("sub", ["predict", "test", "validate", "fit"])
def test_hostile_checkpoint_runs_nothing_on_any_subcommand(evil, sub, capsys):
    ckpt, marker = evil
    args = [sub, "--ckpt_path", str(ckpt)]
    if sub == "predict":
        args += ["--data.init_args.predict_smiles", '["CCO"]']
    err = _refused(capsys, args, "torch_geometric.nn.Sequential")
    assert str(ckpt) in err and "weights_only" not in err
    assert not marker.exists()


def test_hostile_checkpoint_runs_nothing_on_plot_and_load_from_checkpoint(evil, tmp_path, capsys):
    ckpt, marker = evil
    for extra in ([], ["--smiles", "CCO"]):
        assert plot_main([str(ckpt), "--out", str(tmp_path / "figs"), *extra]) == 2
        assert "torch_geometric.nn.Sequential" in capsys.readouterr().err
    with pytest.raises(UntrustedFileError, match=r"torch_geometric\.nn\.Sequential"):
        GraphPropertyModule.load_from_checkpoint(ckpt)
    buffer = io.BytesIO(ckpt.read_bytes())  # a file object is checked too
    with pytest.raises(UntrustedFileError, match="Sequential"):
        GraphPropertyModule.load_from_checkpoint(buffer)
    assert not marker.exists()


def test_a_class_path_naming_any_installed_module_is_not_imported(evil, tmp_path, capsys):
    _, marker = evil
    nested = _checkpoint(tmp_path / "a.ckpt", {"class_path": "evilmod.Net", "init_args": {}})
    _refused(capsys, ["test", "--ckpt_path", str(nested)], "evilmod.Net")
    top = _checkpoint(tmp_path / "b.ckpt", NETWORK)
    hp = torch.load(top, weights_only=True)
    hp["hyper_parameters"]["_class_path"] = "evilmod.Net"
    torch.save(hp, top)
    _refused(capsys, ["predict", "--ckpt_path", str(top)], "evilmod.Net")
    # A plain string jsonargparse would import (a Callable-typed argument), and a short name.
    for value in ("evilmod.Net", "os.system"):
        path = _checkpoint(tmp_path / "c.ckpt", NETWORK, loss=value)
        _refused(capsys, ["test", "--ckpt_path", str(path)], value)
    shortname = _checkpoint(tmp_path / "d.ckpt", {"class_path": "Sequential", "init_args": {}})
    _refused(capsys, ["test", "--ckpt_path", str(shortname)], "'Sequential'")
    other = _checkpoint(tmp_path / "e.ckpt", NETWORK, instantiator=None)
    hp = torch.load(other, weights_only=True)
    hp["hyper_parameters"]["_instantiator"] = "evilmod.Net"
    torch.save(hp, other)
    with pytest.raises(UntrustedFileError, match="instantiator 'evilmod.Net'"):
        GraphPropertyModule.load_from_checkpoint(other)
    assert not marker.exists()


def test_hostile_run_folder_runs_nothing(evil, tmp_path, capsys):
    _, marker = evil
    run = tmp_path / "runs" / "x" / "version_0"
    ckpt = _checkpoint(run / "checkpoints" / "best.ckpt", NETWORK)
    data = {"class_path": "torch_geometric.data.LightningDataset",
            "init_args": {"train_dataset": {
                "class_path": "torch_geometric.datasets.FakeDataset",
                "init_args": {"transform": _sequential(marker)}}}}
    (run / "config.yaml").write_text(yaml.safe_dump({"data": data}))
    for sub in ("test", "validate"):
        err = _refused(capsys, [sub, "--ckpt_path", str(ckpt)],
                       "torch_geometric.data.LightningDataset")
        assert str(run / "config.yaml") in err and "run folder" in err
    # Nested inside an allowed data module: the inner class is refused.
    data = {"class_path": "graph_urpe.data.modules.molecule.CSVDataModule",
            "init_args": {"path": "mols.csv", "transform": _sequential(marker)}}
    (run / "config.yaml").write_text(yaml.safe_dump({"data": data}))
    _refused(capsys, ["test", "--ckpt_path", str(ckpt)], "torch_geometric.nn.Sequential")
    # YAML's Python tags are refused by the safe loader, with our message.
    (run / "config.yaml").write_text(
        "data: !!python/object/apply:os.system ['touch " + str(marker) + "']\n")
    _refused(capsys, ["test", "--ckpt_path", str(ckpt)], "Python object tag")
    # Another configuration file named by the run folder is not read either.
    (run / "config.yaml").write_text(yaml.safe_dump({"data": {
        "class_path": "graph_urpe.data.modules.molecule.CSVDataModule",
        "init_args": {"transform": "other.yaml"}}}))
    _refused(capsys, ["test", "--ckpt_path", str(ckpt)], "other.yaml")
    assert not marker.exists()


class _Payload:
    def __reduce__(self):
        return (print, ("ran",))


def test_pickled_checkpoint_gets_our_message_never_weights_only_false(tmp_path, capsys):
    path = tmp_path / "pickled.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"x": _Payload()}}, path)
    err = _refused(capsys, ["predict", "--ckpt_path", str(path)], "pickled Python objects")
    assert "weights_only" not in err and len(err.strip().splitlines()) == 2  # + the debug hint
    with pytest.raises(UntrustedFileError) as info:
        GraphPropertyModule.load_from_checkpoint(path)
    assert "weights_only" not in str(info.value)
    garbage = tmp_path / "garbage.ckpt"
    garbage.write_bytes(pickle.dumps([1, 2])[:3])
    err = _refused_value(capsys, ["test", "--ckpt_path", str(garbage)])
    assert "corrupt, truncated or not a PyTorch checkpoint" in err


def _refused_value(capsys, args):
    with pytest.raises(SystemExit):
        main(args)
    return capsys.readouterr().err


def _class_paths(value):
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "class_path":
                yield item
            yield from _class_paths(item)
    elif isinstance(value, list):
        for item in value:
            yield from _class_paths(item)


def test_allow_list_holds_every_shipped_configuration_and_nothing_else():
    configs = list((REPO / "configs").rglob("*.yaml")) + list(
        (REPO / "graph_urpe" / "configs").rglob("*.yaml"))
    used = {p for c in configs for p in _class_paths(yaml.safe_load(c.read_text()))}
    assert len(used) >= 10
    for path in sorted(used):
        assert allowed_class(path), path
    for path in ("torch.optim.Adam", "torch.optim.lr_scheduler.CosineAnnealingLR",
                 "torch.optim.lr_scheduler.ReduceLROnPlateau",
                 "graph_urpe.models.graph.GraphPropertyModule"):
        assert allowed_class(path), path
    for path in ("torch_geometric.nn.Sequential", "os.system", "builtins.eval",
                 "graph_urpe.cli.main",                       # a function, not a class
                 "graph_urpe.models.graph.nn.Sequential",      # torch's class, reached via ours
                 "graph_urpe.models.graph.Tensor", "torch.nn.Linear", "torch.optim.Optimizer.zero_grad",
                 "Sequential", "graph_urpe.nope.Nothing", 3):
        assert not allowed_class(path), path
    # Plain data passes: file names, choices, numbers.
    check_file_config({"path": "mols.csv", "root": "data", "task": "regression", "lr": 1e-3,
                       "evaluator": "ogbg-molhiv", "names": ["logP", "u0"]}, "f")


def test_the_user_option_beats_the_checkpoint_on_test_and_predict(tmp_path, capsys, monkeypatch):
    """Package defaults < checkpoint < the user's --config and options (the --config is trusted
    like a script and applied, never silently dropped)."""
    monkeypatch.chdir(tmp_path)
    config, _ = write_config(tmp_path)  # its network has 1 layer; the checkpoint's 2
    ckpt = _checkpoint(tmp_path / "c.ckpt", NETWORK, standardize=False)
    seen = {}

    def record(cli_or_trainer, model, *args, **kwargs):
        seen["model"] = model
        return []

    monkeypatch.setattr(Trainer, "test", functools.wraps(Trainer.test)(record))  # its options
    monkeypatch.setattr(GraphURPECLI, "predict", record)
    for sub in ("test", "predict"):
        seen.clear()
        main([sub, "--ckpt_path", str(ckpt), "--config", config,
              "--model.init_args.model.init_args.dropout", "0.25",
              "--data.init_args.predict_smiles", '["CCO"]'])
        hp = seen["model"].hparams
        assert hp["model"]["init_args"]["dropout"] == 0.25, sub  # the option
        assert hp["model"]["init_args"]["num_layers"] == 1, sub   # the --config
        assert hp["standardize"] is False, sub                    # the checkpoint's own value
        built = [n for n, _ in seen["model"].named_modules() if re.fullmatch(r".*layers\.\d+", n)]
        assert len(built) == 1, built
    capsys.readouterr()


def test_lightning_still_reads_ckpt_path_where_graph_urpe_replaces_it():
    """graph-urpe replaces LightningCLI._parse_ckpt_path (Lightning parses the checkpoint over
    the user's options): fail loudly if Lightning stops calling it right after parsing."""
    import inspect

    source = inspect.getsource(LightningCLI.__init__)
    assert "self.parse_arguments(self.parser, args)\n        self._parse_ckpt_path()" in source
