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
