"""The Lightning callback of one ``graph-urpe hpopt`` trial: reports the monitored validation
metric to the Optuna study after every validation and stops a trial the study's pruner judges
hopeless.

Each trial of ``graph-urpe hpopt`` is an ordinary ``graph-urpe fit`` in its own process, with this
callback added (``--trainer.callbacks+=graph_urpe.models.pruning.TrialPruning``). The study lives
in a journal file (:class:`optuna.storages.JournalStorage`: plain JSON lines, no code) that both
processes open, so the callback reports to the very trial the search asked for. Unlike Optuna's
own Lightning callback (``optuna_integration.PyTorchLightningPruningCallback``, which raises
:class:`optuna.TrialPruned` out of ``fit`` and so needs the trial object in the same process), a
pruned trial here stops like an early-stopped run (its run folder, checkpoints and
``metrics.csv`` complete) and is marked pruned in the study for the search to record.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch import Callback, LightningModule, Trainer

__all__ = ["PRUNED_AT", "TrialPruning", "build_pruner", "open_study"]

PRUNED_AT = "pruned_at_epoch"
"""The trial's user attribute set when the pruner stopped it (the epoch)."""


def build_pruner(settings: dict[str, Any]):
    """The Optuna pruner a study's ``pruner`` user attribute describes.

    Args:
        settings (dict): ``{"name": "median", "n_startup_trials": S, "n_warmup_steps": W}``
            (:class:`optuna.pruners.MedianPruner`: prune a trial whose value at an epoch is worse
            than the median of the completed trials' values at that epoch, after ``S`` completed
            trials and ``W`` epochs) or ``{"name": "none"}``.

    Returns:
        optuna.pruners.BasePruner.

    Raises:
        ValueError: for another pruner name.
    """
    import optuna

    if settings.get("name") == "none":
        return optuna.pruners.NopPruner()
    if settings.get("name") == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=settings["n_startup_trials"],
                                           n_warmup_steps=settings["n_warmup_steps"])
    raise ValueError(f"unknown pruner {settings.get('name')!r}: use 'median' or 'none'.")


def open_study(path: str):
    """The Optuna study kept in the journal file ``path``, with the pruner it was created with.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
    """
    import os.path as osp

    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    if not osp.isfile(path):
        raise FileNotFoundError(f"study file {path!r} not found: the trial of a graph-urpe hpopt "
                                "search needs the study it belongs to.")
    storage = JournalStorage(JournalFileBackend(path))
    name = optuna.get_all_study_names(storage)[0]
    probe = optuna.load_study(study_name=name, storage=storage)
    return optuna.load_study(study_name=name, storage=storage,
                             pruner=build_pruner(probe.user_attrs.get("pruner", {"name": "none"})))


class TrialPruning(Callback):
    """Report ``val/<metric>`` of every validation (``step`` = the epoch) to trial ``trial`` of
    the study in ``study``; when the study's pruner says so, stop training (the run ends as an
    early-stopped one) and mark the trial pruned (user attribute :data:`PRUNED_AT`).

    Args:
        study (str): the study's journal file (written by ``graph-urpe hpopt``).
        trial (int): the trial's number in the study.

    Raises:
        ValueError: (at ``fit`` start) when the module's metric improves the other way than the
            study optimises (the search and its trials disagree on the data or the metric).
    """

    def __init__(self, study: str, trial: int) -> None:
        super().__init__()
        self.study = study
        self.trial = trial
        self._trial = None
        self._monitor = None
        self.stop_reason: str | None = None
        """Why this callback stopped training (the fit summary says it), else :obj:`None`."""

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        import optuna

        if not trainer.is_global_zero:
            return
        study = open_study(self.study)
        mode = getattr(pl_module, "metric_mode", "min")
        wanted = optuna.study.StudyDirection.MAXIMIZE if mode == "max" \
            else optuna.study.StudyDirection.MINIMIZE
        if study.direction != wanted:
            raise ValueError(
                f"the study in {self.study} {study.direction.name.lower()}s its objective but "
                f"this fit's metric val/{pl_module.metric_name} improves towards {mode}: run the "
                "trials with the data and metric the search was started with."
            )
        trial_id = next(t._trial_id for t in study.get_trials(deepcopy=False)
                        if t.number == self.trial)
        self._trial = optuna.trial.Trial(study, trial_id)
        self._monitor = f"val/{pl_module.metric_name}"

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self._trial is None or trainer.sanity_checking:
            return
        value = trainer.callback_metrics.get(self._monitor)
        if value is None:
            return
        epoch = trainer.current_epoch
        self._trial.report(float(value), step=epoch)
        if self._trial.should_prune():
            self._trial.set_user_attr(PRUNED_AT, epoch)
            trainer.should_stop = True
            self.stop_reason = (f"pruned by graph-urpe hpopt (trial {self.trial}: {self._monitor} "
                                "worse than the median of the finished trials at this epoch)")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(study={self.study!r}, trial={self.trial})"
