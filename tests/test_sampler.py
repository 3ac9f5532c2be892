"""SizeBucketBatchSampler: coverage, budgets, DDP split, epochs, padding fraction vs naive loops."""

import re

import numpy as np
import pandas as pd
import pytest
import torch
from torch_geometric.datasets import FakeDataset
from torch_geometric.loader import DataLoader

from graph_urpe.data.sampler import DEFAULT_MAX_CELLS, SizeBucketBatchSampler, graph_sizes
from graph_urpe.data.zinc import EMBEDDED_ZINC_LIKE


def _sizes(num=500, seed=0):
    return np.random.default_rng(seed).integers(1, 40, num)


def _naive_greedy_batch_lengths(sizes, max_nodes_per_batch=None, max_cells_per_batch=None, max_batch_size=None):
    """Independent greedy cut of the sorted sizes, one graph at a time."""
    lengths, current = [], []
    for size in sorted(int(s) for s in sizes):
        candidate = [*current, size]
        fits = (
            (max_nodes_per_batch is None or len(candidate) * max(candidate) <= max_nodes_per_batch)
            and (max_cells_per_batch is None or len(candidate) * max(candidate) ** 2 <= max_cells_per_batch)
            and (max_batch_size is None or len(candidate) <= max_batch_size)
        )
        if fits:
            current = candidate
        else:
            lengths.append(len(current))
            current = [size]
    if current:
        lengths.append(len(current))
    return lengths


@pytest.mark.parametrize(
    "budget",
    [
        {"max_nodes_per_batch": 200},
        {"max_cells_per_batch": 4000},
        {"max_batch_size": 16},
        {"max_nodes_per_batch": 300, "max_batch_size": 10},
    ],
)
@pytest.mark.parametrize("size_jitter", [0.0, 0.05, 0.3])
def test_single_rank_covers_every_index_once_under_budget(budget, size_jitter):
    sizes = _sizes()
    sampler = SizeBucketBatchSampler(sizes, **budget, seed=1, size_jitter=size_jitter)
    expected = _naive_greedy_batch_lengths(sizes, **budget)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        flat = [i for batch in batches for i in batch]
        assert sorted(flat) == list(range(len(sizes)))
        for batch in batches:
            biggest = max(sizes[i] for i in batch)
            assert len(batch) * biggest <= budget.get("max_nodes_per_batch", np.inf)
            assert len(batch) * biggest**2 <= budget.get("max_cells_per_batch", np.inf)
            assert len(batch) <= budget.get("max_batch_size", np.inf)
        if size_jitter == 0:
            assert sorted(len(b) for b in batches) == sorted(expected)
        else:  # the exact count, plus the 5% slack where a padded budget is set
            padded = "max_nodes_per_batch" in budget or "max_cells_per_batch" in budget
            assert len(batches) == len(expected) + (int(np.ceil(0.05 * len(expected))) if padded
                                                    else 0)


def test_batches_group_similar_sizes():
    sizes = _sizes(4000)
    assert np.bincount(sizes)[1:].min() >= 50
    sampler = SizeBucketBatchSampler(sizes, max_batch_size=50, size_jitter=0)
    # Sorted sizes cut into runs: a batch spans at most two distinct sizes when >= 50 share each.
    for batch in sampler:
        assert len({int(sizes[i]) for i in batch}) <= 2


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("num_replicas", [2, 3, 7])
def test_ranks_get_distinct_batches_and_equal_counts(num_replicas, drop_last):
    sizes = _sizes(300, seed=2)
    samplers = [
        SizeBucketBatchSampler(
            sizes, max_nodes_per_batch=150, seed=5, num_replicas=num_replicas, rank=r, drop_last=drop_last
        )
        for r in range(num_replicas)
    ]
    for epoch in (0, 1):
        per_rank = []
        for sampler in samplers:
            sampler.set_epoch(epoch)
            per_rank.append([tuple(b) for b in sampler])
        lengths = {len(batches) for batches in per_rank}
        assert lengths == {len(samplers[0])}
        total = samplers[0].num_batches
        expected_len = total // num_replicas if drop_last else -(-total // num_replicas)
        assert len(samplers[0]) == expected_len
        all_batches = [b for batches in per_rank for b in batches]
        if drop_last:
            assert len(set(all_batches)) == len(all_batches)  # no batch on two ranks
            assert len(all_batches) == total - total % num_replicas
        else:
            # Every index is served; only the padding repeats batches.
            assert {i for b in all_batches for i in b} == set(range(len(sizes)))
            assert len(set(all_batches)) == total
            assert len(all_batches) - total == (-total) % num_replicas
        # Batches are disjoint index sets.
        distinct = set(all_batches)
        assert sum(len(b) for b in distinct) == len({i for b in distinct for i in b})


def test_deterministic_per_epoch_and_reshuffled_between_epochs():
    sizes = _sizes()
    a = SizeBucketBatchSampler(sizes, max_nodes_per_batch=200, seed=3)
    b = SizeBucketBatchSampler(sizes, max_nodes_per_batch=200, seed=3)
    a.set_epoch(4)
    b.set_epoch(4)
    assert list(a) == list(b)
    first = list(a)
    a.set_epoch(5)
    second = list(a)
    assert first != second
    assert {frozenset(x) for x in first} != {frozenset(x) for x in second}  # ties reshuffled too
    assert len(first) == len(second)


def test_no_shuffle_is_sorted_by_size_and_index():
    sizes = np.array([3, 1, 2, 1, 3, 2])
    sampler = SizeBucketBatchSampler(sizes, max_batch_size=2, shuffle=False)
    assert list(sampler) == [[1, 3], [2, 5], [0, 4]]
    sampler.set_epoch(9)
    assert list(sampler) == [[1, 3], [2, 5], [0, 4]]


def test_padding_fraction_matches_naive_count():
    sizes = _sizes(1000, seed=4)
    for budget in ({"max_nodes_per_batch": 256}, {"max_cells_per_batch": 10000}, {"max_batch_size": 32}):
        sampler = SizeBucketBatchSampler(sizes, **budget)
        padded = real = 0
        for batch in sampler:
            biggest = max(int(sizes[i]) for i in batch)
            padded += len(batch) * biggest * biggest
            real += sum(int(sizes[i]) ** 2 for i in batch)
        assert sampler.padding_fraction == pytest.approx(1 - real / padded)
    # Random batches of 32 pad far more than bucketed ones.
    bucketed = SizeBucketBatchSampler(sizes, max_batch_size=32, size_jitter=0).padding_fraction
    assert bucketed < 0.05
    random_batches = np.random.default_rng(0).permutation(len(sizes)).reshape(-1, 25)
    biggest = sizes[random_batches].max(1)
    random_fraction = 1 - (sizes**2).sum() / (25 * biggest**2).sum()
    assert random_fraction > 0.3


def test_hand_worked_budget_and_padding():
    # Sorted sizes 2, 2, 3, 5, max_nodes_per_batch = 6: [2, 2] (cost 4; with 3: 3 * 3 = 9), [3] (with 5: 2 * 5), [5].
    sampler = SizeBucketBatchSampler([5, 2, 3, 2], max_nodes_per_batch=6, shuffle=False)
    assert list(sampler) == [[1, 3], [2], [0]]
    assert sampler.padding_fraction == 0.0
    sampler = SizeBucketBatchSampler([5, 2, 3, 2], max_nodes_per_batch=9, shuffle=False)
    assert list(sampler) == [[1, 3, 2], [0]]
    # Padded cells: 3 * 3^2 + 5^2 = 52; real: 4 + 4 + 9 + 25 = 42.
    assert sampler.padding_fraction == pytest.approx(1 - 42 / 52)


def test_empty_dataset_has_no_batches():
    sampler = SizeBucketBatchSampler([], max_nodes_per_batch=10, num_replicas=2, rank=1)
    assert len(sampler) == 0 and list(sampler) == [] and sampler.padding_fraction == 0.0


def test_too_large_graph_is_refused_with_index_and_size():
    with pytest.raises(ValueError, match="graph 2 with 50 nodes"):
        SizeBucketBatchSampler([3, 4, 50, 60], max_nodes_per_batch=40)
    with pytest.raises(ValueError, match="graph 1 with 11 nodes"):
        SizeBucketBatchSampler([3, 11], max_cells_per_batch=100)
    with pytest.raises(ValueError, match="at least one budget"):
        SizeBucketBatchSampler([3, 4])
    with pytest.raises(ValueError, match="rank"):
        SizeBucketBatchSampler([3, 4], max_nodes_per_batch=10, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="max_nodes_per_batch"):
        SizeBucketBatchSampler([3, 4], max_nodes_per_batch=0)
    with pytest.raises(ValueError, match="sizes"):
        SizeBucketBatchSampler([[3, 4]], max_nodes_per_batch=10)


def test_pyg_dataloader_and_graph_sizes():
    torch.manual_seed(0)
    dataset = FakeDataset(num_graphs=40, avg_num_nodes=12, avg_degree=2)
    sizes = graph_sizes(dataset)
    assert sizes.tolist() == [data.num_nodes for data in dataset]
    subset = dataset[torch.tensor([5, 3, 9])]
    assert graph_sizes(subset).tolist() == [dataset[i].num_nodes for i in (5, 3, 9)]
    assert graph_sizes(list(subset)).tolist() == graph_sizes(subset).tolist()

    sampler = SizeBucketBatchSampler(sizes, max_nodes_per_batch=60, seed=0)
    assert sampler.num_replicas == 1 and sampler.rank == 0  # torch.distributed not initialised
    loader = DataLoader(dataset, batch_sampler=sampler)
    seen = 0
    for batch, indices in zip(loader, sampler, strict=True):
        assert batch.num_graphs == len(indices)
        assert batch.num_nodes == int(sizes[indices].sum())
        assert batch.num_graphs * int(sizes[indices].max()) <= 60
        seen += batch.num_graphs
    assert seen == len(dataset)


ATOM = re.compile(r"Cl|Br|\[[^\]]+\]|[BCNOSPFI]|[cnops]")


def _zinc_like_sizes():
    """Heavy-atom counts of the embedded ZINC-like training molecules, read off the SMILES text
    (one token per atom: bracket atoms, two-letter halogens, organic-subset letters)."""
    frame = pd.read_csv(EMBEDDED_ZINC_LIKE)
    return np.array([len(ATOM.findall(s)) for s in frame.smiles[frame.split == "train"]])


def test_buckets_are_redrawn_each_epoch_and_keep_the_padding_gain():
    sizes = _zinc_like_sizes()
    assert len(sizes) == 10_000 and 6 <= sizes.min() and sizes.max() <= 38
    exact = SizeBucketBatchSampler(sizes, max_batch_size=128, size_jitter=0)
    sampler = SizeBucketBatchSampler(sizes, max_batch_size=128)  # default jitter
    single, paddings, members = [], [], []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = sampler.epoch_batches()
        assert sorted(np.concatenate(batches).tolist()) == list(range(len(sizes)))  # once each
        single.append(np.mean([len(set(sizes[b].tolist())) == 1 for b in batches]))
        paddings.append(sampler.padding_fraction)
        members.append({frozenset(b.tolist()) for b in batches})
    assert members[0] != members[1] and members[1] != members[2]
    assert len(members[0] & members[1]) == 0  # no batch repeats between epochs
    exact_single = np.mean([len(set(sizes[b].tolist())) == 1 for b in exact.epoch_batches()])
    assert exact_single > 0.75 and max(single) < 0.1  # fixed buckets of one size are gone
    # Padding: a few percent, against 0.5-2 % fixed and about 30 % for random batches.
    random_batches = np.random.default_rng(0).permutation(len(sizes))[:78 * 128].reshape(78, 128)
    biggest = sizes[random_batches].max(1).astype(float)
    random_fraction = 1 - (sizes[random_batches].astype(float) ** 2).sum() / (128 * biggest**2).sum()
    assert exact.padding_fraction < 0.02
    assert max(paddings) < 0.1
    assert random_fraction > 0.25


@pytest.mark.parametrize("num_replicas", [2, 3])
def test_redrawn_buckets_under_ddp_equal_counts_disjoint_coverage(num_replicas):
    sizes = _sizes(400, seed=7)
    samplers = [SizeBucketBatchSampler(sizes, max_cells_per_batch=6000, seed=2, num_replicas=num_replicas,
                                       rank=r) for r in range(num_replicas)]
    seen_epochs = []
    for epoch in (0, 1):
        for sampler in samplers:
            sampler.set_epoch(epoch)
        per_rank = [[tuple(b) for b in sampler] for sampler in samplers]
        assert {len(b) for b in per_rank} == {len(samplers[0])}
        served = [b for batches in per_rank for b in batches]
        distinct = set(served)
        assert len(distinct) == samplers[0].num_batches  # repeats are only the DDP padding
        assert sorted(i for b in distinct for i in b) == list(range(len(sizes)))
        seen_epochs.append(distinct)
    assert seen_epochs[0] != seen_epochs[1]


def test_default_cell_budget_and_too_large_graph_message():
    assert DEFAULT_MAX_CELLS == 2**21
    # A 300-atom molecule fits, 23 to a batch (23 * 300^2 <= 2^21 < 24 * 300^2).
    sampler = SizeBucketBatchSampler([300] * 50, max_cells_per_batch=DEFAULT_MAX_CELLS, shuffle=False)
    assert [len(b) for b in sampler] == [23, 23, 4]
    with pytest.raises(ValueError, match=r"graph 1 with 1449 nodes \(2099601 attention cells"):
        SizeBucketBatchSampler([30, 1449, 1448], max_cells_per_batch=DEFAULT_MAX_CELLS)


def test_random_batches_without_bucketing():
    # bucketing=False: a fresh permutation per epoch cut into batches of max_batch_size (the last
    # one shorter), every graph once, the same under the same seed and epoch.
    sizes = np.random.default_rng(3).integers(5, 40, size=250)
    sampler = SizeBucketBatchSampler(sizes, max_batch_size=32, max_cells_per_batch=2**21, bucketing=False)
    assert len(sampler) == 8 and "bucketing=False" in repr(sampler)
    epochs = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert [len(b) for b in batches] == [32] * 7 + [26]
        assert sorted(i for b in batches for i in b) == list(range(250))
        expected = np.random.default_rng(epoch).permutation(250)  # seed 0 + epoch
        assert [i for b in batches for i in b] == expected.tolist()
        epochs.append(batches)
    assert epochs[0] != epochs[1]
    ordered = SizeBucketBatchSampler(sizes, max_batch_size=100, shuffle=False, bucketing=False)
    assert list(ordered) == [list(range(100)), list(range(100, 200)), list(range(200, 250))]
    with pytest.raises(ValueError, match="give max_batch_size"):
        SizeBucketBatchSampler(sizes, max_cells_per_batch=2**21, bucketing=False)
    with pytest.raises(ValueError, match="room for 32 graphs of the largest size"):
        SizeBucketBatchSampler(sizes, max_batch_size=32, max_cells_per_batch=32 * 39 * 39 - 1,
                               bucketing=False)
