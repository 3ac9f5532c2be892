"""Fine-tuning from a checkpoint's encoder: weights transferred, head new, refusals, lr groups,
freezing, the shipped encoder."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
import yaml
from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import Callback

from graph_urpe.cli import main
from graph_urpe.data.modules.molecule import CSVDataModule
from graph_urpe.models.finetune import (
    EncoderMismatchError,
    Finetune,
    encoder_parameter_groups,
    load_pretrained_encoder,
    read_pretrained_encoder,
)
from graph_urpe.models.graph import GraphPropertyModule
from graph_urpe.models.optim import PolynomialDecayLR, configure_optimizers
from graph_urpe.models.record import ModelRecord
from graph_urpe.nn import Graphormer
from graph_urpe.pretrained import DEFAULT, available

SMILES = [
    "CCO", "CCN", "CCCC", "c1ccccc1", "CC(=O)O", "CCOC", "c1ccncc1", "CC(C)O",
    "OCCO", "CC#N", "C1CCCCC1", "CCCl", "Cc1ccccc1", "COC(=O)C", "NCCN", "CCS",
]
OGB_ATOMS = [119, 5, 12, 12, 10, 6, 6, 2, 2]
OGB_BONDS = [5, 6, 2]
ARCH = {"num_layers": 2, "embed_dim": 16, "num_heads": 2, "ffn_dim": 16, "max_hops": 4,
        "max_distance": 8, "max_degree": 6}


def tiny_config(tmp_path, name, targets, extra_model=None, arch=None):
    """A tiny CSV run (16 molecules, OGB features) writing runs/<name>."""
    csv = tmp_path / f"{name}.csv"
    frame = pd.DataFrame({"smiles": SMILES, "split": ["train"] * 10 + ["valid"] * 3 + ["test"] * 3})
    for k, col in enumerate(targets):
        frame[col] = [len(s) / (k + 2.0) for s in SMILES]
    frame.to_csv(csv, index=False)
    init = {"model": {"init_args": dict(ARCH, **(arch or {}))},
            "optimizer": {"init_args": {"lr": 3e-3}},
            "lr_scheduler": {"init_args": {"warmup_steps": 1}}}
    init.update(extra_model or {})
    config = {
        "name": name, "seed_everything": 1,
        "trainer": {"accelerator": "cpu", "max_epochs": 2, "enable_progress_bar": False,
                    "enable_model_summary": False, "num_sanity_val_steps": 0,
                    "default_root_dir": str(tmp_path / "runs")},
        "model": {"init_args": init},
        "data": {"class_path": "graph_urpe.data.modules.molecule.CSVDataModule",
                 "init_args": {"path": str(csv), "split": "split", "featurization": "ogb",
                               "target_columns": list(targets), "root": str(tmp_path / "data"),
                               "batch_size": 4}},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path), tmp_path / "runs" / name / "version_0"


@pytest.fixture(scope="module")
def pretrained_ckpt(tmp_path_factory):
    """A checkpoint of a 3-target regression run (the 'pretraining')."""
    tmp = tmp_path_factory.mktemp("pre")
    torch.set_num_threads(1)
    config, run = tiny_config(tmp, "pre", ["a", "b", "c"])
    main(["fit", "--config", config])
    return str(run / "checkpoints" / "last.ckpt")


def encoder_state_of(ckpt):
    """The encoder tensors of a Lightning checkpoint, read independently of graph_urpe."""
    state = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    return {k[len("model.encoder."):]: v for k, v in state.items()
            if k.startswith("model.encoder.")}


def ogb_net(num_tasks=1, seed=5, **kwargs):
    torch.manual_seed(seed)
    return Graphormer(num_tasks, OGB_ATOMS, OGB_BONDS, readout="sum", **dict(ARCH, **kwargs))


def test_encoder_weights_are_copied_and_the_head_stays_new(pretrained_ckpt):
    expected = encoder_state_of(pretrained_ckpt)
    net = ogb_net(num_tasks=1)
    head_before = copy.deepcopy(net.head.state_dict())
    differs = [k for k, v in net.encoder.state_dict().items() if not torch.equal(v, expected[k])]
    assert differs  # a fresh network differs from the trained one
    load_pretrained_encoder(net, pretrained_ckpt, featurization="ogb")
    got = net.encoder.state_dict()
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert torch.equal(got[key], value), key
    assert net.head.linear.weight.shape == (1, 16)  # 1 new target, the checkpoint had 3
    for key, value in head_before.items():
        assert torch.equal(net.head.state_dict()[key], value)


@pytest.mark.parametrize("build, featurization, needle", [
    (lambda: Graphormer(1, [28], [4], **ARCH), "zinc", "featurization ogb there, zinc here"),
    (lambda: Graphormer(1, [28], OGB_BONDS, **ARCH), None, "atom vocabulary sizes"),
    (lambda: ogb_net(embed_dim=32, ffn_dim=32), "ogb", "width (embed_dim) 16 there, 32 here"),
    (lambda: ogb_net(num_layers=3), "ogb", "layers 2 there, 3 here"),
    (lambda: ogb_net(num_heads=4), "ogb", "heads 2 there, 4 here"),
    (lambda: ogb_net(attention="rpe"), "ogb", "attention kind urpe there, rpe here"),
    (lambda: ogb_net(ffn_dim=24), "ogb",
     "tensor layers.0.ffn.0.weight of shape (16, 16) there, (24, 16) here"),
    (lambda: ogb_net(graph_token=False), "ogb", "tensor graph_token not in this network"),
])
def test_refusals_name_what_does_not_fit_and_load_nothing(pretrained_ckpt, build, featurization,
                                                          needle):
    net = build()
    before = copy.deepcopy(net.state_dict())
    with pytest.raises(EncoderMismatchError) as info:
        load_pretrained_encoder(net, pretrained_ckpt, featurization=featurization)
    message = str(info.value)
    assert needle in message and "\n" not in message and pretrained_ckpt in message
    for key, value in before.items():
        assert torch.equal(net.state_dict()[key], value), key


def test_unknown_source_and_non_graphormer_files_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file and no shipped encoder"):
        read_pretrained_encoder(str(tmp_path / "missing.ckpt"))
    seq = tmp_path / "seq.ckpt"
    torch.save({"state_dict": {"model.embed.weight": torch.zeros(3, 2)},
                "hyper_parameters": {"model": {"class_path": "graph_urpe.nn.TransformerLM"}}}, seq)
    with pytest.raises(ValueError, match=r"TransformerLM\) has no Graphormer encoder"):
        read_pretrained_encoder(str(seq))
    unsafe = tmp_path / "unsafe.ckpt"
    torch.save({"state_dict": {}, "obj": SimpleNamespace(a=1)}, unsafe)
    with pytest.raises(ValueError, match="pickled Python objects"):
        read_pretrained_encoder(str(unsafe))


def test_encoder_learning_rate_is_a_fraction_of_the_heads_through_the_schedule():
    net = ogb_net()
    groups = encoder_parameter_groups(net, 0.1)
    module = SimpleNamespace(trainer=SimpleNamespace(estimated_stepping_batches=10))
    out = configure_optimizers(module, lambda p: torch.optim.AdamW(p, lr=1e-2), PolynomialDecayLR,
                               groups)
    opt, sched = out["optimizer"], out["lr_scheduler"]["scheduler"]
    enc = {id(p) for p in net.encoder.parameters()}
    seen = [id(p) for g in opt.param_groups for p in g["params"]]
    assert sorted(seen) == sorted(id(p) for p in net.parameters())  # each parameter once
    for _ in range(3):
        opt.step()
        sched.step()
        for g in opt.param_groups:
            in_encoder = {id(p) in enc for p in g["params"]}
            assert len(in_encoder) == 1
        lrs = {id(p) in enc: g["lr"] for g in opt.param_groups for p in g["params"]}
        assert lrs[True] == pytest.approx(0.1 * lrs[False])
    with pytest.raises(ValueError, match="encoder_lr_factor"):
        encoder_parameter_groups(net, 0.0)


class RecordChanges(Callback):
    """Per update: did the encoder / the head change?"""

    def __init__(self):
        self.rows = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.before = ({k: v.clone() for k, v in module.model.encoder.state_dict().items()},
                       {k: v.clone() for k, v in module.model.head.state_dict().items()})

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        enc, head = self.before
        self.rows.append((
            any(not torch.equal(v, enc[k]) for k, v in module.model.encoder.state_dict().items()),
            any(not torch.equal(v, head[k]) for k, v in module.model.head.state_dict().items()),
        ))


def test_frozen_encoder_for_the_first_part_then_trained(tmp_path, pretrained_ckpt, one_thread):
    csv = tmp_path / "m.csv"
    pd.DataFrame({"smiles": SMILES, "y": [len(s) for s in SMILES],
                  "split": ["train"] * 10 + ["valid"] * 3 + ["test"] * 3}).to_csv(csv, index=False)
    dm = CSVDataModule(str(csv), target_columns=["y"], split="split", root=str(tmp_path / "d"),
                       batch_size=4)
    module = GraphPropertyModule(ogb_net(), record=ModelRecord(featurization="ogb"), finetune=Finetune(pretrained=pretrained_ckpt, freeze_encoder=0.5, encoder_lr_factor=0.5))
    record = RecordChanges()
    trainer = Trainer(accelerator="cpu", max_steps=6, max_epochs=10, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, num_sanity_val_steps=0, callbacks=[record],
                      use_distributed_sampler=False)
    trainer.fit(module, datamodule=dm)
    assert [enc for enc, _ in record.rows] == [False] * 3 + [True] * 3
    assert all(head for _, head in record.rows)
    assert all(p.requires_grad for p in module.model.parameters())
    with pytest.raises(ValueError, match="freeze_encoder"):
        GraphPropertyModule(ogb_net(), finetune=Finetune(freeze_encoder=1.0))


def test_fit_option_fine_tunes_from_a_checkpoint(tmp_path, pretrained_ckpt, capsys, one_thread):
    extra = {"finetune": {"pretrained": pretrained_ckpt, "encoder_lr_factor": 0.5,
                          "freeze_encoder": 0.9}}
    config, run = tiny_config(tmp_path, "ft", ["y"], extra_model=extra)
    main(["fit", "--config", config, "--trainer.max_steps", "1"])  # one update, encoder frozen
    capsys.readouterr()
    saved = encoder_state_of(run / "checkpoints" / "last.ckpt")
    for key, value in encoder_state_of(pretrained_ckpt).items():
        assert torch.equal(saved[key], value), key
    bad, _ = tiny_config(tmp_path, "bad", ["y"], extra_model={"finetune": {"pretrained": pretrained_ckpt}},
                         arch={"embed_dim": 32, "ffn_dim": 32})
    with pytest.raises(SystemExit):
        main(["fit", "--config", bad])
    err = capsys.readouterr().err
    assert "width (embed_dim) 16 there, 32 here" in err and "Traceback" not in err


def test_shipped_encoder_fits_the_csv_template_network():
    assert DEFAULT in available()  # package data: its absence is a packaging bug, not a skip
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "graph_urpe", "configs", "csv", "template.yaml")) as f:
        template = yaml.safe_load(f)
    assert template["model"]["init_args"]["finetune"]["pretrained"] == DEFAULT
    arch = template["model"]["init_args"]["model"]["init_args"]
    base = {"max_distance": 36, "max_degree": 63, "max_hops": 20}
    net = Graphormer(1, OGB_ATOMS, OGB_BONDS, **{**base, **arch})
    pre = load_pretrained_encoder(net, DEFAULT, featurization="ogb")
    for key, value in pre.state.items():
        assert torch.equal(net.encoder.state_dict()[key], value)
    assert pre.metadata["labels"][0].startswith("d_")


def test_graphormer_recipe_pcqm4mv2_then_molhiv_end_to_end(tmp_path, monkeypatch, one_thread):
    """configs/pcqm4mv2 pretraining on a tiny stand-in, then configs/ogbg-molhiv fine-tuning from
    its best checkpoint, the config's default path (architecture shrunk alike in both; encoder frozen so it must equal the
    pretrained one)."""
    import os

    import numpy as np
    from build_ogb import write_ogb_graphprop_folder
    from build_pcqm4mv2 import write_pcqm4mv2_folder

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    data = tmp_path / "data"
    pcq = ["C", "N", "O", "CC", "CO", "CN", "C#C", "C=O", "CCO", "CC#N", "C1CC1", "NC=O",
           "OCCO", "CC(C)C", "c1ccccc1", "c1ccncc1", "FC(F)F", "CC(=O)O", "N#N", "O=C=O",
           "CCN", "CCCO", "OC1CC1", "C1CO1"]
    write_pcqm4mv2_folder(str(data / "pcqm4mv2_qm9"), pcq, np.linspace(4.0, 12.0, len(pcq)),
                          num_workers=0)
    hiv = SMILES + ["c1ccccc1C", "c1ccccc1O", "C1CCCCC1O", "c1ccncc1O", "c1ccoc1C", "CCCO",
                    "C1CCNCC1", "C1CCOC1"]
    labels = np.array([[float(i % 3 == 0)] for i in range(len(hiv))])
    write_ogb_graphprop_folder(str(data), "ogbg-molhiv", hiv, labels, label_names=["HIV_active"],
                               num_workers=0)
    monkeypatch.chdir(tmp_path)
    tiny = ["--model.init_args.model.init_args.num_layers", "2",
            "--model.init_args.model.init_args.embed_dim", "16",
            "--model.init_args.model.init_args.num_heads", "2",
            "--model.init_args.model.init_args.ffn_dim", "16",
            "--trainer.precision", "32", "--trainer.accelerator", "cpu",
            "--trainer.enable_progress_bar", "false", "--data.init_args.root", str(data),
            "--data.init_args.download", "false", "--data.init_args.num_workers", "0",
            "--data.init_args.batch_size", "8"]
    main(["fit", "--config", os.path.join(root, "graph_urpe", "configs", "pcqm4mv2", "graphormer-base-urpe.yaml"),
          "--data.init_args.standin", "true", "--trainer.max_steps", "4",
          "--trainer.val_check_interval", "2", *tiny])
    ckpt = tmp_path / "runs" / "pcqm4mv2-base-urpe" / "version_0" / "checkpoints" / "best.ckpt"
    assert ckpt.is_file()
    main(["fit", "--config",
          os.path.join(root, "graph_urpe", "configs", "ogbg-molhiv", "graphormer-base-urpe-finetune.yaml"),
          "--trainer.max_epochs", "1", "--model.init_args.finetune.freeze_encoder", "0.99", *tiny])
    run = tmp_path / "runs" / "molhiv-base-urpe-finetune" / "version_0"
    tuned = encoder_state_of(run / "checkpoints" / "last.ckpt")
    for key, value in encoder_state_of(ckpt).items():
        assert torch.equal(tuned[key], value), key
    head = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    assert head["model.head.linear.weight"].shape == (1, 16)
