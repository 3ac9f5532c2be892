"""The random forest member of the classical model (graph_urpe/models/forest.py): its stored
arrays predict what scikit-learn's forest predicts, its size follows the node budget, and a
received state that is not a tree is refused before any walk."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graph_urpe.models.forest import FIRST_TREES, MAX_TREES, Forest, forest_problem

pytestmark = pytest.mark.usefixtures("one_thread")


def _data(n=120, seed=0):
    """Random 0/1 bits of ECFP4's width; the label depends on three of them."""
    rng = np.random.default_rng(seed)
    bits = (rng.random((n, 2048)) < 0.05).astype(np.uint8)
    bits[:, :3] = rng.random((n, 3)) < 0.5
    labels = ((bits[:, 0] + bits[:, 1] + bits[:, 2]) >= 2).astype(np.int64)
    return bits, labels


def test_stored_arrays_predict_what_sklearn_predicts():
    from sklearn.ensemble import RandomForestClassifier

    bits, labels = _data()
    forest = Forest.fit(bits, labels, seed=4)
    assert forest.num_trees == MAX_TREES  # small trees: the budget allows every tree
    query, _ = _data(40, seed=1)
    # an independent forest, fitted in one go (the fit grows its trees with warm_start)
    reference = RandomForestClassifier(MAX_TREES, random_state=4, n_jobs=1).fit(bits, labels)
    expected = reference.predict_proba(query)[:, 1]
    np.testing.assert_allclose(forest.predict(query), expected, rtol=0, atol=1e-12)
    again = Forest.from_state(forest.state_dict())
    np.testing.assert_array_equal(again.predict(query), forest.predict(query))
    assert repr(forest).startswith(f"Forest(trees={MAX_TREES}, nodes=")


def test_a_walk_by_hand_on_one_tree():
    """One tree: bit 5 unset -> leaf 1 (0.25); set -> node 2 tests bit 7: unset -> leaf 3 (0),
    set -> leaf 4 (1)."""
    forest = Forest(np.array([0]), np.array([1, -1, 3, -1, -1], np.int32),
                    np.array([2, -1, 4, -1, -1], np.int32), np.array([5, -1, 7, -1, -1], np.int16),
                    np.array([0.5, 0.25, 0.5, 0.0, 1.0]))
    bits = np.zeros((3, 2048), np.uint8)
    bits[1, 5] = 1
    bits[2, [5, 7]] = 1
    np.testing.assert_array_equal(forest.predict(bits), [0.25, 0.0, 1.0])
    assert forest_problem(forest.state_dict(), molecules=3) is None
    assert forest_problem(forest.state_dict(), molecules=2).startswith(  # 5 nodes > 2 * 2 - 1
        "forest has a tree of more than 3 nodes, more than 2 training molecules make")


def _sizes(forest):
    return np.diff(np.append(forest.roots, len(forest.value)))


def test_large_trees_make_a_smaller_forest():
    from sklearn.ensemble import RandomForestClassifier

    bits, labels = _data()
    rng = np.random.default_rng(2)
    noisy = np.where(rng.random(len(labels)) < 0.3, 1 - labels, labels)  # deep trees
    reference = RandomForestClassifier(MAX_TREES, random_state=0, n_jobs=1).fit(bits, noisy)
    sizes = np.array([e.tree_.node_count for e in reference.estimators_])
    for budget in (2_000, 5 * sizes[:FIRST_TREES].sum() // FIRST_TREES * 3):
        forest = Forest.fit(bits, noisy, seed=0, node_budget=budget)
        # the longest prefix of the same seed's trees within the budget
        assert forest.num_trees == int(np.searchsorted(np.cumsum(sizes), budget, "right"))
        np.testing.assert_array_equal(_sizes(forest), sizes[:forest.num_trees])
        assert len(forest.value) <= budget
    assert Forest.fit(bits, noisy, seed=0, node_budget=1).num_trees == 1  # at least one
    with pytest.raises(ValueError, match="both classes"):
        Forest.fit(bits, np.zeros(len(labels)))


def test_the_columns_share_the_node_budget(monkeypatch):
    from graph_urpe.models import classical

    bits, labels = _data()
    rng = np.random.default_rng(3)
    columns = np.stack([np.where(rng.random(len(labels)) < 0.3, 1 - labels, labels)
                        for _ in range(4)], 1).astype(float)  # noisy: deep trees
    alone = Forest.fit(bits, columns[:, 0], seed=0)
    per_tree = _sizes(alone)[:FIRST_TREES].mean()
    monkeypatch.setattr(classical, "NODE_BUDGET", int(4 * 100 * per_tree))  # ~100 trees a column
    model = classical.ClassicalModel.fit(bits, columns, np.arange(len(labels)), "classification")
    assert model.members == ("svm", "forest")
    first = model.forests[0]
    share = int(4 * 100 * per_tree) // 4
    assert first.num_trees == int(np.searchsorted(np.cumsum(_sizes(alone)), share, "right"))
    assert 80 <= first.num_trees <= 120
    np.testing.assert_array_equal(first.value[:len(alone.value)][:10], alone.value[:10])


def _cycle(state):
    state["left"][2] = 0  # a child before its node: a walk could loop


def _other_tree(state):
    state["right"][0] = int(state["roots"][1])  # a child in the next tree


def _bit_out_of_range(state):
    state["feature"][0] = 4096


def _value_above_one(state):
    state["value"][-1] = 1.5


def _half_leaf(state):
    leaf = int(torch.nonzero(state["left"] == -1)[0])
    state["right"][leaf] = leaf + 1


def _wrong_dtype(state):
    state["feature"] = state["feature"].long()


def _parameter(state):
    state["value"] = torch.nn.Parameter(state["value"])


def _same_children(state):
    state["right"][0] = state["left"][0]


def _chain(state):
    """One tree, a chain 3,000 levels deep (every node's children: a leaf and the next)."""
    size = 6001
    index = torch.arange(size, dtype=torch.int32)
    inner = (index % 2 == 0) & (index < size - 1)
    state.update(roots=torch.tensor([0]),
                 left=torch.where(inner, index + 1, -1).int(),
                 right=torch.where(inner, index + 2, -1).int(),
                 feature=torch.where(inner, 5, -1).to(torch.int16),
                 value=torch.full((size,), 0.5, dtype=torch.float64))


def _too_many_trees(state):
    n = MAX_TREES + 1
    state.update(roots=torch.arange(n), left=torch.full((n,), -1, dtype=torch.int32),
                 right=torch.full((n,), -1, dtype=torch.int32),
                 feature=torch.full((n,), -1, dtype=torch.int16),
                 value=torch.zeros(n, dtype=torch.float64))


def _roots_out_of_order(state):
    state["roots"] = state["roots"].flip(0)


@pytest.mark.parametrize(("edit", "named"), [
    (_cycle, "forest has a node whose children or bit are not those of a tree"),
    (_other_tree, "forest has a node whose children or bit are not those of a tree"),
    (_bit_out_of_range, "forest has a node whose children or bit are not those of a tree"),
    (_half_leaf, "forest has a node whose children or bit are not those of a tree"),
    (_value_above_one, "forest.value holds values outside [0, 1]"),
    (_same_children, "forest has a node whose children or bit are not those of a tree"),
    (_wrong_dtype, "forest.feature is not a plain 1-dim torch.int16 tensor"),
    (_parameter, "forest.value is not a plain 1-dim torch.float64 tensor"),
    (_roots_out_of_order, "forest.roots do not start the trees in order"),
    (_chain, "forest has a tree deeper than the 2048 bits of ECFP4"),
    (_too_many_trees, f"forest has {MAX_TREES + 1} trees, more than the {MAX_TREES}"),
])
def test_a_changed_forest_is_refused_in_one_line(edit, named):
    bits, labels = _data()
    state = Forest.fit(bits, labels, node_budget=FIRST_TREES * 10).state_dict()
    assert forest_problem(state, molecules=10_000) is None
    edit(state)
    assert forest_problem(state, molecules=10_000).startswith(named)
    assert forest_problem({"roots": state["roots"]}, 10_000).startswith("forest is not a mapping")


def test_the_largest_one_column_model_fits_beside_any_network():
    """At the cap of training molecules, with the SVM using every one as a support vector and
    the forest at its node budget plus one tree of 2n - 1 nodes, a one-column classical model
    passes the size check of a received checkpoint even beside an empty state dict."""
    from graph_urpe.checkpoint_parts import check_tensor_bytes
    from graph_urpe.models.classical_baseline import MAX_TRAIN_MOLECULES
    from graph_urpe.models.forest import NODE_BUDGET

    n = MAX_TRAIN_MOLECULES
    nodes = NODE_BUDGET + 2 * n - 1
    state = {"train_fingerprints": torch.zeros(n, 256, dtype=torch.uint8),
             "train_rows": torch.zeros(n, dtype=torch.int64),
             "tasks": [{"support": torch.zeros(n, dtype=torch.int64),
                        "dual_coef": torch.zeros(n, dtype=torch.float64)}],
             "forests": [{"roots": torch.zeros(MAX_TREES, dtype=torch.int64),
                          "left": torch.zeros(nodes, dtype=torch.int32),
                          "right": torch.zeros(nodes, dtype=torch.int32),
                          "feature": torch.zeros(nodes, dtype=torch.int16),
                          "value": torch.zeros(nodes, dtype=torch.float64)}],
             "blend_weight": torch.zeros(1, 3, dtype=torch.float64)}
    check_tensor_bytes({"state_dict": {}, "callbacks": {"ClassicalBaseline": state}})
