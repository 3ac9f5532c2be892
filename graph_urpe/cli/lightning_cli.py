"""The LightningCLI subcommands of ``graph-urpe``: ``fit``, ``validate``, ``test``, ``predict``.

Imported by :func:`graph_urpe.cli.main` only for these four subcommands (it loads torch,
Lightning and the Lightning modules).

Configuration: the package's base file (``configs/default.yaml``, read as ``graph_urpe/configs/default.yaml``: Trainer settings and
the default job) is always read first; ``--config`` files state only what differs, and command-line
options override both. Every option of the Lightning module (``--model.init_args.*``), its network
(``--model.init_args.model.init_args.*``), the data module (``--data.init_args.*``) and the Trainer
(``--trainer.*``) can be set; ``graph-urpe fit --model.help CLASS`` lists a class's options and
``--print_config`` shows the resolved configuration.

The data module's facts (``data.facts``: number of tasks, task type, feature vocabularies,
metric, evaluator, target names, featurization, level, node limit) are linked into the model
(:data:`graph_urpe.cli.links.GRAPH_LINKS`) for ``fit``, ``validate`` and ``test``; for ``predict`` the
checkpoint's values are used, so ``predict --ckpt_path X`` alone rebuilds the trained model.
With ``--ckpt_path``: package defaults < the checkpoint's model < ``--config`` files < options.
A ``--config`` is trusted like a script; a checkpoint and a run folder's ``config.yaml`` are data:
read by :mod:`graph_urpe.trust`, they reach the parser only in their canonical form (classes of
:mod:`graph_urpe.registry`, plain values checked against each class's signature), and the model
built must fit the checkpoint's tensors (:mod:`graph_urpe.cli.checkpoint_parsing`).

Runs: ``fit`` writes one folder per run, ``<trainer.default_root_dir>/<name>/version_<N>``
(``--name``, ``--version``; the next free version by default, the latest one with
``--ckpt_path last``), holding ``config.yaml``, ``metrics.csv``, TensorBoard events,
``checkpoints/best.ckpt`` (best validation metric) and ``checkpoints/last.ckpt`` (always the latest
state, also written on Ctrl-C), ``test_predictions.csv``, ``splits.csv`` and ``figures/``.
``validate`` / ``test`` / ``predict`` write only what they are asked for.
"""

from __future__ import annotations

import contextlib
import io
import os.path as osp
import shlex
import textwrap
from typing import Any, Literal

from lightning.pytorch import LightningDataModule, LightningModule, Trainer
from lightning.pytorch.callbacks import (
    LearningRateMonitor,
    ModelCheckpoint,
)
from lightning.pytorch.cli import (
    LightningArgumentParser,
    SaveConfigCallback,
)
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_warn
from lightning.pytorch.utilities.model_helpers import is_overridden

from graph_urpe.cli.checkpoint_parsing import SUBCOMMANDS, CheckpointParsingCLI
from graph_urpe.cli.config_help import configured_values_note, help_config_files, help_epilog
from graph_urpe.cli.configs import DEFAULT_CONFIG
from graph_urpe.cli.fit_report import print_fit_summary, write_run_outputs
from graph_urpe.cli.fit_setup import fit_callbacks, open_run_folder, release_run_folders
from graph_urpe.cli.leaderboard import trainer_record, write_record
from graph_urpe.cli.links import add_links
from graph_urpe.cli.messages import CLIError
from graph_urpe.cli.parser import HELP_WIDTH, GraphURPEArgumentParser
from graph_urpe.cli.predict import PredictInputs, add_predict_arguments, predict_smiles
from graph_urpe.cli.resume_state import use_checked_restore
from graph_urpe.cli.run import (
    AtomicCheckpointIO,
    RunCSVLogger,
    task_of,
    tested_checkpoint,
    use_exact_resume,
)
from graph_urpe.cli.seeds import seeds_command
from graph_urpe.data.modules.graph import BatchedGraphDataModule
from graph_urpe.models.soup import EpochSoup

__all__ = ["GraphURPECLI", "run"]


class _FitConfigCallback(SaveConfigCallback):
    """Saves the resolved ``config.yaml`` into the run folder, for ``fit`` only."""

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if stage == "fit":
            super().setup(trainer, pl_module, stage)


class GraphURPECLI(CheckpointParsingCLI):
    """LightningCLI with one folder per ``fit`` run, ``fit`` followed by ``test`` on the best
    (or last, ``--test_checkpoint``) checkpoint and a summary, dataset facts linked into the model, and a ``predict`` that requires
    a checkpoint (read as data: :class:`~graph_urpe.cli.checkpoint_parsing.CheckpointParsingCLI`).
    Models and data modules are subclass-mode (chosen by class path)."""

    _parsing: str | None = None  # the subcommand whose parser is being built (None: run=False)

    def __init__(self, *args: Any, user_args: list[str] | None = None, **kwargs: Any) -> None:
        """LightningCLI's arguments, plus ``user_args``: the command line as the user typed it
        (for the resume command printed after Ctrl-C; default: none)."""
        self.user_args = list(user_args or [])
        super().__init__(*args, **kwargs)

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        if self._parsing != "predict":  # predict: the checkpoint's facts win
            add_links(parser)
        else:
            add_predict_arguments(parser)
        parser.add_argument(
            "--name", type=str, default="run",
            help="Run name: fit writes into <trainer.default_root_dir>/<name>/version_<N>.",
        )
        parser.add_argument(
            "--version", type=int | None, default=None,
            help="Run version (default: the next free one; with --ckpt_path last the latest one "
            "that has a last.ckpt).",
        )
        # Options of fit; every subcommand (and run=False) accepts them, so a run's config.yaml
        # can be passed to validate / test / predict as it is (they ignore them).
        parser.add_argument(
            "--test_after_fit", type=bool, default=True,
            help="fit: after training, test a checkpoint (--test_checkpoint), write "
            "test_predictions.csv and the figures into the run folder, and print a summary.",
        )
        parser.add_argument(
            "--test_checkpoint", type=Literal["best", "last", "auto", "soup"], default="best",
            help="fit: the checkpoint tested after training: best (the best validation metric), "
            "last (the end of the schedule), auto: last for regression, best otherwise "
            "(benchmarks/README.md section 12: on small sets the end of the decayed schedule is "
            "steadier for regression, while classifiers overfit and do better stopped early), or "
            "soup: soup.ckpt, the weights of the 5 best epochs by the validation metric averaged "
            "(section 30c: better than best, last and auto on the peer benchmark's sets).",
        )
        parser.add_argument(
            "--ensemble_size", type=int, default=1,
            help="fit: train a deep ensemble of this many networks (different initial weights, "
            "one run folder, one checkpoint); predictions and the test report give the members' "
            "mean and, for regression, their spread (Chemprop's --ensemble-size).",
        )
        parser.add_argument(
            "--classical_baseline", type=bool, default=True,
            help="fit on a CSV (CSVDataModule): also fit an SVM on ECFP4 with a Tanimoto kernel "
            "(and, for classification, a random forest on ECFP4) on the same training rows and "
            "blend them with the network (weights and, for regression, the interval fitted on "
            "the validation rows); report their and the blend's scores beside the network's "
            "(metrics.csv: val|test/<metric>_classical (SVM), _forest, _blend) and keep them in "
            "the checkpoint: predict's <target>_pred is the blend, <target>_network the "
            "network's own, <target>_ecfp_svm the SVM's, <target>_ecfp_rf the forest's, with "
            "nearest_train_similarity / nearest_train_row (graph_urpe.models.classical_baseline);"
            " skipped above 20,000 training molecules (then <target>_pred is the network's).",
        )
        parser.add_argument(
            "--early_stopping_patience", type=int | None, default=None,
            help="fit: stop when the monitored validation metric has not improved for this many "
            "validations (Lightning's EarlyStopping).",
        )

    def _prepare_subcommand_parser(self, klass: type, subcommand: str, **kwargs: Any):
        self._parsing = subcommand
        parser: LightningArgumentParser = super()._prepare_subcommand_parser(
            klass, subcommand, **kwargs
        )
        self._parsing = None
        return parser

    def before_instantiate_classes(self) -> None:
        """``fit``: ``--ensemble_size`` into the model, and a mean-variance head (the network's
        ``outputs_per_task: 2``) for ``--model.init_args.objective.loss mve``."""
        if self.subcommand != "fit":
            return
        config = self.config["fit"]
        model = config.get("model")
        init = model.get("init_args") if model is not None else None
        if init is None or "ensemble_size" not in init:
            if config.get("ensemble_size", 1) != 1:
                raise CLIError("--ensemble_size is for graph_urpe.models.GraphPropertyModule; "
                               "this model has no ensembles: leave it at 1.")
            return
        if config.get("ensemble_size", 1) != 1:
            init["ensemble_size"] = config["ensemble_size"]
        network, objective = init.get("model"), init.get("objective")
        loss = objective.get("loss") if objective is not None else None
        if loss == "mve" and network is not None \
                and network.get("init_args") is not None:
            network["init_args"]["outputs_per_task"] = 2

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
        resume = config.get("ckpt_path") is not None
        self._run_folder, version, config["ckpt_path"] = open_run_folder(
            root, name, config.get("version"), config.get("ckpt_path"))
        user_callbacks = [cb for cb in (trainer_cfg.get("callbacks") or [])
                          if not isinstance(cb, (ModelCheckpoint, LearningRateMonitor))]
        kwargs["callbacks"] = user_callbacks + fit_callbacks(
            config, self.model, self.datamodule, self._run_folder, user_callbacks)
        kwargs["logger"] = [
            RunCSVLogger(root, name=name, version=version, resume=resume),
            TensorBoardLogger(root, name=name, version=version, default_hp_metric=False),
        ]
        kwargs["default_root_dir"] = self.run_dir
        return use_checked_restore(use_exact_resume(super().instantiate_trainer(**kwargs)))

    @property
    def run_dir(self) -> str:
        """``fit``'s run folder (rank 0's on every DDP rank once training has started)."""
        return self._run_folder.run_dir

    # -------------------------------------------------------------- subcommands
    def fit(self, model: LightningModule, **kwargs: Any) -> None:
        """``trainer.fit``, then (unless ``--test_after_fit false``) test the best checkpoint (or
        the last, ``--test_checkpoint last``), write the run's outputs and print the summary."""
        try:
            self.trainer.fit(model, **kwargs)
        except SystemExit as exc:  # Lightning exits with 1 after a graceful shutdown on Ctrl-C
            if self.trainer.interrupted and self.trainer.is_global_zero:
                print_fit_summary(self.trainer, None, self.run_dir,
                                  resume=self._resume_command())
            if self.trainer.received_sigterm and not exc.code:  # its SIGTERMException: 0
                raise SystemExit(143) from None
            raise
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
        choice = tested_checkpoint(self.config["fit"].get("test_checkpoint"),
                                   task_of(model))
        tested = self._best_checkpoint() if choice == "best" else self._write_soup(model, datamodule) \
            if choice == "soup" else osp.join(self.run_dir, "checkpoints", "last.ckpt")
        results = self.trainer.test(model, datamodule=datamodule, ckpt_path=tested or None,
                                    verbose=False)
        if self.trainer.is_global_zero:
            metrics = results[0] if results else {}
            write_run_outputs(self.trainer, model, datamodule, self.run_dir)
            record = trainer_record(self.trainer, metrics)
            if record is not None:
                write_record(record, self.run_dir)
            print_fit_summary(self.trainer, metrics, self.run_dir, record,
                              tested_checkpoint=tested,
                              seeds_command=seeds_command(self.user_args))

    def test(self, model: LightningModule, **kwargs: Any) -> Any:
        """``trainer.test``, then one line saying whether the test metric is a leaderboard
        number (:mod:`graph_urpe.cli.leaderboard`)."""
        results = self.trainer.test(model, **kwargs)
        record = trainer_record(self.trainer, results[0]) if results else None
        if record is not None and self.trainer.is_global_zero:
            print(record["note"])
        return results

    def _resume_command(self) -> str:
        """The command that resumes this run: the user's, with ``--ckpt_path last`` and the
        run's ``--name`` / ``--version``."""
        args, skip = [], False
        for arg in self.user_args:
            if skip:
                skip = False
            elif arg in ("--ckpt_path", "--version", "--name"):
                skip = True
            elif not arg.startswith(("--ckpt_path=", "--version=", "--name=")):
                args.append(arg)
        version = osp.basename(self.run_dir).removeprefix("version_")
        name = osp.basename(osp.dirname(self.run_dir))
        return shlex.join(["graph-urpe", *args, "--name", name, "--version", version,
                           "--ckpt_path", "last"])

    def _write_soup(self, model: LightningModule, datamodule: LightningDataModule) -> str:
        """Write ``checkpoints/soup.ckpt``: the fit's last state with the module's weights
        replaced by :meth:`~graph_urpe.models.soup.EpochSoup.averaged` (the module keeps its own
        weights); its path, or the last checkpoint's (with a warning) when no epoch was kept."""
        soup = next((cb for cb in self.trainer.callbacks if isinstance(cb, EpochSoup)), None)
        last = osp.join(self.run_dir, "checkpoints", "last.ckpt")
        if soup is None or not soup.entries:
            rank_zero_warn(f"no epoch had a finite {soup.monitor if soup else 'validation metric'}"
                           " (a validation split without both classes, or without labels): "
                           "soup.ckpt is not written and last.ckpt is tested; use more data or "
                           "--data.init_args.split random", category=UserWarning)
            return last
        path = osp.join(self.run_dir, "checkpoints", "soup.ckpt")
        own = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict(soup.averaged())
        try:
            # Validate the soup, as every epoch is validated before its checkpoint is written:
            # its calibration and the blend's weights and interval are then fitted on its own
            # validation predictions (not averaged, not the last epoch's), so predict with
            # soup.ckpt writes what the test of soup.ckpt scores.
            self.trainer.validate(model, datamodule=datamodule, verbose=False)
            self.trainer.save_checkpoint(path)
        finally:
            model.load_state_dict(own)
        return path

    def _best_checkpoint(self) -> str:
        for cb in self.trainer.checkpoint_callbacks:
            if isinstance(cb, ModelCheckpoint) and cb.monitor is not None and cb.best_model_path:
                return cb.best_model_path
        return ""

    def predict(self, model: LightningModule, **kwargs: Any) -> Any:
        """``trainer.predict`` (:meth:`parse_arguments` has made sure of a checkpoint): for a
        graph data module, the ``--csv`` / ``--smiles`` inputs through
        :func:`~graph_urpe.cli.predict.predict_smiles` with the checkpoint's training vocabulary;
        otherwise the data module's own predict loader."""
        dm = kwargs.get("datamodule")
        if isinstance(dm, BatchedGraphDataModule):
            inputs = PredictInputs.from_config(self.config[self.subcommand],
                                               model.record.smiles_column)
            return predict_smiles(self.trainer, model, dm, inputs, self.training_vocabulary,
                                  classical=self.classical, ckpt_path=kwargs.get("ckpt_path"))
        return self.trainer.predict(model, **kwargs)


CONFIG_HELP = (
    "--config: an experiment file (only what differs from the package's default.yaml), or the "
    "name of one shipped with the package without a path, e.g. csv/template or "
    "zinc/zinc-like-rpe (a local file of that name wins; `graph-urpe fit --config list` lists "
    "them). May be given more than once.")

def run(argv: list[str], user_args: list[str] | None = None) -> None:
    """Run one LightningCLI subcommand: ``argv`` starts with ``fit``, ``validate``, ``test`` or
    ``predict``; its ``--config`` values are file paths or inline configurations
    (:func:`graph_urpe.cli.configs.resolve_config_args`).

    Args:
        argv (list[str]): the arguments.
        user_args (list[str], optional): the arguments as the user typed them, for the resume
            command printed after Ctrl-C (default: ``argv``).

    Raises:
        CLIError: for ``predict`` without a checkpoint or an unreadable checkpoint.
        FileNotFoundError: for a ``--ckpt_path`` that does not exist.
        argparse.ArgumentError: for an option that does not parse (also an abbreviated one:
            options must be written out).
    """
    # allow_abbrev=False: `--trainer.max_epoch` is refused, not read as --trainer.max_epochs.
    parser_kwargs: dict[str, Any] = {"description": "graph-urpe (LightningCLI)",
                                     "exit_on_error": False, "allow_abbrev": False}
    # --help after --config: the defaults shown are the configuration's (graph_urpe.cli.config_help)
    base = [DEFAULT_CONFIG, *help_config_files(argv)]
    for sub in SUBCOMMANDS:
        parser_kwargs[sub] = {"default_config_files": base, "exit_on_error": False,
                              "allow_abbrev": False, "epilog": CONFIG_HELP}
        if len(base) > 1:
            parser_kwargs[sub]["help_epilog"] = help_epilog(base, list(user_args or argv))
    note = configured_values_note(argv, list(user_args or argv),
                                  lambda args: _printed_config(parser_kwargs, args))
    if note:  # --data.help CLASS after --config: the configuration's values, then the class help
        print(textwrap.fill(note, HELP_WIDTH) + "\n")
    failed = True
    try:
        _run_cli(parser_kwargs, argv, user_args)
        failed = False
    finally:  # the run folder is free again when the command ends (also within one process)
        release_run_folders(failed)


def _printed_config(parser_kwargs: dict[str, Any], argv: list[str]) -> str:
    """What ``argv`` (ending in ``--print_config``) prints: the resolved configuration; empty
    when it cannot be resolved (the help that follows says why, or prints as it would)."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            _run_cli(parser_kwargs, argv, None)
    except SystemExit:
        return out.getvalue()
    except Exception:  # noqa: BLE001  (e.g. predict without --ckpt_path: no note, only the help)
        return ""
    return out.getvalue()


def _run_cli(parser_kwargs: dict[str, Any], argv: list[str], user_args: list[str] | None) -> None:
    GraphURPECLI(
        LightningModule,
        LightningDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        parser_kwargs=parser_kwargs,
        parser_class=GraphURPEArgumentParser,
        save_config_callback=_FitConfigCallback,
        save_config_kwargs={"overwrite": True},
        args=argv,
        user_args=user_args if user_args is not None else argv,
    )
