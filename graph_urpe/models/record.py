"""What the training data taught a model, kept with it: :class:`ModelRecord`.

One record of the data's facts a trained :class:`~graph_urpe.models.graph.GraphPropertyModule`
needs after training (the task, the monitored metric, the official evaluator, the targets'
names, how SMILES become graphs, the node limit, the SMILES column and where the data came
from). ``graph-urpe fit`` links it whole from the data module's
:class:`~graph_urpe.data.facts.DatasetFacts` (:func:`ModelRecord.from_facts`); the checkpoint
stores it as plain values under ``hyper_parameters.record``; ``predict``, ``fingerprint``,
``explain`` and :class:`~graph_urpe.models.predictor.Predictor` read it from there.

Checkpoints written before the record existed hold these facts (and the objective's and
fine-tuning's options) as top-level arguments: :func:`nest_flat_arguments` moves them into their
groups when such a file is read.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from graph_urpe.data.facts import DatasetFacts, default_metric, default_target_names
from graph_urpe.data.featurize import Featurization
from graph_urpe.models.objective import MetricName, Task

__all__ = ["GROUPED_ARGUMENTS", "ModelRecord", "as_group", "nest_flat_arguments"]


@dataclasses.dataclass(frozen=True)
class ModelRecord:
    r"""The facts of the training data a trained model keeps.

    Args:
        task (str, optional): ``"regression"``, ``"classification"`` or ``"multiclass"``.
            (default: ``"regression"``)
        metric (str, optional): the monitored metric, ``"mae"``, ``"rmse"``, ``"r2"``,
            ``"rocauc"``, ``"ap"``, ``"accuracy"`` or ``"f1_macro"``. (default: :obj:`None`:
            ``mae`` / ``rocauc`` / ``accuracy`` by task, :attr:`metric_name`)
        evaluator (str, optional): official evaluator (``"ogbg-..."``, ``"pcqm4mv2"``).
            (default: :obj:`None`)
        target_names (list[str], optional): names of the label columns. (default: :obj:`None`:
            ``y`` or ``y0, y1, ...``)
        featurization (str, optional): how SMILES become graphs (``"zinc"`` / ``"ogb"``).
            (default: :obj:`None`: not molecules)
        max_graph_nodes (int, optional): the node-count limit of training, which ``predict``
            enforces. (default: :obj:`None`)
        smiles_column (str, optional): the SMILES column of the training file, the column
            ``predict``, ``fingerprint`` and ``explain`` read by default. (default: :obj:`None`:
            ``smiles``)
        dataset_source (str, optional): where the training data came from, one line; set at
            ``fit`` from the loaded data. (default: :obj:`None`)
    """

    task: Task = "regression"
    metric: MetricName | None = None
    evaluator: str | None = None
    target_names: list[str] | None = None
    featurization: Featurization | None = None
    max_graph_nodes: int | None = None
    smiles_column: str | None = None
    dataset_source: str | None = None

    @classmethod
    def from_facts(cls, facts: DatasetFacts) -> ModelRecord:
        """The record of a data module's facts (``dataset_source`` is set at ``fit``)."""
        return cls(task=facts.task, metric=facts.metric, evaluator=facts.evaluator,
                   target_names=list(facts.target_names), featurization=facts.featurization,
                   max_graph_nodes=facts.max_graph_nodes, smiles_column=facts.smiles_column)

    @property
    def metric_name(self) -> str:
        """The monitored metric (:attr:`metric`, else the task's default,
        :func:`~graph_urpe.data.facts.default_metric`)."""
        return self.metric if self.metric is not None else default_metric(self.task)

    def names(self, num_labels: int) -> list[str]:
        """The ``num_labels`` target names (:attr:`target_names`, else ``y`` / ``y0, y1, ...``).

        Raises:
            ValueError: :attr:`target_names` of another length than ``num_labels``.
        """
        if not self.target_names:
            return list(default_target_names(num_labels))
        if len(self.target_names) != num_labels:
            names = list(map(str, self.target_names))
            shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
            raise ValueError(
                f"target_names lists {len(names)} name(s) ({shown}) for {num_labels} "
                "target(s) (the network's num_tasks): give one name per target column.")
        return list(self.target_names)


def as_group(value: Any, kind: type) -> Any:
    """An option group as its dataclass ``kind``: :obj:`None` gives the defaults, a dict (a
    checkpoint's or YAML's fields) is built, an instance is kept.

    Raises:
        TypeError: a dict with a field ``kind`` does not have.
    """
    if value is None:
        return kind()
    return kind(**value) if isinstance(value, dict) else value


GROUPED_ARGUMENTS = {
    "record": ("task", "metric", "evaluator", "target_names", "featurization",
               "max_graph_nodes", "smiles_column", "dataset_source"),
    "objective": ("loss", "standardize", "pos_weight", "platt_scaling", "num_classes"),
    "finetune": ("pretrained", "encoder_lr_factor", "freeze_encoder"),
}
"""The groups of :class:`~graph_urpe.models.graph.GraphPropertyModule`'s arguments that earlier
versions took one by one, and their fields."""


def nest_flat_arguments(args: dict[str, Any]) -> dict[str, Any]:
    """A :class:`~graph_urpe.models.graph.GraphPropertyModule`'s stored arguments in today's
    groups: the fields earlier versions kept at the top level (``task``, ``loss``,
    ``pretrained``, ...) moved into ``record``, ``objective`` and ``finetune``. Plain data in,
    plain data out; arguments already grouped are left as they are.

    Args:
        args (dict): the arguments (a checkpoint's ``hyper_parameters`` or a run folder's
            ``model.init_args``).

    Raises:
        ValueError: a flat field beside its group that is not a mapping or holds it too (a file
            of no version: which value holds would be a guess).
    """
    out = dict(args)
    for group, fields in GROUPED_ARGUMENTS.items():
        moved = {f: out.pop(f) for f in fields if f in out}
        if not moved:
            continue
        nested = out.get(group)
        if nested is not None and not isinstance(nested, dict):
            raise ValueError(f"{group} is not a mapping, beside the earlier versions' flat "
                             f"{', '.join(moved)}")
        twice = sorted(set(moved) & set(nested or {}))
        if twice:
            raise ValueError(f"{', '.join(twice)} given twice: flat (earlier versions) and in "
                             f"{group}")
        out[group] = {**moved, **(nested or {})}
    return out

