"""benchmarks/pretrain_twin.py: per-family errors and paired bootstrap, against hand-worked values."""

import importlib.util
import os

import numpy as np
import pandas as pd
import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
                      "pretrain_twin.py")
_spec = importlib.util.spec_from_file_location("pretrain_twin", SCRIPT)
twin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(twin)


def test_per_molecule_errors_by_family_with_missing_labels():
    data = pd.DataFrame({"d_Chi0": [1.0, 0.0], "d_TPSA": [2.0, np.nan], "m_1": [0.0, 1.0]},
                        index=[5, 7])
    pred = pd.DataFrame({"row": [7, 5], "d_Chi0_pred": [0.5, 0.0], "d_TPSA_pred": [9.0, 3.0],
                         "m_1_pred": [1.0, 0.0]})
    err = twin.per_molecule_errors(data, pred, ["d_Chi0", "d_TPSA", "m_1"],
                                   ["topological", "physchem", "counts"])
    # row 5: |0-1|, |3-2|, |0-0|; row 7: |0.5-0|, TPSA missing, |1-1|
    assert err["topological"] == pytest.approx([1.0, 0.5])
    assert err["counts"] == pytest.approx([0.0, 0.0])
    assert err["all"] == pytest.approx([2 / 3, 0.25])
    assert np.isnan(err["physchem"][1]) and err["physchem"][0] == 1.0
    with pytest.raises(ValueError, match="no prediction"):
        twin.per_molecule_errors(data, pred.iloc[:1], ["d_Chi0"], ["topological"])


def test_bootstrap_mean_and_percentiles():
    values = np.array([0.0, 1.0])
    resamples = np.array([[0, 0], [0, 1], [1, 1], [1, 0]])
    mean, lo, hi = twin.bootstrap(values, resamples)
    assert mean == 0.5
    assert (lo, hi) == pytest.approx((np.percentile([0, .5, 1, .5], 2.5),
                                      np.percentile([0, .5, 1, .5], 97.5)))
