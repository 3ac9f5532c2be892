"""``graph-urpe hpopt``: hyperparameter search with Optuna over ``graph-urpe fit`` runs.

::

    graph-urpe hpopt --config csv/template --trials 20 -- --data.init_args.path my.csv
    graph-urpe hpopt --print-space > space.yaml          # the default space, to edit
    graph-urpe hpopt --config C --trials 20 --space space.yaml -- FIT OPTIONS
    graph-urpe fit --config runs/my-csv-hpopt/best.yaml  # train (and test) the best configuration

Every trial is an ordinary ``graph-urpe fit`` in its own process (as ``graph-urpe seeds`` runs
them) with the options after ``--``, the values the sampler chose (:mod:`graph_urpe.cli.
search_space`) and ``--test_after_fit false``: trials never touch the test split. Each writes its
run folder ``<default_root_dir>/<name>-hpopt/version_<trial>``; its objective is the monitored
validation metric (``val/mae``, ``val/rocauc``, ...) in its ``metrics.csv`` of the checkpoint
that ``fit`` tests and the summary tells to predict with (``--test_checkpoint``,
:func:`~graph_urpe.cli.run.tested_checkpoint`): the best value (``best.ckpt``; for ``soup``,
the CSV template's, too, as a proxy: a trial is not tested, and the soup is validated only at the
end of a tested fit), or the last validation's (``last.ckpt``; ``auto`` for regression), so the
number tuned is
that of the model used. After every validation the trial reports that metric to the study
(:class:`~graph_urpe.models.pruning.TrialPruning`), and Optuna's median pruner stops trials worse
than the median of the finished ones at the same epoch.

The search's epochs parameter sets ``trainer.max_epochs`` in every trial (10 to 50 by default),
in place of the configuration's; ``--trainer.max_epochs N`` after ``--`` caps it at ``N``
(:func:`~graph_urpe.cli.search_space.cap_epochs`).

Beside the runs: ``study.jsonl`` (the Optuna study, a journal of JSON lines: running the same
command again continues it), ``trials.csv`` (every trial: state, objective, epochs, values, run
folder) and ``best.yaml``: this search's own configuration (its ``--config`` files and the
options after ``--``, resolved as a fit saves its ``config.yaml``) with the values the study
recorded for the best trial, without the search's own settings, that ``graph-urpe fit --config
best.yaml`` trains again, tests, and (on the same machine, with the seed it holds) reproduces to
the trial's validation metric. Sampler: Optuna's TPE, seeded (``--sampler-seed``).

What is trusted: the ``--config`` files, the options after ``--`` and the ``--space`` file are
the user's, trusted like a script (a space may set any fit option, ``trainer.callbacks``
included, and jsonargparse builds what the values name). Everything in the study folder is data
(it may come from someone else, and a search continues it): ``study.jsonl`` is read by
:func:`~graph_urpe.models.pruning.study_storage` (a corrupt line refused by its number), and
:func:`~graph_urpe.cli.search_outputs.write_best_config` builds ``best.yaml`` from the search's
configuration, never from a trial's ``config.yaml`` (not read at all), with the best trial's
recorded values each checked against its search parameter (one of its choices, or a number in its
range): a value the space cannot draw is refused in one line naming ``study.jsonl``, the trial and
the parameter, and no ``best.yaml`` is written.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import os.path as osp
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from graph_urpe.cli.argv import split_passthrough
from graph_urpe.cli.messages import CLIError
from graph_urpe.cli.search_outputs import PRUNING_CALLBACK, report_search, write_trials
from graph_urpe.cli.search_space import (
    DEFAULT_SPACE,
    EPOCHS_OPTION,
    SearchParameter,
    cap_epochs,
    parse_space,
)

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``graph-urpe hpopt``."""
    parser = argparse.ArgumentParser(
        prog="graph-urpe hpopt", allow_abbrev=False,
        description="Search hyperparameters with Optuna: one `graph-urpe fit` per trial (its own "
        "run folder, never tested), bad trials pruned by the validation metric, the best "
        "configuration written as a file that `graph-urpe fit --config` takes.",
        epilog="Options after `--` are passed to every `graph-urpe fit`. A trial's objective is "
        "the validation metric of the checkpoint fit tests (--test_checkpoint: best, also for "
        "soup, the CSV template's, or the last validation for last). The epochs parameter "
        "of the search space sets --trainer.max_epochs in every trial (10 to 50 by default), in "
        "place of the configuration's; --trainer.max_epochs N after `--` caps the range at N.",
    )
    parser.add_argument("--config", action="append", default=None,
                        help="experiment file(s), as for `graph-urpe fit --config`")
    parser.add_argument("--trials", type=int, default=20,
                        help="trials to run (added to those of an existing study; default: 20)")
    parser.add_argument("--space", default=None,
                        help="search space file (YAML; default: --print-space's); trusted like "
                        "a --config: the fit builds whatever classes its values name")
    parser.add_argument("--name", default=None,
                        help="run name (default: the config's); trials go to "
                        "<default_root_dir>/<name>-hpopt")
    parser.add_argument("--pruner", choices=("median", "none"), default="median",
                        help="Optuna's MedianPruner, or none (default: median)")
    parser.add_argument("--prune-after", type=int, default=5,
                        help="epochs every trial runs before it may be pruned (default: 5)")
    parser.add_argument("--startup-trials", type=int, default=3,
                        help="finished trials before any is pruned (default: 3)")
    parser.add_argument("--sampler-seed", type=int, default=0,
                        help="seed of the TPE sampler (default: 0)")
    parser.add_argument("--print-space", action="store_true",
                        help="print the default search space (YAML) and exit")
    return parser


def _import_optuna():
    try:
        import optuna
    except ImportError:
        raise CLIError("graph-urpe hpopt needs Optuna: pip install 'graph-urpe[hpopt]' "
                       "(or pip install optuna).") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def _probe(fit_args: list[str]) -> tuple[Any, str, str, str, dict]:
    """The resolved configuration of ``graph-urpe fit FIT_ARGS`` (parsed and instantiated as
    ``fit`` does, nothing trained or written), its monitored metric and direction, the
    checkpoint it tests (``"best"`` / ``"last"``), and the configuration as plain data, as a fit
    run saves it into its ``config.yaml`` (without the arguments of ``Trainer.fit``:
    ``ckpt_path``, ``weights_only``), the base of ``best.yaml``."""
    import yaml
    from lightning.pytorch import LightningDataModule, LightningModule

    from graph_urpe.cli.configs import DEFAULT_CONFIG, resolve_config_args
    from graph_urpe.cli.lightning_cli import GraphURPECLI
    from graph_urpe.cli.run import task_of, tested_checkpoint

    kwargs = {"default_config_files": [DEFAULT_CONFIG], "exit_on_error": False,
              "allow_abbrev": False}
    chatter = [logging.getLogger(name) for name in ("lightning.pytorch.utilities.rank_zero",
                                                    "lightning.fabric.utilities.seed")]
    levels = [log.level for log in chatter]
    for log in chatter:  # "Seed set", "GPU available": the trials print them
        log.setLevel(logging.WARNING)
    try:
        cli = GraphURPECLI(LightningModule, LightningDataModule, subclass_mode_model=True,
                           subclass_mode_data=True, parser_kwargs=kwargs,
                           save_config_callback=None, args=resolve_config_args(fit_args),
                           run=False)
    finally:
        for log, level in zip(chatter, levels):
            log.setLevel(level)
    metric = getattr(cli.model, "metric_name", None)
    if metric is None:
        raise CLIError(f"{type(cli.model).__name__} names no monitored metric: graph-urpe hpopt "
                       "searches models of graph_urpe.models.GraphPropertyModule.")
    tested = tested_checkpoint(cli.config.get("test_checkpoint"), task_of(cli.model))
    # What SaveConfigCallback writes into a run's config.yaml (parser.save, skip_none=False).
    saved = yaml.safe_load(cli.parser.dump(cli.config, skip_none=False))
    return cli.config, metric, cli.model.metric_mode, tested, saved


def _check_space(space: list[SearchParameter], config: Any) -> list[SearchParameter]:
    """``space`` without the encoder-shape parameters when the configuration fine-tunes a
    pretrained encoder; every option must exist in the configuration."""
    pretrained = config.get("model.init_args.finetune.pretrained")
    if pretrained:
        fixed = [p.name for p in space if p.sets_encoder_shape]
        if fixed:
            print(f"graph-urpe hpopt: the encoder is pretrained ({pretrained}): its shape is "
                  f"fixed, so {', '.join(fixed)} {'is' if len(fixed) == 1 else 'are'} left out "
                  "of the search.", flush=True)
        space = [p for p in space if not p.sets_encoder_shape]
    for param in space:
        for option in param.options:
            if option not in config:
                raise CLIError(f"search parameter {param.name!r}: the fit has no option "
                               f"--{option} (`graph-urpe fit --print_config` shows them).")
    if not space:
        raise CLIError("the search space is empty: give parameters with --space.")
    return space


def _objective(run_dir: str, metric: str, mode: str, checkpoint: str = "best"
               ) -> tuple[float | None, int]:
    """The ``val/<metric>`` of a run's ``checkpoint`` (``"best"``: the best value in its
    ``metrics.csv``; ``"last"``: the last validation's) and how many validations it holds."""
    import pandas as pd

    path = osp.join(run_dir, "metrics.csv")
    column = f"val/{metric}"
    if not osp.isfile(path):
        return None, 0
    table = pd.read_csv(path)
    if column not in table:
        return None, 0
    values = table[column].dropna()
    if values.empty:
        return None, 0
    if checkpoint == "last":
        return float(values.iloc[-1]), int(values.size)
    return float(values.max() if mode == "max" else values.min()), int(values.size)


def _given_max_epochs(extra: list[str]) -> int | None:
    """The value of ``--trainer.max_epochs`` among the fit options (the last one), or
    :obj:`None` when none is given or it sets no limit."""
    value = None
    for i, arg in enumerate(extra):
        if arg == f"--{EPOCHS_OPTION}" and i + 1 < len(extra):
            value = extra[i + 1]
        elif arg.startswith(f"--{EPOCHS_OPTION}="):
            value = arg.split("=", 1)[1]
    try:
        epochs = int(value)
    except (TypeError, ValueError):  # none given, or null: no cap (the fit checks the value)
        return None
    return epochs if epochs > 0 else None  # -1: Lightning's "no limit"


def _option_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _create_study(optuna, folder: str, name: str, direction: str, metric: str, args):
    from graph_urpe.models.pruning import study_storage

    os.makedirs(folder, exist_ok=True)
    storage = study_storage(osp.join(folder, "study.jsonl"))
    existing = optuna.get_all_study_names(storage)
    study = optuna.create_study(storage=storage, study_name=existing[0] if existing else name,
                                direction=direction, load_if_exists=True)
    # A continued study draws new values: the seed moves on with its trials.
    study.sampler = optuna.samplers.TPESampler(seed=args.sampler_seed + len(study.trials))
    if existing:
        if study.user_attrs.get("metric") != metric or study.direction.name.lower() != direction:
            raise CLIError(f"the study in {folder} optimises {study.user_attrs.get('metric')} "
                           f"({study.direction.name.lower()}), this fit monitors {metric}: give "
                           "another --name for a new search.")
    else:
        study.set_user_attr("metric", metric)
    pruner = {"name": args.pruner, "n_startup_trials": args.startup_trials,
              "n_warmup_steps": args.prune_after}
    study.set_user_attr("pruner", pruner)
    return study


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``graph-urpe hpopt`` (see the module docstring).

    Returns:
        int: ``0``; ``2`` for bad arguments; the exit status of the first trial when it fails
        (a later failing trial is recorded as failed and the search goes on).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    own, extra = split_passthrough(argv)
    args = build_parser().parse_args(own)
    if args.print_space:
        print(DEFAULT_SPACE, end="")
        return 0
    if not args.config:
        print("graph-urpe hpopt: error: give the experiment with --config (as for fit).",
              file=sys.stderr)
        return 2
    for option, value, least in (("--trials", args.trials, 1), ("--prune-after", args.prune_after,
                                 0), ("--startup-trials", args.startup_trials, 0)):
        if value < least:
            print(f"graph-urpe hpopt: error: {option} must be >= {least}, got {value}",
                  file=sys.stderr)
            return 2
    optuna = _import_optuna()
    if args.space:
        if not osp.isfile(args.space):
            raise CLIError(f"--space {args.space}: no such file (`graph-urpe hpopt --print-space "
                           "> space.yaml` writes the default one to edit).")
        with open(args.space, encoding="utf-8") as handle:
            space = parse_space(handle.read(), f"search space {args.space}")
    else:
        space = parse_space(DEFAULT_SPACE, "the default search space")
    fit_args = [a for c in args.config for a in ("--config", c)] + extra
    if args.name:
        fit_args += ["--name", args.name]
    config, metric, mode, checkpoint, saved = _probe(fit_args)
    from graph_urpe.models.pruning import PRUNED_AT

    space = _check_space(space, config)
    cap = _given_max_epochs(extra)
    if cap is not None:
        space, note = cap_epochs(space, cap)
        if note:
            print(f"graph-urpe hpopt: {note}.", flush=True)
        if not space:
            raise CLIError("the search space is empty once --trainer.max_epochs fixes the "
                           "epochs: give more parameters with --space.")
    objective = f"{checkpoint} val/{metric}"
    print(f"graph-urpe hpopt: a trial's objective is its {objective} (the {checkpoint} "
          "checkpoint, the one fit tests: --test_checkpoint).", flush=True)
    for option in (o for p in space for o in p.options if p.options != (EPOCHS_OPTION,)
                   or cap is None):
        if any(a == f"--{option}" or a.startswith(f"--{option}=") for a in extra):
            print(f"graph-urpe hpopt: the search sets --{option}: the value given after -- is "
                  "overridden in every trial (leave the parameter out of --space to fix it).",
                  flush=True)
    name = config.get("name") or "run"
    folder = osp.abspath(osp.join(config.get("trainer.default_root_dir") or "runs",
                                  f"{name}-hpopt"))
    direction = "maximize" if mode == "max" else "minimize"
    study = _create_study(optuna, folder, name, direction, metric, args)
    study_file = osp.join(folder, "study.jsonl")
    fit = [sys.executable, "-m", "graph_urpe.cli", "fit", *fit_args, "--name", f"{name}-hpopt",
           "--test_after_fit", "false"]
    for _ in range(args.trials):
        trial = study.ask()
        values = {p.name: p.suggest(trial) for p in space}
        options = [x for p in space for o in p.options
                   for x in (f"--{o}", _option_value(values[p.name]))]
        callback = {"class_path": PRUNING_CALLBACK,
                    "init_args": {"study": study_file, "trial": trial.number}}
        shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in values.items())
        print(f"graph-urpe hpopt: trial {trial.number} ({shown})", flush=True)
        run_dir = osp.join(folder, f"version_{trial.number}")
        code = subprocess.run([*fit, "--version", str(trial.number), *options,
                               f"--trainer.callbacks+={json.dumps(callback)}"],
                              check=False).returncode
        value, validations = _objective(run_dir, metric, mode, checkpoint)
        pruned = next(t for t in study.get_trials(deepcopy=False)
                      if t.number == trial.number).user_attrs.get(PRUNED_AT)
        if code or value is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            done = [t for t in study.get_trials(deepcopy=False)
                    if t.state == optuna.trial.TrialState.COMPLETE]
            write_trials(study, space, folder)
            if not done:
                print(f"graph-urpe hpopt: trial {trial.number} failed (exit {code}) before any "
                      f"finished: fix the fit (its options: {' '.join(fit_args)}).",
                      file=sys.stderr)
                return code or 2
            print(f"graph-urpe hpopt: trial {trial.number} failed (exit {code}); recorded as "
                  "failed, the search goes on.", file=sys.stderr, flush=True)
            continue
        if pruned is not None:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            print(f"graph-urpe hpopt: trial {trial.number} pruned after epoch {pruned} "
                  f"({objective} so far {value:.4g}; {run_dir})", flush=True)
        else:
            study.tell(trial, value)
            print(f"graph-urpe hpopt: trial {trial.number} {objective} {value:.4g} "
                  f"({validations} validations; {run_dir})", flush=True)
        write_trials(study, space, folder)
    return report_search(optuna, study, space, folder, name, metric, saved)
