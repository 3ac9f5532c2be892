"""Relation tables and Toeplitz relation ids against hand-worked examples and the T5 formula."""

import math

import pytest
import torch

from graph_urpe.constants import UNREACHABLE
from graph_urpe.nn import (
    GaussianBasisEmbedding,
    RelationEmbedding,
    graph_relation_ids,
    num_graph_relations,
    num_relative_positions,
    relative_position_ids,
)


def test_unique_bidirectional_ids_hand_worked():
    expected = torch.tensor([[2, 3, 4, 4], [1, 2, 3, 4], [0, 1, 2, 3], [0, 0, 1, 2]])
    assert torch.equal(relative_position_ids(4, max_distance=2), expected)
    assert num_relative_positions(2) == 5


def test_unique_causal_ids_hand_worked():
    expected = torch.tensor([[0, 0, 0], [1, 0, 0], [2, 1, 0]])
    assert torch.equal(relative_position_ids(3, max_distance=5, causal=True), expected)
    assert num_relative_positions(5, causal=True) == 6


def test_ids_are_toeplitz_and_rectangular():
    ids = relative_position_ids(5, 8, max_distance=10)
    assert ids.shape == (5, 8)
    for i in range(5):
        for j in range(8):
            assert ids[i, j] == j - i + 10


def t5_bucket_reference(rel, num_buckets, max_distance, bidirectional):
    """Mesh-TensorFlow / T5 `_relative_position_bucket` written out for one scalar (n = i - j)."""
    n = -rel
    ret = 0
    if bidirectional:
        num_buckets //= 2
        if n < 0:
            ret += num_buckets
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    val = max_exact + int(
        math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    )
    return ret + min(val, num_buckets - 1)


@pytest.mark.parametrize("causal", [False, True])
def test_t5_buckets_match_reference(causal):
    n, nb, md = 40, 16, 32
    ids = relative_position_ids(n, max_distance=md, num_buckets=nb, causal=causal)
    for i in range(n):
        for j in range(n):
            assert ids[i, j] == t5_bucket_reference(j - i, nb, md, not causal), (i, j)
    assert ids.max() < num_relative_positions(md, causal, nb)


def test_invalid_arguments():
    with pytest.raises(ValueError, match="max_distance"):
        relative_position_ids(3, max_distance=-1)
    with pytest.raises(ValueError, match="even"):
        relative_position_ids(3, max_distance=4, num_buckets=5)
    with pytest.raises(ValueError, match="init"):
        RelationEmbedding(3, 2, init="uniform")
    with pytest.raises(ValueError, match="padding_idx"):
        RelationEmbedding(3, 2, padding_idx=3)


def test_relation_embedding_shapes_init_and_padding():
    torch.manual_seed(0)
    c = RelationEmbedding(6, 4, init="ones", padding_idx=5)
    ids = torch.tensor([[[0, 5], [2, 3]]])  # [1, 2, 2]
    out = c(ids)
    assert out.shape == (1, 4, 2, 2)
    expected = torch.ones(1, 4, 2, 2)
    expected[0, :, 0, 1] = 0.0  # the padding relation gives C = 0
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    assert torch.all(c.weight.grad[5] == 0)
    b = RelationEmbedding(1000, 3, init="normal", std=0.02)
    assert abs(b.weight.std().item() - 0.02) < 0.003
    assert torch.all(RelationEmbedding(4, 2, init="zeros").weight == 0)
    # value check: out[..., h, i, j] = weight[ids[i, j], h]
    ids2 = torch.randint(0, 1000, (3, 5, 5))
    out2 = b(ids2)
    for h in range(3):
        torch.testing.assert_close(out2[:, h], b.weight[:, h][ids2])
    assert "RelationEmbedding(1000, num_heads=3" in repr(b)


def test_graph_relation_ids_without_graph_token():
    # Graph 0: path 0-1-2 (distance 2 clipped to max_distance 1); graph 1: two isolated nodes.
    spd = torch.tensor([
        [[0, 1, 2], [1, 0, 1], [2, 1, 0]],
        [[0, UNREACHABLE, UNREACHABLE], [UNREACHABLE, 0, UNREACHABLE],
         [UNREACHABLE, UNREACHABLE, UNREACHABLE]],
    ])
    pad = torch.tensor([[False, False, False], [False, False, True]])
    assert num_graph_relations(1) == 5  # 0, 1, unreachable 2, token 3, padding 4
    ids = graph_relation_ids(spd, pad, max_distance=1, graph_token=False)
    expected = torch.tensor([
        [[0, 1, 1], [1, 0, 1], [1, 1, 0]],
        [[0, 2, 4], [2, 0, 4], [4, 4, 4]],
    ])
    assert torch.equal(ids, expected)
    with_token = graph_relation_ids(spd, pad, max_distance=1)
    assert torch.equal(with_token[:, 1:, 1:], expected)
    assert (with_token[0, 0] == 3).all() and (with_token[:, :, 0][:, :3] == 3).all()


@pytest.mark.parametrize("value_dtype", [torch.int16, torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("module_dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_gaussian_basis_embedding_dtype_follows_its_parameters(module_dtype, value_dtype):
    torch.manual_seed(0)
    emb = GaussianBasisEmbedding(num_heads=3, num_kernels=5)
    value = (torch.rand(2, 4, 4) * 4).to(value_dtype)
    reference = emb.double()(value.double())  # the equation, in float64
    emb = emb.to(module_dtype)
    out = emb(value)
    assert out.shape == (2, 3, 4, 4) and out.dtype == module_dtype
    tol = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 2e-2}[module_dtype]
    torch.testing.assert_close(out.double(), reference, atol=tol, rtol=tol)
    if module_dtype == torch.float32:  # autocast runs the two linear layers in its dtype
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert emb(value).dtype == torch.bfloat16
