"""Whether a test metric is a leaderboard number: the official evaluator on the official data and
the whole test split. One record per tested run, printed by the end-of-run summary, written into
the run folder (:data:`RECORD_FILE`) and shown by ``graph-urpe collect``.
"""

from __future__ import annotations

import json
import os
import os.path as osp
import platform
from typing import Any

import torch
from lightning.pytorch import Trainer

from graph_urpe.data.modules.graph import GraphDataModule
from graph_urpe.files import atomic_write
from graph_urpe.models.metrics import METRICS

__all__ = ["RECORD_FILE", "evaluator_name", "hardware", "leaderboard_record", "read_record",
           "trainer_record", "write_record"]

RECORD_FILE = "leaderboard.json"
"""File of a run folder holding :func:`leaderboard_record`."""

HIDDEN_SPLITS = ("test-dev", "test-challenge")
"""PCQM4Mv2's splits whose labels only OGB holds."""


def evaluator_name(evaluator: str | None) -> str | None:
    """The Python name of an official evaluator: ``"pcqm4mv2"`` ->
    ``"ogb.lsc.PCQM4Mv2Evaluator"``, ``"ogbg-molhiv"`` ->
    ``"ogb.graphproppred.Evaluator('ogbg-molhiv')"``; :obj:`None` for none."""
    if evaluator is None:
        return None
    if evaluator == "pcqm4mv2":
        return "ogb.lsc.PCQM4Mv2Evaluator"
    return f"ogb.graphproppred.Evaluator({evaluator!r})"


def leaderboard_record(evaluator: str | None, metric: str, source: str, official: bool,
                       tested: int, split_size: int, split: str = "test",
                       labelled: bool = True, **facts: Any) -> dict[str, Any]:
    r"""Says whether the test :obj:`metric` of a run is a leaderboard number, and why not.

    Args:
        evaluator (str, optional): official evaluator (OGB dataset name or ``"pcqm4mv2"``).
        metric (str): the monitored metric (``"rocauc"``, ``"mae"``, ...).
        source (str): where the data come from (e.g. ``"ogbg-molhiv rebuilt offline ..."``).
        official (bool): the data are the official download.
        tested (int): graphs the test covered.
        split_size (int): graphs of the tested split.
        split (str, optional): the tested split's name. (default: ``"test"``)
        labelled (bool, optional): the split has labels (PCQM4Mv2's test-dev has none: OGB
            scores its submission file). (default: :obj:`True`)
        **facts: what OGB's submission form asks besides (``parameters``, ``hardware``,
            ``valid``: the best validation value), stored as given.

    Returns:
        dict: ``leaderboard`` (bool), ``evaluator`` (its Python name or :obj:`None`),
        ``metric``, ``source``, ``official_data``, ``tested_graphs``, ``split_graphs``,
        ``split``, ``note`` (one line for people) and :obj:`facts`.
    """
    label = METRICS[metric].label if metric in METRICS else metric
    name = evaluator_name(evaluator)
    reasons = []
    if name is None:
        reasons.append(f"{source} has no official evaluator (metrics by torchmetrics)")
    if not official and name is not None:  # a rebuild matters where an official version exists
        reasons.append(f"the data are an offline rebuild ({source}), not the official download")
    if tested < split_size:
        reasons.append(f"the test covered {tested:,} of the split's {split_size:,} graphs "
                       "(limit_test_batches)")
    if not labelled:
        reasons.append(f"{split} labels are hidden: OGB scores the submission file")
    if reasons:
        by = f" ({label} by {name})" if name else ""
        note = f"Not a leaderboard number{by}: " + "; ".join(reasons) + "."
    else:
        note = (f"Leaderboard number: {label} by {name} on the official data, all "
                f"{split_size:,} graphs of the {split} split.")
    return {"leaderboard": not reasons, "evaluator": name, "metric": metric, "source": source,
            "official_data": official, "tested_graphs": tested, "split_graphs": split_size,
            "split": split, "note": note, **facts}


def trainer_record(trainer: Trainer, metrics: dict[str, float]) -> dict[str, Any] | None:
    """:func:`leaderboard_record` of a test just run by :obj:`trainer` (its model's evaluator
    and metric, its data module's loaded dataset and test split); :obj:`None` for data modules
    that load no benchmark dataset (e.g. the synthetic tasks)."""
    dm = trainer.datamodule
    tested = metrics.get("test/num_graphs")
    if not isinstance(dm, GraphDataModule) or dm.loaded is None or tested is None:
        return None
    loaded, test = dm.loaded, dm.splits.get("test")
    if test is None:
        return None
    record = trainer.lightning_module.record
    metric = record.metric or dm.facts.metric
    split = dm.test_split
    labelled = split not in HIDDEN_SPLITS
    model = trainer.lightning_module
    valid = [float(cb.best_model_score) for cb in trainer.checkpoint_callbacks
             if cb.monitor == f"val/{metric}" and cb.best_model_score is not None]
    return leaderboard_record(
        record.evaluator, metric, loaded.source, loaded.official, int(tested), len(test),
        split, labelled, parameters=sum(p.numel() for p in model.parameters()),
        hardware=hardware(trainer), valid=valid[0] if valid else None)


def hardware(trainer: Trainer) -> str:
    """What the run ran on, for OGB's submission form: ``"<devices> x <device name>"`` (a CPU's
    model name and core count)."""
    device = trainer.strategy.root_device
    count = trainer.num_devices * trainer.num_nodes
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = f"{platform.processor() or platform.machine()} CPU ({os.cpu_count()} cores)"
        if osp.isfile("/proc/cpuinfo"):
            with open("/proc/cpuinfo", encoding="utf-8") as f:
                models = [line.split(":", 1)[1].strip() for line in f
                          if line.startswith("model name")]
            if models:
                name = f"{models[0]} ({os.cpu_count()} cores)"
    return f"{count} x {name}"


def write_record(record: dict[str, Any], run_dir: str) -> str:
    """Writes :obj:`record` as ``run_dir/leaderboard.json``; returns the path."""
    path = osp.join(run_dir, RECORD_FILE)
    with atomic_write(path) as handle:
        handle.write(json.dumps(record, indent=1) + "\n")
    return path


def read_record(run_dir: str) -> dict[str, Any] | None:
    """The record of a run folder, or :obj:`None` for a run that has none (an older run)."""
    path = osp.join(run_dir, RECORD_FILE)
    if not osp.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)
