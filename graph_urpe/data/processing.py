"""Turning many SMILES rows into PyG graphs: featurization, size check, labels and the
``pre_transform``, in parallel worker processes with a progress bar.

This is the expensive part of building a dataset (RDKit parsing and the all-pairs shortest paths of
:class:`graph_urpe.transforms.AddShortestPathDistance`); datasets run it once and cache the result
(the CSV dataset through :func:`rows_to_columns` and :func:`task_runner`, chunk by chunk into a
memory-mapped store). Each SMILES is parsed once:
the features, the canonical key of the duplicate check and the scaffold of a scaffold split come
from that one molecule, and the node limit is read from the text first only when the text is
longer than the limit. About 0.9 CPU ms per MOSES molecule in all, one process
(``benchmarks/README.md`` section 16b).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import multiprocessing
import os
import pickle
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from rdkit import Chem
from torch_geometric.data import Data
from tqdm.auto import tqdm

from graph_urpe.choices import check_choice
from graph_urpe.data.csv.row_errors import RowError
from graph_urpe.data.csv.splits import mol_scaffold
from graph_urpe.data.featurize import (
    Featurization,
    MoleculeError,
    heavy_atom_count,
    mol_to_graph,
    parse_smiles,
)
from graph_urpe.data.store import encode_strings
from graph_urpe.data.stored_graphs import ColumnBlocks, graphs_to_columns

PROGRESS_MIN_ITEMS = 1000
"""With ``progress=None``, inputs of at least this many items show a progress bar (about a second
of RDKit and SPD work per thousand molecules on one core)."""

AUTO_PARALLEL_MIN_ITEMS = 5000
"""With ``num_workers=None``, inputs smaller than this are processed in the calling process."""

AUTO_MAX_WORKERS = 8
"""With ``num_workers=None``, at most this many worker processes."""


def available_cpus() -> int:
    """CPUs this process may run on (:func:`os.sched_getaffinity`, else :func:`os.cpu_count`)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def resolve_num_workers(num_workers: int | None, num_items: int) -> int:
    r"""Number of worker processes to use: :obj:`num_workers` if given (0 = in-process), else
    chosen from the machine and the input size so that the default is never slower than one
    process: ``min(AUTO_MAX_WORKERS, cpus - 1)`` workers (one core is left to the calling process,
    which unpickles and collects the results) when that is at least 2 and the input has at least
    :data:`AUTO_PARALLEL_MIN_ITEMS` items, else 0 (``cpus`` from :func:`available_cpus`).

    Measured on the 12,000-molecule ZINC-like set with ZINC featurization and
    ``AddShortestPathDistance(paths=True)`` on a 2-core machine shared with other jobs (load
    average 6-7): in-process 15-30 s; 2 workers 23-90 s; 1 worker 10-160 s (before results were
    sent back as NumPy arrays, each graph cost about 5 ms to pickle and unpickle, more than
    computing it). With 2 cores, workers compete with the calling process and are not reliably
    faster, hence at least 3 cores before any worker is used. Again on MOSES (2026-12-02, section
    16b): a second process beside a first one on this shared machine ran at half speed (two
    concurrent runs of 6,000 molecules: 745 molecules / s each, one alone 1,620), so two workers
    gave 1,569 molecules / s against 1,056 in-process only when the second core was free.

    Raises:
        ValueError: for a negative :obj:`num_workers`.
    """
    if num_workers is not None:
        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0 (0 = no worker processes), got {num_workers}")
        return int(num_workers)
    workers = min(AUTO_MAX_WORKERS, available_cpus() - 1)
    if num_items < AUTO_PARALLEL_MIN_ITEMS or workers < 2:
        return 0
    return workers


def parallel_map(fn: Callable[[Any], Any], items: Sequence[Any], num_workers: int | None = None,
                 chunksize: int | None = None, desc: str | None = None,
                 progress: bool | None = None) -> list[Any]:
    r"""``[fn(item) for item in items]``, in a :class:`multiprocessing.Pool` when
    :func:`resolve_num_workers` says so, in order, with a :mod:`tqdm` progress bar.

    Args:
        fn (Callable): a picklable function (module-level, or a :func:`functools.partial` of one).
        items (Sequence): the inputs (picklable).
        num_workers (int, optional): worker processes; 0 runs in the calling process.
            (default: :obj:`None`, see :func:`resolve_num_workers`)
        chunksize (int, optional): items sent to a worker at a time.
            (default: :obj:`None`, about ``len(items) / (8 * num_workers)``, at most 1000)
        desc (str, optional): progress bar label. (default: :obj:`None`)
        progress (bool, optional): show a progress bar on stderr; :obj:`None` shows one for at
            least :data:`PROGRESS_MIN_ITEMS` items. (default: :obj:`None`)
    """
    workers = resolve_num_workers(num_workers, len(items))
    if progress is None:
        progress = len(items) >= PROGRESS_MIN_ITEMS
    bar = functools.partial(tqdm, total=len(items), desc=desc, disable=not progress,
                            file=sys.stderr, unit="mol" if desc else "it", smoothing=0.1)
    if workers == 0:
        with task_runner(0):
            return [fn(item) for item in bar(items)]
    if chunksize is None:
        chunksize = max(1, min(1000, len(items) // (8 * workers)))
    chunks = [items[i:i + chunksize] for i in range(0, len(items), chunksize)]
    results: list[Any] = []
    with task_runner(workers) as run, bar() as progress_bar:
        # One task (and one pickle each way) per chunk of items, not per item.
        for blob in run(functools.partial(_call_packed, fn), chunks):
            done = [_unpack(result) for result in pickle.loads(blob)]
            results.extend(done)
            progress_bar.update(len(done))
    return results


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while results pile up (each full collection walks
    every graph made so far: 10 % of the CPU time at 50,000 molecules); the graphs hold no
    reference cycles, and the collector is back on (if it was) when the block ends."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _call_packed(fn: Callable[[Any], Any], chunk: Sequence[Any]) -> bytes:
    # Results travel back as plain pickle bytes of NumPy arrays, one blob per chunk: the pool's own
    # pickler would move every tensor into its own shared-memory segment (torch.multiprocessing's
    # reducers), and plain pickling of a Data object's tensors costs about 5 ms per molecule (more
    # than computing it); NumPy arrays pickle in microseconds.
    return pickle.dumps([_pack(fn(item)) for item in chunk], protocol=pickle.HIGHEST_PROTOCOL)


class _PackedData(dict):
    """A :class:`~torch_geometric.data.Data` as ``{key: numpy array or plain value}``."""


def _pack(result: Any) -> Any:
    if not isinstance(result, Data):
        return result
    return _PackedData({k: v.numpy() if isinstance(v, torch.Tensor) else v
                        for k, v in result.to_dict().items()})


def _unpack(result: Any) -> Any:
    if not isinstance(result, _PackedData):
        return result
    return Data.from_dict({k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
                           for k, v in result.items()})


@contextlib.contextmanager
def task_runner(num_workers: int) -> Iterator[Callable[[Callable[[Any], Any], Iterable[Any]],
                                                      Iterator[Any]]]:
    r"""A function ``run(fn, tasks)`` that yields ``fn(task)`` for every task in order: in a
    :class:`multiprocessing.Pool` of :obj:`num_workers` processes kept open for the whole block
    (0: in the calling process), with Python's cyclic garbage collector paused.

    Args:
        num_workers (int): worker processes (0 = none).
    """
    with _collector_paused():
        if num_workers == 0:
            yield map
            return
        pool = multiprocessing.get_context().Pool(num_workers)
        try:
            yield lambda fn, tasks: pool.imap(fn, tasks)
        except BaseException:
            pool.terminate()
            raise
        else:
            # Workers leave on the closed queue's sentinels; terminate() (Pool's __exit__) holds
            # the task queue's lock while it sends SIGTERM, so a worker that outlives SIGTERM
            # (a Python handler inherited at fork) waited on that lock for ever.
            pool.close()
        finally:
            pool.join()


def rows_to_columns(items: Sequence[tuple[int, Any, np.ndarray | None]], featurization: str,
                    max_graph_nodes: int | None,
                    pre_transform: Callable[[Data], Data] | None, canonical: bool = False,
                    scaffold: bool = False) -> list[ColumnBlocks]:
    r"""Featurizes some rows (as :func:`molecules_to_graphs`, SMILES kept) and returns them as
    column blocks of a :class:`~graph_urpe.data.store_writer.GraphStoreWriter`: the graphs'
    (:func:`~graph_urpe.data.stored_graphs.graphs_to_columns`), ``canonical_key`` (``int64``
    per graph, if :obj:`canonical`), ``scaffold`` (a text per graph, if :obj:`scaffold`) and the
    failed rows (``error.row`` ``int64``, ``error.smiles`` and ``error.reason`` texts, one per
    failed row). Plain NumPy arrays travel back from a worker process in microseconds, and the
    calling process only appends their bytes.

    Args:
        items (Sequence): ``(row, smiles, label row or None)`` per row.
        featurization, max_graph_nodes, pre_transform, canonical, scaffold: see
            :func:`molecules_to_graphs`.

    Raises:
        RuntimeError: if :obj:`pre_transform` raises (naming the row).
    """
    graphs, errors, keys, scaffolds = [], [], [], []
    for item in items:
        result = _row_to_graph(item, featurization, max_graph_nodes, pre_transform,
                               keep_smiles=True, canonical=canonical, scaffold=scaffold)
        if isinstance(result, RowError):
            errors.append(result)
            continue
        if canonical:
            keys.append(result.canonical_key)
            del result.canonical_key
        if scaffold:
            scaffolds.append(result.scaffold)
            del result.scaffold
        graphs.append(result)
    ones = np.ones(len(graphs), dtype=np.int64)
    blocks = graphs_to_columns(graphs) if graphs else []
    if canonical:
        blocks.append(("canonical_key", np.array(keys, dtype=np.int64), ones, 0, "array"))
    if scaffold:
        blocks.append(("scaffold", *encode_strings(scaffolds), 0, "str"))
    blocks.append(("error.row", np.array([e.row for e in errors], dtype=np.int64),
                   np.ones(len(errors), dtype=np.int64), 0, "array"))
    for field in ("smiles", "reason"):
        blocks.append((f"error.{field}", *encode_strings([getattr(e, field) for e in errors]),
                       0, "str"))
    return blocks


def canonical_key(mol: Chem.Mol) -> int:
    """A signed 64-bit hash (BLAKE2b) of the molecule's canonical SMILES
    (:func:`rdkit.Chem.MolToSmiles`): equal for two SMILES of the same molecule, so duplicates can
    be found from the integers alone (a collision needs about 2^32 molecules)."""
    digest = hashlib.blake2b(Chem.MolToSmiles(mol).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _row_to_graph(item: tuple[int, Any, np.ndarray | None], featurization: str,
                  max_graph_nodes: int | None, pre_transform: Callable[[Data], Data] | None,
                  keep_smiles: bool, canonical: bool = False,
                  scaffold: bool = False) -> Data | RowError:
    row, smiles, label = item
    if not isinstance(smiles, str):  # an empty cell (NaN) or a blank line
        smiles = ""
    # Before sanitising, featurizing and shortest paths. Every atom takes at least one character,
    # so only a text longer than the limit can exceed it (no other SMILES is read twice).
    if max_graph_nodes is not None and len(smiles) > max_graph_nodes:
        atoms = heavy_atom_count(smiles)
        if atoms is not None and atoms > max_graph_nodes:
            return RowError(row, smiles, f"graph has {atoms} nodes > max_graph_nodes={max_graph_nodes}")
    try:
        mol = parse_smiles(smiles)  # the one parse: features, keys and scaffold come from it
        if max_graph_nodes is not None and mol.GetNumAtoms() > max_graph_nodes:
            return RowError(row, smiles, f"graph has {mol.GetNumAtoms()} nodes > "
                            f"max_graph_nodes={max_graph_nodes}")
        data = mol_to_graph(mol, featurization)
    except MoleculeError as exc:
        return RowError(row, smiles, str(exc))
    if canonical:
        data.canonical_key = canonical_key(mol)
    if scaffold:
        data.scaffold = mol_scaffold(mol)
    if label is not None:
        data.y = torch.tensor(label, dtype=torch.float32).view(1, -1)
    if keep_smiles:
        data.smiles = smiles
    data.row = row
    if pre_transform is not None:
        try:
            data = pre_transform(data)
        except Exception as exc:
            raise RuntimeError(
                f"pre_transform {pre_transform!r} failed on row {row} ({smiles!r}): {exc}"
            ) from exc
    return data


def check_max_graph_nodes(max_graph_nodes: int | None) -> int | None:
    r"""The node limit as an ``int`` (or :obj:`None`: no limit), the one check of every reader.

    Raises:
        ValueError: a value that is not a positive integer.
    """
    if max_graph_nodes is None:
        return None
    try:
        whole = not isinstance(max_graph_nodes, bool) and int(max_graph_nodes) == max_graph_nodes
    except (TypeError, ValueError):
        whole = False
    if not whole or max_graph_nodes < 1:
        raise ValueError(f"max_graph_nodes must be a positive integer or None, got "
                         f"{max_graph_nodes!r}")
    return int(max_graph_nodes)


def molecules_to_graphs(
    smiles: Sequence[str],
    labels: np.ndarray | None = None,
    featurization: Featurization = "ogb",
    max_graph_nodes: int | None = None,
    pre_transform: Callable[[Data], Data] | None = None,
    keep_smiles: bool = True,
    rows: Iterable[int] | None = None,
    num_workers: int | None = None,
    chunksize: int | None = None,
    desc: str | None = "Featurizing molecules",
    progress: bool | None = None,
    canonical: bool = False,
    scaffold: bool = False,
) -> tuple[list[Data], list[RowError]]:
    r"""Featurizes SMILES strings into graphs, in parallel, keeping labels with their graphs.

    Each valid row becomes a :class:`~torch_geometric.data.Data` with the featurization's ``x``,
    ``edge_index``, ``edge_attr``; ``y`` ``torch.float32`` ``[1, T]`` (NaN = missing label, kept);
    ``smiles`` (str, if :obj:`keep_smiles`); ``row`` (int, the input row it came from); then
    :obj:`pre_transform` is applied. Rows that fail (invalid SMILES, unknown ZINC atom type, more
    than :obj:`max_graph_nodes` nodes) are returned as
    :class:`~graph_urpe.data.csv.row_errors.RowError` and have no graph, so no label is ever paired with the wrong graph.

    Args:
        smiles (Sequence[str]): SMILES strings.
        labels (numpy.ndarray, optional): ``[N, T]`` float labels (NaN allowed). (default: :obj:`None`)
        featurization (str, optional): ``"ogb"`` or ``"zinc"``. (default: :obj:`"ogb"`)
        max_graph_nodes (int, optional): refuse graphs with more nodes. (default: :obj:`None`, no limit)
        pre_transform (Callable, optional): picklable transform applied to each graph, e.g.
            :class:`graph_urpe.transforms.AddShortestPathDistance`. (default: :obj:`None`)
        keep_smiles (bool, optional): store ``smiles`` on each graph. (default: :obj:`True`)
        rows (Iterable[int], optional): row numbers to report (default: ``0 .. N-1``).
        num_workers (int, optional): worker processes (see :func:`resolve_num_workers`).
            (default: :obj:`None`, automatic)
        chunksize (int, optional): rows per worker task. (default: :obj:`None`, automatic)
        desc (str, optional): progress bar label.
        progress (bool, optional): show a progress bar (on stderr) over featurization and
            :obj:`pre_transform` (e.g. the SPD); :obj:`None` shows one for inputs of at least
            :data:`PROGRESS_MIN_ITEMS` molecules. (default: :obj:`None`)
        canonical (bool, optional): store ``canonical_key`` (int, :func:`canonical_key` of the
            molecule, from the same RDKit parse as the features) on each graph, for duplicate
            checks without parsing the SMILES again. (default: :obj:`False`)
        scaffold (bool, optional): store ``scaffold`` (str, its Bemis-Murcko scaffold,
            :func:`~graph_urpe.data.csv.splits.mol_scaffold`, from the same parse) on each graph,
            for :func:`~graph_urpe.data.csv.splits.scaffold_split`. (default: :obj:`False`)

    Returns:
        ``(graphs, errors)``: the graphs in input order, and the failed rows in input order.

    Raises:
        ValueError: for an unknown :obj:`featurization`, :obj:`labels` without one row per SMILES,
            or :obj:`max_graph_nodes` < 1.
        RuntimeError: if :obj:`pre_transform` raises (naming the row).
    """
    n = len(smiles)
    check_choice("featurization", featurization, Featurization)
    if labels is not None:
        labels = np.asarray(labels, dtype=np.float64)
        if labels.ndim == 1:
            labels = labels[:, None]
        if labels.ndim != 2 or labels.shape[0] != n:
            raise ValueError(f"labels must have shape [{n}, T], got {list(labels.shape)}")
    max_graph_nodes = check_max_graph_nodes(max_graph_nodes)
    rows = list(range(n)) if rows is None else [int(r) for r in rows]
    items = [(rows[i], smiles[i], None if labels is None else labels[i]) for i in range(n)]
    fn = functools.partial(_row_to_graph, featurization=featurization, max_graph_nodes=max_graph_nodes,
                           pre_transform=pre_transform, keep_smiles=keep_smiles,
                           canonical=canonical, scaffold=scaffold)
    results = parallel_map(fn, items, num_workers=num_workers, chunksize=chunksize, desc=desc,
                           progress=progress)
    graphs = [r for r in results if isinstance(r, Data)]
    errors = [r for r in results if isinstance(r, RowError)]
    return graphs, errors
