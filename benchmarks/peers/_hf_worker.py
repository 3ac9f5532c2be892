"""Peer-benchmark worker for Hugging Face ``transformers``' Graphormer (run in the peers venv).

``transformers.models.deprecated.graphormer`` (last shipped in 4.57.x): ``preprocess_item`` (its
Cython Floyd-Warshall and path-edge tables, compiled on first import through ``pyximport``),
``GraphormerDataCollator`` and ``GraphormerForGraphClassification`` (regression with
``num_classes=1``: its own MSE loss). Started by ``hf_graphormer.py``; commands: see
``_worker.py``.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import torch
from _protocol import serve
from _worker import Worker
from transformers.models.deprecated.graphormer.collating_graphormer import (
    GraphormerDataCollator,
    preprocess_item,
)
from transformers.models.deprecated.graphormer.configuration_graphormer import (
    GraphormerConfig,
)
from transformers.models.deprecated.graphormer.modeling_graphormer import (
    GraphormerForGraphClassification,
)


class HFAdapter:
    """``transformers``' Graphormer behind the :class:`_worker.Worker` interface."""

    def __init__(self) -> None:
        self.collator = None

    def prepare(self, item: dict) -> dict:
        return item

    def preprocess(self, item: dict) -> dict:
        return preprocess_item(dict(item))  # it adds keys to the dict it gets: keep the input

    def spd(self, graph: dict):
        return graph["spatial_pos"] - 1  # it stores SPD + 1 (0 is its padding)

    def collate(self, graphs: list[dict]) -> dict:
        return self.collator([dict(g) for g in graphs])  # it replaces the arrays by tensors

    def build(self, cfg: dict, seed: int) -> dict:
        cfg = dict(cfg)
        self.collator = GraphormerDataCollator(spatial_pos_max=cfg.pop("spatial_pos_max"))
        torch.manual_seed(seed)
        return {"hf": GraphormerForGraphClassification(GraphormerConfig(**cfg))}

    def loss(self, model, batch: dict):
        return model(**batch, return_dict=True).loss

    def predict(self, model, batch: dict):
        return model(**{k: v for k, v in batch.items() if k != "labels"}, return_dict=True).logits


if __name__ == "__main__":
    serve(Worker(HFAdapter()).handlers())
