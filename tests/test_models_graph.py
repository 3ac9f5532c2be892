"""Training, evaluation and prediction of the graph task: values against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from lightning.pytorch import Trainer, seed_everything
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from torch_geometric.data import Batch

from graph_urpe.cli.predict import PredictInputs, predict_smiles
from graph_urpe.data.featurize import smiles_to_graph
from graph_urpe.data.modules.graph import IndexedDataset
from graph_urpe.data.modules.molecule import CSVDataModule
from graph_urpe.models.graph import GraphPropertyModule
from graph_urpe.models.loss_checks import NonFiniteLossError
from graph_urpe.models.metrics import EpochPredictions, epoch_metrics, masked_loss
from graph_urpe.models.objective import Objective
from graph_urpe.models.optim import PolynomialDecayLR, parameter_groups, polynomial_decay_lr
from graph_urpe.models.record import ModelRecord
from graph_urpe.nn import Graphormer
from graph_urpe.transforms import AddShortestPathDistance

SMILES = [
    "CCO", "CCN", "CCCC", "c1ccccc1", "CC(=O)O", "CCOC", "c1ccncc1", "CC(C)O",
    "OCCO", "CC#N", "C1CCCCC1", "CCCl", "Cc1ccccc1", "COC(=O)C", "NCCN", "CCS",
]
TINY = {"num_layers": 1, "embed_dim": 16, "num_heads": 2, "ffn_dim": 16, "max_hops": 4, "max_distance": 8,
        "max_degree": 6, "dropout": 0.0, "attention_dropout": 0.0}


def tiny_net(num_tasks=1, featurization="zinc", **kw):
    atoms, bonds = ([28], [4]) if featurization == "zinc" else (
        [119, 5, 12, 12, 10, 6, 6, 2, 2], [5, 6, 2])
    return Graphormer(num_tasks=num_tasks, atom_categories=atoms, bond_categories=bonds,
                      **{**TINY, **kw})


def module(task="regression", lr=3e-3, warmup=5, total=None, **kw):
    """The Python path: a network instance and explicit dataset facts."""
    from functools import partial

    sched = partial(PolynomialDecayLR, warmup_steps=warmup)
    if total is not None:
        sched = partial(sched, total_steps=total)
    record = ModelRecord(task=task, featurization="zinc", target_names=["target"])
    return GraphPropertyModule(tiny_net(), record, optimizer=partial(torch.optim.AdamW, lr=lr),
                               lr_scheduler=sched, **kw)


def write_csv(path, task="regression"):
    rng = np.random.default_rng(0)
    if task == "regression":
        y = np.array([len(s) / 4.0 for s in SMILES])
    else:
        y = (np.array([len(s) for s in SMILES]) > 5).astype(float)
        y[[1, 9]] = np.nan  # missing labels
    split = ["train"] * 10 + ["valid"] * 3 + ["test"] * 3
    pd.DataFrame({"smiles": SMILES, "target": y, "split": split,
                  "noise": rng.normal(size=len(SMILES))}).to_csv(path, index=False)
    return str(path)


def trainer(tmp_path, **kw):
    cfg = {"accelerator": "cpu", "devices": 1, "logger": False, "enable_progress_bar": False,
               "enable_model_summary": False, "use_distributed_sampler": False,
               "num_sanity_val_steps": 0, "default_root_dir": str(tmp_path), "enable_checkpointing": False}
    cfg.update(kw)
    return Trainer(**cfg)


def datamodule(tmp_path, task="regression", **kw):
    csv = write_csv(tmp_path / f"mols_{task}.csv", task)
    kw.setdefault("batch_size", 4)
    return CSVDataModule(csv, task=task, split="split", featurization="zinc",
                         root=str(tmp_path / f"processed_{task}"), **kw)


# ---------------------------------------------------------------------------- pure functions
def test_masked_loss_ignores_nan_labels():
    pred = torch.tensor([[1.0, 2.0], [3.0, 5.0]])
    target = torch.tensor([[0.0, float("nan")], [4.0, 2.0]])
    assert masked_loss(pred, target, "l1").item() == pytest.approx((1 + 1 + 3) / 3)
    assert masked_loss(pred, target, "mse").item() == pytest.approx((1 + 1 + 9) / 3)
    logits = torch.tensor([[0.0, 3.0]])
    labels = torch.tensor([[1.0, float("nan")]])
    assert masked_loss(logits, labels, "bce").item() == pytest.approx(math.log(2.0))
    empty = masked_loss(pred, torch.full_like(pred, float("nan")), "l1")
    assert empty.item() == 0.0
    with pytest.raises(ValueError, match="shape"):
        masked_loss(pred, target[:, :1], "l1")


def test_metrics_against_hand_values():
    y = torch.tensor([[0.0, float("nan")], [0.0, 1.0], [1.0, 1.0], [1.0, float("nan")]])
    s = torch.tensor([[0.1, 0.0], [0.4, 0.2], [0.35, 0.3], [0.8, 0.0]])
    out = epoch_metrics(s, y, "classification")
    # Task 0: 3 of 4 (positive, negative) pairs ranked right; task 1 has one class: skipped.
    assert out["rocauc"] == pytest.approx(0.75)
    # AP: ranks 0.8 (+), 0.4 (-), 0.35 (+): 0.5 * 1 + 0.5 * 2/3.
    assert out["ap"] == pytest.approx(0.5 + 1 / 3)
    official = epoch_metrics(s[:, :1], y[:, :1], "classification", evaluator="ogbg-molhiv")
    assert official["rocauc"] == pytest.approx(0.75)
    assert math.isnan(epoch_metrics(s[:, 1:], y[:, 1:], "classification")["rocauc"])
    pred, target = torch.tensor([[1.0], [2.0], [4.0]]), torch.tensor([[1.5], [float("nan")], [2.0]])
    out = epoch_metrics(pred, target, "regression")
    assert out["mae"] == pytest.approx(1.25)
    assert out["rmse"] == pytest.approx(math.sqrt((0.25 + 4) / 2))
    # R^2 by hand: labels 1.5, 2.0 (mean 1.75); residuals -0.5, 2.0.
    assert out["r2"] == pytest.approx(1 - (0.25 + 4.0) / (0.0625 + 0.0625))
    pcq = epoch_metrics(pred, target, "regression", evaluator="pcqm4mv2")
    assert pcq["mae"] == pytest.approx(1.25)


def test_epoch_predictions_drop_repeats_and_sort():
    collector = EpochPredictions(1)
    collector.update(torch.tensor([3, 1]), torch.tensor([[30.0], [10.0]]), torch.zeros(2, 1))
    collector.update(torch.tensor([3, 2]), torch.tensor([[31.0], [20.0]]), torch.zeros(2, 1))
    uid, out, _ = collector.compute()
    assert uid.tolist() == [1, 2, 3]
    assert out.view(-1).tolist() == [10.0, 20.0, 30.0]


def test_polynomial_decay_schedule():
    peak, end = 1e-3, 1e-5
    f = lambda t: polynomial_decay_lr(t, 10, 110, peak, end, 1.0)
    assert f(0) == pytest.approx(1e-4)
    assert f(9) == pytest.approx(peak)
    assert f(10) == pytest.approx(peak)
    assert f(60) == pytest.approx(end + (peak - end) * 0.5)
    assert f(110) == f(500) == end
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=peak)
    sched = PolynomialDecayLR(opt, total_steps=110, warmup_steps=10, end_lr=end)
    seen = []
    for _ in range(61):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen[0] == pytest.approx(1e-4) and seen[60] == pytest.approx(f(60))
    with pytest.raises(ValueError):
        polynomial_decay_lr(0, 10, 10, peak, end, 1.0)


def test_warmup_is_a_fraction_of_the_run_and_capped():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    assert PolynomialDecayLR(opt, total_steps=200, warmup_fraction=0.1).warmup_steps == 20
    assert PolynomialDecayLR(opt, total_steps=10**7).warmup_steps == 10_000  # the cap
    assert PolynomialDecayLR(opt, total_steps=200, warmup_steps=7).warmup_steps == 7  # explicit
    assert PolynomialDecayLR(opt, total_steps=1).warmup_steps == 0
    with pytest.raises(ValueError, match="total_steps"):
        PolynomialDecayLR(opt)


def test_parameter_groups_decay_only_weight_matrices():
    net = tiny_net()
    decay, no_decay = (g["params"] for g in parameter_groups(net))
    names = {id(p): n for n, p in net.named_parameters()}
    decayed = {names[id(p)] for p in decay}
    assert decayed and all(p.dim() >= 2 for p in decay)
    # Embedding tables and the B / C relation tables are never decayed (C would drift from 1).
    for name in names.values():
        if "embedding" in name or "spatial" in name or "multiplier" in name or name.endswith(".bias"):
            assert name not in decayed, name
    assert len(decay) + len(no_decay) == len(list(net.parameters()))


def test_indexed_dataset_adds_sample_ids():
    graphs = [smiles_to_graph(s, "zinc") for s in SMILES[:3]]
    ds = IndexedDataset(graphs)
    assert [ds[i].sample_id for i in range(3)] == [0, 1, 2]
    assert "sample_id" not in graphs[0]  # the wrapped items are untouched


# ------------------------------------------------------------------------------- training
def test_tiny_training_run_overfits(tmp_path):
    seed_everything(0)
    dm = datamodule(tmp_path, batch_size=16)
    model = module(lr=1e-2, warmup=5, total=150, objective=Objective(loss="mse"))
    losses = []

    class Record(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            losses.append(float(outputs["loss"]))

    trainer(tmp_path, max_steps=150, callbacks=[Record()], limit_val_batches=0).fit(model, dm)
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    assert last < 0.05 * first, (first, last)


def test_regression_targets_are_standardised_with_training_statistics(tmp_path):
    dm = datamodule(tmp_path)
    model = module()
    trainer(tmp_path, max_epochs=1).fit(model, dm)
    y = np.array([len(s) / 4.0 for s in SMILES[:10]])  # the 10 training molecules
    assert model.target_mean.item() == pytest.approx(y.mean(), abs=1e-5)
    assert model.target_std.item() == pytest.approx(y.std(), abs=1e-5)
    # Predictions are in the labels' units: network output * std + mean.
    batch = next(iter(dm.val_dataloader()))
    model.eval()
    with torch.no_grad():
        raw = model(batch)
        torch.testing.assert_close(model.predict_values(batch), raw * y.std() + y.mean(),
                                   rtol=1e-5, atol=1e-5)


def test_non_finite_loss_stops_training(tmp_path):
    csv = tmp_path / "huge.csv"
    pd.DataFrame({"smiles": SMILES, "target": [1e30] * len(SMILES),
                  "split": ["train"] * 10 + ["valid"] * 3 + ["test"] * 3}).to_csv(csv, index=False)
    dm = CSVDataModule(str(csv), split="split", featurization="zinc", root=str(tmp_path / "p"),
                       batch_size=4)
    model = module(objective=Objective(loss="mse", standardize=False))
    with pytest.raises(NonFiniteLossError, match="training loss"):
        trainer(tmp_path, max_epochs=1).fit(model, dm)


def test_compile_is_refused_on_cpu_before_any_work(tmp_path):
    # benchmarks/README.md section 7: compiled slower than eager on CPU, so not offered there.
    model = module(compile=True)
    with pytest.raises(ValueError, match="compile=True is not offered on CPU"):
        trainer(tmp_path, max_epochs=1).fit(model, datamodule(tmp_path))
    assert model.global_step == 0


def test_classification_with_missing_labels(tmp_path):
    seed_everything(0)
    dm = datamodule(tmp_path, task="classification")
    model = module(task="classification")
    t = trainer(tmp_path, max_epochs=2)
    t.fit(model, dm)
    assert model.loss_name == "bce" and model.metric_name == "rocauc"
    assert model.metric_mode == "max"
    metrics = t.validate(model, dm, verbose=False)[0]
    assert metrics["val/num_graphs"] == 3
    assert 0.0 <= metrics["val/rocauc"] <= 1.0 or math.isnan(metrics["val/rocauc"])


def _fit_with_checkpoints(tmp_path, epochs):
    seed_everything(0)
    dm = datamodule(tmp_path)
    ckpt = ModelCheckpoint(dirpath=str(tmp_path / "ckpt"), monitor="val/mae", mode="min",
                           save_last=True, filename="best-{epoch}")
    model = module()
    t = trainer(tmp_path, max_epochs=epochs, callbacks=[ckpt], enable_checkpointing=True)
    t.fit(model, dm)
    return model, dm, ckpt, t


def test_checkpoint_save_load_and_resume(tmp_path):
    model, dm, _ckpt, t = _fit_with_checkpoints(tmp_path, epochs=2)
    per_epoch = len(dm.train_dataloader())  # 10 training molecules, batches of <= 4
    assert per_epoch >= 3 and t.global_step == 2 * per_epoch
    last = str(tmp_path / "final.ckpt")
    t.save_checkpoint(last)  # the final state
    raw = torch.load(last, weights_only=True, map_location="cpu")  # no pickled module inside
    assert "model" not in raw["hyper_parameters"]
    assert all(k.startswith(("model.", "target_"))
               or k in ("uncertainty_scale", "interval_factor", "sigma_floor")
               for k in raw["state_dict"])  # one copy
    # Built from an instance in Python: load with a network of the same architecture.
    loaded = GraphPropertyModule.load_from_checkpoint(last, model=tiny_net())
    assert loaded.target_mean.item() == pytest.approx(model.target_mean.item())
    batch = Batch.from_data_list([
        AddShortestPathDistance()(smiles_to_graph(s, "zinc")) for s in SMILES[:4]
    ])
    model.eval()
    loaded.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded.predict_values(batch), model.predict_values(batch))
    # Resume from "last": training continues at epoch 2 with the same step counter.
    model2 = module()
    t2 = trainer(tmp_path, max_epochs=3, callbacks=[ModelCheckpoint(dirpath=str(tmp_path / "ckpt"),
                                                                    save_last=True)],
                 enable_checkpointing=True)
    t2.fit(model2, dm, ckpt_path="last")
    assert t2.current_epoch == 3 and t2.global_step == 3 * per_epoch


def test_predict_keeps_row_order_and_reports_failures(tmp_path):
    _model, _dm, ckpt, _ = _fit_with_checkpoints(tmp_path, epochs=1)
    inputs = ["CCO", "C1CC", "[Na+].[Cl-]", "CCCCCCCCCCCC", "c1ccccc1", "", "OCCO"]
    csv = tmp_path / "to_predict.csv"
    pd.DataFrame({"id": [f"m{i}" for i in range(len(inputs))], "smiles": inputs}).to_csv(csv, index=False)
    out = tmp_path / "out" / "pred.csv"
    pdm = CSVDataModule(str(tmp_path / "mols_regression.csv"), featurization="zinc",
                        max_graph_nodes=10, batch_size=2)
    loaded = GraphPropertyModule.load_from_checkpoint(ckpt.last_model_path, model=tiny_net())
    counts = predict_smiles(trainer(tmp_path), loaded, pdm,
                            PredictInputs(csv=str(csv), output=str(out)))
    table = pd.read_csv(out, keep_default_na=False)
    assert table["row"].tolist() == list(range(len(inputs)))
    assert counts == {"rows": 7, "predicted": 3, "failed": 4, "flagged": 0, "resumed_chunks": 0}
    assert table["id"].tolist() == [f"m{i}" for i in range(len(inputs))]
    assert table["smiles"].tolist() == inputs
    errors = table["error"].tolist()
    failed = [i for i, e in enumerate(errors) if e]
    assert failed == [1, 2, 3, 5]
    assert "invalid SMILES" in errors[1] and "28 ZINC atom types" in errors[2]
    assert "12" in errors[3] and "10" in errors[3]  # the size and the limit
    assert all(table["target_pred"][i] == "" for i in failed)
    # Predictions equal the model applied to each molecule on its own, in the labels' units.
    loaded.eval()
    for i in (0, 4, 6):
        g = Batch.from_data_list([AddShortestPathDistance()(smiles_to_graph(inputs[i], "zinc"))])
        g.sample_id = torch.tensor([0])
        with torch.no_grad():
            expect = loaded.predict_values(g).item()
        assert float(table["target_pred"][i]) == pytest.approx(expect, abs=1e-5)


# --------------------------------------------------- every data module, on offline-built folders
MORE = SMILES + ["CCCO", "CCCN", "OC(=O)CC", "c1ccoc1", "CC(C)C", "NC(=O)C", "C1CCNC1", "CSC",
                 "OCC(O)CO", "c1ccc(O)cc1", "CC=CC", "CCOCC"]


def _build_family(family, root):
    """Write a tiny offline folder in the family's own format; return the data module."""
    from build_ogb import write_ogb_graphprop_folder
    from build_pcqm4mv2 import write_pcqm4mv2_folder
    from build_pyg_zinc import write_pyg_zinc_raw

    from graph_urpe.data.modules.molecule import OGBDataModule, PCQM4Mv2DataModule, ZINCDataModule

    targets = [len(s) / 3.0 for s in MORE]
    if family == "zinc":
        splits = ["train"] * 20 + ["valid"] * 4 + ["test"] * 4
        write_pyg_zinc_raw(f"{root}/zinc", MORE, targets, splits, num_workers=0)
        return ZINCDataModule(root=root, batch_size=8), ["target"], None
    if family == "ogbg-molhiv":
        labels = np.array([[float(i % 2)] for i in range(len(MORE))])
        write_ogb_graphprop_folder(root, "ogbg-molhiv", MORE, labels, num_workers=0)
        return OGBDataModule("ogbg-molhiv", root=root, batch_size=8), ["y"], "ogbg-molhiv"
    write_pcqm4mv2_folder(f"{root}/pcqm4mv2_qm9", MORE, targets, num_workers=0)
    return PCQM4Mv2DataModule(standin=True, root=root, batch_size=8), ["homolumogap"], "pcqm4mv2"


@pytest.mark.parametrize("family", ["zinc", "ogbg-molhiv", "pcqm4mv2"])
def test_data_module_families_validate_with_official_metric(tmp_path, family):
    dm, names, evaluator = _build_family(family, str(tmp_path))
    # The static facts need no processing and describe the folder that gets built.
    f = dm.facts
    assert list(f.target_names) == names and f.evaluator == evaluator
    assert f.featurization == ("zinc" if family == "zinc" else "ogb")
    assert f.atom_categories == ((28,) if family == "zinc" else (119, 5, 12, 12, 10, 6, 6, 2, 2))
    assert dm.loaded is None  # stated without processing anything
    net = Graphormer(num_tasks=f.num_tasks, atom_categories=list(f.atom_categories),
                     bond_categories=list(f.bond_categories), **TINY)
    model = GraphPropertyModule(net, record=ModelRecord(task=f.task, metric=f.metric, evaluator=f.evaluator, target_names=list(f.target_names), featurization=f.featurization))
    metrics = trainer(tmp_path).validate(model, dm, verbose=False)[0]
    # Independent check: run the model over the validation split and score it by hand.
    model.eval()
    preds, ys = [], []
    with torch.no_grad():
        for batch in dm.val_dataloader():
            preds.append(model(batch))
            ys.append(batch.y)
    pred, y = torch.cat(preds), torch.cat(ys)
    assert metrics["val/num_graphs"] == len(dm.splits["val"]) == len(y)
    if family == "ogbg-molhiv":
        from sklearn.metrics import roc_auc_score

        expected = roc_auc_score(y.view(-1).numpy(), pred.view(-1).numpy()) \
            if 0 < y.sum() < len(y) else float("nan")
        name = "val/rocauc"
    else:
        expected = (pred - y).abs().mean().item()
        name = "val/mae"
    if math.isnan(expected):
        assert math.isnan(metrics[name])
    else:
        assert metrics[name] == pytest.approx(expected, abs=1e-5)


def test_epoch_predictions_of_a_single_sample_keep_their_shape():
    """torchmetrics squeezes one-element results; a one-molecule split must stay [1, T]."""
    collector = EpochPredictions(1)
    collector.update(torch.tensor([4]), torch.tensor([[2.5]]), torch.tensor([[2.0]]))
    ids, pred, target = collector.rows()
    assert ids.tolist() == [4] and pred.shape == (1, 1) and target.shape == (1, 1)
    assert epoch_metrics(pred, target, "regression")["mae"] == pytest.approx(0.5)


@pytest.mark.parametrize("family", ["zinc", "ogbg-molhiv", "pcqm4mv2"])
def test_target_stats_read_the_collated_labels(tmp_path, family):
    """training_statistics reads y from the collated storage: the same labels, in the same order,
    as building every training graph; mean and std as numpy computes them; the source is the
    loaded folder's, not the registry name."""
    from graph_urpe.data.modules.graph import collated_labels

    dm, _, _ = _build_family(family, str(tmp_path))
    dm.setup("fit")
    train = dm.splits["train"]
    tasks = dm.facts.num_tasks
    built = torch.cat([train[i].y.view(-1, tasks) for i in range(len(train))])
    fast = collated_labels(train)
    assert fast is not None and fast.dtype == torch.float32
    torch.testing.assert_close(fast.reshape(-1, tasks), built.float())
    stats = dm.training_statistics()
    mean, std = stats.target_mean, stats.target_std
    assert stats.source == dm.loaded.source and stats.source != dm.facts.name
    assert mean == pytest.approx(np.nanmean(built.numpy(), 0).tolist(), abs=1e-6)
    assert std == pytest.approx(np.nanstd(built.numpy(), 0).tolist(), abs=1e-6)
