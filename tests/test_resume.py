"""Resuming ``fit`` is exact in every interruption pattern: ``kill -9`` right after an epoch's
checkpoint and Ctrl-C in the middle of an epoch, with and without ``max_steps`` and
``limit_train_batches``: the same optimizer steps, bit-identical weights and the same logged
losses (``metrics.csv``) as the uninterrupted run (dropout on, so the RNG states matter too)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings

import pandas as pd
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from test_cli import write_config

from graph_urpe.cli import main

COMMON = ["--model.init_args.model.init_args.dropout", "0.3",
          "--model.init_args.model.init_args.attention_dropout", "0.3",
          "--trainer.log_every_n_steps", "1", "--test_after_fit", "false",
          "--trainer.max_epochs", "3"]
STEPS = ["--trainer.max_steps", "1600"]  # as the CSV template: far beyond the 3 epochs
LIMIT = ["--trainer.limit_train_batches", "2"]


class KillAtEpochStart(Callback):
    """``kill -9`` of this process when epoch ``epoch`` starts: right after the previous epoch's
    last.ckpt / best.ckpt were written."""

    def __init__(self, epoch: int = 1) -> None:
        self.epoch = epoch

    def on_train_epoch_start(self, trainer, pl_module):
        if trainer.current_epoch == self.epoch:
            os.kill(os.getpid(), signal.SIGKILL)


class InterruptAt(Callback):
    """Ctrl-C (KeyboardInterrupt) at optimizer step ``step``: in ``on_train_batch_start`` (the
    batch is fetched, not trained: it must be trained again) or ``on_train_batch_end`` (it is
    trained and must not be trained again)."""

    def __init__(self, step: int = 5, hook: str = "start") -> None:
        self.step, self.hook = step, hook

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.hook == "start" and trainer.global_step == self.step:
            raise KeyboardInterrupt

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.hook == "end" and trainer.global_step == self.step:
            raise KeyboardInterrupt


def callback(cls: type, **init_args) -> str:
    return "--trainer.callbacks+=" + json.dumps(
        {"class_path": f"test_resume.{cls.__name__}", "init_args": init_args})


# Every run of this module on one thread (conftest's one_thread; the killed subprocess through its
# environment): the same thread count sums in the same order, so the weights can be bit-identical.
pytestmark = pytest.mark.usefixtures("one_thread")

_WHOLE: dict[tuple[str, ...], tuple[str, object]] = {}


@pytest.fixture(scope="module")
def whole_runs(tmp_path_factory):
    """``whole(extra)``: the uninterrupted 3-epoch run with the options ``extra`` (one per set of
    options in this module): ``(config, runs folder)``; fit once, shared by the tests."""

    def whole(extra: list[str]):
        key = tuple(extra)
        if key not in _WHOLE:
            tmp = tmp_path_factory.mktemp("whole")
            config, runs = write_config(tmp)
            main(["fit", "--config", config, "--name", "whole", *COMMON, *extra])
            _WHOLE[key] = (config, runs.parent / "whole" / "version_0")
        return _WHOLE[key]

    return whole


def assert_same_run(whole, split) -> None:
    """Same steps, epochs, bit-identical weights and the same metrics.csv rows."""
    ckpts = [torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
             for run in (whole, split)]
    assert ckpts[1]["global_step"] == ckpts[0]["global_step"]
    assert ckpts[1]["loops"]["fit_loop"]["epoch_progress"] == \
        ckpts[0]["loops"]["fit_loop"]["epoch_progress"]
    assert ckpts[1]["state_dict"].keys() == ckpts[0]["state_dict"].keys()
    for key, value in ckpts[0]["state_dict"].items():
        assert torch.equal(ckpts[1]["state_dict"][key], value), key
    frames = []
    for run in (whole, split):
        frame = pd.read_csv(run / "metrics.csv")
        frames.append(frame.sort_values(["step", *frame.columns.difference(["step"])])
                      .reset_index(drop=True)[sorted(frame.columns)])
    assert "train/loss" in frames[0] and frames[0]["train/loss"].notna().sum() > 4
    pd.testing.assert_frame_equal(frames[1], frames[0], check_exact=True)


def _steps_per_epoch(run) -> int:
    return torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] // 3


@pytest.mark.parametrize("extra", [STEPS, STEPS + LIMIT],
                         ids=["max_steps", "max_steps+limit_train_batches"])
def test_kill_9_after_an_epoch_checkpoint_resumes_exactly(tmp_path, whole_runs, extra):
    """(Without max_steps the same kill is covered by test_cli's Ctrl-C at an epoch's end.)"""
    config, whole = whole_runs(extra)
    runs = tmp_path / "runs"
    args = ["--config", config, "--name", "split", "--trainer.default_root_dir", str(runs),
            *COMMON, *extra]
    # One thread, as the in-process runs (pytestmark above).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), *sys.path]),
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    killed = subprocess.run(
        [sys.executable, "-m", "graph_urpe.cli", "fit", *args, callback(KillAtEpochStart, epoch=1)],
        env=env, capture_output=True, text=True, timeout=300, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    split = runs / "split" / "version_0"
    epoch0 = torch.load(split / "checkpoints" / "last.ckpt", weights_only=True)
    assert epoch0["global_step"] == _steps_per_epoch(whole)  # killed right after epoch 0
    main(["fit", *args, "--ckpt_path", "last"])
    assert_same_run(whole, split)


@pytest.mark.parametrize(("hook", "extra"), [("start", []), ("start", STEPS + LIMIT)],
                         ids=["epochs", "max_steps+limit_train_batches"])
def test_ctrl_c_mid_epoch_resumes_exactly(tmp_path, whole_runs, hook, extra):
    config, whole = whole_runs(extra)
    runs = tmp_path / "runs"
    args = ["--config", config, "--name", "split", "--trainer.default_root_dir", str(runs),
            *COMMON, *extra]
    step = _steps_per_epoch(whole) + 1  # the second batch of epoch 1
    with pytest.raises(SystemExit):  # Lightning's graceful shutdown on Ctrl-C exits with 1
        main(["fit", *args, callback(InterruptAt, step=step, hook=hook)])
    split = runs / "split" / "version_0"
    saved = torch.load(split / "checkpoints" / "last.ckpt", weights_only=True)
    assert saved["global_step"] == step + (hook == "end")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        main(["fit", *args, "--ckpt_path", "last"])
    assert not [w for w in record if "not resumable" in str(w.message)]
    assert_same_run(whole, split)
