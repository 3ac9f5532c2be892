"""Node-level and multi-class tasks: ids, losses and metrics against hand computations, the
synthetic data module, a CLI fit of the node-level config, and the paper's argument on graphs."""

from __future__ import annotations

import math
import os
from pathlib import Path

import networkx as nx
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
import yaml
from lightning.pytorch import Trainer
from torch import nn
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader

from graph_urpe.cli import main
from graph_urpe.cli.configs import CONFIG_DIR
from graph_urpe.data.indexed import IndexedDataset
from graph_urpe.data.modules.synthetic_graph import SyntheticGraphDataModule, structural_num_classes
from graph_urpe.data.synthetic_graphs import SyntheticGraphDataset
from graph_urpe.models.graph import GraphPropertyModule
from graph_urpe.models.metrics import EpochPredictions, multiclass_loss, multiclass_metrics
from graph_urpe.models.objective import Objective
from graph_urpe.models.record import ModelRecord
from graph_urpe.models.sample_ids import NODE_ID_STRIDE, node_sample_ids
from graph_urpe.nn import Graphormer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def graph(num_nodes: int, key: int, y) -> Data:
    """A path graph whose nodes carry ``key`` (a row of a fixed output table) and labels ``y``."""
    src = torch.arange(num_nodes - 1)
    edge_index = torch.stack([torch.cat([src, src + 1]), torch.cat([src + 1, src])])
    return Data(edge_index=edge_index, num_nodes=num_nodes, y=torch.as_tensor(y),
                key=torch.arange(num_nodes) + key)


class FixedNodeOutputs(nn.Module):
    """A node-level "network" that returns a fixed output row per node (looked up by ``key``)."""

    level = "node"

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.num_tasks = table.shape[1]
        self.table = nn.Parameter(table.clone())

    def forward(self, batch) -> torch.Tensor:
        return self.table[batch.key]


def validate(module, batches) -> dict[str, float]:
    """``Trainer.validate`` over a loader, or over a list of ready batches."""
    if isinstance(batches, list):
        batches = torch.utils.data.DataLoader(batches, batch_size=None, collate_fn=lambda b: b)
    trainer = Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                      enable_model_summary=False, enable_checkpointing=False)
    return trainer.validate(module, dataloaders=batches, verbose=False)[0]


# ------------------------------------------------------------------------------ node ids
def test_node_sample_ids_are_graph_id_times_stride_plus_local_index():
    batch = Batch.from_data_list([graph(3, 0, [0, 0, 0]), graph(2, 3, [0, 0])])
    batch.sample_id = torch.tensor([5, 2])
    expected = [5 * NODE_ID_STRIDE + i for i in range(3)] + [2 * NODE_ID_STRIDE + i for i in range(2)]
    assert node_sample_ids(batch).tolist() == expected
    assert [divmod(int(i), NODE_ID_STRIDE) for i in node_sample_ids(batch)] == \
        [(5, 0), (5, 1), (5, 2), (2, 0), (2, 1)]
    single = graph(4, 0, [0] * 4)
    single.sample_id = 7
    assert node_sample_ids(single).tolist() == [7 * NODE_ID_STRIDE + i for i in range(4)]
    with pytest.raises(ValueError, match="sample_id"):
        node_sample_ids(graph(2, 0, [0, 0]))


def test_epoch_predictions_count_each_node_once_when_a_graph_repeats():
    a = Batch.from_data_list([graph(3, 0, [0, 0, 0]), graph(2, 3, [0, 0])])
    a.sample_id = torch.tensor([0, 1])
    b = Batch.from_data_list([graph(2, 3, [0, 0]), graph(1, 5, [0])])  # graph 1 again (DDP pad)
    b.sample_id = torch.tensor([1, 2])
    collector = EpochPredictions(1)
    collector.update(node_sample_ids(a), torch.arange(5.0).view(-1, 1), torch.zeros(5, 1))
    collector.update(node_sample_ids(b), torch.tensor([[30.0], [40.0], [50.0]]), torch.zeros(3, 1))
    ids, pred, _ = collector.compute()
    assert ids.tolist() == [0, 1, 2, NODE_ID_STRIDE, NODE_ID_STRIDE + 1, 2 * NODE_ID_STRIDE]
    assert pred.view(-1).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 50.0]  # first copy kept


# ---------------------------------------------------------------------- multiclass maths
def test_multiclass_loss_and_metrics_against_hand_values():
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 3.0], [1.0, 0.0, 0.0],
                           [0.0, 5.0, 0.0]])
    target = torch.tensor([[0.0], [1.0], [1.0], [float("nan")], [-100.0]])  # last two missing
    # Cross-entropy by hand over the three labelled rows.
    ce = [-(lg[c] - math.log(sum(math.exp(v) for v in lg))) for lg, c in
          zip(logits[:3].tolist(), [0, 1, 1])]
    assert multiclass_loss(logits, target).item() == pytest.approx(sum(ce) / 3, rel=1e-6)
    assert multiclass_loss(logits, torch.full((5, 1), float("nan"))).item() == 0.0
    out = multiclass_metrics(logits, target)
    # Predictions 0, 1, 2 for labels 0, 1, 1: 2 of 3 right. F1: class 0 = 1, class 1 =
    # 2 * 1 / (2 * 1 + 0 + 1) = 2/3, class 2 (predicted once, never a label) = 0; class absent
    # from both is not averaged (none here). Majority label 1: 2 of 3.
    assert out["accuracy"] == pytest.approx(2 / 3)
    assert out["f1_macro"] == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert out["baseline_accuracy"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="out of range"):
        multiclass_metrics(logits, torch.tensor([[3.0]] * 5))


def test_node_level_validation_matches_a_hand_computation():
    torch.manual_seed(0)
    labels = [[0, 1, 1], [2, 0], [1, 1, 1, 0]]
    graphs = []
    key = 0
    for y in labels:
        graphs.append(graph(len(y), key, y))
        key += len(y)
    table = torch.randn(key, 3)
    module = GraphPropertyModule(FixedNodeOutputs(table), record=ModelRecord(task="multiclass"), objective=Objective(num_classes=3))
    assert module.level == "node" and module.metric_name == "accuracy"
    assert module.target_names == ["y"]
    loader = DataLoader(IndexedDataset(graphs), batch_size=2)
    # The padded DDP rank repeats batches: the repeat must not change any value.
    repeated = list(loader) + list(loader)[:1]
    metrics = validate(module, repeated)
    flat = torch.tensor([c for y in labels for c in y])
    pred = table.argmax(1)
    ce = F.cross_entropy(table, flat).item()
    f1 = []
    for c in range(3):
        tp = int(((pred == c) & (flat == c)).sum())
        fp = int(((pred == c) & (flat != c)).sum())
        fn = int(((pred != c) & (flat == c)).sum())
        if tp + fp + fn:
            f1.append(2 * tp / (2 * tp + fp + fn))
    assert metrics["val/num_nodes"] == 9 and metrics["val/num_graphs"] == 3
    assert metrics["val/loss"] == pytest.approx(ce, rel=1e-5)
    assert metrics["val/accuracy"] == pytest.approx(float((pred == flat).float().mean()))
    assert metrics["val/f1_macro"] == pytest.approx(sum(f1) / len(f1))
    assert metrics["val/baseline_accuracy"] == pytest.approx(5 / 9)  # label 1: 5 of 9 nodes


def test_node_level_regression_with_missing_labels():
    labels = [[1.0, float("nan"), 3.0], [0.5, 2.0]]
    graphs = [graph(3, 0, [[v] for v in labels[0]]), graph(2, 3, [[v] for v in labels[1]])]
    table = torch.tensor([[1.5], [9.0], [2.0], [0.5], [4.0]])
    module = GraphPropertyModule(FixedNodeOutputs(table), record=ModelRecord(task="regression", metric="mae"))
    metrics = validate(module, DataLoader(IndexedDataset(graphs), batch_size=1))
    # Labelled nodes: |1.5-1| + |2-3| + |0.5-0.5| + |4-2| = 3.5 over 4.
    assert metrics["val/mae"] == pytest.approx(3.5 / 4)
    assert metrics["val/loss"] == pytest.approx(3.5 / 4)  # l1 in (identity-)standardised units
    assert metrics["val/num_nodes"] == 5


def test_level_and_class_count_errors():
    net = FixedNodeOutputs(torch.zeros(4, 3))
    with pytest.raises(ValueError, match="num_classes=4"):
        GraphPropertyModule(net, record=ModelRecord(task="multiclass"), objective=Objective(num_classes=4))
    with pytest.raises(ValueError, match="num_classes is for task='multiclass'"):
        GraphPropertyModule(net, record=ModelRecord(task="regression"), objective=Objective(num_classes=3))
    with pytest.raises(ValueError, match="does not fit a multiclass task"):
        GraphPropertyModule(net, record=ModelRecord(task="multiclass", metric="mae"))
    module = GraphPropertyModule(net, record=ModelRecord(task="multiclass"))
    per_graph = Batch.from_data_list([graph(2, 0, [1]), graph(2, 2, [0])])  # graph-level labels
    per_graph.sample_id = torch.tensor([0, 1])
    with pytest.raises(ValueError, match="labels per node"):
        module.training_step(per_graph, 0)


# ---------------------------------------------------------------------- synthetic data
def test_class_bounds_hold_and_are_reached_by_a_star():
    star = nx.star_graph(9)  # 10 nodes
    assert structural_num_classes("degree", 10) - 1 == max(d for _, d in star.degree())
    pairs2 = sum(1 for u, dist in nx.all_pairs_shortest_path_length(star)
                 for v, d in dist.items() if u < v and d == 2)
    assert structural_num_classes("pairs_distance2", 10) - 1 == pairs2 == 36
    for task in ("degree", "distance2", "eccentricity", "diameter", "pairs_distance2"):
        data = SyntheticGraphDataset(task, num_graphs=40, max_nodes=10, seed=3)
        assert data.num_classes <= structural_num_classes(task, 10)


def test_synthetic_data_module_facts_and_independent_splits():
    dm = SyntheticGraphDataModule("degree", train_size=6, val_size=4, test_size=4, max_nodes=12,
                                  data_seed=1, batch_size=4)
    f = dm.facts
    assert (f.level, f.task, f.metric, f.num_tasks) == ("node", "multiclass", "accuracy", 12)
    assert f.atom_categories == (1,) and f.bond_categories == (1,) and f.max_graph_nodes == 12
    assert f.target_names == ("degree",) and dm.facts.num_tasks == 12
    dm.setup("fit")
    # Split seeds 3, 4, 5: the same graphs as the dataset drawn directly from those seeds.
    for offset, split in enumerate(("train", "val", "test")):
        direct = SyntheticGraphDataset("degree", num_graphs=len(dm.splits[split]), max_nodes=12,
                                       seed=3 + offset)
        assert torch.equal(dm.splits[split]._data.y, direct._data.y)
    assert not torch.equal(dm.splits["val"]._data.edge_index[:, :10],
                           dm.splits["test"]._data.edge_index[:, :10])
    batch = next(iter(dm.val_dataloader()))
    assert batch.y.shape == (batch.num_nodes,) and batch.sample_id.numel() == batch.num_graphs
    assert SyntheticGraphDataModule("diameter").level == "graph"
    with pytest.raises(ValueError, match="task must be one of"):
        SyntheticGraphDataModule("triangles")


# ------------------------------------------------------------------------------ the CLI
def test_cli_fits_the_node_level_config_and_writes_a_run_folder(tmp_path, capsys):
    root = tmp_path / "runs"
    main(["fit", "--config", str(CONFIG_DIR / "graph-synthetic" / "degree-urpe.yaml"),
          "--trainer.max_epochs", "2", "--trainer.accelerator", "cpu",
          "--trainer.enable_progress_bar", "false", "--trainer.default_root_dir", str(root),
          "--data.init_args.train_size", "24", "--data.init_args.val_size", "8",
          "--data.init_args.test_size", "8", "--data.init_args.max_nodes", "10",
          "--model.init_args.model.init_args.num_layers", "1"])
    out = capsys.readouterr().out
    run = root / "graph-degree-urpe" / "version_0"
    assert (run / "checkpoints" / "best.ckpt").is_file() and (run / "config.yaml").is_file()
    assert "(val/accuracy, tested)" in out and "Test accuracy:" in out
    config = yaml.safe_load((run / "config.yaml").read_text())
    net = config["model"]["init_args"]["model"]["init_args"]
    assert (net["attention"], net["graph_token"], net["centrality_encoding"]) == \
        ("urpe", False, False)
    metrics = pd.read_csv(run / "metrics.csv")
    graphs = SyntheticGraphDataset("degree", num_graphs=8, max_nodes=10, seed=1)
    assert set(metrics["val/num_nodes"].dropna()) == {float(graphs._data.y.numel())}
    assert metrics["val/accuracy"].dropna().between(0, 1).all()
    # The linked facts: a node-level network with one logit per degree 0..9.
    model = GraphPropertyModule.load_from_checkpoint(run / "checkpoints" / "best.ckpt")
    assert (model.level, model.model.level, model.num_outputs) == ("node", "node", 10)
    assert (model.model.encoder.attention, model.record.task) == ("urpe", "multiclass")
    # test_predictions.csv: one row per test node; the label is the node's degree (networkx on
    # the test graphs, drawn from seed 3 * data_seed + 2), the prediction the most probable class.
    table = pd.read_csv(run / "test_predictions.csv")
    tests = SyntheticGraphDataset("degree", num_graphs=8, max_nodes=10, seed=2)
    degrees = [(g, n, d) for g, data in enumerate(tests)
               for n, d in sorted(nx.Graph(data.edge_index.t().tolist()).degree)]
    assert list(zip(table["row"], table["node"], table["degree"])) == degrees
    assert "smiles" not in table
    probs = table[[f"degree_prob_{k}" for k in range(10)]].to_numpy()
    assert probs.sum(axis=1) == pytest.approx(1.0, abs=1e-5)
    assert (table["degree_pred"].to_numpy() == probs.argmax(axis=1)).all()
    accuracy = float((table["degree_pred"] == table["degree"]).mean())
    assert f"Test accuracy: {accuracy:.4f}" in out
    assert (run / "figures" / "confusion.png").is_file()


def test_shipped_synthetic_graph_configs_differ_only_in_attention_and_name():
    files = {a: CONFIG_DIR / "graph-synthetic" / f"degree-{a}.yaml"
             for a in ("rpe", "urpe")}
    cfg = {a: yaml.safe_load(Path(f).read_text()) for a, f in files.items()}
    assert cfg["rpe"]["model"]["init_args"]["model"]["init_args"]["attention"] == "rpe"
    cfg["rpe"]["model"]["init_args"]["model"]["init_args"]["attention"] = "urpe"
    cfg["rpe"]["name"] = "graph-degree-urpe"
    assert cfg["rpe"] == cfg["urpe"]


# ------------------------------------------------------------- the paper's argument, graphs
def _net(attention: str, num_classes: int) -> Graphormer:
    return Graphormer(num_classes, [1], level="node", num_layers=2, embed_dim=32, num_heads=4,
                      ffn_dim=64, attention=attention, max_distance=12, edge_encoding="none",
                      graph_token=False, centrality_encoding=False, dropout=0.0,
                      attention_dropout=0.0)


def _spread_within_graphs(out: torch.Tensor, batch) -> float:
    """Largest difference between a node's outputs and its graph's first node's."""
    return float((out - out[batch.ptr[batch.batch]]).abs().max())


def _train(net, data, epochs: int) -> None:
    opt = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=0.0)
    loader = DataLoader(data, batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    for _ in range(epochs):
        for batch in loader:
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(net(batch), batch.y).backward()
            opt.step()



def test_rpe_gives_every_node_of_a_graph_the_same_output_and_urpe_does_not(one_thread):
    """Identical features, no graph token, no centrality encoding: ``softmax(B)`` rows sum to one,
    so RPE outputs are equal within every graph (to rounding) for any weights, before and after
    training, and its degree accuracy cannot beat the best per-graph constant; URPE's ``C``
    breaks the symmetry and learns the degree (Luo et al., NeurIPS 2022, Sec. 3, on graphs)."""
    torch.manual_seed(0)
    train = SyntheticGraphDataset("degree", num_graphs=160, max_nodes=12, seed=0)
    test = SyntheticGraphDataset("degree", num_graphs=50, max_nodes=12, seed=1)
    batch = next(iter(DataLoader(test, batch_size=50)))
    counts = [torch.bincount(batch.y[batch.batch == g]).max() for g in range(batch.num_graphs)]
    per_graph_constant = float(sum(counts)) / batch.num_nodes  # best output constant per graph
    rpe, urpe = _net("rpe", 12), _net("urpe", 12)
    with torch.no_grad():  # arbitrary weights: a wide spatial bias, and C away from its ones
        nn.init.normal_(rpe.encoder.spatial_bias.weight, 0.0, 2.0)
        nn.init.normal_(urpe.encoder.multiplier.weight, 1.0, 0.5)
        assert _spread_within_graphs(rpe(batch), batch) < 1e-5
        assert _spread_within_graphs(urpe(batch), batch) > 1e-3
    rpe, urpe = _net("rpe", 12), _net("urpe", 12)
    _train(rpe, train, epochs=40)
    _train(urpe, train, epochs=40)
    with torch.no_grad():
        out_rpe, out_urpe = rpe(batch), urpe(batch)
    assert _spread_within_graphs(out_rpe, batch) < 1e-4 * (1 + out_rpe.abs().max().item())
    acc_rpe = float((out_rpe.argmax(-1) == batch.y).float().mean())
    acc_urpe = float((out_urpe.argmax(-1) == batch.y).float().mean())
    assert acc_rpe <= per_graph_constant
    assert acc_urpe > per_graph_constant + 0.2, (acc_urpe, per_graph_constant)
