"""What a ``graph-urpe hpopt`` search writes beside its runs and prints at the end: ``trials.csv``
(every trial, written again after each), ``best.yaml`` (the search's own configuration with the
values the study recorded for the best trial, each checked against its search parameter: the
study folder is data) and the closing summary. :mod:`graph_urpe.cli.hpopt` runs the search.
"""

from __future__ import annotations

import math
import os.path as osp
import sys
from collections.abc import Sequence
from typing import Any

from graph_urpe.cli.messages import CLIError
from graph_urpe.cli.search_space import SearchParameter

__all__ = ["PRUNING_CALLBACK", "report_search", "write_best_config", "write_trials"]

PRUNING_CALLBACK = "graph_urpe.models.pruning.TrialPruning"
"""The class path of the callback every trial reports its validation metric with; taken out of
``best.yaml``."""


def _recorded_value_fault(param: SearchParameter, value: Any) -> str | None:
    """Why ``value`` is not a value ``param`` can take (:obj:`None` when it is one): one of its
    choices (same type and value), or a number in its range (an int for an int range, on its
    ``step`` grid)."""
    if param.choices is not None:
        if any(type(value) is type(c) and value == c for c in param.choices):
            return None
        return f"not one of its choices {list(param.choices)}"
    integer = isinstance(param.low, int) and isinstance(param.high, int)
    kinds = (int,) if integer else (int, float)
    if type(value) not in kinds or not math.isfinite(value):
        return f"not {'an int' if integer else 'a number'} in its range [{param.low}, {param.high}]"
    if not param.low <= value <= param.high:
        return f"outside its range [{param.low}, {param.high}]"
    if param.step:
        steps = (value - param.low) / param.step
        if abs(steps - round(steps)) > 1e-6:
            return f"not on its grid {param.low} + k * {param.step}"
    return None


def write_best_config(config: dict[str, Any], path: str, name: str, header: Sequence[str],
                      space: Sequence[SearchParameter], recorded: dict[str, Any],
                      study_file: str, trial: int) -> str:
    """Write this search's configuration with the values the study recorded for a trial as an
    experiment file for ``graph-urpe fit --config``.

    ``config`` is the search's own fit configuration (the user's ``--config`` files and options,
    trusted like a script; :mod:`graph_urpe.cli.hpopt` resolves it as a fit run saves it). The
    recorded values
    come from ``study.jsonl``, which is data: each is checked against its search parameter (the
    user's space, trusted) before use: one of a choice parameter's choices (type and value), a
    number within a range parameter's ``[low, high]`` (an int for an int range, on its
    ``step``'s grid). They are set at their parameter's options; a parameter the trial does not
    record keeps the configuration's value, a recorded one outside ``space`` is not used. Then
    the search's own settings are taken out (its pruning callback, ``version``, ``ckpt_path``,
    ``test_after_fit``) and ``name`` is set. Nothing of the trial's run folder is read (its
    ``config.yaml`` is data too) and nothing the values name is imported.

    Args:
        config (dict[str, Any]): the search's fit configuration (plain data; not modified).
        path (str): the file to write (atomically).
        name (str): the ``name`` a fit of it runs under.
        header (Sequence[str]): comment lines at the top (line breaks in one become spaces:
            they may show values the study recorded).
        space (Sequence[SearchParameter]): the search space.
        recorded (dict[str, Any]): parameter name -> the value ``study_file`` records for the
            trial (e.g. ``{"lr": 0.002}``).
        study_file (str): the study's ``study.jsonl``, for messages.
        trial (int): the trial's number, for messages.

    Returns:
        str: ``path``.

    Raises:
        graph_urpe.trust.UntrustedFileError: a recorded value is not one its search parameter
            can take (nothing written).
        CLIError: a parameter's option is not in ``config``.
    """
    import copy

    import yaml

    from graph_urpe.files import atomic_write
    from graph_urpe.trust import UntrustedFileError

    config = copy.deepcopy(config)
    for param in space:
        if param.name not in recorded:
            continue
        value = recorded[param.name]
        fault = _recorded_value_fault(param, value)
        if fault is not None:
            shown = repr(value)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            raise UntrustedFileError(study_file, f"trial {trial} records {shown} for search "
                                     f"parameter {param.name!r}, {fault}; nothing it names was "
                                     "imported. A study folder is data: a recorded value must be "
                                     "one the search space can draw (a study of another space: "
                                     "start a new search with another --name). best.yaml was "
                                     "not written.")
        for option in param.options:
            *parents, last = option.split(".")
            node = config
            for key in parents:
                node = node.get(key) if isinstance(node, dict) else None
            if not isinstance(node, dict) or last not in node:
                raise CLIError(f"search parameter {param.name!r}: the fit configuration has no "
                               f"option --{option}; best.yaml was not written.")
            node[last] = value
    trainer = config.get("trainer")
    if isinstance(trainer, dict) and isinstance(trainer.get("callbacks"), list):
        callbacks = [cb for cb in trainer["callbacks"]
                     if not (isinstance(cb, dict) and cb.get("class_path") == PRUNING_CALLBACK)]
        trainer["callbacks"] = callbacks or None
    for key in ("version", "ckpt_path", "test_after_fit"):
        config.pop(key, None)
    config["name"] = name
    text = "".join(f"# {' '.join(line.splitlines())}\n" for line in header) \
        + yaml.safe_dump(config, sort_keys=False)
    with atomic_write(path) as handle:
        handle.write(text)
    return path


def write_trials(study: Any, space: Sequence[SearchParameter], folder: str) -> None:
    """Write ``trials.csv`` into ``folder``: one row per trial of ``study`` (number, state,
    objective, validations, the values of ``space``'s parameters, run folder); written again
    after every trial.

    Args:
        study (optuna.Study): the study.
        space (Sequence[SearchParameter]): the search space (one column per parameter).
        folder (str): the search's folder (the runs are its ``version_<trial>``).
    """
    import pandas as pd

    from graph_urpe.files import atomic_write_csv

    rows = []
    for trial in study.get_trials(deepcopy=False):
        rows.append({"trial": trial.number, "state": trial.state.name.lower(),
                     "value": trial.value if trial.value is not None else math.nan,
                     "validations": len(trial.intermediate_values),
                     **{p.name: trial.params.get(p.name) for p in space},
                     "run": osp.join(folder, f"version_{trial.number}")})
    atomic_write_csv(pd.DataFrame(rows), osp.join(folder, "trials.csv"))


def report_search(optuna: Any, study: Any, space: Sequence[SearchParameter], folder: str,
                  name: str, metric: str, saved: dict[str, Any]) -> int:
    """The end of a search: ``best.yaml`` (:func:`write_best_config`: the search's configuration
    ``saved`` with the best trial's values) and the summary of its trials printed.

    Args:
        optuna (module): the imported :mod:`optuna`.
        study (optuna.Study): the finished study.
        space (Sequence[SearchParameter]): the search space.
        folder (str): the search's folder (``best.yaml`` and ``trials.csv`` go there).
        name (str): the run name a fit of ``best.yaml`` runs under.
        metric (str): the monitored metric (``val/<metric>``).
        saved (dict[str, Any]): the search's fit configuration, as a fit run saves it.

    Returns:
        int: ``0``; ``2`` when no trial finished (all pruned or failed).

    Raises:
        graph_urpe.trust.UntrustedFileError: a value the study records for the best trial that
            its search parameter cannot take (:func:`write_best_config`).
    """
    complete = [t for t in study.get_trials(deepcopy=False)
                if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        print(f"graph-urpe hpopt: no trial finished (all pruned or failed): see "
              f"{osp.join(folder, 'trials.csv')}.", file=sys.stderr)
        return 2
    best = study.best_trial
    run_dir = osp.join(folder, f"version_{best.number}")
    states = [t.state.name.lower() for t in study.get_trials(deepcopy=False)]
    # The study's values (data) go into best.yaml checked against the space: the header shows
    # only those of this search's parameters.
    chosen = ", ".join(f"{p.name}={best.params[p.name]}" for p in space if p.name in best.params)
    path = write_best_config(saved, osp.join(folder, "best.yaml"), name, [
        (f"Best of {len(states)} trials of graph-urpe hpopt: trial {best.number}, "
         f"val/{metric} {best.value:.6g} ({run_dir})."),
        f"Values: {chosen}.",
        f"Train and test it: graph-urpe fit --config {osp.join(folder, 'best.yaml')}",
    ], space, best.params, osp.join(folder, "study.jsonl"), best.number)
    print("=" * 72)
    print(f"Trials: {len(states)} ({states.count('complete')} finished, "
          f"{states.count('pruned')} pruned, {states.count('fail')} failed): "
          f"{osp.join(folder, 'trials.csv')}")
    print(f"Best trial: {best.number}, val/{metric} {best.value:.6g}: {chosen}")
    print(f"Best configuration: {path}")
    print(f"Train and test it: graph-urpe fit --config {path}")
    return 0
