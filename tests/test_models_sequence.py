"""The sequence tasks under LightningCLI: injected network, linked data sizes, checkpoints that
rebuild the model alone (in a fresh process), the Python path, and every shipped config."""

import functools
import os
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
import yaml
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningCLI

from graph_urpe.cli.configs import CONFIG_DIR
from graph_urpe.cli.lightning_cli import GraphURPECLI
from graph_urpe.data.modules.sequence import SyntheticDataModule, sequence_links
from graph_urpe.models.sequence import SyntheticTaskModule
from graph_urpe.nn import SequenceTransformer

ROOT = Path(__file__).parents[1]
EXCERPT = Path(__file__).parent / "data" / "shakespeare_excerpt"
TINY_TRAINER = [
    "--trainer.max_steps=2", "--trainer.logger=false", "--trainer.enable_progress_bar=false",
    "--trainer.enable_model_summary=false", "--trainer.num_sanity_val_steps=0",
    "--trainer.limit_val_batches=1", "--trainer.accelerator=cpu",
]



def _cli(args: list[str], run: bool = True) -> LightningCLI:
    return GraphURPECLI(LightningModule, LightningDataModule, subclass_mode_model=True,
                      subclass_mode_data=True, args=args, run=run,
                      save_config_kwargs={"overwrite": True})


def _excerpt(root: Path) -> Path:
    root.mkdir(exist_ok=True)
    for split in ("train", "valid", "test"):
        (root / f"wiki.{split}.tokens").write_bytes((EXCERPT / f"wiki.{split}.tokens").read_bytes())
    return root



SYNTHETIC = {
    "model": {
        "class_path": "graph_urpe.models.sequence.SyntheticTaskModule",
        "init_args": {
            "model": {"class_path": "graph_urpe.nn.SequenceTransformer",
                      "init_args": {"embed_dim": 16, "num_layers": 1, "num_heads": 2,
                                    "attention": "ape"}},
            "optimizer": {"class_path": "torch.optim.AdamW", "init_args": {"lr": 3e-3}},
        },
    },
    "data": {
        "class_path": "graph_urpe.data.modules.sequence.SyntheticDataModule",
        "init_args": {"task": "etp", "length": 6, "vocab_size": 5, "batch_size": 4,
                      "train_size": 8, "val_size": 4, "test_size": 4},
    },
}
LM = {
    "model": {
        "class_path": "graph_urpe.models.sequence.LanguageModelModule",
        "init_args": {"model": {"class_path": "graph_urpe.nn.TransformerLM",
                                "init_args": {"embed_dim": 16, "num_layers": 1, "num_heads": 2,
                                              "tie_weights": False,
                                              "adaptive_cutoffs": [20, 60]}}},
    },
    "data": {"class_path": "graph_urpe.data.modules.sequence.WikiTextDataModule",
             "init_args": {"seq_len": 8, "batch_size": 4}},
}


def _fit(tmp_path: Path, config: dict) -> tuple[LightningCLI, Path]:
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    cli = _cli(["fit", "--config", str(path), *TINY_TRAINER,
                f"--trainer.default_root_dir={tmp_path / 'run'}"])
    ckpt = Path(cli.run_dir) / "checkpoints" / "last.ckpt"  # the run folder's latest state
    assert cli.trainer.global_step == 2 and ckpt.is_file()
    return cli, ckpt


def test_links_are_the_data_modules_sizes():
    """Every link source is a property of a sequence data module, none of a graph one's names."""
    assert sequence_links() == [
        ("data.num_tokens", "model.init_args.model.init_args.num_tokens"),
        ("data.vocab_size", "model.init_args.model.init_args.vocab_size"),
        ("data.sequence_length", "model.init_args.model.init_args.max_length"),
        ("data.num_classes", "model.init_args.num_classes"),
    ]
    graph_names = {"num_tasks", "atom_categories", "bond_categories", "task_type", "metric",
                   "evaluator", "target_names", "featurization", "max_graph_nodes"}
    assert not graph_names & {s.split(".", 1)[1] for s, _ in sequence_links()}


def test_cli_fit_checkpoint_and_fresh_process_reload(tmp_path, one_thread):
    """(a) fit runs; (b) the checkpoint stores the network's class path and arguments with the
    linked sizes, and data only; (c) a fresh process rebuilds both models from the checkpoint
    alone and gives the same outputs."""
    L.seed_everything(0)
    syn, syn_ckpt = _fit(tmp_path / "syn", SYNTHETIC)
    lm_config = yaml.safe_load(yaml.safe_dump(LM))
    lm_config["data"]["init_args"]["root"] = str(_excerpt(tmp_path / "corpus"))
    lm, lm_ckpt = _fit(tmp_path / "lm", lm_config)

    # (b) ETP, length 6, vocabulary 5 -> num_tokens 5, max_length 6, 5 + 1 classes
    hp = torch.load(syn_ckpt, weights_only=True)["hyper_parameters"]
    assert hp["_class_path"] == "graph_urpe.models.sequence.SyntheticTaskModule"
    assert hp["model"]["class_path"] == "graph_urpe.nn.SequenceTransformer"
    net = hp["model"]["init_args"]
    assert (net["num_tokens"], net["max_length"], net["embed_dim"], net["attention"]) == (
        5, 6, 16, "ape")
    assert hp["num_classes"] == 6 and hp["optimizer"]["init_args"]["lr"] == 3e-3
    assert syn.model.head.out_features == 6 and syn.model.model.num_tokens == 5
    hp = torch.load(lm_ckpt, weights_only=True)["hyper_parameters"]
    vocab = lm.datamodule.vocab_size
    assert hp["model"]["class_path"] == "graph_urpe.nn.TransformerLM"
    assert (hp["model"]["init_args"]["vocab_size"], hp["model"]["init_args"]["max_length"]) == (
        vocab, 8)
    assert "num_classes" not in hp

    # (c) a fresh process: no data, no config, only the checkpoint
    x_syn = torch.randint(0, 5, (3, 6), generator=torch.Generator().manual_seed(1))
    x_lm = torch.randint(0, vocab, (2, 8), generator=torch.Generator().manual_seed(2))
    torch.save({"syn": x_syn, "lm": x_lm}, tmp_path / "inputs.pt")
    script = (
        "import sys, torch\n"
        "from graph_urpe.models.sequence import LanguageModelModule, SyntheticTaskModule\n"
        "x = torch.load(sys.argv[3])\n"
        "syn = SyntheticTaskModule.load_from_checkpoint(sys.argv[1], map_location='cpu').eval()\n"
        "lm = LanguageModelModule.load_from_checkpoint(sys.argv[2], map_location='cpu').eval()\n"
        "with torch.no_grad():\n"
        "    torch.save({'syn': syn(x['syn']), 'lm': lm(x['lm'])}, sys.argv[4])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", script, str(syn_ckpt), str(lm_ckpt),
                    str(tmp_path / "inputs.pt"), str(tmp_path / "out.pt")],
                   check=True, env=env, cwd=tmp_path, capture_output=True)
    out = torch.load(tmp_path / "out.pt", weights_only=True)
    syn.model.eval()
    lm.model.eval()
    with torch.no_grad():
        torch.testing.assert_close(out["syn"], syn.model(x_syn), rtol=0, atol=1e-6)
        torch.testing.assert_close(out["lm"], lm.model(x_lm), rtol=0, atol=1e-6)
    assert out["syn"].shape == (3, 6, 6) and out["lm"].shape == (2, 8, vocab)


def test_python_path_checkpoint_stores_data_only(tmp_path, one_thread):
    """(d) An injected instance and optimizer partial are not pickled; the checkpoint loads with
    ``weights_only=True``, and ``load_from_checkpoint(path, model=...)`` restores the weights."""
    L.seed_everything(0)
    dm = SyntheticDataModule(task="pi", length=6, vocab_size=5, batch_size=4, train_size=8,
                             val_size=4, test_size=4)

    def network() -> SequenceTransformer:
        return SequenceTransformer(dm.num_tokens, max_length=dm.sequence_length, embed_dim=16,
                                   num_layers=1, num_heads=2)

    model = SyntheticTaskModule(network(), num_classes=dm.num_classes,
                                optimizer=functools.partial(torch.optim.AdamW, lr=1e-2))
    assert dict(model.hparams) == {"num_classes": 6} and model.hparams_initial == model.hparams
    trainer = L.Trainer(max_steps=2, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0,
                        default_root_dir=tmp_path, accelerator="cpu")
    trainer.fit(model, dm)
    path = trainer.checkpoint_callback.best_model_path
    state = torch.load(path, weights_only=True)
    assert state["hyper_parameters"] == {"num_classes": 6}
    assert state["datamodule_hyper_parameters"]["task"] == "pi"
    restored = SyntheticTaskModule.load_from_checkpoint(path, model=network()).eval()
    model.eval()
    x = torch.randint(0, 5, (2, 6))
    with torch.no_grad():
        assert torch.equal(restored(x), model(x))


def _config_files() -> list[tuple[str, str]]:
    return [(family, path.name) for family in ("synthetic", "lm")
            for path in sorted((CONFIG_DIR / family).glob("*.yaml"))
            if path.name != "base.yaml"]


@pytest.mark.parametrize(("family", "name"), _config_files())
def test_shipped_config_runs_one_step(family, name, tmp_path, monkeypatch, one_thread):
    """Every experiment file parses on its family base and trains one step (sizes shrunk)."""
    monkeypatch.chdir(tmp_path)  # the configs' run folders are relative
    configs = CONFIG_DIR / family
    net = "--model.init_args.model.init_args"
    args = [
        "fit", "--config", str(configs / "base.yaml"), "--config", str(configs / name),
        "--trainer.max_steps=1", "--trainer.val_check_interval=1", "--trainer.limit_val_batches=1",
        "--trainer.accelerator=cpu", "--trainer.precision=32-true",
        "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false",
        f"{net}.embed_dim=8", f"{net}.num_heads=2", f"{net}.ffn_dim=16", f"{net}.num_layers=1",
        "--model.init_args.lr_scheduler.init_args.warmup_steps=0",  # a 1-step run: no warm-up
    ]
    if family == "synthetic":
        args += ["--data.init_args.length=8", "--data.init_args.vocab_size=5",
                 "--data.init_args.batch_size=2", "--data.init_args.train_size=4",
                 "--data.init_args.val_size=2", "--data.init_args.test_size=2",
                 "--data.init_args.num_workers=0"]
    else:
        args += [f"--data.init_args.root={_excerpt(tmp_path / 'corpus')}",
                 "--data.init_args.seq_len=8", "--data.init_args.batch_size=2",
                 "--data.init_args.eval_batch_size=2", f"{net}.adaptive_cutoffs=[20, 60]"]
    cli = _cli(args)
    assert cli.trainer.global_step == 1
    expected = yaml.safe_load((configs / name).read_text())
    position = expected["model"]["init_args"]["model"]["init_args"]["attention"]
    encoder = cli.model.model if family == "synthetic" else cli.model.model.encoder
    assert encoder.attention == position
    assert cli.trainer.logger.name == name.removesuffix(".yaml")
    assert (Path(cli.run_dir) / "checkpoints" / "last.ckpt").is_file()
