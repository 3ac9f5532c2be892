"""Fixtures shared by the test modules."""

from __future__ import annotations

import os.path as osp
import sys

import pytest
import torch

# The offline dataset builders are scripts in datasets/ (not part of the package); the tests that
# write offline folders import them from there (``from build_ogb import ...``).
sys.path.insert(0, osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))), "datasets"))


@pytest.fixture
def one_thread():
    """One torch thread while the test runs: the tiny models train fastest that way and do not
    oversubscribe a shared 2-core machine; the previous thread count is restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


SLOW = {
    # whole modules: full CLI fits, DDP with two processes, kill -9 and resume, a pip install
    "test_cli.py": "CLI fits, DDP with 2 processes, resume",
    "test_cli_installed.py": "pip-installs the package into a folder",
    "test_resume.py": "kill -9 / Ctrl-C and resume, bit for bit",
    "test_full_disk.py": "fits on a full file system",
    "test_hpopt.py": "Optuna trials, one fit process each",
    "test_docs.py": "builds the Sphinx site (sphinx-build -W)",
    # single tests
    "test_mixed_precision.py::test_default_job_trains_in_bf16_mixed": "the default job in bf16",
    "test_mixed_precision.py::test_csv_template_trains_in_bf16_mixed": "the CSV template in bf16",
    "test_leaderboard.py::test_seeds_runs_one_fit_per_seed": "three fits",
    "test_leaderboard.py::test_summary_and_record_mark_rebuilt_data": "fits",
    "test_leaderboard.py::test_stand_in_fit_on_test_dev": "a fit",
    "test_triton_attention.py::test_cases_in_triton_interpreter": "Triton's interpreter",
    "test_models_sequence.py::test_cli_fit_checkpoint_and_fresh_process_reload": "a CLI fit",
    "test_models_sequence.py::test_shipped_config_runs_one_step": "every sequence config",
    "test_fused_attention.py::test_compiles_fullgraph": "torch.compile",
    "test_graphormer.py::test_torch_compile": "torch.compile",
    "test_graphormer.py::test_no_graph_break": "torch.compile",
    "test_finetune.py::test_fit_option_fine_tunes": "CLI fits",
    "test_finetune.py::test_graphormer_recipe": "pretraining then fine-tuning fits",
    "test_models_node_level.py::test_cli_fits": "a CLI fit",
    "test_predict_chunks.py::test_ddp_predict": "a CLI fit and a 2-process DDP predict",
    "test_models_node_level.py::test_rpe_gives_every_node": "two trainings",
    "test_synthetic.py::test_urpe_identifies_positions": "two trainings",
}
"""Tests kept out of the fast loop (``python -m pytest -q -m "not slow"``), as PyG keeps its full
tests behind a switch and Chemprop marks its CLI tests: node-id prefixes (module file, then
``::test`` name prefix) -> what makes them slow. The full suite (``python -m pytest -q``, what CI
runs) includes them. A new slow test may also carry ``@pytest.mark.slow`` itself."""


def pytest_collection_modifyitems(config, items) -> None:
    """Marks the tests of :data:`SLOW` with ``slow``."""
    for item in items:
        node = item.nodeid.rsplit("/", 1)[-1]
        if any(node == key or node.startswith(key if ".py::" in key else key + "::")
               for key in SLOW):
            item.add_marker(pytest.mark.slow)
