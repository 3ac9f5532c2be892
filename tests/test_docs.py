"""The documentation site builds without a warning: ``sphinx-build -W --keep-going -b html docs
OUT`` (what ``.readthedocs.yaml`` runs), so a broken cross-reference between pages, a docstring
whose reStructuredText does not parse, or a CLI subcommand whose ``--help`` fails stops CI; then
the pages a user opens first exist and hold what they promise (the CLI reference holds the
parsers' own help, an API page its ``Shapes:`` section)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx", reason="the docs extra: pip install -e '.[docs]'")
pytest.importorskip("myst_parser", reason="the docs extra: pip install -e '.[docs]'")
pytest.importorskip("furo", reason="the docs extra: pip install -e '.[docs]'")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path):
    out = tmp_path / "html"
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(ROOT / "docs"), str(out)],
        check=False, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]

    # The CLI reference holds every subcommand's help, options the parsers define included.
    cli = (out / "cli.html").read_text()
    for usage, option in [("fit", "--trainer.max_epochs"), ("predict", "--smiles_column"),
                          ("summarize", "--max-graph-nodes"), ("hpopt", "--trials"),
                          ("seeds", "--first-seed"), ("explain", "--smiles")]:
        assert (f"usage: graph-urpe {usage} " in cli
                or f"usage: graph-urpe [options] {usage} " in cli), usage
        assert option in cli, option
    conv = (out / "api" / "generated" / "graph_urpe.nn.URPEGraphConv.html").read_text()
    assert "Shapes" in conv and "Parameters" in conv
    for page in ("getting-started", "tutorials/csv", "tutorials/pyg-layer",
                 "tutorials/ogb-leaderboard", "tutorials/urpe-vs-rpe", "pyg_contrib"):
        assert (out / f"{page}.html").is_file(), page
    # The figures of the URPE-vs-RPE story are copied into the site.
    assert len(list((out / "_images").glob("default-*.png"))) == 4
