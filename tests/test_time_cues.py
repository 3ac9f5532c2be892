"""fit's time cues (:mod:`graph_urpe.cli.time_cues`): the estimate printed once early in the
first epoch agrees with the run's measured length, and the progress bar spans the whole run."""

from __future__ import annotations

import logging
import time

import pytest
import torch
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import Callback, TQDMProgressBar
from torch.utils.data import DataLoader, TensorDataset

from graph_urpe.cli.time_cues import (
    VALIDATION_BATCH_COST,
    FitTimeEstimate,
    RunProgressBar,
    format_duration,
    time_cues,
)

RANK_ZERO = "lightning.pytorch.utilities.rank_zero"  # rank_zero_info's logger (predict quiets it)
TRAIN_SLEEP = 0.02  # seconds a training batch takes (a sleep: steady on a busy machine)


class _Sleepy(LightningModule):
    """Training batches of :data:`TRAIN_SLEEP` s, validation batches of a third of that (the
    share :data:`VALIDATION_BATCH_COST` assumes)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        time.sleep(TRAIN_SLEEP)
        return self.lin(batch[0]).sum()

    def validation_step(self, batch, batch_idx):
        time.sleep(TRAIN_SLEEP * VALIDATION_BATCH_COST)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class _Stopwatch(Callback):
    """The wall-clock time from the start of training to its end (what the estimate covers;
    the Trainer's own setup before it is not)."""

    def on_train_start(self, trainer, pl_module):
        self.start = time.perf_counter()

    def on_train_end(self, trainer, pl_module):
        self.seconds = time.perf_counter() - self.start


def _fit(callbacks, max_epochs=3, progress=False, **trainer_kwargs):
    data = TensorDataset(torch.randn(40, 2))  # 10 training batches of 4, 5 validation of 8
    watch = _Stopwatch()
    trainer = Trainer(max_epochs=max_epochs, callbacks=[*callbacks, watch],
                      enable_progress_bar=progress, logger=False, enable_checkpointing=False,
                      num_sanity_val_steps=0, enable_model_summary=False, accelerator="cpu",
                      **trainer_kwargs)
    trainer.fit(_Sleepy(), DataLoader(data, batch_size=4), DataLoader(data, batch_size=8))
    return trainer, watch.seconds


def test_the_estimate_agrees_with_the_run_and_is_printed_once(caplog):
    estimate = FitTimeEstimate(warmup_batches=5)
    with caplog.at_level(logging.INFO, logger=RANK_ZERO):
        _, measured = _fit([estimate], max_epochs=3)
    # Measured over batches 2-6 (5 after the first), then 30 training and 3 x 5 validation
    # batches: the training's wall-clock time within a factor of 1.5.
    assert estimate.seconds_per_batch == pytest.approx(TRAIN_SLEEP, rel=0.5)
    assert measured / 1.5 < estimate.estimate < measured * 1.5
    printed = [r.getMessage() for r in caplog.records if "Time estimate" in r.getMessage()]
    assert printed == [estimate.message]
    assert estimate.message.startswith("Time estimate: about ")
    assert "40 training graphs, 10 batches an epoch x 3 epochs" in estimate.message
    assert "measured over 5 batches, plus validation" in estimate.message
    assert "a tenth" not in estimate.message  # 3 epochs: nothing shorter to suggest


def test_a_long_run_suggests_a_tenth_of_its_epochs_and_a_short_one_stays_silent(caplog):
    long = FitTimeEstimate(warmup_batches=3)
    with caplog.at_level(logging.INFO, logger=RANK_ZERO):
        _fit([long], max_epochs=20, limit_train_batches=4, limit_val_batches=1)
    assert "4 batches an epoch x 20 epochs" in long.message
    assert "About a tenth with --trainer.max_epochs 2" in long.message
    capped = FitTimeEstimate(warmup_batches=3)
    _fit([capped], max_epochs=20, max_steps=12)  # max_steps ends it first: 12 batches
    assert "40 training graphs, 12 batches to max_steps 12 at" in capped.message
    assert "a tenth" not in capped.message
    # the estimate counts 12 batches and two validations of 5: 12 s + 10 s / 3
    expected = capped.seconds_per_batch * (12 + 2 * 5 * VALIDATION_BATCH_COST)
    assert capped.estimate == pytest.approx(expected, rel=0.3)
    silent = FitTimeEstimate(warmup_batches=3, min_seconds=3600)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=RANK_ZERO):
        _fit([silent], max_epochs=1)
    assert silent.estimate is not None and silent.message is None
    assert not [r for r in caplog.records if "Time estimate" in r.getMessage()]


def test_the_progress_bar_spans_the_whole_run():
    bar = RunProgressBar()
    _fit([bar], max_epochs=3, progress=True)
    assert bar.train_progress_bar.total == 30 and bar.train_progress_bar.n == 30
    assert bar.train_progress_bar.desc.startswith("Epoch 3/3")
    stopped = RunProgressBar()
    _fit([stopped], max_epochs=3, progress=True, max_steps=15)  # max_steps: 15 batches
    assert stopped.train_progress_bar.total == 15 and stopped.train_progress_bar.n == 15


def test_fit_adds_the_cues_unless_the_bar_is_off_or_the_users():
    assert [type(c) for c in time_cues(None, [])] == [FitTimeEstimate, RunProgressBar]
    assert [type(c) for c in time_cues(False, [])] == [FitTimeEstimate]
    assert [type(c) for c in time_cues(True, [TQDMProgressBar()])] == [FitTimeEstimate]


def test_durations_read_as_a_person_would():
    assert format_duration(0.2) == "1 second" and format_duration(45) == "45 seconds"
    assert format_duration(18.5 * 60) == "18 minutes"  # round half to even: 18.5 -> 18
    assert format_duration(3 * 3600) == "3.0 hours"
