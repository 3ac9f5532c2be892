"""Tests for the synthetic tasks (graph_urpe.data.synthetic_sequences) and their Lightning modules."""

import functools

import lightning as L
import pytest
import torch

from graph_urpe.data.modules.sequence import SyntheticDataModule
from graph_urpe.data.synthetic_sequences import (
    SyntheticSequenceDataset,
    even_token_prediction_targets,
    filler_token,
    num_classes,
    position_identification_targets,
)
from graph_urpe.models.optim import PolynomialDecayLR
from graph_urpe.models.sequence import SyntheticTaskModule
from graph_urpe.nn import SequenceTransformer


def test_even_token_prediction_hand_made():
    # even length 6, vocab 10: outputs are inputs at 1, 3, 5, then filler 10
    x = torch.tensor([[5, 7, 1, 9, 3, 4]])
    assert even_token_prediction_targets(x, 10).tolist() == [[7, 9, 4, 10, 10, 10]]
    # odd length 5: 5 // 2 = 2 copied tokens (positions 1 and 3)
    x = torch.tensor([[2, 8, 6, 0, 1]])
    assert even_token_prediction_targets(x, 10).tolist() == [[8, 0, 10, 10, 10]]
    assert filler_token(10) == 10 and num_classes("etp", 5, 10) == 11


def test_position_identification_hand_made():
    x = torch.tensor([[4, 4, 4, 4], [0, 3, 1, 2]])
    assert position_identification_targets(x).tolist() == [[0, 1, 2, 3], [0, 1, 2, 3]]
    assert num_classes("pi", 4, 100) == 4
    with pytest.raises(ValueError, match="task must be one of"):
        num_classes("copy", 4, 100)


def test_dataset_is_deterministic_and_streams_are_independent():
    train = SyntheticSequenceDataset("etp", 16, 7, 1000, seed=3)
    again = SyntheticSequenceDataset("etp", 16, 7, 1000, seed=3)
    val = SyntheticSequenceDataset("etp", 16, 7, 1000, seed=3, split="val")
    other_seed = SyntheticSequenceDataset("etp", 16, 7, 1000, seed=4)
    x, y = train[5]
    assert torch.equal(x, again[5][0]) and torch.equal(y, again[5][1])
    assert not torch.equal(x, val[5][0]) and not torch.equal(x, other_seed[5][0])
    assert not torch.equal(x, train[6][0])
    # targets follow the rule on the generated sample (loop reference)
    expected = [int(x[2 * i + 1]) if i < 8 else 7 for i in range(16)]
    assert y.tolist() == expected
    # all tokens in range, roughly uniform over 1000 samples
    xs, _ = train.materialize()
    assert xs.shape == (1000, 16) and xs.min() == 0 and xs.max() == 6
    freq = torch.bincount(xs.flatten(), minlength=7).float() / xs.numel()
    assert (freq - 1 / 7).abs().max() < 0.01
    with pytest.raises(IndexError):
        train[1000]
    with pytest.raises(ValueError, match="split"):
        SyntheticSequenceDataset("pi", 16, 7, 10, split="dev")


def test_datamodule_batches_and_fixed_validation():
    dm = SyntheticDataModule(task="pi", length=8, vocab_size=5, batch_size=4, train_size=12,
                             val_size=6, test_size=6)
    x, y = next(iter(dm.train_dataloader()))
    assert x.shape == y.shape == (4, 8) and x.dtype == torch.long
    assert y.tolist() == [list(range(8))] * 4
    assert len(dm.train_dataloader()) == 3
    v1 = next(iter(dm.val_dataloader()))[0]
    v2 = next(iter(SyntheticDataModule(task="pi", length=8, vocab_size=5, val_size=6)
                   .val_dataloader()))[0]
    assert torch.equal(v1, v2)
    t = next(iter(dm.test_dataloader()))[0]
    assert not torch.equal(v1, t)


def test_datamodule_sizes_are_static():
    # PI: one class per position; ETP: the vocabulary plus the filler. Nothing is generated.
    pi = SyntheticDataModule(task="pi", length=8, vocab_size=5, val_size=6)
    assert (pi.num_tokens, pi.sequence_length, pi.num_classes) == (5, 8, 8)
    etp = SyntheticDataModule(task="etp", length=8, vocab_size=5)
    assert (etp.num_tokens, etp.sequence_length, etp.num_classes) == (5, 8, 6)
    assert pi._eval_sets == {} and etp._eval_sets == {}
    # the sizes are properties, not hyperparameters, so they cannot clash with the model's
    assert set(pi.hparams) == {"task", "length", "vocab_size", "batch_size", "train_size",
                               "val_size", "test_size", "seed", "num_workers"}
    with pytest.raises(ValueError, match="task must be one of"):
        SyntheticDataModule(task="copy")
    with pytest.raises(ValueError, match="val_size"):
        SyntheticDataModule(val_size=0)


def _task(position: str, length: int, vocab_size: int, num_classes: int, lr: float = 1e-2):
    net = SequenceTransformer(vocab_size, max_length=length, attention=position, embed_dim=32,
                              num_layers=2, num_heads=4)
    return SyntheticTaskModule(
        net, num_classes, optimizer=functools.partial(torch.optim.AdamW, lr=lr, weight_decay=0.0),
        lr_scheduler=functools.partial(PolynomialDecayLR, warmup_steps=20, end_lr=0.0),
    )


def _fit_pi(position: str) -> float:
    L.seed_everything(0)
    dm = SyntheticDataModule(task="pi", length=8, vocab_size=10, batch_size=32,
                             train_size=32 * 150, val_size=256, test_size=256)
    model = _task(position, dm.sequence_length, dm.num_tokens, dm.num_classes)
    trainer = L.Trainer(max_steps=150, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, limit_val_batches=0)
    trainer.fit(model, dm)
    return trainer.test(model, dm, verbose=False)[0]["test/accuracy"]



def test_urpe_identifies_positions_that_rpe_cannot(one_thread):
    """Position Identification, length 8: URPE learns it, RPE stays at chance (1/8)."""
    urpe, rpe = _fit_pi("urpe"), _fit_pi("rpe")
    assert urpe >= 0.99
    assert rpe <= 0.2


def test_accuracy_matches_a_loop_over_the_split(one_thread):
    """``test/accuracy`` is correct tokens / all tokens of the split, every sample counted once."""
    L.seed_everything(0)
    # 10 test samples with an evaluation batch of 8: a full and a partial batch
    dm = SyntheticDataModule(task="etp", length=6, vocab_size=4, batch_size=2, train_size=60,
                             val_size=4, test_size=10)
    model = _task("urpe", dm.sequence_length, dm.num_tokens, dm.num_classes)
    trainer = L.Trainer(max_steps=30, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, limit_val_batches=0)
    trainer.fit(model, dm)
    acc = trainer.test(model, dm, verbose=False)[0]["test/accuracy"]
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for k in range(10):
            x, y = dm._eval_set("test")[k]
            pred = model(x[None])[0].argmax(-1)
            for i in range(6):
                correct += int(pred[i] == y[i])
                total += 1
    assert total == 60 and acc == pytest.approx(correct / total, abs=1e-6)


def test_module_checks_its_arguments():
    net = SequenceTransformer(10, max_length=16, embed_dim=8, num_heads=2)
    model = SyntheticTaskModule(net, num_classes=16)
    assert model(torch.zeros(2, 16, dtype=torch.long)).shape == (2, 16, 16)
    with pytest.raises(TypeError, match="embed_dim"):
        SyntheticTaskModule(torch.nn.Linear(4, 4), num_classes=3)
    with pytest.raises(ValueError, match="num_classes"):
        SyntheticTaskModule(net, num_classes=0)
