"""How long a ``fit`` will take, said early and shown throughout: two Lightning callbacks (and
``predict``'s estimate after its first chunk, :func:`rows_estimate`).

* :class:`FitTimeEstimate`: times the first training batches of the run (the first batch, which
  pays for start-up, is left out) and prints once, during the first epoch, an estimate of the
  whole run from the measured seconds per batch, the batches per epoch, the epochs left and a
  share for validation, e.g. ``about 18 minutes on this machine (7,800 training molecules x 50
  epochs ...); about a tenth with --trainer.max_epochs 5``;
* :class:`RunProgressBar`: Lightning's :class:`~lightning.pytorch.callbacks.TQDMProgressBar`
  whose training bar spans the whole run (every epoch's batches, ``Epoch 3/50``), so its ETA is
  the run's, not the epoch's; the rate is averaged over the run (``smoothing=0``), so the pauses
  for validation are part of it.

``graph-urpe fit`` adds both (:class:`~graph_urpe.cli.lightning_cli.GraphURPECLI`; the bar only
where ``trainer.enable_progress_bar`` is on and no other progress bar is given).
"""

from __future__ import annotations

import math
import time
from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import Callback, ProgressBar, TQDMProgressBar
from lightning.pytorch.callbacks.progress.tqdm_progress import convert_inf
from lightning.pytorch.utilities import rank_zero_info

__all__ = ["MIN_ESTIMATE_SECONDS", "VALIDATION_BATCH_COST", "FitTimeEstimate", "RunProgressBar",
           "format_duration", "planned_training_batches", "rows_estimate", "time_cues"]

VALIDATION_BATCH_COST = 1 / 3
"""A validation batch's time as a share of a training batch's: a forward pass without the
backward pass and the optimizer step (about a third; an assumption, not a measurement)."""


MIN_ESTIMATE_SECONDS = 30.0
"""``fit`` prints no time estimate for a run estimated shorter than this (seconds)."""


def format_duration(seconds: float) -> str:
    """``seconds`` in the unit a person reads: seconds below 90, minutes below 90 minutes,
    hours (one decimal) above.

    Args:
        seconds (float): a duration, ``>= 0``.
    """
    if seconds < 90:
        whole = max(1, round(seconds))
        return f"{whole} second{'s' * (whole != 1)}"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} minutes"
    return f"{seconds / 3600:.1f} hours"


def rows_estimate(seconds: float, rows: int, left: int) -> str:
    """The line ``predict`` prints after its first predicted chunk when more rows follow: the
    time left at that chunk's rate (featurization and prediction), as an estimate.

    Args:
        seconds (float): the chunk's wall-clock time.
        rows (int): its rows.
        left (int): the rows after it.
    """
    rate = rows / seconds if seconds > 0 else float("inf")
    return (f"Time estimate: about {format_duration(left / rate)} more for the other {left:,} "
            f"rows, at the first chunk's {rate:,.0f} rows a second on this machine.")


def _epochs_left(trainer: Trainer) -> int | None:
    epochs = trainer.max_epochs
    if epochs is None or epochs < 0 or math.isinf(epochs):
        return None
    return max(0, epochs - trainer.current_epoch)


def planned_training_batches(trainer: Trainer) -> int | None:
    """The training batches left in the run as planned: batches per epoch times the epochs left
    (``trainer.max_epochs``), or fewer where ``trainer.max_steps`` ends it first; :obj:`None`
    when neither bounds it (an endless epoch, ``max_epochs=-1`` without ``max_steps``).

    Args:
        trainer (Trainer): at or after ``on_train_start``.
    """
    per_epoch = convert_inf(trainer.num_training_batches)
    epochs = _epochs_left(trainer)
    total = per_epoch * epochs if per_epoch is not None and epochs is not None else None
    if trainer.max_steps is not None and trainer.max_steps > 0:
        by_steps = (trainer.max_steps - trainer.global_step) * trainer.accumulate_grad_batches
        total = by_steps if total is None else min(total, by_steps)
    return total


class FitTimeEstimate(Callback):
    """Prints once, early in the first epoch of a ``fit``, how long the whole run will take.

    The estimate is ``s * (B_train + c * B_val)``: ``s`` the measured wall-clock seconds per
    training batch (between the end of the run's first batch and the end of batch
    ``warmup_batches``, data loading included), ``B_train`` the training batches left as planned
    (:func:`planned_training_batches`), ``B_val`` the validation batches of the validations left
    (batches per validation times one validation every ``check_val_every_n_epoch`` epochs) and
    ``c`` :data:`VALIDATION_BATCH_COST`. It is an estimate ("about"): batch sizes vary, an early
    stop or ``max_time`` ends a run sooner. Printed through the progress bar when one is shown,
    else logged (rank zero only); nothing for runs whose estimate is under ``min_seconds``.

    Args:
        warmup_batches (int, optional): training batches timed after the first one; fewer when
            the epoch has fewer. (default: :obj:`10`)
        min_seconds (float, optional): estimates below this are not printed. (default: :obj:`0`)

    Attributes:
        estimate (float or None): the estimated seconds of the run, once measured.
        seconds_per_batch (float or None): ``s``.
        message (str or None): the line printed.
    """

    def __init__(self, warmup_batches: int = 10, min_seconds: float = 0.0) -> None:
        self.warmup_batches = int(warmup_batches)
        self.min_seconds = float(min_seconds)
        self.estimate: float | None = None
        self.seconds_per_batch: float | None = None
        self.message: str | None = None
        self._seen = 0
        self._start: float | None = None
        self._first_end: float | None = None

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._seen, self._first_end, self.estimate = 0, None, None
        self._planned = planned_training_batches(trainer)  # at the start (a resumed run's rest)
        self._epochs = _epochs_left(trainer)

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if self._seen == 0:
            self._start = time.perf_counter()

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        if self.estimate is not None:
            return
        now = time.perf_counter()
        self._seen += 1
        per_epoch = convert_inf(trainer.num_training_batches)
        if self._seen == 1:
            self._first_end = now
            if per_epoch != 1:
                return
            timed, elapsed = 1, now - self._start  # one batch an epoch: it is all there is
        else:
            timed, elapsed = self._seen - 1, now - self._first_end
            last_of_epoch = per_epoch is not None and batch_idx + 1 >= per_epoch
            if timed < self.warmup_batches and not last_of_epoch:
                return
        self.seconds_per_batch = elapsed / timed
        self._report(trainer, timed, elapsed)

    def _report(self, trainer: Trainer, timed: int, elapsed: float) -> None:
        planned, epochs = self._planned, self._epochs
        if planned is None:
            self.estimate = float("nan")
            return
        left = max(0, planned - self._seen)  # the batches measured are done
        val_batches = sum(convert_inf(b) or 0 for b in trainer.num_val_batches) \
            if trainer.enable_validation else 0
        every = trainer.check_val_every_n_epoch or 1
        per_epoch = convert_inf(trainer.num_training_batches)
        run_epochs = math.ceil(planned / per_epoch) if per_epoch else 1  # max_steps: fewer
        if epochs is not None:
            run_epochs = min(run_epochs, epochs)
        validations = math.ceil(run_epochs / every) if val_batches else 0
        s = self.seconds_per_batch
        self.estimate = elapsed + s * (left + VALIDATION_BATCH_COST * val_batches * validations)
        if self.estimate < self.min_seconds or not trainer.is_global_zero:
            return
        dataset = getattr(trainer.train_dataloader, "dataset", None)
        size = f"{len(dataset):,} training graphs, " if hasattr(dataset, "__len__") else ""
        by_epochs = per_epoch is not None and epochs is not None \
            and planned == per_epoch * epochs
        shape = (f"{size}{per_epoch:,} batches an epoch x {epochs} epochs" if by_epochs
                 else f"{size}{planned:,} batches to max_steps {trainer.max_steps}")
        val = " plus validation" if validations else ""
        line = (f"Time estimate: about {format_duration(self.estimate)} on this machine for the "
                f"whole run ({shape} at {s:.3g} s a batch, measured over {timed} batches,{val}; "
                "an early stop or max_time ends it sooner)")
        if by_epochs and epochs >= 10 and trainer.current_epoch == 0:
            shorter = max(1, epochs // 10)
            line += (f". About a tenth with --trainer.max_epochs {shorter} (the learning-rate "
                     "schedule follows max_epochs)")
        self.message = line + "."
        bar = trainer.progress_bar_callback
        if isinstance(bar, TQDMProgressBar) and bar.is_enabled:
            bar.print(self.message)
        else:
            rank_zero_info(self.message)


class RunProgressBar(TQDMProgressBar):
    """:class:`~lightning.pytorch.callbacks.TQDMProgressBar` whose training bar counts the whole
    run's training batches (:func:`planned_training_batches`): one bar from the first epoch to
    the last, described ``Epoch k/N``, whose ETA is the run's (its rate, ``smoothing=0``, is the
    run's average, validation pauses included). Validation, test and predict bars are
    Lightning's. An endless run (no ``max_epochs`` nor ``max_steps``) gets Lightning's
    per-epoch bar.

    Args:
        refresh_rate (int, optional): as :class:`~lightning.pytorch.callbacks.TQDMProgressBar`.
            (default: :obj:`1`)
        process_position (int, optional): as :class:`~lightning.pytorch.callbacks.TQDMProgressBar`.
            (default: :obj:`0`)
    """

    def __init__(self, refresh_rate: int = 1, process_position: int = 0) -> None:
        super().__init__(refresh_rate=refresh_rate, process_position=process_position)
        self._run_total: int | None = None
        self._offset = 0
        self._first_epoch = 0

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        super().on_train_start(trainer, pl_module)
        self._run_total = planned_training_batches(trainer)
        self._first_epoch = trainer.current_epoch
        if self._run_total is not None:
            self.train_progress_bar.reset(total=self._run_total)

    def on_train_epoch_start(self, trainer: Trainer, *_: Any) -> None:
        if self._run_total is None:
            super().on_train_epoch_start(trainer)
            return
        per_epoch = convert_inf(self.total_train_batches) or 0
        self._offset = (trainer.current_epoch - self._first_epoch) * per_epoch
        epoch = trainer.current_epoch + 1
        self.train_progress_bar.set_description(
            f"Epoch {epoch}/{trainer.max_epochs}" if trainer.max_epochs and trainer.max_epochs > 0
            else f"Epoch {epoch}")

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        if self._run_total is None:
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
            return
        n = min(self._offset + batch_idx + 1, self._run_total)
        if self._should_update(n, self._run_total) and not self.train_progress_bar.disable:
            self.train_progress_bar.n = n
            self.train_progress_bar.refresh()
            self.train_progress_bar.set_postfix(self.get_metrics(trainer, pl_module))


def time_cues(enable_progress_bar: bool | None, callbacks: list[Callback]) -> list[Callback]:
    """The callbacks ``fit`` adds for its time cues: a :class:`FitTimeEstimate` (silent below
    :data:`MIN_ESTIMATE_SECONDS`), and a
    :class:`RunProgressBar` unless the progress bar is off (``enable_progress_bar`` false) or
    ``callbacks`` (the user's) already hold a progress bar.

    Args:
        enable_progress_bar (bool, optional): the Trainer's option (:obj:`None`: Lightning's
            default, on).
        callbacks (list[Callback]): the user's callbacks.
    """
    cues: list[Callback] = [FitTimeEstimate(min_seconds=MIN_ESTIMATE_SECONDS)]
    if enable_progress_bar is not False and not any(isinstance(cb, ProgressBar)
                                                    for cb in callbacks):
        cues.append(RunProgressBar())
    return cues
