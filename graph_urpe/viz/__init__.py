"""Figures of runs and of what a model learned (matplotlib, an optional extra:
``pip install 'graph-urpe[plot]'``).

* :mod:`~graph_urpe.viz.curves`: learning curves from a run's ``metrics.csv``;
* :mod:`~graph_urpe.viz.results`: parity / ROC and precision-recall plots from
  ``test_predictions.csv``;
* :mod:`~graph_urpe.viz.run`: :func:`plot_run`, every figure of a run folder;
* :mod:`~graph_urpe.viz.cli`: ``graph-urpe plot``.

matplotlib is imported (with the Agg backend) only when a figure is drawn.
"""

from graph_urpe.viz.curves import learning_curves_figure, plot_learning_curves, read_metrics_csv
from graph_urpe.viz.results import (
    infer_task,
    parity_figure,
    plot_parity,
    plot_roc_pr,
    read_predictions_csv,
    roc_pr_figure,
)
from graph_urpe.viz.run import plot_run

__all__ = [
    "infer_task",
    "learning_curves_figure",
    "parity_figure",
    "plot_learning_curves",
    "plot_parity",
    "plot_roc_pr",
    "plot_run",
    "read_metrics_csv",
    "read_predictions_csv",
    "roc_pr_figure",
]
