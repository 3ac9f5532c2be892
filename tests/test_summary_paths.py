"""Issue 43 item 3: every path in a fit summary is absolute, also for a run started with
relative paths (``--config my.yaml``, a CSV named relative to the current folder)."""

from __future__ import annotations

import os.path as osp
import re
import shlex
from pathlib import Path

import yaml

from graph_urpe.cli import main
from graph_urpe.cli.seeds import seeds_command


def test_a_fit_with_relative_paths_prints_only_absolute_ones(tmp_path, capsys, monkeypatch):
    from tests.test_cli import write_config

    config, _ = write_config(tmp_path, max_epochs=1)
    cfg = yaml.safe_load(Path(config).read_text())
    cfg["data"]["init_args"].update(path="mols.csv", root="data")
    cfg["trainer"]["default_root_dir"] = "runs"
    (tmp_path / "rel.yaml").write_text(yaml.safe_dump(cfg))
    monkeypatch.chdir(tmp_path)
    main(["fit", "--config", "rel.yaml"])
    out = capsys.readouterr().out
    summary = out[out.rindex("=" * 72, 0, out.rindex("=" * 72)):]
    words = [w.strip("(),;:") for line in summary.splitlines() for w in line.split()
             if not line.startswith("=")]
    paths = [w for w in words if re.search(r"\.(csv|yaml|ckpt)$", w) or "/" in w]
    # the CSV (leaderboard note), the config (seeds command), the checkpoints, the run folder
    assert str(tmp_path / "mols.csv") in paths and str(tmp_path / "rel.yaml") in paths
    assert str(tmp_path / "runs" / "tiny" / "version_0") in paths
    relative = [p for p in paths if not osp.isabs(p) and not p.startswith("--")
                and p not in ("val/mae", "csv/template")]  # a metric's name, a shipped config
    assert relative == [], relative


def test_the_seeds_command_names_local_files_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text("name: x\n")
    (tmp_path / "my.csv").write_text("smiles\nCCO\n")
    words = shlex.split(seeds_command(["fit", "--config", "mine.yaml", "--config", "csv/template",
                                       "--data.init_args.path=my.csv", "--name", "x"]))
    assert words[4:8] == ["--config", str(tmp_path / "mine.yaml"), "--config", "csv/template"]
    assert words[words.index("--") + 1:] == [f"--data.init_args.path={tmp_path / 'my.csv'}",
                                             "--name", "x"]
