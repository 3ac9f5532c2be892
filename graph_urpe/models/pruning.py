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

__all__ = ["PRUNED_AT", "TrialPruning", "build_pruner", "open_study", "study_storage"]

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
        ValueError: settings that are not a mapping, another pruner name, or (median) counts
            that are not non-negative integers.
    """
    import optuna

    name = settings.get("name") if isinstance(settings, dict) else None
    if name not in ("median", "none"):
        raise ValueError(f"unknown pruner {str(settings)[:80]}: use name 'median' or 'none'.")
    if name == "none":
        return optuna.pruners.NopPruner()
    counts = [settings.get(key) for key in ("n_startup_trials", "n_warmup_steps")]
    if not all(type(n) is int and n >= 0 for n in counts):
        raise ValueError(f"the median pruner needs n_startup_trials and n_warmup_steps as "
                         f"non-negative integers, got {str(counts)[:80]}.")
    return optuna.pruners.MedianPruner(n_startup_trials=counts[0], n_warmup_steps=counts[1])


_REPLAY_ERRORS = (AssertionError, AttributeError, IndexError, KeyError, OverflowError,
                  TypeError, ValueError)
"""What Optuna's replay of a journal raises on a record it cannot apply."""


def study_storage(path: str):
    """The Optuna journal storage of the study file ``path`` (a new one if it does not exist).

    The file is a study folder's, so it is data: every line must be a complete JSON object with
    an integer ``op_code`` (checked before Optuna reads it), and Optuna's replay of the records
    (which ends in an ``AssertionError``, ``KeyError``, ... on one it cannot apply) is followed
    line by line, so a changed or corrupt file is refused in one line naming the file and line.
    Nothing in it is imported or run: Optuna reads parameter distributions from a fixed table.

    Args:
        path (str): the study's ``study.jsonl``.

    Returns:
        optuna.storages.JournalStorage.

    Raises:
        graph_urpe.trust.ReceivedFileError: a line that is not a complete JSON record of a
            study, or one Optuna's replay cannot apply.
    """
    import json

    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from graph_urpe.trust import ReceivedFileError

    fix = ("it was changed or cut short: remove that line and those after it, or start a new "
           "search with another --name.")
    try:
        with open(path, "rb") as handle:
            for number, line in enumerate(handle, start=1):
                try:
                    record = json.loads(line) if line.endswith(b"\n") else None
                except (UnicodeDecodeError, ValueError):
                    record = None
                if not isinstance(record, dict) or type(record.get("op_code")) is not int:
                    raise ReceivedFileError(path, f"line {number} is not a complete JSON record "
                                            f"of an Optuna study; {fix}")
    except FileNotFoundError:
        pass  # a new study

    class _Numbered(JournalFileBackend):
        """Counts the records it hands to the replay (the file's line numbers)."""

        line = 0

        def read_logs(self, log_number_from: int):
            for self.line, log in enumerate(super().read_logs(log_number_from),
                                            start=log_number_from + 1):
                yield log

    backend = _Numbered(path)
    try:
        return JournalStorage(backend)
    except _REPLAY_ERRORS as err:
        raise ReceivedFileError(path, f"line {backend.line} is not a record Optuna can apply "
                                f"to its study ({type(err).__name__}); {fix}") from None


def open_study(path: str):
    """The Optuna study kept in the journal file ``path`` (read by :func:`study_storage`), with
    the pruner it was created with.

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        graph_urpe.trust.ReceivedFileError: a corrupt or changed file, one that holds no study,
            or whose pruner settings :func:`build_pruner` refuses.
    """
    import os.path as osp

    import optuna

    from graph_urpe.trust import ReceivedFileError

    if not osp.isfile(path):
        raise FileNotFoundError(f"study file {path!r} not found: the trial of a graph-urpe hpopt "
                                "search needs the study it belongs to.")
    storage = study_storage(path)
    names = optuna.get_all_study_names(storage)
    if not names:
        raise ReceivedFileError(path, "it holds no study: run the trial from the graph-urpe "
                                "hpopt search that wrote it.")
    probe = optuna.load_study(study_name=names[0], storage=storage)
    try:
        pruner = build_pruner(probe.user_attrs.get("pruner", {"name": "none"}))
    except ValueError as err:
        raise ReceivedFileError(path, f"its study's pruner setting: {err}") from None
    return optuna.load_study(study_name=names[0], storage=storage, pruner=pruner)


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
