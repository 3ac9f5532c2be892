"""The CSV template runs from an installed package, outside the clone: ``pip install`` (not
editable) into a folder, then its ``graph-urpe`` script from another folder with
``--config csv/template`` (no path)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
from test_cli import SMILES

ROOT = Path(__file__).resolve().parents[1]


def test_csv_template_runs_from_an_installed_package(tmp_path):
    source = tmp_path / "source"  # a copy: pip builds in the source tree
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "graph_urpe", source / "graph_urpe",
                    ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--no-compile", "--target", str(target), str(source)],
                   check=True, capture_output=True, timeout=300)
    shutil.rmtree(source)

    work = tmp_path / "elsewhere"
    work.mkdir()
    split = ["train"] * 10 + ["valid"] * 3 + ["test"] * 3
    pd.DataFrame({"smiles": SMILES, "logS": [len(s) / 4.0 for s in SMILES],
                  "split": split}).to_csv(work / "my.csv", index=False)
    env = {**os.environ, "PYTHONPATH": str(target), "PYTHONWARNINGS": "ignore",
           "OMP_NUM_THREADS": "1"}
    script = target / "bin" / "graph-urpe"
    where = subprocess.run([sys.executable, "-c", "import graph_urpe; print(graph_urpe.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(target)), where.stdout  # not the clone, not an editable
    proc = subprocess.run(
        [sys.executable, str(script), "fit", "--config", "csv/template",
         "--data.init_args.path", "my.csv", "--data.init_args.target_columns", "[logS]",
         "--data.init_args.split", "split", "--trainer.max_epochs", "1",
         "--trainer.enable_progress_bar", "false", "--trainer.default_root_dir", "runs"],
        cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Training finished the planned schedule: 1 of 1 epochs." in proc.stdout
    assert re.search(r"Test MAE: [0-9.]+", proc.stdout)
    assert "Test loss (L1 of standardised targets, network):" in proc.stdout
    # Every path in the summary is absolute (the run folder was given relative).
    run = work / "runs" / "my-csv" / "version_0"
    for label in ("Best checkpoint", "Last checkpoint", "Run folder"):
        path = re.search(rf"{label}: (\S+)", proc.stdout).group(1)
        assert os.path.isabs(path) and Path(path).exists(), (label, path)
        assert Path(path).resolve().is_relative_to(run.resolve())
