"""Run figures (learning curves, parity, ROC / PR) checked against the CSVs they are drawn from and
against naive recomputations (threshold loops, pairwise AUC, plain MAE / R² formulas)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")  # the optional plotting extra; .[dev] installs it, so CI runs these
from PIL import Image

from graph_urpe.viz import (
    confusion_figure,
    infer_task,
    learning_curves_figure,
    parity_figure,
    plot_run,
    read_metrics_csv,
    roc_pr_figure,
)
from graph_urpe.viz.curves import learning_curve_columns


def open_png(path):
    assert path.stat().st_size > 0
    with Image.open(path) as im:
        assert im.format == "PNG"
        assert im.width > 100 and im.height > 100
        return im.size


def lightning_metrics(tmp_path):
    """A real metrics.csv from CSVLogger + LearningRateMonitor (a 3-epoch linear model)."""
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import LearningRateMonitor
    from lightning.pytorch.loggers import CSVLogger

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 1)

        def training_step(self, batch, _):
            loss = self.lin(batch[0]).pow(2).mean()
            self.log("train/loss", loss, on_step=True, on_epoch=False)
            return loss

        def validation_step(self, batch, _):
            self.log("val/mae", self.lin(batch[0]).abs().mean())

        def configure_optimizers(self):
            opt = torch.optim.AdamW(self.parameters(), 1e-2)
            sched = torch.optim.lr_scheduler.StepLR(opt, 1, 0.9)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    torch.manual_seed(0)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(40, 2)),
                                       batch_size=4)
    trainer = L.Trainer(
        max_epochs=3, logger=CSVLogger(tmp_path, name="", version=""),
        callbacks=[LearningRateMonitor("step")], log_every_n_steps=2, enable_progress_bar=False,
        enable_model_summary=False, enable_checkpointing=False,
    )
    trainer.fit(Tiny(), data, data)
    return tmp_path / "metrics.csv"


def test_learning_curves_match_lightning_csv(tmp_path):
    path = lightning_metrics(tmp_path)
    raw = pd.read_csv(path)
    fig = learning_curves_figure(read_metrics_csv(path))
    train_ax, val_ax, lr_ax = fig.axes
    train = raw[raw["train/loss"].notna()]
    np.testing.assert_allclose(train_ax.lines[0].get_xydata(), train[["step", "train/loss"]])
    # Validation: the last value logged in each epoch, collected with a plain loop.
    last = {}
    for _, row in raw.iterrows():
        if not math.isnan(row["val/mae"]):
            last[row["epoch"]] = row["val/mae"]
    assert len(last) == 3
    np.testing.assert_allclose(val_ax.lines[0].get_xydata(), sorted(last.items()))
    lr = raw[raw["lr-AdamW"].notna()]
    np.testing.assert_allclose(lr_ax.lines[0].get_xydata(), lr[["step", "lr-AdamW"]])
    # StepLR(0.9) per step: the logged rates are 1e-2 * 0.9 ** step.
    np.testing.assert_allclose(lr["lr-AdamW"], 1e-2 * 0.9 ** lr["step"], rtol=1e-6)


def test_learning_curves_skip_missing_and_dedupe_param_groups():
    steps = np.arange(60)
    frame = pd.DataFrame({
        "epoch": steps // 20, "step": steps, "train/loss_step": np.linspace(2, 1, 60),
        "lr-AdamW/pg1": 1e-3 * np.ones(60), "lr-AdamW/pg2": 1e-3 * np.ones(60),
    })
    fig = learning_curves_figure(frame)
    assert [ax.get_title() for ax in fig.axes] == ["training loss", "learning rate"]
    # Counts logged beside the metrics (val/num_graphs) are not validation curves.
    counted = frame.assign(**{"val/mae": 0.5, "val/num_graphs": 256.0})
    assert learning_curve_columns(counted)["val"] == ["val/mae"]
    # Raw loss plus its running mean over 60 // 20 = 3 points.
    _raw, smooth = fig.axes[0].lines
    expected = pd.Series(np.linspace(2, 1, 60)).rolling(3, min_periods=1).mean()
    np.testing.assert_allclose(smooth.get_ydata(), expected)
    assert len(fig.axes[1].lines) == 1  # identical param groups drawn once
    frame["lr-AdamW/pg2"] = 2e-3
    assert len(learning_curves_figure(frame).axes[1].lines) == 2
    with pytest.raises(ValueError, match="no training loss"):
        learning_curves_figure(pd.DataFrame({"epoch": [0], "step": [0], "other": [1.0]}))


def test_read_metrics_rejects_non_lightning_file(tmp_path):
    (tmp_path / "m.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="'step'"):
        read_metrics_csv(tmp_path / "m.csv")
    with pytest.raises(FileNotFoundError):
        read_metrics_csv(tmp_path / "missing.csv")


def regression_table(seed=0, n=50):
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    p = y + 0.3 * rng.normal(size=n)
    y[[3, 7]] = np.nan
    return pd.DataFrame({"row": range(n), "smiles": ["CCO"] * n, "gap": y, "gap_pred": p,
                         "logp": 2 * p, "logp_pred": 2 * y + 1})


def test_parity_points_and_scores():
    frame = regression_table()
    fig = parity_figure(frame)
    ax = fig.axes[0]
    keep = frame["gap"].notna()
    y, p = frame.loc[keep, "gap"].to_numpy(), frame.loc[keep, "gap_pred"].to_numpy()
    np.testing.assert_allclose(ax.collections[0].get_offsets(), np.c_[y, p])
    mae = np.abs(p - y).mean()
    r2 = 1 - ((y - p) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    assert f"MAE {mae:.4g}, R² {r2:.3f} (n=48)" in ax.get_title()
    assert ax.get_title().startswith("gap")
    x0, x1 = ax.lines[0].get_xdata()
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [x0, x1])  # the y = x line


def naive_roc(y, s):
    """(fpr, tpr) at (0, 0) and at every distinct threshold, highest first."""
    pts = [(0.0, 0.0)]
    for t in sorted(set(s), reverse=True):
        pred = s >= t
        pts.append(((pred & (y == 0)).sum() / (y == 0).sum(), (pred & (y == 1)).sum() / y.sum()))
    return np.array(pts)


def naive_auc(y, s):
    pos, neg = s[y == 1], s[y == 0]
    return np.mean([(a > b) + 0.5 * (a == b) for a in pos for b in neg])


def classification_table(seed=1, n=60):
    rng = np.random.default_rng(seed)
    a = (rng.random(n) < 0.4).astype(float)
    sa = np.round(np.clip(0.3 * a + 0.7 * rng.random(n), 0, 1), 2)  # ties on purpose
    a[:4] = np.nan
    b = (rng.random(n) < 0.5).astype(float)
    return pd.DataFrame({"row": range(n), "smiles": ["C"] * n, "act": a, "act_pred": sa,
                         "tox": b, "tox_pred": rng.random(n), "one": np.ones(n),
                         "one_pred": rng.random(n)})


def test_roc_pr_curves_against_naive_thresholds():
    frame = classification_table()
    fig = roc_pr_figure(frame)
    roc_ax, pr_ax = fig.axes[:2]
    assert len(roc_ax.lines) == 3  # act, tox, chance ("one" has a single class: skipped)
    assert "skipped (one class only): one" in "".join(t.get_text() for t in fig.texts)
    keep = frame["act"].notna()
    y, s = frame.loc[keep, "act"].to_numpy(), frame.loc[keep, "act_pred"].to_numpy()
    np.testing.assert_allclose(roc_ax.lines[0].get_xydata(), naive_roc(y, s))
    legend = [t.get_text() for t in roc_ax.get_legend().get_texts()]
    assert legend[0] == f"act (AUC {naive_auc(y, s):.3f})"
    # Precision-recall: every (recall, precision) at a distinct threshold is on the curve.
    curve = {tuple(np.round(pt, 12)) for pt in pr_ax.lines[0].get_xydata()}
    for t in set(s):
        pred = s >= t
        tp = (pred & (y == 1)).sum()
        assert (round(tp / y.sum(), 12), round(tp / pred.sum(), 12)) in curve
    # Average precision: sum over thresholds of (R_k - R_{k-1}) * P_k.
    ap, prev = 0.0, 0.0
    for t in sorted(set(s), reverse=True):
        pred = s >= t
        tp = (pred & (y == 1)).sum()
        ap += (tp / y.sum() - prev) * tp / pred.sum()
        prev = tp / y.sum()
    assert next(t.get_text() for t in pr_ax.get_legend().get_texts()) == f"act (AP {ap:.3f})"
    # The precision-recall chance level of each task: its share of positives (dashed lines 2, 3).
    tox = frame["tox"].to_numpy()
    for line, share in zip(pr_ax.lines[2:], (y.sum() / len(y), tox.sum() / len(tox))):
        assert line.get_linestyle() == "--"
        np.testing.assert_allclose(line.get_ydata(), [share, share])
    assert len(pr_ax.lines) == 4


def test_roc_needs_both_classes():
    frame = pd.DataFrame({"row": [0, 1], "smiles": ["C", "O"], "a": [1.0, 1.0],
                          "a_pred": [0.2, 0.9]})
    with pytest.raises(ValueError, match="both classes"):
        roc_pr_figure(frame)


def test_infer_task_rule():
    assert infer_task(regression_table()) == "regression"
    assert infer_task(classification_table()) == "classification"
    frame = classification_table()
    frame.loc[5, "tox_pred"] = 1.2  # a prediction outside [0, 1]
    assert infer_task(frame) == "regression"
    frame = classification_table()
    frame.loc[5, "tox"] = 0.5  # a target other than 0 / 1
    assert infer_task(frame) == "regression"
    with pytest.raises(ValueError, match="'T', 'T_pred'"):
        infer_task(pd.DataFrame({"row": [0], "smiles": ["C"], "y": [1.0]}))


def multiclass_table() -> pd.DataFrame:
    """Three classes, six labelled nodes and one unlabelled: hand counts below."""
    y = [0, 0, 1, 1, 2, 2, np.nan]
    pred = [0, 1, 1, 1, 0, 2, 2]
    probs = np.eye(3)[pred] * 0.8 + 0.2 / 3
    frame = pd.DataFrame({"row": [0, 0, 0, 1, 1, 1, 1], "node": [0, 1, 2, 0, 1, 2, 3],
                          "deg": y, "deg_pred": pred})
    for k in range(3):
        frame[f"deg_prob_{k}"] = probs[:, k]
    return frame


def test_confusion_figure_against_hand_counts():
    frame = multiclass_table()
    assert infer_task(frame) == "multiclass"
    fig = confusion_figure(frame)
    shares = fig.axes[0].images[0].get_array()
    # True 0 -> predicted 0, 1; true 1 -> 1, 1; true 2 -> 0, 2 (the unlabelled row left out).
    assert np.asarray(shares).tolist() == [[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.5, 0.0, 0.5]]
    assert "accuracy 0.667" in fig.axes[0].get_title()
    assert "majority class 0.333" in fig.axes[0].get_title()


def test_plot_run_writes_what_applies(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    steps = np.arange(10)
    pd.DataFrame({"epoch": steps // 5, "step": steps, "train/loss": np.linspace(1, 0, 10),
                  "val/mae": np.r_[[np.nan] * 4, 0.5, [np.nan] * 4, 0.4]}).to_csv(
        run / "metrics.csv", index=False)
    regression_table().to_csv(run / "test_predictions.csv", index=False)
    written = plot_run(run)
    assert [p.name for p in written] == ["learning_curves.png", "parity.png"]
    assert all(p.parent == run / "figures" for p in written)
    for p in written:
        open_png(p)

    cls = tmp_path / "cls"
    (cls / "version_0").mkdir(parents=True)  # found below the run folder too
    classification_table().to_csv(cls / "version_0" / "test_predictions.csv", index=False)
    (written,) = plot_run(cls, out_dir=tmp_path / "out")
    assert written == tmp_path / "out" / "roc_pr.png"
    open_png(written)

    one = tmp_path / "one"
    one.mkdir()
    pd.DataFrame({"row": [0, 1], "smiles": ["C", "O"], "a": [1.0, 1.0],
                  "a_pred": [0.2, 0.9]}).to_csv(one / "test_predictions.csv", index=False)
    with pytest.warns(UserWarning, match="no roc_pr.png"):
        assert plot_run(one) == []
    assert plot_run(one, task="regression")[0].name == "parity.png"

    multi = tmp_path / "multi"
    multi.mkdir()
    multiclass_table().to_csv(multi / "test_predictions.csv", index=False)
    (written,) = plot_run(multi)
    assert written.name == "confusion.png"
    open_png(written)


def test_plot_run_refuses_a_folder_of_several_runs(tmp_path):
    for v in (0, 1):
        run = tmp_path / "runs" / "demo" / f"version_{v}"
        run.mkdir(parents=True)
        regression_table().to_csv(run / "test_predictions.csv", index=False)
    with pytest.raises(ValueError, match="holds 2 runs' test_predictions.csv"):
        plot_run(tmp_path / "runs")
    assert not (tmp_path / "runs" / "figures").exists()
    assert [p.name for p in plot_run(tmp_path / "runs" / "demo" / "version_1")] == ["parity.png"]


def test_plot_run_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        plot_run(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="neither metrics.csv"):
        plot_run(tmp_path)
    with pytest.raises(ValueError, match="task must be"):
        plot_run(tmp_path, task="ranking")


def test_missing_matplotlib_says_how_to_install(monkeypatch):
    import sys

    from graph_urpe.viz._mpl import pyplot

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    with pytest.raises(ImportError, match=r"pip install 'graph-urpe\[plot\]'"):
        pyplot()
