"""The ``graph-urpe`` command: training, evaluation and prediction, built on LightningCLI.

Usage::

    graph-urpe fit                                   # URPE-Graphormer on the embedded ZINC-like data
    graph-urpe fit --config configs/zinc/zinc-like-rpe.yaml      # an experiment: what differs
    graph-urpe fit --name my-run --ckpt_path last    # resume the latest version of run my-run
    graph-urpe test --ckpt_path runs/NAME/version_0/checkpoints/best.ckpt
    graph-urpe predict --ckpt_path CKPT --data.init_args.predict_csv mols.csv \\
        --data.init_args.predict_output out.csv
    graph-urpe summarize zinc-like                   # graphs, splits and label statistics
    graph-urpe plot RUN_DIR_OR_CKPT --out DIR        # figures of a run or a checkpoint
    graph-urpe collect runs/NAME/version_*           # test metrics over runs, mean ± std
    graph-urpe seeds --config CONFIG --seeds 10      # 10 fits, their table and leaderboard row

Configuration: the package's base file (``graph_urpe/configs/default.yaml``: Trainer settings and
the default job) is always read first; ``--config`` files state only what differs, and command-line
options override both. Every option of the Lightning module (``--model.init_args.*``), its network
(``--model.init_args.model.init_args.*``), the data module (``--data.init_args.*``) and the Trainer
(``--trainer.*``) can be set; ``graph-urpe fit --model.help CLASS`` lists a class's options and
``--print_config`` shows the resolved configuration.

Dataset facts (number of tasks, task type, feature vocabularies, metric, evaluator, target names,
featurisation, node limit) are static properties of the data module and are linked into the
model (:data:`GRAPH_LINKS`), for ``fit``, ``validate`` and ``test``; for ``predict`` the
checkpoint's values are used, so ``predict --ckpt_path X`` alone rebuilds the trained model.
With ``--ckpt_path``: package defaults < the checkpoint's model < ``--config`` files < options.
A ``--config`` is trusted like a script; a checkpoint and a run folder's ``config.yaml`` are data,
checked by :mod:`graph_urpe.trust` before anything they name is imported.

Runs: ``fit`` writes one folder per run, ``<trainer.default_root_dir>/<name>/version_<N>``
(``--name``, ``--version``; the next free version by default, the latest one with
``--ckpt_path last``), holding ``config.yaml``, ``metrics.csv``, TensorBoard events,
``checkpoints/best.ckpt`` (best validation metric) and ``checkpoints/last.ckpt`` (always the latest
state, also written on Ctrl-C), ``test_predictions.csv``, ``splits.csv`` and ``figures/``.
``validate`` / ``test`` / ``predict`` write only what they are asked for.
"""

from __future__ import annotations

import os
import sys

# OpenMP threads that busy-wait between parallel regions collapse when the CPU is shared (another
# job, DDP ranks on one machine): measured 5-10x slower steps on a busy 2-core machine. Passive
# waiting costs little when the machine is idle. Must be set before torch starts OpenMP; an
# explicit OMP_WAIT_POLICY in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import argparse
import json
import logging
import os.path as osp
import re
import warnings
from importlib.resources import files
from typing import Any

from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch import LightningDataModule, LightningModule, Trainer
from lightning.pytorch.callbacks import (
    EarlyStopping,
    LearningRateMonitor,
    ModelCheckpoint,
)
from lightning.pytorch.cli import (
    LightningArgumentParser,
    LightningCLI,
    SaveConfigCallback,
)
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities.model_helpers import is_overridden

from graph_urpe.data.cache import CorruptCacheError, UnsafeCacheError
from graph_urpe.data.zinc import ZincDownloadError
from graph_urpe.files import OutputError, claim_run_folder
from graph_urpe.tasks.graph_predict import predict_smiles
from graph_urpe.tasks.leaderboard import trainer_record, write_record
from graph_urpe.tasks.run import (
    AtomicCheckpointIO,
    LogsAtCheckpoint,
    RNGStateCheckpoint,
    RunCSVLogger,
    print_fit_summary,
    use_exact_resume,
    write_run_outputs,
)
from graph_urpe.trust import read_checkpoint, read_run_data

__all__ = ["DEFAULT_CONFIG", "GRAPH_LINKS", "GraphURPECLI", "main"]

DEFAULT_CONFIG = str(files("graph_urpe") / "configs" / "default.yaml")
"""The base configuration, read before any ``--config``."""

SUBCOMMANDS = ("fit", "validate", "test", "predict")

GRAPH_LINKS = (
    ("data.num_tasks", "model.init_args.model.init_args.num_tasks"),
    ("data.atom_categories", "model.init_args.model.init_args.atom_categories"),
    ("data.bond_categories", "model.init_args.model.init_args.bond_categories"),
    ("data.task_type", "model.init_args.task"),
    ("data.metric", "model.init_args.metric"),
    ("data.evaluator", "model.init_args.evaluator"),
    ("data.target_names", "model.init_args.target_names"),
    ("data.featurization", "model.init_args.featurization"),
    ("data.max_graph_nodes", "model.init_args.max_graph_nodes"),
    ("data.dataset_source", "model.init_args.dataset_source"),
    ("data.level", "model.init_args.model.init_args.level"),
)
"""``(data module property, model argument)`` pairs linked at instantiation. jsonargparse skips a
link whose property the chosen data module does not have, so the sequence families (with their
own property names) share the command."""


def _all_links() -> tuple[tuple[str, str], ...]:
    try:
        from graph_urpe.tasks.sequence_data import sequence_links
    except ImportError:  # the sequence family is optional for the graph command
        return GRAPH_LINKS
    return GRAPH_LINKS + tuple(sequence_links())


class _FitConfigCallback(SaveConfigCallback):
    """Saves the resolved ``config.yaml`` into the run folder, for ``fit`` only."""

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if stage == "fit":
            super().setup(trainer, pl_module, stage)


class CLIError(Exception):
    """An error in the user's input, printed as one line (no traceback) by :func:`main`."""


def _latest_version(folder: str) -> int | None:
    found = [int(m.group(1)) for d in (os.listdir(folder) if osp.isdir(folder) else [])
             if (m := re.fullmatch(r"version_(\d+)", d))
             and osp.isfile(osp.join(folder, d, "checkpoints", "last.ckpt"))]
    return max(found) if found else None


class GraphURPECLI(LightningCLI):
    """LightningCLI with one folder per ``fit`` run, ``fit`` followed by ``test`` on the best
    checkpoint and a summary, dataset facts linked into the model, and a ``predict`` that requires
    a checkpoint. Models and data modules are subclass-mode (chosen by class path)."""

    _parsing: str | None = None  # the subcommand whose parser is being built (None: run=False)

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        if self._parsing != "predict":  # predict: the checkpoint's facts win
            for source, target in _all_links():
                parser.link_arguments(source, target, apply_on="instantiate")
        parser.add_argument(
            "--name", type=str, default="run",
            help="Run name: fit writes into <trainer.default_root_dir>/<name>/version_<N>.",
        )
        parser.add_argument(
            "--version", type=int | None, default=None,
            help="Run version (default: the next free one; with --ckpt_path last the latest one "
            "that has a last.ckpt).",
        )

    def _prepare_subcommand_parser(self, klass: type, subcommand: str, **kwargs: Any):
        self._parsing = subcommand
        parser: LightningArgumentParser = super()._prepare_subcommand_parser(
            klass, subcommand, **kwargs
        )
        self._parsing = None
        # Options of fit; every subcommand accepts them, so a run's config.yaml can be passed to
        # validate / test / predict as it is (they ignore them).
        parser.add_argument(
            "--test_after_fit", type=bool, default=True,
            help="fit: after training, test the best checkpoint, write test_predictions.csv and "
            "the figures into the run folder, and print a summary.",
        )
        parser.add_argument(
            "--early_stopping_patience", type=int | None, default=None,
            help="fit: stop when the monitored validation metric has not improved for this many "
            "validations (Lightning's EarlyStopping).",
        )
        return parser

    # ------------------------------------------------------------------ parsing
    def parse_arguments(self, parser: LightningArgumentParser, args: Any) -> None:
        """Lightning's parse, with a ``--ckpt_path`` checkpoint's model (checked) placed right
        after the subcommand: package defaults < checkpoint < the user's ``--config`` files and
        options, so ``predict --ckpt_path X`` alone rebuilds the trained model and a user's option
        beats the checkpoint's.

        The checkpoint is read by :func:`~graph_urpe.trust.read_checkpoint` (plain data; the
        classes it names checked against the allow-list before anything is imported). For
        ``validate`` / ``test`` without data options, the data section of the run folder's
        ``config.yaml`` (``RUN/config.yaml`` beside ``RUN/checkpoints/``) is read and checked the
        same way, so the model is evaluated on the data it was trained on.

        Raises:
            CLIError: ``predict`` without ``--ckpt_path``.
            FileNotFoundError: a ``--ckpt_path`` file that does not exist.
            UntrustedFileError: the checkpoint or run folder names a class outside the allow-list.
        """
        if isinstance(args, dict) or not isinstance(args, (list, tuple, type(None))):
            super().parse_arguments(parser, args)  # structured configuration (run=False)
            return
        argv = list(sys.argv[1:] if args is None else args)
        sub = argv[0] if argv and argv[0] in SUBCOMMANDS else None
        scanned = _ckpt_argument(argv)
        try:
            super().parse_arguments(parser, self._with_checkpoint(argv, sub, scanned))
        except argparse.ArgumentError:
            if sub == "predict" and scanned is None:  # the network's sizes are the checkpoint's
                raise CLIError(PREDICT_NEEDS_CHECKPOINT) from None
            raise
        parsed = self.config[sub].get("ckpt_path") if sub else None
        if sub == "predict" and not parsed:
            raise CLIError(PREDICT_NEEDS_CHECKPOINT)
        if parsed != scanned and parsed is not None:  # given in a --config file
            super().parse_arguments(parser, self._with_checkpoint(argv, sub, parsed))
        if sub == "predict":  # "GPU available", "Seed set": nothing a predicting user acts on
            for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.seed"):
                logging.getLogger(name).setLevel(logging.WARNING)

    training_vocabulary: dict | None = None
    """The ``--ckpt_path`` checkpoint's training vocabulary (plain lists), for predict's warnings."""

    def _with_checkpoint(self, argv: list[str], sub: str | None, ckpt_path: str | None) -> list[str]:
        """``argv`` with the checked checkpoint's model (and for ``validate`` / ``test`` without
        data options the run folder's checked data section) right after the subcommand."""
        if sub is None or ckpt_path is None or ckpt_path in ("last", "best", "hpc"):
            return argv
        if not osp.isfile(ckpt_path):
            raise FileNotFoundError(
                f"checkpoint {ckpt_path!r} not found: pass --ckpt_path with an existing .ckpt "
                "file (fit prints the best and last checkpoint paths), or 'last' to resume.")
        ckpt = read_checkpoint(ckpt_path)
        self.training_vocabulary = ckpt.get("training_vocabulary")
        return _checkpoint_arguments(argv, sub, ckpt_path, ckpt)

    def _parse_ckpt_path(self) -> None:
        """Disables Lightning's own reading of ``--ckpt_path`` hyperparameters (it parses them over
        the user's options, unchecked): :meth:`parse_arguments` has done it."""

    # ------------------------------------------------------------------ trainer
    def instantiate_trainer(self, **kwargs: Any) -> Trainer:
        """For ``fit``: the run folder, its loggers and its two checkpoints; otherwise no logger
        and no checkpointing (``test`` / ``predict`` write only what they are asked for)."""
        sub = self.subcommand
        if sub is None:  # run=False (benchmarks): a plain Trainer from the configuration
            return super().instantiate_trainer(**kwargs)
        config = self.config_init[sub]
        trainer_cfg = config["trainer"]
        plugins = list(trainer_cfg.get("plugins") or [])
        kwargs["plugins"] = [*plugins, AtomicCheckpointIO()]
        if sub != "fit":
            kwargs.setdefault("logger", False)
            kwargs.setdefault("enable_checkpointing", False)
            return super().instantiate_trainer(**kwargs)
        root = trainer_cfg.get("default_root_dir") or "runs"
        name = config.get("name") or "run"
        folder = osp.join(root, name)
        version = config.get("version")
        ckpt = config.get("ckpt_path")
        if version is None:
            # a new run claims its folder by exclusive creation: parallel runs never share one
            version = _latest_version(folder) if ckpt == "last" else claim_run_folder(folder)[0]
            if version is None:
                raise CLIError(
                    f"--ckpt_path last: no run of {name!r} under {root} has a last.ckpt; start "
                    "the run without --ckpt_path, or give --name/--version of the run to resume."
                )
        run_dir = osp.join(folder, f"version_{version}")
        if ckpt == "last":
            last = osp.join(run_dir, "checkpoints", "last.ckpt")
            if not osp.isfile(last):
                raise CLIError(f"--ckpt_path last: {last} does not exist.")
            config["ckpt_path"] = last
        elif ckpt is None and osp.isfile(osp.join(run_dir, "checkpoints", "last.ckpt")):
            raise CLIError(
                f"run folder {run_dir} already holds a trained run: resume it with --ckpt_path "
                "last, or leave out --version to start a new version."
            )
        self.run_dir = run_dir
        model = self.model
        metric = getattr(model, "metric_name", None)
        mode = getattr(model, "metric_mode", "min")
        ckpt_dir = osp.join(run_dir, "checkpoints")
        callbacks = [
            ModelCheckpoint(dirpath=ckpt_dir, filename="last", monitor=None, save_top_k=1,
                            enable_version_counter=False, save_on_exception=True),
            LearningRateMonitor(logging_interval="step"),
            RNGStateCheckpoint(),
            LogsAtCheckpoint(),
        ]
        if metric is not None:
            callbacks.insert(0, ModelCheckpoint(
                dirpath=ckpt_dir, filename="best", monitor=f"val/{metric}", mode=mode,
                save_top_k=1, enable_version_counter=False, auto_insert_metric_name=False))
        patience = config.get("early_stopping_patience")
        if patience is not None and metric is not None:
            callbacks.append(EarlyStopping(monitor=f"val/{metric}", mode=mode, patience=patience))
        user_callbacks = [cb for cb in (trainer_cfg.get("callbacks") or [])
                          if not isinstance(cb, (ModelCheckpoint, LearningRateMonitor))]
        kwargs["callbacks"] = user_callbacks + callbacks
        kwargs["logger"] = [
            RunCSVLogger(root, name=name, version=version, resume=ckpt is not None),
            TensorBoardLogger(root, name=name, version=version, default_hp_metric=False),
        ]
        kwargs["default_root_dir"] = run_dir
        return use_exact_resume(super().instantiate_trainer(**kwargs))

    # -------------------------------------------------------------- subcommands
    def fit(self, model: LightningModule, **kwargs: Any) -> None:
        """``trainer.fit``, then (unless ``--test_after_fit false``) test the best checkpoint,
        write the run's outputs and print the summary."""
        self.trainer.fit(model, **kwargs)
        datamodule = kwargs.get("datamodule")
        if (
            not self.config["fit"].get("test_after_fit", True)
            or self.trainer.interrupted
            or not is_overridden("test_step", model)
            or datamodule is None
            or not is_overridden("test_dataloader", datamodule)
        ):
            if self.trainer.is_global_zero:
                print_fit_summary(self.trainer, None, self.run_dir)
            return
        best = self._best_checkpoint()
        results = self.trainer.test(model, datamodule=datamodule, ckpt_path=best or None,
                                    verbose=False)
        if self.trainer.is_global_zero:
            metrics = results[0] if results else {}
            write_run_outputs(self.trainer, model, datamodule, self.run_dir)
            record = trainer_record(self.trainer, metrics)
            if record is not None:
                write_record(record, self.run_dir)
            print_fit_summary(self.trainer, metrics, self.run_dir, record)

    def test(self, model: LightningModule, **kwargs: Any) -> Any:
        """``trainer.test``, then one line saying whether the test metric is a leaderboard
        number (:mod:`graph_urpe.tasks.leaderboard`)."""
        results = self.trainer.test(model, **kwargs)
        record = trainer_record(self.trainer, results[0]) if results else None
        if record is not None and self.trainer.is_global_zero:
            print(record["note"])
        return results

    def _best_checkpoint(self) -> str:
        for cb in self.trainer.checkpoint_callbacks:
            if isinstance(cb, ModelCheckpoint) and cb.monitor is not None and cb.best_model_path:
                return cb.best_model_path
        return ""

    def predict(self, model: LightningModule, **kwargs: Any) -> Any:
        """``trainer.predict`` (:meth:`parse_arguments` has made sure of a checkpoint); SMILES
        inputs through :func:`~graph_urpe.tasks.graph_predict.predict_smiles`, with the
        checkpoint's training vocabulary."""
        dm = kwargs.get("datamodule")
        if callable(getattr(dm, "prepare_predict", None)):
            return predict_smiles(self.trainer, model, dm, self.training_vocabulary,
                                  ckpt_path=kwargs.get("ckpt_path"))
        return self.trainer.predict(model, **kwargs)


HELP = """graph-urpe: URPE-Graphormer training, evaluation and prediction (LightningCLI).

subcommands:
  fit        train (one run folder per run), then test the best checkpoint and print a summary
  validate   evaluate a checkpoint on the validation split
  test       evaluate a checkpoint on the test split
  predict    predict SMILES (--data.init_args.predict_csv / predict_smiles) with a checkpoint
  summarize  a dataset's splits and label statistics (graph-urpe summarize --help)
  plot       figures of a run folder or a checkpoint (graph-urpe plot --help)
  collect    test metrics of several runs in one table with mean ± std (graph-urpe collect --help)
  seeds      fit one experiment over N seeds, then collect it and the leaderboard row (--help)

`graph-urpe SUBCOMMAND --help` lists the options of a subcommand; `--model.help CLASS` and
`--data.help CLASS` those of a class (e.g. --model.help graph_urpe.tasks.GraphPropertyModule).
"""


def main(args: list[str] | None = None) -> None:
    """Entry point of ``graph-urpe`` (see the module docstring).

    Args:
        args (list[str], optional): the arguments (default: ``sys.argv[1:]``).
    """
    argv = list(sys.argv[1:] if args is None else args)
    _quiet_third_party()
    try:
        _main(argv, args)
    except argparse.ArgumentError as err:
        if os.environ.get("GRAPH_URPE_DEBUG"):
            raise
        hint = ""
        if "predict_smiles" in str(err):
            hint = ("\nSMILES on the command line are a YAML list: quote each one, e.g. "
                    "--data.init_args.predict_smiles '[\"CCO\", \"NO\"]'")
        print(f"graph-urpe: error: {_short(str(err))}{hint}\n(`graph-urpe {argv[0] if argv else ''} "
              "--help` lists the options; GRAPH_URPE_DEBUG=1 shows the whole message)",
              file=sys.stderr)
        raise SystemExit(2) from None
    except (CLIError, FileNotFoundError, FileExistsError, ValueError, OutputError,
            ZincDownloadError, UnsafeCacheError, CorruptCacheError,
            MisconfigurationException) as err:
        if os.environ.get("GRAPH_URPE_DEBUG"):
            raise
        print(f"graph-urpe: error: {_short(str(err))}\n(set GRAPH_URPE_DEBUG=1 for the traceback)",
              file=sys.stderr)
        raise SystemExit(2) from None


def _short(message: str, max_lines: int = 2) -> str:
    """The reason of a jsonargparse / Lightning error in one line: the innermost errors, without
    the union bookkeeping ("Does not validate against any of the Union subtypes", "Subtypes:",
    "Expected a <class 'NoneType'>") and without the dumps of the configuration ("Given value",
    ``Namespace(...)``); at most ``max_lines`` reasons, joined by " | "."""
    noise = ("Given value", "Subtypes:", "Errors:", "Expected a <class 'NoneType'>")
    lines: list[str] = []
    key = None
    for raw in message.splitlines():
        line = raw.strip().removeprefix("- ").strip()
        line = line.replace("Does not validate against any of the Union subtypes", "").strip()
        if match := re.fullmatch(r'Parser key "([^"]*)":\s*(.*)', line):
            key, line = match.group(1), match.group(2)
        if not line or line.startswith(noise) or "Namespace(" in line:
            continue
        if key and key not in line:  # the reason first, then the option it is about
            line = f"{line} (option {key})"
        if line not in lines:
            lines.append(line)
    return " | ".join(lines[-max_lines:]) if lines else message.strip().splitlines()[0]


class _DropTips(logging.Filter):
    """Drops Lightning's advertising tips (nothing a user can act on)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.getMessage()).startswith("💡 Tip")


def _quiet_third_party() -> None:
    """Silence third-party messages that say nothing actionable; real warnings stay visible.

    * Lightning's "Tip: ... litlogger" advertisement;
    * Lightning's own ``_pytree`` ``LeafSpec`` deprecation (Lightning's code, not the user's);
    * Lightning's note that a custom batch sampler may drop samples in ``predict``
      (:class:`~graph_urpe.data.sampler.SizeBucketBatchSampler` yields every sample; the tests
      check it);
    * OGB's non-writable NumPy array warning when it converts its cached arrays;
    * Lightning's note that a checkpoint's callbacks are missing, for ``test`` / ``predict`` on a
      checkpoint of ``fit`` (they write no checkpoints, on purpose).
    """
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(_DropTips())
    for message in (
        r"`isinstance\(treespec, LeafSpec\)` is deprecated",
        r"You are using a custom batch sampler",
        r"The given NumPy array is not writable",
        r"LightningCLI's args parameter is intended",  # graph-urpe passes argv on purpose
        # predict / test on a checkpoint of fit: its checkpoint callbacks are deliberately absent
        r"Be aware that when using `ckpt_path`, callbacks used to create the checkpoint",
    ):
        warnings.filterwarnings("ignore", message=message)


PREDICT_NEEDS_CHECKPOINT = ("predict needs a trained model: pass --ckpt_path PATH (e.g. the "
                            "best.ckpt printed at the end of `graph-urpe fit`).")


def _ckpt_argument(argv: list[str]) -> str | None:
    """The value of ``--ckpt_path`` on the command line (the last one), or :obj:`None`."""
    value = None
    for i, arg in enumerate(argv):
        if arg == "--ckpt_path" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--ckpt_path="):
            value = arg.split("=", 1)[1]
    return None if value in (None, "null", "None", "") else value


def _checkpoint_arguments(argv: list[str], sub: str, ckpt_path: str, ckpt: dict) -> list[str]:
    """``argv`` with the checkpoint's model (and the run folder's data) after the subcommand."""
    hparams = dict(ckpt.get("hyper_parameters") or {})
    class_path = hparams.pop("_class_path", None)
    hparams.pop("_instantiator", None)
    if class_path is None or "model" not in hparams:
        return argv
    # jsonargparse's --config takes a file or the configuration itself (JSON is YAML).
    config = {"model": {"class_path": class_path,
                        "init_args": json.loads(json.dumps(hparams, default=list))}}
    user = argv[1:]
    run_config = osp.join(osp.dirname(osp.dirname(osp.abspath(ckpt_path))), "config.yaml")
    if sub in ("validate", "test") and osp.isfile(run_config) and not any(
            a.startswith(("--data", "--config", "-c")) for a in user):
        data = read_run_data(run_config)
        if data is not None:
            print(f"{sub}: data as in {run_config} (the run's own data; pass --data options or "
                  "--config to evaluate on other data)")
            config["data"] = data
    return [sub, "--config", json.dumps(config), *user]


def _main(argv: list[str], args: list[str] | None) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        try:
            print(HELP)
        except BrokenPipeError:  # `graph-urpe --help | head`
            pass
        return
    if argv[0] == "summarize":
        from graph_urpe.data.summary import main as summarize_main

        summarize_main(argv[1:])
        return
    if argv[0] == "collect":
        from graph_urpe.tasks.collect import main as collect_main

        code = collect_main(argv[1:])
        if code:
            raise SystemExit(code)
        return
    if argv[0] == "seeds":
        from graph_urpe.tasks.seeds import main as seeds_main

        code = seeds_main(argv[1:])
        if code:
            raise SystemExit(code)
        return
    if argv[0] == "plot":
        from graph_urpe.viz.cli import main as plot_main

        code = plot_main(argv[1:])
        if code:
            raise SystemExit(code)
        return
    if args is not None:
        args = argv
    parser_kwargs: dict[str, Any] = {"description": HELP.splitlines()[0]}
    parser_kwargs["exit_on_error"] = False
    for sub in SUBCOMMANDS:
        parser_kwargs[sub] = {"default_config_files": [DEFAULT_CONFIG], "exit_on_error": False}
    GraphURPECLI(
        LightningModule,
        LightningDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        parser_kwargs=parser_kwargs,
        save_config_callback=_FitConfigCallback,
        save_config_kwargs={"overwrite": True},
        args=args,  # None: LightningCLI reads sys.argv itself
    )


if __name__ == "__main__":
    main()
