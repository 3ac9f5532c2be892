"""The columns ``predict`` writes from a checkpoint's classical model
(:class:`~graph_urpe.models.classical.ClassicalModel`) beside the network's: the blend as
``<target>_pred`` (:mod:`graph_urpe.models.blend`, :mod:`graph_urpe.models.logit_pool`) and the network's own prediction as
``<target>_network``, each member's prediction (``<target>_ecfp_svm``, and for classification
``<target>_ecfp_rf``), the nearest training molecule, and the applicability-domain note
(:mod:`graph_urpe.models.applicability`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from graph_urpe.data.fingerprints import ecfp4
from graph_urpe.models import logit_pool as pool
from graph_urpe.models.applicability import domain_warning
from graph_urpe.models.classical import ClassicalModel

__all__ = ["MEMBER_SUFFIXES", "NETWORK", "SUFFIX", "classical_columns"]

NETWORK = "_network"
"""``predict``'s column of the network's own prediction where the blend is ``<target>_pred``."""

SUFFIX = "_ecfp_svm"
"""``predict``'s column of the SVM's prediction: ``<target>_ecfp_svm``."""

MEMBER_SUFFIXES = {"svm": SUFFIX, "forest": "_ecfp_rf"}
"""``predict``'s column of each member's prediction (keys: ``ClassicalModel.members``)."""


def classical_columns(table: pd.DataFrame, smiles: list[str], model: ClassicalModel,
                      targets: list[str]) -> pd.DataFrame:
    """``predict``'s table with the classical model's columns, before ``error``.

    With a blend (the checkpoint's ``blend_weight``): ``<target>_pred`` becomes the blend
    (:func:`graph_urpe.models.logit_pool.checkpoint_outputs`; ``<target>_std``, ``<target>_lower``,
    ``<target>_upper`` its uncertainty) and ``<target>_network`` keeps the network's own
    prediction. Then ``<target>_ecfp_svm`` (the SVM's prediction), ``<target>_ecfp_rf`` (the
    forest's, for a classical model with one),
    ``nearest_train_similarity`` (ECFP4 Tanimoto to the nearest training molecule) and
    ``nearest_train_row`` (that molecule's CSV data row). Empty for rows with an error (a table
    without an ``error`` column: every row is predicted). A row below the model's
    applicability threshold gets a note in its ``warning`` column (where the table has one).

    Args:
        table (pandas.DataFrame): the prediction table, one row per input, in input order, with
            the network's ``<target>_pred`` (and ``_std``, ``_lower``, ``_upper`` where it
            writes them).
        smiles (list[str]): the inputs' SMILES, in the same order.
        model (ClassicalModel): the checkpoint's classical model.
        targets (list[str]): the label names (its columns).

    Returns:
        pandas.DataFrame: a new table.

    Raises:
        ValueError: a model of another number of label columns than ``targets``, or a table
            that already has one of the columns.
    """
    if len(model.tasks) != len(targets):
        raise ValueError(f"the checkpoint's classical model has {len(model.tasks)} label columns "
                         f"and its network {len(targets)}: use a checkpoint `graph-urpe fit` "
                         "wrote")
    networks = [] if model.blend_weight is None else [f"{t}{NETWORK}" for t in targets]
    members = [f"{t}{MEMBER_SUFFIXES[m]}" for m in model.members for t in targets]
    names = networks + members + ["nearest_train_similarity", "nearest_train_row"]
    taken = [n for n in names if n in table.columns]
    if taken:
        raise ValueError(f"the input has a column {taken[0]!r}, a name predict writes: rename it")
    ok = (np.flatnonzero(table["error"].astype(str).to_numpy() == "") if "error" in table.columns
          else np.arange(len(table)))  # test_predictions.csv: no error column, every row
    pred = np.full((len(table), len(targets), len(model.members)), np.nan)
    similarity = np.full(len(table), np.nan)
    nearest = pd.array([pd.NA] * len(table), dtype="Int64")
    if len(ok):
        p, s, r = model.predict_with_neighbours(ecfp4([smiles[i] for i in ok]))
        pred[ok], similarity[ok], nearest[ok] = p, s, r
    out = table.copy()
    values = [*pred.transpose(2, 1, 0).reshape(-1, len(table)), similarity, nearest]
    if networks:
        network = {key: table[[f"{t}_{key}" for t in targets]].to_numpy(np.float64)
                   for key in ("pred", "std", "lower", "upper")
                   if f"{targets[0]}_{key}" in table.columns}
        network["prediction"] = network.pop("pred")
        blended = pool.checkpoint_outputs(model.task, network, pred, model.blend_weight,
                                          model.blend_calibration)
        for key, value in blended.items():
            out[[f"{t}_{'pred' if key == 'prediction' else key}" for t in targets]] = value
        values = [*network["prediction"].T, *values]
    at = list(out.columns).index("error") if "error" in out.columns else len(out.columns)
    for offset, (name, column) in enumerate(zip(names, values)):
        out.insert(at + offset, name, column)
    if "warning" in out.columns and not np.isnan(model.similarity_threshold):
        out["warning"] = [domain_warning(w, s, r, model.similarity_threshold) for w, s, r in zip(
            out["warning"].astype(str), similarity, nearest)]
    return out
