"""Figures of runs and of what a model learned (matplotlib, an optional extra:
``pip install 'graph-urpe[plot]'``; it is imported, with the Agg backend, only when a figure is
drawn).

* :mod:`~graph_urpe.viz.curves`: learning curves from a run's ``metrics.csv``;
* :mod:`~graph_urpe.viz.results`: parity / ROC and precision-recall plots from
  ``test_predictions.csv``;
* :mod:`~graph_urpe.viz.run`: :func:`plot_run`, every figure of a run folder;
* :mod:`~graph_urpe.viz.relations`: the learned ``B`` and ``C`` tables per head against SPD or
  ``j - i``, read from a state dict;
* :mod:`~graph_urpe.viz.attention`: attention maps before / after ``C`` on one molecule, drawn
  beside it;
* :mod:`~graph_urpe.viz.attribution`: per-atom integrated-gradients attributions of a
  prediction (Captum, ``pip install 'graph-urpe[explain]'``), drawn on the molecule by RDKit.

``viz`` draws; it imports :mod:`graph_urpe.nn` and :mod:`graph_urpe.data`, never
:mod:`graph_urpe.models` or :mod:`graph_urpe.cli` (the run summary imports ``viz`` to draw a run's figures; the ``graph-urpe plot``
command, which loads a trained module, is :mod:`graph_urpe.cli.plot`).
"""

from graph_urpe.viz.attention import (
    attention_figure,
    attention_maps,
    plot_attention,
)
from graph_urpe.viz.attribution import AtomAttributions, atom_attributions, draw_attributions
from graph_urpe.viz.curves import learning_curves_figure, plot_learning_curves, read_metrics_csv
from graph_urpe.viz.relations import (
    RelationTables,
    graph_relation_labels,
    plot_relation_tables,
    relation_tables_figure,
    relation_tables_from_state_dict,
    sequence_relation_labels,
)
from graph_urpe.viz.results import (
    confusion_figure,
    infer_task,
    parity_figure,
    plot_parity,
    plot_roc_pr,
    read_predictions_csv,
    roc_pr_figure,
)
from graph_urpe.viz.run import plot_run

__all__ = [
    "AtomAttributions",
    "RelationTables",
    "atom_attributions",
    "attention_figure",
    "attention_maps",
    "confusion_figure",
    "draw_attributions",
    "graph_relation_labels",
    "infer_task",
    "learning_curves_figure",
    "parity_figure",
    "plot_attention",
    "plot_learning_curves",
    "plot_parity",
    "plot_relation_tables",
    "plot_roc_pr",
    "plot_run",
    "read_metrics_csv",
    "read_predictions_csv",
    "relation_tables_figure",
    "relation_tables_from_state_dict",
    "roc_pr_figure",
    "sequence_relation_labels",
]
