"""The pure parts of the Chemprop peer benchmark (``benchmarks/peers/chemprop.py``), without Chemprop.

The one split written for both tools is checked on a hand example and read back independently
(graph-urpe's own :func:`~graph_urpe.data.csv.splits.column_split` for the column, the JSON for
Chemprop's file); the metrics against values worked by hand and scikit-learn; the table's cells,
ratios and verdicts against numbers worked by hand.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os

import pytest

from graph_urpe.data.csv.splits import column_split

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
                      "peers", "chemprop.py")
_spec = importlib.util.spec_from_file_location("chemprop_bench", SCRIPT)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)  # under its own name: "chemprop" would be the real package's


def test_split_files_write_one_membership_for_both_tools():
    split = {"train": [3, 0], "valid": [4], "test": [2, 1]}
    column, splits_json = bench.split_files(split, 5)
    assert column == ["train", "test", "test", "train", "valid"]
    assert splits_json == [{"train": [0, 3], "val": [4], "test": [1, 2]}]
    # what graph-urpe reads from the column equals what Chemprop reads from the JSON file
    ours = column_split(column)
    theirs = json.loads(json.dumps(splits_json))[0]
    assert ours["train"].tolist() == theirs["train"]
    assert ours["valid"].tolist() == theirs["val"]
    assert ours["test"].tolist() == theirs["test"]


@pytest.mark.parametrize("split, match", [
    ({"train": [0, 1], "valid": [1], "test": [2]}, "in two splits"),
    ({"train": [0], "valid": [1], "test": [3]}, "outside"),
    ({"train": [0], "valid": [], "test": [2]}, "unassigned"),
])
def test_split_files_refuse_what_is_not_a_partition(split, match):
    with pytest.raises(ValueError, match=match):
        bench.split_files(split, 3)


def test_score_matches_hand_worked_values_and_sklearn():
    from sklearn.metrics import mean_absolute_error, roc_auc_score

    # |1-2| + |2-2| + |4-1| = 4 over 3 molecules
    assert bench.score("mae", [1, 2, 4], [2, 2, 1]) == pytest.approx(4 / 3)
    assert bench.score("mae", [1, 2, 4], [2, 2, 1]) == pytest.approx(
        mean_absolute_error([1, 2, 4], [2, 2, 1]))
    # positives 0.35 and 0.8 against negatives 0.1 and 0.4: 3 of the 4 pairs ordered right
    labels, scores = [0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]
    assert bench.score("rocauc", labels, scores) == pytest.approx(0.75)
    assert bench.score("rocauc", labels, scores) == pytest.approx(roc_auc_score(labels, scores))
    with pytest.raises(ValueError, match="3 labels but 2 predictions"):
        bench.score("mae", [1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="metric must be"):
        bench.score("rmse", [1], [1])


def _record(name, tool, variant, seed, metric, value, cpu, baseline=None):
    return {"set": name, "tool": tool, "variant": variant, "seed": seed, "metric": metric,
            "value": value, "cpu_s": cpu, "mean_baseline": baseline}


def test_format_table_cells_ratios_and_verdicts_by_hand():
    results = [
        _record("freesolv", "ours", "default", 0, "mae", 0.8, 50, 4.0),
        _record("freesolv", "chemprop", "default", 0, "mae", 1.0, 100, 4.0),
        _record("freesolv", "ours", "default", 1, "mae", 1.0, 70, 4.0),
        _record("freesolv", "chemprop", "default", 1, "mae", 1.2, 100, 4.0),
        _record("bace", "chemprop", "default", 0, "rocauc", 0.80, 200),
        _record("bace", "ours", "scratch", 0, "rocauc", 0.79, 150),
        _record("bace", "ours", "default", 0, "rocauc", 0.81, 300),
    ]
    lines = bench.format_table(results).splitlines()
    assert lines[0].startswith("| set | metric | tool |")
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    # FreeSolv: Chemprop first; ours 0.9 +- 0.1414 (sample std of 0.8, 1.0); MAE ratio 0.9 / 1.1
    # = 0.82 <= 0.90 and CPU 60 / 100 = 0.60: met. / train mean: (0.2 + 0.25) / 2 = 0.225.
    assert rows[0] == ["freesolv", "MAE", "Chemprop 2.3.1", "1.100 ± 0.141", "0,1", "100", "-",
                       "-", "0.28", "-"]
    assert rows[1] == ["freesolv", "MAE", "graph-urpe template (default)", "0.900 ± 0.141",
                       "0,1", "60", "0.82", "0.60", "0.23", "met"]
    # BACE: one seed (no std); default +0.010 < +0.02 and CPU 1.50 > 1: both missed; scratch has
    # no target of its own
    assert rows[2][2:] == ["Chemprop 2.3.1", "0.800", "0", "200", "-", "-", "-", "-"]
    assert rows[3][2:] == ["graph-urpe template (default)", "0.810", "0", "300", "+0.010",
                           "1.50", "-", "missed: ROC-AUC +0.010 (>= +0.02), CPU ratio 1.50 (<= 1)"]
    assert rows[4][2:8] == ["graph-urpe template (scratch)", "0.790", "0", "150", "-0.010", "0.75"]
    assert rows[4][9] == "-"


def test_fifth_is_a_fifth_of_the_template_budget():
    template = {"trainer": {"max_epochs": 200, "max_steps": 1600}}
    assert bench.ours_args("fifth", template) == ["--trainer.max_epochs", "40",
                                                  "--trainer.max_steps", "320"]
    assert bench.ours_args("default", template) == []
    with pytest.raises(ValueError, match="variant must be"):
        bench.ours_args("tiny", template)


def test_epochs_variant_sets_max_epochs_only():
    template = {"trainer": {"max_epochs": 50}}
    assert bench.ours_args("epochs30", template) == ["--trainer.max_epochs", "30"]
    assert bench.variant_name("epochs30") == "epochs30"
    for bad in ("epochs0", "epochs", "epochs-3", "tiny"):
        with pytest.raises(argparse.ArgumentTypeError, match="epochsN"):
            bench.variant_name(bad)


def _classical():
    path = os.path.join(os.path.dirname(SCRIPT), "_classical.py")
    spec = importlib.util.spec_from_file_location("classical_anchor", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tanimoto_kernel_matches_a_hand_count():
    import numpy as np

    a = np.array([[1, 1, 0, 0], [0, 0, 0, 0]], dtype=np.uint8)
    b = np.array([[1, 0, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]], dtype=np.uint8)
    k = _classical().tanimoto_kernel(a, b)
    # |a0 & b0| = 1, |a0 | b0| = 3; a0 == b1; an empty row is 0 against a non-empty one, 1 with one
    assert np.allclose(k, [[1 / 3, 1.0, 0.0], [0.0, 0.0, 1.0]])


def test_classical_anchors_fit_on_train_rows_only():
    import numpy as np

    classical = _classical()
    smiles = ["C" * n for n in range(1, 9)] + ["c1ccccc1" + "C" * n for n in range(8)]
    y = np.array([float(n) for n in range(1, 9)] + [20.0 + n for n in range(8)])
    rows = {"train": np.arange(0, 16, 2), "valid": np.array([], int), "test": np.arange(1, 16, 2)}
    for variant in ("svr", "rf"):
        pred, cpu = classical.run_classical(smiles, y, rows, "regression", variant, seed=0)
        assert pred.shape == (8,) and cpu > 0
        # aromatic and aliphatic test molecules are told apart by their train neighbours
        assert pred[4:].min() > pred[:4].max()
    labels = (y > 10).astype(float)
    score, _ = classical.run_classical(smiles, labels, rows, "classification", "svr", seed=0)
    assert bench.score("rocauc", labels[rows["test"]], score) == 1.0
    with pytest.raises(ValueError, match="variant"):
        classical.fit_predict("knn", "regression", np.zeros((2, 3)), np.zeros(2),
                              np.zeros((1, 3)), 0)


def test_encoder_choice_reads_the_tested_checkpoints_validation_metric(tmp_path):
    path = os.path.join(os.path.dirname(os.path.dirname(SCRIPT)), "finetune_encoders.py")
    spec = importlib.util.spec_from_file_location("finetune_encoders", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "metrics.csv").write_text(
        "epoch,step,train/loss,val/mae,val/rocauc\n0,9,1.0,,\n0,9,,2.0,0.6\n1,19,,1.5,0.8\n"
        "2,29,,1.7,0.7\n2,29,,,\n")
    assert module.validation_metric(tmp_path, "mae") == 1.7      # the last epoch (last ckpt)
    assert module.validation_metric(tmp_path, "rocauc") == 0.8   # the best epoch (best ckpt)
    (tmp_path / "metrics.csv").write_text("epoch,step,train/loss\n0,9,1.0\n")
    with pytest.raises(ValueError, match="no val/mae"):
        module.validation_metric(tmp_path, "mae")
