"""Tests for graph_urpe.nn.transformer against independent computations."""

import math

import pytest
import torch

from graph_urpe.nn.transformer import SequenceTransformer, TransformerLM

ATTENTIONS = ("none", "ape", "rpe", "urpe")


def _naive_layer(layer, x, bias, mult):
    """One post-LN layer with explicit loops over heads, queries and keys (reference).

    ``bias`` and ``mult`` are the full ``[H, N, N]`` matrices ``B`` and ``C``.
    """
    attn = layer.attn
    h, d = attn.num_heads, attn.head_dim
    n, e = x.shape
    w, b = attn.qkv_proj.weight, attn.qkv_proj.bias
    q = x @ w[:e].T + b[:e]
    k = x @ w[e : 2 * e].T + b[e : 2 * e]
    v = x @ w[2 * e :].T + b[2 * e :]
    out = torch.zeros(n, e, dtype=x.dtype)
    for hh in range(h):
        sl = slice(hh * d, (hh + 1) * d)
        for i in range(n):
            scores = torch.stack(
                [q[i, sl] @ k[j, sl] / math.sqrt(d) + bias[hh, i, j] for j in range(n)]
            )
            probs = torch.exp(scores - scores.max())
            probs = probs / probs.sum()
            for j in range(n):
                out[i, sl] += probs[j] * mult[hh, i, j] * v[j, sl]
    y = out @ attn.out_proj.weight.T + attn.out_proj.bias
    x = layer.attn_norm(x + y)
    ffn = layer.ffn[3](torch.nn.functional.gelu(layer.ffn[0](x)))
    return layer.ffn_norm(x + ffn)


def test_urpe_encoder_matches_naive_loops():
    torch.manual_seed(0)
    n, m = 6, 3  # max_distance 3 < n - 1: distances beyond 3 are clipped
    model = SequenceTransformer(11, embed_dim=8, num_layers=2, num_heads=2, attention="urpe",
                                max_length=n, max_distance=m).double()
    with torch.no_grad():  # make C non-trivial (it starts at ones)
        model.rel_multiplier[0].weight.uniform_(-1.5, 1.5)
    tokens = torch.randint(0, 11, (1, n))
    bw = model.rel_bias[0].weight
    cw = model.rel_multiplier[0].weight
    bias = torch.empty(2, n, n, dtype=torch.float64)
    mult = torch.empty_like(bias)
    for hh in range(2):
        for i in range(n):
            for j in range(n):
                rid = min(max(j - i, -m), m) + m
                bias[hh, i, j] = bw[rid, hh]
                mult[hh, i, j] = cw[rid, hh]
    with torch.no_grad():
        x = model.embed_norm(model.embed_tokens(tokens[0]))
        for layer in model.layers:  # shared tables: the same B and C in every layer
            x = _naive_layer(layer, x, bias, mult)
        got = model(tokens)[0]
    torch.testing.assert_close(got, x)


def test_shared_and_per_layer_relation_tables():
    shared = SequenceTransformer(5, embed_dim=8, num_layers=3, num_heads=2, max_length=10)
    per_layer = SequenceTransformer(5, embed_dim=8, num_layers=3, num_heads=2, max_length=10,
                                    share_relations=False)
    assert len(shared.rel_bias) == 1 and len(shared.rel_multiplier) == 1
    assert len(per_layer.rel_bias) == 3 and len(per_layer.rel_multiplier) == 3
    # one id per distance -9..9, 2 heads; the B/C tables add 2 * 19 * 2 parameters per table set
    assert shared.rel_bias[0].weight.shape == (19, 2)
    n_shared = sum(p.numel() for p in shared.parameters())
    n_per = sum(p.numel() for p in per_layer.parameters())
    assert n_per - n_shared == 2 * 2 * 19 * 2
    b_shared, c_shared = shared.relation_tensors(7)
    assert all(b is b_shared[0] for b in b_shared) and all(c is c_shared[0] for c in c_shared)
    b_per, _ = per_layer.relation_tensors(7)
    assert not torch.equal(b_per[0], b_per[1])
    # C starts at ones, B at N(0, 0.02)
    assert torch.equal(c_shared[0], torch.ones(1, 2, 7, 7))


def test_t5_buckets_and_variant_tables():
    model = SequenceTransformer(5, embed_dim=8, num_heads=2, attention="rpe", num_buckets=8,
                                max_length=64)
    assert model.rel_bias[0].weight.shape == (8, 2) and model.rel_multiplier is None
    assert SequenceTransformer(5, embed_dim=8, num_heads=2, attention="none").rel_bias is None
    ape = SequenceTransformer(5, embed_dim=8, num_heads=2, attention="ape", max_length=4)
    assert ape.rel_bias is None and ape.embed_positions.weight.shape == (4, 8)
    with pytest.raises(ValueError, match="max_length"):
        ape(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="attention must be one of"):
        SequenceTransformer(5, attention="alibi")
    with pytest.raises(ValueError, match="integer tensor"):
        model(torch.zeros(1, 3))


def test_urpe_with_unit_multiplier_equals_rpe():
    torch.manual_seed(1)
    urpe = SequenceTransformer(9, embed_dim=8, num_layers=2, num_heads=2, attention="urpe",
                               max_length=6)
    rpe = SequenceTransformer(9, embed_dim=8, num_layers=2, num_heads=2, attention="rpe",
                              max_length=6)
    missing = rpe.load_state_dict(urpe.state_dict(), strict=False)
    assert missing.unexpected_keys == ["rel_multiplier.0.weight"]
    tokens = torch.randint(0, 9, (3, 6))
    torch.testing.assert_close(urpe(tokens), rpe(tokens))


@pytest.mark.parametrize("position", ["rpe", "none"])
def test_identical_tokens_give_identical_outputs_without_urpe(position):
    """The paper's negative result: right-stochastic attention cannot break the symmetry."""
    torch.manual_seed(2)
    model = SequenceTransformer(3, embed_dim=8, num_layers=3, num_heads=2, attention=position,
                                max_length=10).eval()
    out = model(torch.full((1, 10), 2))
    torch.testing.assert_close(out, out[:, :1].expand_as(out))


def test_identical_tokens_give_distinct_outputs_with_urpe():
    torch.manual_seed(3)
    model = SequenceTransformer(3, embed_dim=8, num_layers=1, num_heads=2, attention="urpe",
                                max_length=10).eval()
    with torch.no_grad():  # C = 1 for keys at or before the query, 0 after: a prefix counter
        ids = torch.arange(-9, 10)
        model.rel_multiplier[0].weight.copy_((ids <= 0).double()[:, None].expand(-1, 2))
    out = model(torch.full((1, 10), 2))[0]
    dists = torch.cdist(out, out) + torch.eye(10)
    assert dists.min() > 1e-3


@pytest.mark.parametrize("position", ATTENTIONS)
def test_causal_lm_ignores_future_tokens(position):
    torch.manual_seed(4)
    lm = TransformerLM(20, embed_dim=16, num_layers=2, num_heads=2, attention=position,
                       max_length=12, norm_first=True).eval()
    tokens = torch.randint(0, 20, (2, 12))
    changed = tokens.clone()
    changed[:, 7] = (changed[:, 7] + 5) % 20
    a, b = lm(tokens), lm(changed)
    torch.testing.assert_close(a[:, :7], b[:, :7], rtol=0, atol=0)
    assert (a[:, 7] - b[:, 7]).abs().max() > 1e-4


def test_causal_relation_ids_are_one_sided():
    lm = TransformerLM(20, embed_dim=16, num_heads=2, attention="urpe", max_length=12)
    # distances i - j in 0..11: 12 ids per head
    assert lm.encoder.rel_bias[0].weight.shape == (12, 2)
    with pytest.raises(ValueError, match="always causal"):
        TransformerLM(20, causal=False)


def test_untrained_lm_perplexity_is_about_vocab_size():
    torch.manual_seed(5)
    vocab = 500
    lm = TransformerLM(vocab, embed_dim=32, num_layers=2, num_heads=4, attention="urpe",
                       max_length=32).eval()
    tokens = torch.randint(0, vocab, (8, 32))
    with torch.no_grad():
        logits = lm(tokens[:, :-1])
    nll = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
    ppl = math.exp(nll.item())
    assert 0.8 * vocab < ppl < 1.25 * vocab


def test_key_padding_mask_hides_padded_tokens():
    torch.manual_seed(6)
    model = SequenceTransformer(9, embed_dim=8, num_heads=2, attention="urpe", max_length=8).eval()
    tokens = torch.randint(0, 9, (1, 8))
    mask = torch.zeros(1, 8, dtype=torch.bool)
    mask[:, 5:] = True
    other = tokens.clone()
    other[:, 5:] = (other[:, 5:] + 1) % 9
    a, b = model(tokens, key_padding_mask=mask), model(other, key_padding_mask=mask)
    torch.testing.assert_close(a[:, :5], b[:, :5])


def test_pre_ln_has_final_norm_and_reset_parameters():
    model = SequenceTransformer(9, embed_dim=8, num_heads=2, norm_first=True, max_length=8)
    assert model.embed_norm is None and model.final_norm is not None
    with torch.no_grad():
        model.rel_multiplier[0].weight.zero_()
    model.reset_parameters()
    assert torch.equal(model.rel_multiplier[0].weight, torch.ones_like(model.rel_multiplier[0].weight))
    assert "attention='urpe'" in repr(model)


@pytest.mark.parametrize("cutoffs", [None, [5, 15]])
def test_lm_nll_matches_log_softmax_of_scores(cutoffs):
    torch.manual_seed(7)
    lm = TransformerLM(30, tie_weights=cutoffs is None, adaptive_cutoffs=cutoffs, embed_dim=16,
                       num_heads=2, max_length=9).eval()
    tokens = torch.randint(0, 30, (2, 9))
    targets = torch.randint(0, 30, (2, 9))
    targets[1, 6:] = -100
    with torch.no_grad():
        logp = torch.log_softmax(lm(tokens), dim=-1)
        nll = lm.nll(tokens, targets)
    for b in range(2):
        for i in range(9):
            t = int(targets[b, i])
            expected = 0.0 if t == -100 else -float(logp[b, i, t])
            assert abs(float(nll[b, i]) - expected) < 1e-4
    # the adaptive softmax is a proper distribution over all V words
    torch.testing.assert_close(logp.exp().sum(-1), torch.ones(2, 9))
    with pytest.raises(ValueError, match="tie_weights"):
        TransformerLM(30, adaptive_cutoffs=[5])
