"""``graph-urpe predict`` on SMILES, one straight path: check the output, then chunk by chunk of
input rows featurize them as the checkpoint was trained (:mod:`graph_urpe.data.predict_inputs`),
flag inputs outside the training vocabulary, predict, write the chunk's rows (one per input); join
the chunks into the output at the end (:mod:`graph_urpe.cli.prediction_parts`: a killed run
resumes at the first chunk not written).

* :class:`PredictInputs`: the command's own options (input, SMILES column, output, chunk size);
  the data module only lends its batch budgets
  (:class:`~graph_urpe.data.budgets.BatchBudgets`);
* :class:`~graph_urpe.cli.predict_writer.SmilesPredictionWriter`: the Lightning callback that
  builds a chunk's table (:mod:`graph_urpe.cli.predict_writer`), handed plain values only;
* :func:`predict_smiles`: the whole path (what ``graph-urpe predict`` runs).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, Self

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from graph_urpe.choices import check_at_least
from graph_urpe.cli.predict_writer import SmilesPredictionWriter
from graph_urpe.cli.prediction_parts import PredictionParts, file_identity
from graph_urpe.cli.time_cues import rows_estimate
from graph_urpe.data.budgets import BatchBudgets
from graph_urpe.data.csv.reading import csv_header
from graph_urpe.data.modules.graph import BatchedGraphDataModule
from graph_urpe.data.predict_inputs import (
    iter_predict_inputs,
    model_input_graphs,
    vocabulary_warnings,
)
from graph_urpe.data.predictions import check_output_columns
from graph_urpe.files import check_writable, refuse_output_over_inputs
from graph_urpe.models.classical_baseline import classical_columns, count_outside_domain

__all__ = [
    "PredictInputs",
    "add_predict_arguments",
    "predict_smiles",
]


@dataclasses.dataclass(frozen=True)
class PredictInputs:
    r"""What ``graph-urpe predict`` reads and writes (its options ``--csv``, ``--smiles``,
    ``--smiles_column``, ``--output``, ``--chunk_rows``; Chemprop's ``--test-path``,
    ``--preds-path``, ``--smiles-columns``).

    Args:
        csv (str, optional): a CSV file with a SMILES column; its other columns are copied to
            the output. (default: :obj:`None`)
        smiles (list[str], optional): SMILES strings instead of a file. (default: :obj:`None`)
        smiles_column (str, optional): the SMILES column of :attr:`csv` (and of the output).
            (default: ``"smiles"``)
        output (str, optional): the output CSV, one row per input row.
            (default: ``"predictions.csv"``)
        chunk_rows (int, optional): input rows read, featurized, predicted and written at a
            time (memory bounded by the chunk, not the input; a killed run resumes at the first
            unwritten chunk: :mod:`graph_urpe.cli.prediction_parts`). (default: :obj:`20000`)

    Raises:
        ValueError: both :attr:`csv` and :attr:`smiles`, or ``chunk_rows < 1``.
    """

    csv: str | None = None
    smiles: list[str] | None = None
    smiles_column: str = "smiles"
    output: str = "predictions.csv"
    chunk_rows: int = 20_000

    def __post_init__(self) -> None:
        if self.csv is not None and self.smiles is not None:
            raise ValueError("give either --csv or --smiles, not both.")
        check_at_least(1, chunk_rows=self.chunk_rows)

    @classmethod
    def from_config(cls, config: Any, trained_smiles_column: str | None = None) -> PredictInputs:
        """The options as parsed by :func:`add_predict_arguments` (``config["csv"]`` ...); without
        ``--smiles_column``, the training file's column (``trained_smiles_column``, kept in the
        checkpoint), else ``"smiles"``."""
        column = config.get("smiles_column") or trained_smiles_column or "smiles"
        return cls(config.get("csv"), config.get("smiles"), column, config.get("output"),
                   config.get("chunk_rows"))

    def chunks(self) -> Iterator[pd.DataFrame]:
        """The input rows in chunks of at most :attr:`chunk_rows`, read as they are needed (a
        CSV is never held whole; :func:`~graph_urpe.data.predict_inputs.iter_predict_inputs`)."""
        return iter_predict_inputs(self.csv, self.smiles, self.smiles_column, self.chunk_rows)


def add_predict_arguments(parser: Any) -> None:
    """Add ``predict``'s own options (:class:`PredictInputs`: ``--csv``, ``--smiles``,
    ``--smiles_column``, ``--output``, ``--chunk_rows``) to its LightningCLI parser
    (:class:`~lightning.pytorch.cli.LightningArgumentParser`)."""
    parser.add_argument("--csv", type=str | None, default=None,
                        help="predict: a CSV file with a SMILES column (its other columns are "
                        "copied to the output).")
    parser.add_argument("--smiles", type=str, nargs="+", default=None,
                        help="predict: SMILES instead of a file, separated by spaces (quote each "
                        "for the shell): --smiles CCO 'c1ccccc1O'.")
    parser.add_argument("--smiles_column", type=str | None, default=None,
                        help="predict: the SMILES column of --csv (default: the training "
                        "file's, kept in the checkpoint; else smiles).")
    parser.add_argument("--output", type=str, default="predictions.csv",
                        help="predict: the output CSV, one row per input row.")
    parser.add_argument("--chunk_rows", type=int, default=20_000,
                        help="predict: input rows read, featurized, predicted and written at a "
                        "time (memory bounded by the chunk; a killed run resumes at the first "
                        "unwritten chunk).")


def _predict_chunk(trainer: Any, model: Any, datamodule: BatchedGraphDataModule,
                   frame: pd.DataFrame, inputs: PredictInputs, vocabulary: dict | None,
                   predict_kwargs: dict, progress: Any = None) -> pd.DataFrame:
    """The prediction table of one chunk of input rows (see :func:`predict_smiles`)."""
    budgets = BatchBudgets.of(datamodule)
    graphs, errors = model_input_graphs(
        frame[inputs.smiles_column].tolist(), model, budgets,
        getattr(datamodule, "processing_workers", None))
    targets = list(model.target_names)
    writer = SmilesPredictionWriter(
        frame, errors,
        vocabulary_warnings(graphs, vocabulary, model.record.featurization), targets,
        progress)
    if not graphs:  # Lightning skips the loop on an empty loader
        return writer.tabulate(np.zeros(0, dtype=np.int64), np.zeros((0, len(targets))))
    trainer.callbacks.append(writer)
    try:
        loader = budgets.loader(graphs, trainer.world_size, trainer.global_rank,
                                datamodule.num_workers)
        trainer.predict(model, dataloaders=loader,
                        return_predictions=False, **predict_kwargs)
    finally:
        trainer.callbacks.remove(writer)
    return writer.table


def _report(counts: dict[str, int], first_errors: list[tuple[int, str]], output: str,
            rank_zero: bool, from_csv: bool = True) -> None:
    """Print how many rows were predicted, failed and flagged (the output's absolute path), and
    the first failures: their 0-based row and, as ``fit`` does, their CSV line (row + 2: one
    header line, blank lines kept as rows) or, for ``--smiles``, their 1-based position."""
    if not rank_zero or not counts["rows"]:
        return
    failed = counts["failed"]
    failed_text = f"{failed} failed (reason in the 'error' column)" if failed else "0 failed"
    flagged = (f"; {counts['flagged']} flagged: outside the training vocabulary, larger than "
               "every training molecule or outside the applicability domain (see the 'warning' "
               "column)" if counts["flagged"] else "")
    resumed = (f" ({counts['resumed_chunks']} chunks from an interrupted run reused)"
               if counts["resumed_chunks"] else "")
    rows = f"{counts['rows']} input row{'s' if counts['rows'] != 1 else ''}"
    print(f"\nWrote predictions for {rows} to {os.path.abspath(output)}{resumed}: "
          f"{counts['predicted']} predicted, {failed_text}{flagged}.")
    for row, reason in first_errors[:10]:
        where = f"CSV line {row + 2}" if from_csv else f"--smiles value {row + 1}"
        print(f"  row {row} ({where}): {reason}")
    if failed > 10:
        print(f"  ... and {failed - 10} more")


def _count_rows(path: str | None, smiles: list[str] | None) -> int | None:
    """The number of input rows, for the progress bar: a CSV's line count less its header (an
    estimate when quoted fields span lines)."""
    if path is None:
        return None if smiles is None else len(smiles)
    lines, last = 0, b"\n"
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            lines += block.count(b"\n")
            last = block[-1:]
    return max(0, lines + (last != b"\n") - 1)


class _SigtermLatch:
    """Within the block, SIGTERM only sets :attr:`received` (the block decides where to stop):
    Lightning's handler, installed during each ``trainer.predict``, calls this one too, but its
    predict loop never checks its flag and it forgets it at the next ``trainer.predict``, so a
    SIGTERM did not stop ``predict``. A process forked within the block (a featurization pool's
    worker, which its pool ends with SIGTERM) still dies of it. Only in the main thread (signal
    handlers can be set only there); elsewhere a no-op."""

    received = False

    def __enter__(self) -> Self:
        self._pid, self._installed = os.getpid(), False
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._note)
            self._installed = True
        return self

    def _note(self, signum: int, frame: Any) -> None:
        if os.getpid() != self._pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        self.received = True

    def __exit__(self, *exc: object) -> None:
        if self._installed:  # None: a handler not set from Python, taken as the default
            signal.signal(signal.SIGTERM,
                          signal.SIG_DFL if self._previous is None else self._previous)


def predict_smiles(trainer: Any, model: Any, datamodule: BatchedGraphDataModule,
                   inputs: PredictInputs, vocabulary: dict | None = None,
                   classical: Any = None, **predict_kwargs: Any) -> dict[str, int]:
    """Predict SMILES and write one row per input (what ``graph-urpe predict`` runs).

    Checks the output path before any work, then goes through the input in chunks of
    ``inputs.chunk_rows`` rows: featurizes a chunk as the model was trained (its
    ``featurization``, node limit and relations; :func:`~graph_urpe.data.predict_inputs.
    model_input_graphs`, as :class:`~graph_urpe.Predictor` and ``explain`` do), flags inputs outside the training vocabulary, runs ``trainer.predict``
    over size-bucketed batches with one :class:`SmilesPredictionWriter` and writes the chunk's
    rows at once (:class:`~graph_urpe.cli.prediction_parts.PredictionParts`); at the end the
    chunks are joined into the output atomically. Memory is bounded by a chunk, a progress bar on
    stderr shows rows done, rate and ETA, and a killed run started again with the same input,
    checkpoint (their content: SHA-256) and chunk size skips the chunks already written. A
    chunk where no input becomes a graph still writes its error rows. A SIGTERM stops it once the chunk at hand is written (on
    every DDP rank), with one line on stderr saying how to resume.

    Args:
        trainer (lightning.pytorch.Trainer): the trainer.
        model (GraphPropertyModule): the trained module (its ``featurization``,
            ``max_graph_nodes``, ``dataset_source``, ``target_names``).
        datamodule (BatchedGraphDataModule): the batch budgets (``batch_size``,
            ``max_nodes_per_batch``, ``max_cells_per_batch``, ``max_graph_nodes``:
            :meth:`BatchBudgets.of <graph_urpe.data.budgets.BatchBudgets.of>`; without ``--data``
            options, :data:`~graph_urpe.data.budgets.DEFAULT_BUDGETS`) and
            ``processing_workers`` where it has them. A ``max_graph_nodes`` above the model's
            cannot raise the model's limit: a warning on stderr says so.
        inputs (PredictInputs): what to read and where to write.
        vocabulary (dict, optional): the training vocabulary (default: :obj:`None`, the model's
            :attr:`training_vocabulary`, restored by ``load_from_checkpoint``).
        classical (ClassicalModel, optional): the checkpoint's classical model: the blend as
            ``<target>_pred`` and its columns (``<target>_network``, ``<target>_ecfp_svm``,
            ``<target>_ecfp_rf``, ``nearest_train_similarity``, ...:
            :func:`~graph_urpe.models.classical_baseline.classical_columns`) and one warning
            line for the molecules below its applicability threshold. (default: :obj:`None`)
        **predict_kwargs: more arguments of ``trainer.predict`` (e.g. ``ckpt_path``: loaded for
            the first chunk predicted).

    Returns:
        dict: ``{"rows", "predicted", "failed", "flagged", "resumed_chunks"}`` counts.

    Raises:
        ValueError: no input could be predicted (after writing their error rows; an output
            that is not finite, a negative std or an inverted interval is an error in its row),
            the input CSV cannot be read, lacks the SMILES column or has columns named like
            the output's, or the model was not trained on molecules.
        graph_urpe.files.OutputError: the output path cannot be written, or is one of the inputs
            (the checkpoint, the input CSV).
        SystemExit: status 143 after a SIGTERM (the chunks written are kept).
    """
    refuse_output_over_inputs(inputs.output, {"--csv": inputs.csv,
                                              "--ckpt_path": predict_kwargs.get("ckpt_path")})
    check_writable(inputs.output)
    if inputs.csv is not None:  # before any work: the user's columns are kept
        check_output_columns(csv_header(inputs.csv), list(model.target_names), inputs.csv)
    # The input's checks (the whole file's encoding and field counts, the SMILES column) run as
    # its first chunk is read: before the parts folder and the progress bar (an error alone).
    frames = inputs.chunks()
    first = next(frames, None)
    frames = itertools.chain([] if first is None else [first], frames)
    trained, asked = model.record.max_graph_nodes, getattr(datamodule, "max_graph_nodes",
                                                                   None)
    if trained is not None and asked is not None and asked > trained and trainer.is_global_zero:
        print(f"Warning: --data.init_args.max_graph_nodes {asked} is above the model's limit, "
              f"{trained} nodes (its training's, kept in the checkpoint): larger molecules still "
              "get an error row (train with a larger max_graph_nodes to predict them).",
              file=sys.stderr, flush=True)
    if vocabulary is None:
        vocabulary = getattr(model, "training_vocabulary", None)
    targets = list(model.target_names)
    parts = PredictionParts(inputs.output, owner=trainer.is_global_zero, manifest={
        "input": file_identity(inputs.csv),
        "smiles": None if inputs.smiles is None else list(inputs.smiles),
        "checkpoint": file_identity(predict_kwargs.get("ckpt_path")),
        "chunk_rows": inputs.chunk_rows, "smiles_column": inputs.smiles_column,
        "targets": targets})
    counts = {"rows": 0, "predicted": 0, "failed": 0, "flagged": 0,
              "resumed_chunks": parts.resumed}
    first_errors: list[tuple[int, str]] = []
    lightning_bar = trainer.progress_bar_callback
    if lightning_bar is not None:
        lightning_bar.disable()  # one bar over all chunks instead of one per chunk
    total = _count_rows(inputs.csv, inputs.smiles)
    bar = tqdm(total=total, desc="Predicting", unit="mol", file=sys.stderr, smoothing=0.05,
               disable=not trainer.is_global_zero)
    chunks, stopped, outside = 0, False, 0
    done, resumed_rows, started = 0, 0, time.perf_counter()
    with _SigtermLatch() as sigterm:
        try:
            for index, frame in enumerate(frames):
                chunks = index + 1
                if parts.done(index):
                    table = parts.read(index)
                    resumed_rows += len(table)
                    started = time.perf_counter()
                else:
                    table = _predict_chunk(trainer, model, datamodule, frame, inputs, vocabulary,
                                           predict_kwargs, bar.update)
                    if classical is not None:
                        table = classical_columns(table, frame[inputs.smiles_column].tolist(),
                                                  classical, targets)
                    predict_kwargs.pop("ckpt_path", None)  # loaded once: later chunks reuse it
                    if trainer.is_global_zero:
                        parts.write(index, table)
                errors = table["error"].astype(str)
                failed = errors != ""
                counts["rows"] += len(table)
                counts["failed"] += int(failed.sum())
                counts["predicted"] += int((~failed).sum())
                counts["flagged"] += int((table["warning"].astype(str) != "").sum())
                outside += count_outside_domain(table, classical) if classical is not None else 0
                if len(first_errors) < 10:
                    first_errors += [(int(r), e)
                                     for r, e in zip(table["row"][failed], errors[failed])]
                done += len(table)  # the bar ticked per batch; now the chunk's rows exactly
                bar.update(done - bar.n)
                if index == parts.resumed and total and total > done and trainer.is_global_zero:
                    bar.write(rows_estimate(time.perf_counter() - started, done - resumed_rows,
                                             total - done), file=sys.stderr)
                # once the chunk is kept; all ranks alike (a SIGTERM may reach rank 0 alone)
                if trainer.strategy.reduce_boolean_decision(sigterm.received, all=False):
                    stopped = True
                    break
        finally:
            bar.close()
            if lightning_bar is not None:
                lightning_bar.enable()
    if stopped:
        if trainer.is_global_zero:
            print(f"predict stopped by SIGTERM after {chunks} chunks of {inputs.chunk_rows} "
                  f"rows, kept in {parts.folder}: run the same command again to resume after "
                  "them.", file=sys.stderr, flush=True)
        raise SystemExit(143)
    if trainer.is_global_zero:
        if chunks:
            parts.finish(chunks)
        else:  # no input rows: nothing to write
            parts.discard()
    _report(counts, first_errors, inputs.output, trainer.is_global_zero, inputs.csv is not None)
    if outside and trainer.is_global_zero:
        print(f"Warning: {outside} molecule(s) have an ECFP4 Tanimoto similarity below "
              f"{classical.similarity_threshold:.2f} to every training molecule (column "
              "nearest_train_similarity): outside the applicability domain chosen on the "
              "validation rows, their predictions are extrapolations.", file=sys.stderr,
              flush=True)
    if counts["predicted"] == 0:
        rows = counts["rows"]
        raise ValueError(
            f"no molecule could be predicted: {rows} input row{'s' if rows != 1 else ''}"
            + (", all failed (see the 'error' column above)." if rows else
               ": give at least one SMILES (--csv FILE or --smiles).")
        )
    return counts
