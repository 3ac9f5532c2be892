"""``graph-urpe collect`` on hand-made run folders with known metrics (mean / std worked by hand)."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from graph_urpe.cli.collect import collect_runs, expand_run_dirs, main, read_run, summarize

# Three runs: test MAE 0.5, 0.7, 0.9 -> mean 0.7, sample std sqrt((0.04 + 0 + 0.04) / 2) = 0.2;
# test R2 0.8, 0.6, 0.7 -> mean 0.7, sample std sqrt((0.01 + 0.01 + 0) / 2) = 0.1.
MAE = (0.5, 0.7, 0.9)
R2 = (0.8, 0.6, 0.7)


def make_run(folder, seed, mae, r2, *, name="demo", earlier_test=True, with_test=True):
    """A run folder as ``graph-urpe fit`` leaves it: CSVLogger rows (validation rows, optionally
    an earlier test row with other values, then the final test row) and config.yaml."""
    folder.mkdir(parents=True)
    rows = [
        {"epoch": 0, "step": 9, "val/mae": 1.5, "val/r2": 0.1},
        {"epoch": 1, "step": 19, "val/mae": 1.2, "val/r2": 0.2},
    ]
    if earlier_test:
        rows.append({"epoch": 1, "step": 19, "test/mae": 9.0, "test/r2": -9.0,
                     "test/num_graphs": 50.0})
    rows.append({"epoch": 2, "step": 29, "val/mae": 1.0, "val/r2": 0.3})
    if with_test:
        rows.append({"epoch": 2, "step": 29, "test/mae": mae, "test/r2": r2,
                     "test/num_graphs": 50.0})
    columns = ["epoch", "step", "test/mae", "test/num_graphs", "test/r2", "val/mae", "val/r2"]
    pd.DataFrame(rows, columns=columns).to_csv(folder / "metrics.csv", index=False)
    (folder / "config.yaml").write_text(yaml.safe_dump({"seed_everything": seed, "name": name}))
    return folder


@pytest.fixture
def runs(tmp_path):
    base = tmp_path / "runs" / "demo"
    return [make_run(base / f"version_{v}", seed, m, r)
            for v, seed, m, r in zip((0, 1, 2), (0, 1, 2), MAE, R2)]


def test_read_run_takes_last_test_row(runs):
    run = read_run(str(runs[2]))
    assert run == {"run": str(runs[2]), "name": "demo", "version": 2, "seed": 2,
                   "leaderboard": None, "note": None, "mae": 0.9, "r2": 0.7}


def test_mean_and_sample_std(runs):
    frame = collect_runs([str(r) for r in runs])
    assert list(frame.columns) == ["run", "name", "version", "seed", "leaderboard", "note",
                                   "mae", "r2"]
    assert frame["seed"].tolist() == [0, 1, 2]
    stats = summarize(frame)
    assert stats.at["mean", "mae"] == pytest.approx(0.7)
    assert stats.at["std", "mae"] == pytest.approx(0.2)
    assert stats.at["mean", "r2"] == pytest.approx(0.7)
    assert stats.at["std", "r2"] == pytest.approx(0.1)
    assert stats.at["n", "mae"] == 3


def test_main_markdown_and_csv_from_quoted_glob(runs, tmp_path, capsys):
    out = tmp_path / "table.csv"
    pattern = str(tmp_path / "runs" / "demo" / "version_*")
    assert main([pattern, "--markdown", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    printed = captured.out
    lines = [line for line in printed.splitlines() if line.startswith("|")]
    assert lines[0] == "| run | name | version | seed | leaderboard | mae | r2 |"
    assert len(lines) == 2 + 3 + 1  # header, rule, three runs, mean ± std
    assert "| 0.5000 | 0.8000 |" in lines[2]
    assert lines[-1] == "| mean ± std (n=3) |  |  |  |  | 0.7000 ± 0.2000 | 0.7000 ± 0.1000 |"
    assert "Leaderboard status unknown for 3 run(s)" in captured.err
    table = pd.read_csv(out)
    assert table["run"].tolist()[-2:] == ["mean", "std"]
    assert table["mae"].tolist() == pytest.approx([0.5, 0.7, 0.9, 0.7, 0.2])
    assert table["r2"].tolist() == pytest.approx([0.8, 0.6, 0.7, 0.7, 0.1])
    assert table["seed"].tolist()[:3] == [0, 1, 2]
    assert out.read_text().splitlines()[1].split(",")[2:4] == ["0", "0"]  # integers stay so


def test_name_folder_expands_in_version_order(tmp_path, capsys):
    base = tmp_path / "runs" / "demo"
    for v in (10, 2, 1):
        make_run(base / f"version_{v}", v, 0.1 * v, 0.5)
    assert expand_run_dirs([str(base)]) == [str(base / f"version_{v}") for v in (1, 2, 10)]
    assert main([str(base)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].split() == ["run", "name", "version", "seed", "leaderboard", "mae", "r2"]
    # mean of 0.1, 0.2, 1.0 is 0.4333; sample std sqrt((0.1111 + 0.0544 + 0.3211) / 2) = 0.4933
    assert text[-1].split()[-6:] == ["0.4333", "±", "0.4933", "0.5000", "±", "0.0000"]
    assert text[-1].startswith("mean ± std (n=3)")


def test_single_run_has_no_std(tmp_path, capsys):
    run = make_run(tmp_path / "version_0", 0, 0.25, 0.5, earlier_test=False)
    assert main([str(run), "--markdown"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("| 0.2500 | 0.5000 |")


def test_shared_seed_is_reported(tmp_path, capsys):
    a = make_run(tmp_path / "a" / "version_0", 3, 0.5, 0.5)
    b = make_run(tmp_path / "b" / "version_0", 3, 0.6, 0.5)
    other = make_run(tmp_path / "c" / "version_0", 3, 0.6, 0.5, name="other")
    assert main([str(a), str(b), str(other)]) == 0
    err = capsys.readouterr().err
    assert "share seed 3" in err and str(a) in err and str(b) in err
    assert str(other) not in err  # another run name with the same seed is not a repeat


def test_run_without_test_metrics_is_refused(tmp_path, capsys):
    good = make_run(tmp_path / "version_0", 0, 0.5, 0.5)
    bad = make_run(tmp_path / "version_1", 1, 0.5, 0.5, earlier_test=False, with_test=False)
    assert main([str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "holds no test metrics" in err and str(bad / "metrics.csv") in err


def test_missing_folder_and_empty_pattern(tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main([str(tmp_path / "runs" / "x" / "version_*")]) == 2
    assert "no run folder matches" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty")]) == 2
    assert "has no metrics.csv" in capsys.readouterr().err


def test_a_refused_fit_in_the_parent_folder_is_skipped_by_name(tmp_path, capsys):
    # A fit refused at setup leaves version_1 with config.yaml only: collecting the parent
    # folder skips it (named on stderr); named explicitly it is still refused.
    make_run(tmp_path / "version_0", 0, 0.5, 0.5)
    make_run(tmp_path / "version_2", 2, 0.7, 0.5)
    refused = tmp_path / "version_1"
    refused.mkdir()
    (refused / "config.yaml").write_text("seed_everything: 1\n")
    assert main([str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert f"skipped {refused}: no metrics.csv" in captured.err
    assert expand_run_dirs([str(tmp_path)]) == [str(tmp_path / "version_0"),
                                                 str(tmp_path / "version_2")]
    # mean of MAE 0.5 and 0.7 over the two runs that trained
    assert captured.out.splitlines()[-1].startswith("mean ± std (n=2)")
    assert captured.out.splitlines()[-1].split()[4:7] == ["0.6000", "±", "0.1414"]
    assert main([str(refused)]) == 2
    assert "has no metrics.csv" in capsys.readouterr().err


def test_table_marks_runs_that_are_not_leaderboard_numbers(runs, capsys):
    from graph_urpe.cli.leaderboard import leaderboard_record, write_record

    full = leaderboard_record("ogbg-molhiv", "rocauc", "ogbg-molhiv", True, 50, 50)
    cut = leaderboard_record("ogbg-molhiv", "rocauc", "ogbg-molhiv", True, 20, 50)
    for run, record in zip(runs, (full, full, cut)):
        write_record(record, str(run))
    frame = collect_runs([str(r) for r in runs])
    assert frame["leaderboard"].tolist() == ["yes", "yes", "no"]
    assert main([str(r) for r in runs]) == 0
    printed = capsys.readouterr().err
    assert ("Leaderboard number: ROC-AUC by ogb.graphproppred.Evaluator('ogbg-molhiv') on the "
            "official data, all 50 graphs of the test split. (2 runs)") in printed
    assert ("Not a leaderboard number (ROC-AUC by ogb.graphproppred.Evaluator('ogbg-molhiv')): "
            "the test covered 20 of the split's 50 graphs (limit_test_batches). (1 run)") in printed
