"""Lightning data modules for graph property prediction: the shared bases.

:class:`BatchedGraphDataModule` holds what every graph data module shares (size-bucketed
loaders, DDP splitting, ``sample_id``, the static dataset facts linked into the model); the
molecular families (:mod:`graph_urpe.data.modules.molecule`: ZINC-like, PyG ZINC, OGB, PCQM4Mv2,
your CSV) share :class:`GraphDataModule` on top of it.

Every dataset is built with :class:`~graph_urpe.transforms.AddShortestPathDistance` (and, with
``resistance=True``, :class:`~graph_urpe.transforms.AddResistanceDistance`) as ``pre_transform``
(pair relations computed once and cached on disk). Loaders use
:class:`~graph_urpe.data.sampler.SizeBucketBatchSampler` (graphs of similar size batched together,
under a budget) and split batches across DDP ranks themselves, so run the Trainer with
``use_distributed_sampler=False`` (the shipped configs do). Every graph carries ``sample_id``
(its index in the split), used to de-duplicate and order epoch metrics and predictions.

``graph-urpe predict`` (:mod:`graph_urpe.cli.predict`) takes its inputs and output itself and
borrows only a data module's batch budgets (:class:`~graph_urpe.data.budgets.BatchBudgets`; their
defaults, :data:`~graph_urpe.data.budgets.DEFAULT_BUDGETS`, are also those of
:class:`~graph_urpe.Predictor` and ``explain``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd
import torch
from lightning.pytorch import Callback, LightningDataModule
from torch_geometric.data import InMemoryDataset
from torch_geometric.loader import DataLoader

from graph_urpe.data.budgets import DEFAULT_BUDGETS
from graph_urpe.data.collated import collated_rows
from graph_urpe.data.facts import DatasetFacts, TrainingStatistics, label_columns
from graph_urpe.data.families import DatasetFamily, DatasetSplits, LoadOptions
from graph_urpe.data.indexed import IndexedDataset
from graph_urpe.data.predict_inputs import (
    training_vocabulary,
)
from graph_urpe.data.processing import check_max_graph_nodes
from graph_urpe.data.resumable_loader import ResumableDataLoader
from graph_urpe.data.sampler import (
    SizeBucketBatchSampler,
    graph_sizes,
)
from graph_urpe.transforms import StandardLayout, pair_pre_transform

__all__ = [
    "BatchedGraphDataModule",
    "GraphDataModule",
    "collated_labels",
]

def collated_labels(dataset) -> torch.Tensor | None:
    r"""The labels ``y`` of every graph of a PyG :class:`~torch_geometric.data.InMemoryDataset`
    (or an indexed subset of one) read from its collated storage, without building any graph.

    Only where access changes nothing in ``y`` but its layout (no transform, or
    :class:`~graph_urpe.transforms.StandardLayout`, a cast to ``float32``).

    Args:
        dataset: a PyG dataset.

    Returns:
        Tensor or None: ``float32`` ``[sum of label rows, ...]`` in dataset order (reshape to
        ``[-1, T]``); :obj:`None` where the graphs must be built to read ``y``.
    """
    layout_only = isinstance(dataset, InMemoryDataset) and (
        dataset.transform is None or isinstance(dataset.transform, StandardLayout))
    y = collated_rows(dataset, "y") if layout_only else None
    return None if y is None else y.float()


class BatchedGraphDataModule(LightningDataModule):
    r"""Base of every graph data module: loaders that batch graphs of similar size under a budget
    (:class:`~graph_urpe.data.sampler.SizeBucketBatchSampler`), split batches across DDP ranks
    and give every graph its ``sample_id``; the static dataset facts that ``graph-urpe`` links into
    the model (:data:`graph_urpe.cli.links.GRAPH_LINKS`).

    Subclasses fill :attr:`splits` (``"train"``, ``"val"``, ``"test"``: PyG datasets) in
    :meth:`setup` and state :attr:`facts`; the module then meets the
    :class:`~graph_urpe.data.facts.GraphData` protocol that the model reads.

    Args:
        batch_size (int, optional): at most this many graphs per batch. (default: :obj:`128`)
        max_nodes_per_batch (int, optional): budget of padded nodes per batch
            (``graphs x largest graph``). (default: :obj:`None`)
        max_cells_per_batch (int, optional): budget of padded attention cells per batch
            (``graphs x largest graph^2``), the memory bound of every loader.
            (default: :data:`~graph_urpe.data.sampler.DEFAULT_MAX_CELLS`)
        num_workers (int, optional): DataLoader worker processes. (default: :obj:`0`)
        seed (int, optional): seed of the batch shuffling. (default: :obj:`0`)
        bucketing (bool, optional): training batches of graphs of similar size (re-drawn every
            epoch), or, with :obj:`False`, random batches of :obj:`batch_size` (more padding;
            for comparisons, see ``benchmarks/README.md``). Validation and test batches are
            always bucketed (their metrics do not depend on the batching). (default: :obj:`True`)

    Raises:
        ValueError: for non-positive budgets, or none at all.
    """

    def __init__(
        self,
        batch_size: int | None = DEFAULT_BUDGETS.batch_size,
        max_nodes_per_batch: int | None = DEFAULT_BUDGETS.max_nodes_per_batch,
        max_cells_per_batch: int | None = DEFAULT_BUDGETS.max_cells_per_batch,
        num_workers: int = 0,
        seed: int = 0,
        bucketing: bool = True,
    ) -> None:
        super().__init__()
        for name, value in (
            ("batch_size", batch_size),
            ("max_nodes_per_batch", max_nodes_per_batch),
            ("max_cells_per_batch", max_cells_per_batch),
        ):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be a positive integer or None, got {value}.")
        if batch_size is None and max_nodes_per_batch is None and max_cells_per_batch is None:
            raise ValueError(
                "give at least one batch budget: batch_size, max_nodes_per_batch or "
                "max_cells_per_batch."
            )
        self.batch_size = batch_size
        self.max_nodes_per_batch = max_nodes_per_batch
        self.max_cells_per_batch = max_cells_per_batch
        self.num_workers = num_workers
        self.seed = seed
        self.bucketing = bucketing
        self.splits: dict[str, Any] = {}

    @property
    def facts(self) -> DatasetFacts:
        """The static facts of the data (:class:`~graph_urpe.data.facts.DatasetFacts`), known
        without reading any graph; ``graph-urpe`` links them into the model
        (:data:`graph_urpe.cli.links.GRAPH_LINKS`). Every subclass states them.

        Raises:
            NotImplementedError: in a subclass that does not state them.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must state its data's facts: define a `facts` property "
            "returning graph_urpe.data.facts.DatasetFacts (task, num_tasks, metric, ...).")

    def source(self) -> str:
        """Where the data come from, one line (recorded in the checkpoint as
        ``dataset_source``). (default: the facts' name)"""
        return self.facts.name

    def train_split(self):
        """The training split (a PyG dataset), for :meth:`training_statistics`."""
        return self.splits["train"]

    def training_vocabulary(self) -> dict[str, Any] | None:
        """The atom / bond feature values of the training split, for molecular data (a
        featurization), else :obj:`None`."""
        if self.facts.featurization is None:
            return None
        return training_vocabulary(self.train_split())

    def training_statistics(self) -> TrainingStatistics:
        """What the model takes from the training split when fitting starts
        (:class:`~graph_urpe.data.facts.TrainingStatistics`): NaN-aware per-label mean and
        population std (1 where a label has fewer than two values or no spread; node-level labels
        count every node), the feature vocabulary and :meth:`source`."""
        train = self.train_split()
        labels = label_columns(self.facts.task, self.facts.num_tasks)
        ys = collated_labels(train)
        if ys is None:
            ys = torch.cat([train[i].y.view(-1, labels).float() for i in range(len(train))])
        ys = ys.reshape(-1, labels)
        mask = ~torch.isnan(ys)
        count = mask.sum(0).clamp(min=1)
        filled = torch.where(mask, ys, torch.zeros(()))
        mean = filled.sum(0) / count
        var = torch.where(mask, (ys - mean).square(), torch.zeros(())).sum(0) / count
        std = var.sqrt()
        std = torch.where((mask.sum(0) < 2) | (std == 0), torch.ones_like(std), std)
        return TrainingStatistics(mean.tolist(), std.tolist(), self.training_vocabulary(),
                                  self.source())

    def test_callbacks(self) -> list[Callback]:
        """Lightning callbacks to run while testing (none here; PCQM4Mv2's hidden splits add
        OGB's submission writer)."""
        return []

    def _rank(self) -> tuple[int, int]:
        trainer = self.trainer
        if trainer is None:
            return 1, 0
        # The Trainer's flag is private (no public attribute in Lightning 2.6; fenced by
        # tests/test_private_apis.py).
        if trainer.world_size > 1 and getattr(
            trainer._accelerator_connector, "use_distributed_sampler", False
        ):
            raise ValueError(
                f"{type(self).__name__} splits batches across ranks itself: run the Trainer "
                "with use_distributed_sampler=False (--trainer.use_distributed_sampler false)."
            )
        return trainer.world_size, trainer.global_rank

    def _loader(self, dataset, shuffle: bool, sizes=None, indexed: bool = True,
                bucketing: bool = True, resumable: bool = False) -> DataLoader:
        world, rank = self._rank()
        sizes = graph_sizes(dataset) if sizes is None else sizes
        sampler = SizeBucketBatchSampler(
            sizes,
            max_nodes_per_batch=self.max_nodes_per_batch,
            max_cells_per_batch=self.max_cells_per_batch,
            max_batch_size=self.batch_size,
            shuffle=shuffle,
            seed=self.seed,
            num_replicas=world,
            rank=rank,
            bucketing=bucketing,
        )
        # training resumes mid-epoch where it stopped (Lightning's stateful-loader protocol)
        loader = ResumableDataLoader if resumable else DataLoader
        return loader(
            IndexedDataset(dataset) if indexed else dataset,
            batch_sampler=sampler,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.splits["train"], shuffle=True, bucketing=self.bucketing,
                            resumable=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.splits["val"], shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.splits["test"], shuffle=False)


class GraphDataModule(BatchedGraphDataModule):
    r"""Base of the molecular data modules: the splits of one dataset family
    (:class:`~graph_urpe.data.families.DatasetFamily`) and the loaders of
    :class:`BatchedGraphDataModule`.

    Subclasses set :attr:`family`, whose facts (task, label columns and their names,
    featurization, metric, evaluator) are the module's, and may override :attr:`test_split` and
    :meth:`test_callbacks`.

    Args:
        root (str, optional): data folder (each dataset in its own subfolder, see
            :class:`~graph_urpe.data.families.LoadOptions`). (default: ``"data"``)
        batch_size, max_nodes_per_batch, max_cells_per_batch, num_workers, seed, bucketing: see
            :class:`BatchedGraphDataModule`.
        max_graph_nodes (int, optional): refuse larger graphs: in the training data they are
            reported by the dataset (never silently dropped; with ``strict`` an error);
            ``predict`` gives larger inputs an ``error``. (default: :obj:`None`)
        strict (bool, optional): refuse the dataset if any input is unusable.
            (default: :obj:`False`)
        download (bool, optional): let PyG/OGB download missing data. (default: :obj:`False`)
        processing_workers (int, optional): worker processes for the one-time processing.
            (default: :obj:`None`, automatic)
        resistance (bool, optional): also store the resistance distance
            (:class:`~graph_urpe.transforms.AddResistanceDistance`), which models with
            ``relations`` including ``"resistance"`` read (Graphormer-GD); ``graph-urpe`` sets it
            from the network's ``relations`` (:func:`~graph_urpe.cli.links.reads_resistance`).
            (default: :obj:`False`)
        bucketing (bool, optional): size-bucketed batches (see the base class).
            (default: :obj:`True`)

    Raises:
        ValueError: for non-positive budgets.
    """

    test_split: str = "test"
    family: DatasetFamily | None = None
    """The dataset family, its facts and how it builds its splits (set by each subclass)."""

    def __init__(
        self,
        root: str = "data",
        batch_size: int | None = DEFAULT_BUDGETS.batch_size,
        max_nodes_per_batch: int | None = DEFAULT_BUDGETS.max_nodes_per_batch,
        max_cells_per_batch: int | None = DEFAULT_BUDGETS.max_cells_per_batch,
        num_workers: int = 0,
        seed: int = 0,
        max_graph_nodes: int | None = None,
        strict: bool = False,
        download: bool = False,
        processing_workers: int | None = None,
        bucketing: bool = True,
        resistance: bool = False,
    ) -> None:
        super().__init__(batch_size, max_nodes_per_batch, max_cells_per_batch, num_workers, seed,
                         bucketing)
        self.pre_transform = pair_pre_transform(resistance)
        self.root = root
        self.max_graph_nodes = check_max_graph_nodes(max_graph_nodes)
        self.strict = strict
        self.download = download
        self.processing_workers = processing_workers
        self.loaded: DatasetSplits | None = None

    # ------------------------------------------------------------------- the dataset
    @property
    def facts(self) -> DatasetFacts:
        """The family's facts with this module's node limit (``max_graph_nodes``)."""
        if self.family is None:
            raise TypeError(
                f"{type(self).__name__} has no dataset family: use one of the dataset families "
                "(ZincLikeDataModule, ZINCDataModule, OGBDataModule, PCQM4Mv2DataModule, "
                "CSVDataModule) or set self.family in your subclass."
            )
        return dataclasses.replace(self.family.facts, max_graph_nodes=self.max_graph_nodes)

    def source(self) -> str:
        """Where the loaded data come from (the dataset's ``source``: a file, a release, an
        offline stand-in), else the family name."""
        return self.load().source or self.facts.name

    def load(self) -> DatasetSplits:
        """Build (first call: process and cache on disk) or load the dataset with its splits."""
        if self.loaded is None:
            facts = self.facts
            self.loaded = self.family.load(LoadOptions(
                self.root, pre_transform=self.pre_transform, max_graph_nodes=self.max_graph_nodes,
                strict=self.strict, download=self.download, num_workers=self.processing_workers))
            for part in ("train", "valid", self.test_split):
                if part not in self.loaded.splits:
                    raise ValueError(
                        f"dataset {facts.name!r} has no {part!r} split; it has "
                        f"{sorted(self.loaded.splits)}."
                    )
        return self.loaded

    def split_membership(self) -> pd.DataFrame | None:
        """Where every source row went (``row, smiles, split, reason``; skipped rows with their
        reason), for datasets read from a user's file; :obj:`None` for the benchmark datasets."""
        fn = self.loaded.split_membership if self.loaded is not None else None
        return fn() if fn is not None else None

    def train_split(self):
        """The training split (processing the dataset on first use)."""
        return self.load().splits["train"]

    # ------------------------------------------------------------------------ hooks
    def _predicting(self) -> bool:
        trainer = self.trainer
        return trainer is not None and trainer.state.fn == "predict"

    def prepare_data(self) -> None:
        """Process and cache the dataset once (rank 0); nothing when predicting."""
        if not self._predicting():
            self.load()

    def setup(self, stage: str) -> None:
        """Load the cached splits (every rank); nothing when predicting."""
        if stage != "predict" and not self.splits:
            parts = self.load().splits
            self.splits = {"train": parts["train"], "val": parts["valid"],
                           "test": parts[self.test_split]}
