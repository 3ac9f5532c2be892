"""A dataset view whose graphs carry their position, so predictions can be matched to inputs."""

from __future__ import annotations

import copy

from torch.utils.data import Dataset
from torch_geometric.data import Data


class IndexedDataset(Dataset):
    r"""A view of a dataset whose items carry ``sample_id``: their index in this view (used to
    put predictions back in input order, and to count every sample once under DDP).

    Args:
        dataset: any indexable dataset of :class:`~torch_geometric.data.Data`.

    Shapes:
        - **item**: the wrapped ``Data`` (a shallow copy, the dataset is not changed) plus
          ``sample_id`` (int, in ``[0, len(dataset))``).
    """

    def __init__(self, dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, idx: int) -> Data:
        data = copy.copy(self.dataset[idx])
        data.sample_id = int(idx)
        return data

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.dataset!r})"
