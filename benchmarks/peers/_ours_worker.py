"""Peer-benchmark worker for graph-urpe's Graphormer (run in graph-urpe's environment).

Preprocessing: :class:`graph_urpe.transforms.AddShortestPathDistance` ``(max_distance=None,
paths=True)`` on a PyG ``Data`` per molecule; batches: :meth:`torch_geometric.data.Batch.from_data_list`;
models: :meth:`graph_urpe.nn.Graphormer.slim` with ``attention="rpe"`` and ``"urpe"`` (same
initial weights up to ``C``), MSE loss as ``transformers``' regression head. Started by
``hf_graphormer.py``; commands: see ``_worker.py``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _protocol import serve
from _worker import Worker
from torch_geometric.data import Batch, Data

from graph_urpe.nn import Graphormer
from graph_urpe.transforms import AddShortestPathDistance


class OursAdapter:
    """graph-urpe's Graphormer behind the :class:`_worker.Worker` interface."""

    def __init__(self) -> None:
        self.transform = AddShortestPathDistance(max_distance=None, paths=True)

    def prepare(self, item: dict) -> Data:
        return Data(
            x=torch.from_numpy(item["node_feat"]), edge_index=torch.from_numpy(item["edge_index"]),
            edge_attr=torch.from_numpy(item["edge_attr"]),
            y=torch.tensor([item["y"]], dtype=torch.float32), num_nodes=item["num_nodes"],
        )

    def preprocess(self, data: Data) -> Data:
        return self.transform(data)

    def spd(self, data: Data):
        n = data.num_nodes
        return data.spd.view(n, n).numpy()

    def collate(self, graphs: list[Data]) -> Batch:
        return Batch.from_data_list(graphs)

    def build(self, cfg: dict, seed: int) -> dict:
        models = {}
        for attention in cfg["attentions"]:
            torch.manual_seed(seed)
            models[attention] = Graphormer.slim(attention=attention)
        return models

    def loss(self, model, batch: Batch):
        return F.mse_loss(model(batch), batch.y)

    def predict(self, model, batch: Batch):
        return model(batch)


if __name__ == "__main__":
    serve(Worker(OursAdapter()).handlers())
