"""Checkpoints and run folders a user receives are data: nothing they name is imported or run.

Every hostile file would write a marker file if any of its code ran (the exploits of issue 28,
with harmless payloads); each test asserts that the marker does not exist, that no module outside
graph-urpe's own and its libraries was imported, and that the refusal is one line naming the file.
"""

from __future__ import annotations

import functools
import io
import pickle
import sys
import zipfile
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
from graph_urpe.received import build, check_module_hparams
from graph_urpe.registry import CLASSES, lookup
from graph_urpe.trust import (
    ReceivedFileError,
    UntrustedFileError,
    read_checkpoint,
    read_run_config,
    read_run_data,
)
from tests.test_cli import write_config

REPO = Path(__file__).resolve().parents[1]

NET = {"num_tasks": 1, "atom_categories": [28], "bond_categories": [4], "num_layers": 1,
       "embed_dim": 16, "num_heads": 2, "ffn_dim": 16, "max_hops": 4, "max_distance": 8,
       "max_degree": 6, "dropout": 0.0}
ALLOWED_NEW_MODULES = ("graph_urpe.", "torch.", "lightning.", "jsonargparse", "torchmetrics",
                       "torch_geometric", "typeshed_client", "docstring_parser")


def hparams(**extra) -> dict:
    """A graph-urpe checkpoint's hyperparameters (the form LightningCLI saves)."""
    return {"_class_path": "graph_urpe.models.graph.GraphPropertyModule",
            "_instantiator": "lightning.pytorch.cli.instantiate_module",
            "model": {"class_path": "graph_urpe.nn.Graphormer", "init_args": dict(NET)},
            "optimizer": {"class_path": "torch.optim.AdamW", "init_args": {"lr": 1e-3}},
            "record": {"task": "regression", "featurization": "zinc"}, **extra}


@functools.lru_cache(maxsize=1)
def state_dict() -> dict:
    """The state dict of the model :func:`hparams` describes."""
    torch.manual_seed(0)
    return build(check_module_hparams(hparams())).state_dict()


def checkpoint(path: Path, hp: dict | None = None, state: dict | None = None, **top) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": dict(state_dict()) if state is None else state,
                "hyper_parameters": hparams() if hp is None else hp, "epoch": 0,
                "global_step": 0, "pytorch-lightning_version": "2.6.6", **top}, path)
    return path


def outside_allow_list(before: set[str]) -> set[str]:
    """Modules imported since ``before`` that are neither graph-urpe's (its ``__main__`` excluded)
    nor its libraries'."""
    new = set(sys.modules) - before
    return {m for m in new if not m.startswith(ALLOWED_NEW_MODULES)
            or m.startswith("graph_urpe.cli.__main__")}


@pytest.fixture
def marker(tmp_path, monkeypatch):
    """A marker path; ``evilmod`` (importable) writes it when imported; the cwd is tmp_path."""
    mark = tmp_path / "MARKER"
    (tmp_path / "evilmod.py").write_text(
        f"import pathlib\npathlib.Path({str(mark)!r}).write_text('imported')\n"
        "import torch\nclass Net(torch.nn.Module):\n    def __init__(self, **kw):\n"
        "        super().__init__()\n        self.num_tasks = 1\n")
    (tmp_path / "cfgfile").write_text("class_path: evilmod.Net\n")  # no suffix
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return mark


def exploits(mark: Path) -> dict[str, dict]:
    """Issue 28's hostile hyperparameters, by name."""
    yaml_payload = f"{{class_path: joblib.logger.PrintTime, init_args: {{logfile: {mark}}}}}"
    sequential = {"class_path": "torch_geometric.nn.Sequential", "init_args": {
        "input_args": f"x -> __import__('pathlib').Path({str(mark)!r}).write_text('ran')",
        "modules": []}}
    return {
        "lambda_lr": hparams(lr_scheduler={"class_path": "torch.optim.lr_scheduler.LambdaLR",
                                           "init_args": {"lr_lambda": yaml_payload}}),
        "yaml_in_a_float": hparams(lr_scheduler={"class_path": "PolynomialDecayLR",
                                                 "init_args": {"end_lr": yaml_payload}}),
        "yaml_string_model": hparams(model="{class_path: this.Foo}"),
        "torch_linear": hparams(model={"class_path": "torch.nn.Linear",
                                       "init_args": {"in_features": 1, "out_features": 1}}),
        "existing_file": hparams(model="cfgfile"),
        "bare_name": hparams(lr_scheduler="Softsign"),
        "cli_main": {**hparams(), "_class_path": "graph_urpe.cli.__main__.Foo"},
        "evilmod": {**hparams(), "_class_path": "evilmod.Net"},
        "sequential": hparams(model=sequential),
        "dotted_string": hparams(loss="os.system"),
        "instantiator": {**hparams(), "_instantiator": "evilmod.Net"},
        "unknown_argument": hparams(optimizer={"class_path": "torch.optim.AdamW",
                                               "init_args": {"params": "evilmod.Net"}}),
    }


@pytest.mark.parametrize("name", sorted(exploits(Path("m"))))
def test_every_exploit_of_the_issue_is_refused_before_anything_is_imported(
        marker, tmp_path, name, capsys):
    path = checkpoint(tmp_path / f"{name}.ckpt", exploits(marker)[name])
    warm = checkpoint(tmp_path / "warm.ckpt", hparams(loss="nope"))  # the refusal's own imports
    with pytest.raises(SystemExit):
        main(["predict", "--ckpt_path", str(warm), "--smiles", "C"])
    capsys.readouterr()
    before = set(sys.modules)
    with pytest.raises(UntrustedFileError) as info:
        GraphPropertyModule.load_from_checkpoint(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message and "registry" in message, message
    with pytest.raises(UntrustedFileError):
        GraphPropertyModule.load_from_checkpoint(io.BytesIO(path.read_bytes()))
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", "--ckpt_path", str(path), "--smiles", "CCO"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and str(path) in err and len(err.strip().splitlines()) == 2
    assert not marker.exists()
    assert outside_allow_list(before) == set()


@pytest.mark.parametrize("sub", ["test", "validate", "fit"])
def test_the_issue_exploit_is_refused_by_every_subcommand_and_plot(marker, tmp_path, sub, capsys):
    path = checkpoint(tmp_path / "evil.ckpt", exploits(marker)["lambda_lr"])
    with pytest.raises(SystemExit) as info:
        main([sub, "--ckpt_path", str(path)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "LambdaLR" in err and "weights_only" not in err
    if sub == "test":
        for extra in ([], ["--smiles", "CCO"]):
            assert plot_main([str(path), "--out", str(tmp_path / "figs"), *extra]) == 2
            assert "LambdaLR" in capsys.readouterr().err
    assert not marker.exists()


def test_a_checkpoint_of_fit_loads_and_keeps_its_configuration(tmp_path):
    vocabulary = {"atom": [[1, 2]], "bond": [], "max_atoms": 24}
    path = checkpoint(tmp_path / "good.ckpt", training_vocabulary=vocabulary)
    module = GraphPropertyModule.load_from_checkpoint(path)
    assert len(module.model.encoder.layers) == 1
    assert module.hparams["model"]["init_args"]["embed_dim"] == 16  # saved again by a new fit
    assert module.training_vocabulary == vocabulary
    for key, tensor in state_dict().items():
        torch.testing.assert_close(module.state_dict()[key], tensor, rtol=0, atol=0,
                                   equal_nan=True, msg=key)
    # Old and new layouts' class paths are aliases of the same registry keys.
    old = hparams(model={"class_path": "graph_urpe.nn.graphormer.Graphormer",
                         "init_args": dict(NET)})
    old["_class_path"] = "graph_urpe.tasks.graph.GraphPropertyModule"
    old["lr_scheduler"] = {"class_path": "graph_urpe.tasks.optim.PolynomialDecayLR",
                           "init_args": {"warmup_steps": 2}}
    assert GraphPropertyModule.load_from_checkpoint(checkpoint(tmp_path / "old.ckpt", old))
    # A module built in Python records no network: it is passed again, never guessed.
    bare = {"task": "regression", "standardize": False}
    path = checkpoint(tmp_path / "bare.ckpt", bare)
    with pytest.raises(ReceivedFileError, match=r"does not record its network.*model=network"):
        GraphPropertyModule.load_from_checkpoint(path)
    net = build(check_module_hparams(hparams())).model
    module = GraphPropertyModule.load_from_checkpoint(path, model=net)
    assert module.model is net and module.objective.standardize is False


def test_registry_holds_every_shipped_class_and_resolves_nothing_else():
    configs = list((REPO / "configs").rglob("*.yaml")) + [REPO / "graph_urpe/configs/default.yaml"]
    used = set()
    for config in configs:
        stack = [yaml.safe_load(config.read_text())]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                used.update(v for k, v in item.items() if k == "class_path")
                stack.extend(item.values())
    assert len(used) >= 10
    for path in sorted(used):
        entry = lookup(path)
        assert entry is not None, path
        cls = entry.load()
        assert f"{cls.__module__}.{cls.__qualname__}".endswith(path.rsplit(".", 1)[1])
    for key, entry in CLASSES.items():  # every registered class: its type hints resolve
        cls = entry.load()
        assert cls.__name__ == key and f"{cls.__module__}.{cls.__qualname__}" in entry.aliases
        check_module_hparams({"_class_path": key}, role=entry.role)
    for name in ("torch.nn.Linear", "os.system", "Sequential", "graph_urpe.cli.main",
                 "graph_urpe.models.graph.nn.Sequential", "torch.optim.Optimizer",
                 "torch.optim.lr_scheduler.LambdaLR", " Graphormer", "graphormer", 3, None):
        assert lookup(name) is None, name


def test_a_hostile_run_folder_is_refused_and_a_test_csv_run_is_testable(marker, tmp_path,
                                                                       capsys):
    run = tmp_path / "runs" / "x" / "version_0"
    ckpt = checkpoint(run / "checkpoints" / "best.ckpt")
    config = run / "config.yaml"
    hostile = [
        {"class_path": "torch_geometric.data.LightningDataset", "init_args": {}},
        {"class_path": "CSVDataModule", "init_args": {"path": "m.csv", "transform": "x"}},
        {"class_path": "CSVDataModule", "init_args": {"path": {"class_path": "evilmod.Net"}}},
        "cfgfile",
    ]
    for data in hostile:
        config.write_text(yaml.safe_dump({"data": data}))
        with pytest.raises(SystemExit):
            main(["test", "--ckpt_path", str(ckpt)])
        err = capsys.readouterr().err
        assert str(config) in err and "run folder" in err, err
    config.write_text("data: !!python/object/apply:os.system ['touch " + str(marker) + "']\n")
    with pytest.raises(UntrustedFileError, match="Python object tag"):
        read_run_data(str(config))
    assert not marker.exists()
    # A run trained on test.csv (a name that is also a module's) is plain data.
    config.write_text(yaml.safe_dump({"data": {"class_path": "graph_urpe.tasks.CSVDataModule",
                                               "init_args": {"path": "test.csv"}}}))
    assert read_run_data(str(config)) == {
        "class_path": "graph_urpe.data.modules.CSVDataModule",
        "init_args": {"path": "test.csv"}}


def test_run_folder_alias_bomb_and_non_mapping_are_one_line(tmp_path):
    config = tmp_path / "config.yaml"
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    config.write_text("\n".join(lines) + "\ndata: *a9\n")  # 1e10 leaves in ~1 KB
    assert config.stat().st_size < 4000
    with pytest.raises(UntrustedFileError, match="aliases are expanded"):
        read_run_data(str(config))
    for text, what in (("- a\n- b\n", "mapping, found list"), ("\xff\xfe", "not a YAML text"),
                       ("a: [", "not a YAML text")):
        config.write_bytes(text.encode("latin-1"))
        with pytest.raises(ReceivedFileError, match=what) as info:
            read_run_config(str(config))
        assert str(config) in str(info.value) and "\n" not in str(info.value)


def test_sizes_are_bounded_by_the_state_dict_before_anything_is_built(tmp_path):
    import time

    def refused(name, hp=None, state=None, match="", **top):
        path = checkpoint(tmp_path / f"{name}.ckpt", hp, state, **top)
        start = time.process_time()
        with pytest.raises(ReceivedFileError, match=match) as info:
            GraphPropertyModule.load_from_checkpoint(path)
        assert time.process_time() - start < 20 and "\n" not in str(info.value)
        assert str(path) in str(info.value)

    huge = hparams()
    huge["model"]["init_args"]["num_layers"] = 1_000_000
    refused("layers", huge, match="num_layers is 1,000,000, more than the")
    refused("members", hparams(ensemble_size=1_000_000), match="ensemble_size is 1,000,000")
    wide = hparams()
    wide["model"]["init_args"]["num_heads"] = 2**20  # a meta build stops after a few tensors
    refused("heads", wide, match="far more layers|do not build|has shape")
    two = hparams()
    two["model"]["init_args"]["num_layers"] = 2
    refused("two", two, match="missing")
    wide = dict(state_dict(), extra=torch.zeros(4))
    refused("unknown", state=wide, match="does not have")
    reshaped = dict(state_dict())
    key = next(k for k in reshaped if k.endswith("weight"))
    reshaped[key] = reshaped[key].reshape(-1)
    refused("reshaped", state=reshaped, match="has shape")
    refused("big", match="outside the state dict", blob=torch.zeros(5 * 2**20))
    refused("vocabulary", match="training_vocabulary",
            training_vocabulary={"atom": "C", "bond": []})
    for size in ("24", -1, True, 2.5):
        refused("size", match="training_vocabulary",
                training_vocabulary={"atom": [[1]], "bond": [], "max_atoms": size})
    path = tmp_path / "nostate.ckpt"
    torch.save({"hyper_parameters": hparams()}, path)
    with pytest.raises(ReceivedFileError, match="no state_dict"):
        read_checkpoint(path)
    with pytest.raises(ReceivedFileError, match="is a folder"):
        read_checkpoint(tmp_path)


def test_shared_reference_bomb_and_compressed_entries_are_refused(tmp_path):
    leaf: list = [0] * 10
    for _ in range(12):  # 10**12 values reached through pickle's shared references
        leaf = [leaf] * 10
    path = checkpoint(tmp_path / "bomb.ckpt", hparams(target_names=leaf))
    with pytest.raises(UntrustedFileError, match="more than"):
        read_checkpoint(path)
    good = checkpoint(tmp_path / "good.ckpt")
    packed = tmp_path / "packed.ckpt"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    with pytest.raises(UntrustedFileError, match="compressed"):
        read_checkpoint(packed)


class _Payload:
    def __reduce__(self):
        return (print, ("ran",))


def test_pickled_or_corrupt_checkpoint_gets_our_message_never_weights_only_false(tmp_path,
                                                                                 capsys):
    path = tmp_path / "pickled.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"x": _Payload()}}, path)
    with pytest.raises(SystemExit):
        main(["predict", "--ckpt_path", str(path)])
    err = capsys.readouterr().err
    assert "pickled Python objects" in err and "weights_only" not in err
    assert len(err.strip().splitlines()) == 2  # + the debug hint
    garbage = tmp_path / "garbage.ckpt"
    garbage.write_bytes(pickle.dumps([1, 2])[:3])
    with pytest.raises(ReceivedFileError, match="corrupt, truncated or not a PyTorch"):
        GraphPropertyModule.load_from_checkpoint(garbage)


def test_the_user_option_beats_the_checkpoint_and_sizes_must_still_fit(tmp_path, capsys,
                                                                       monkeypatch):
    """Package defaults < checkpoint < the user's --config and options (trusted like a script,
    applied, never silently dropped); the model they build must fit the checkpoint's tensors."""
    monkeypatch.chdir(tmp_path)
    config, _ = write_config(tmp_path)  # the same sizes as NET, lr 3e-3
    ckpt = checkpoint(tmp_path / "c.ckpt", hparams(standardize=False))
    seen = {}

    def record(cli_or_trainer, model, *args, **kwargs):
        seen["model"] = model
        return []

    monkeypatch.setattr(Trainer, "test", functools.wraps(Trainer.test)(record))
    monkeypatch.setattr(GraphURPECLI, "predict", record)
    for sub in ("test", "predict"):
        seen.clear()
        main([sub, "--ckpt_path", str(ckpt), "--config", config,
              "--model.init_args.model.init_args.dropout", "0.25",
              *(["--smiles", "CCO"] if sub == "predict" else [])])
        hp = seen["model"].hparams
        assert hp["model"]["init_args"]["dropout"] == 0.25, sub  # the option
        assert hp["optimizer"]["init_args"]["lr"] == 3e-3, sub    # the --config
        assert hp["objective"]["standardize"] is False, sub       # the checkpoint's own value
        assert seen["model"].objective.standardize is False, sub
    with pytest.raises(SystemExit):
        main(["test", "--ckpt_path", str(ckpt), "--config", config,
              "--model.init_args.model.init_args.num_layers", "3"])
    err = capsys.readouterr().err
    assert "does not fit the model your options build" in err and str(ckpt) in err


def test_lightning_still_reads_ckpt_path_where_graph_urpe_replaces_it():
    """graph-urpe replaces LightningCLI._parse_ckpt_path (Lightning parses the checkpoint over
    the user's options): fail loudly if Lightning stops calling it right after parsing."""
    import inspect

    source = inspect.getsource(LightningCLI.__init__)
    assert "self.parse_arguments(self.parser, args)\n        self._parse_ckpt_path()" in source


def test_importing_the_command_modules_main_runs_nothing(monkeypatch):
    """Issue 28: ``graph_urpe.cli.__main__`` ran ``main()`` when imported by name."""
    import importlib

    import graph_urpe.cli

    calls = []
    monkeypatch.setattr(graph_urpe.cli, "main", lambda *a: calls.append(a))
    monkeypatch.delitem(sys.modules, "graph_urpe.cli.__main__", raising=False)
    importlib.import_module("graph_urpe.cli.__main__")
    assert calls == []


@pytest.mark.parametrize("top", [
    {"loops": {"class_path": "evilmod.Evil", "init_args": {}}},
    {"pytorch-lightning_version": "0.0.1"},
    {"pytorch-lightning_version": {"class_path": "evilmod.Evil"}},
    {"optimizer_states": [{"class_path": "evilmod.Evil"}]},
    {"lr_schedulers": [{"class_path": "evilmod.Evil", "_class_path": "evilmod.Evil"}]},
    {"lr_schedulers": [{"optimizer": {}, "last_epoch": 3}]},
], ids=["loops", "old-version", "version-mapping", "optimizer-states", "scheduler-class",
        "scheduler-attribute"])
def test_what_lightning_restores_is_checked_in_one_line(tmp_path, top):
    """Found by the attacker trial: these reached Lightning's restore and ended in a traceback
    (or, for a scheduler, set attributes on it): now one line naming the file."""
    path = checkpoint(tmp_path / "changed.ckpt", **top)
    with pytest.raises((UntrustedFileError, ReceivedFileError)) as err:
        read_checkpoint(path)
    assert "changed.ckpt" in str(err.value) and "\n" not in str(err.value)
