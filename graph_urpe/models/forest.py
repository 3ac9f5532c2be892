r"""The random forest on ECFP4 beside the SVM of a classification fit's classical model, kept as
plain arrays (issue 41: on BACE's scaffold split a random forest on ECFP4 scores test ROC-AUC
0.855 against the Tanimoto SVC's 0.846 and the template's 0.815, and blended with the network and
the SVM it lifts the fit's prediction from 0.841 to 0.855: ``benchmarks/README.md`` section 29).

* **Fit**: scikit-learn's :class:`~sklearn.ensemble.RandomForestClassifier` (Breiman 2001) with
  its defaults (``max_features="sqrt"``, trees grown until their leaves are pure) on the 0/1
  ECFP4 bits of one label column's labelled training rows, :data:`MAX_TREES` trees, fewer when
  the trees are large: the forest keeps the first trees whose nodes fit the column's share of
  :data:`NODE_BUDGET` (at least one tree; it grows with scikit-learn's ``warm_start`` after a
  first :data:`FIRST_TREES` trees measured the nodes a tree needs). The fit summary prints the
  number of trees kept (trees are drawn independently, so a prefix of the forest is the forest
  scikit-learn fits with that ``n_estimators`` and seed).
* **Stored** (:meth:`Forest.state_dict`, no pickle): every tree's nodes concatenated, each tree's
  root, and per node the two children (``-1`` for a leaf), the bit it tests (``-1`` for a leaf)
  and the leaf's fraction of class-1 training molecules. The split threshold is not stored: on a
  0/1 bit scikit-learn always splits at 0.5 (checked at fit).
* **Predicted** from those arrays (:meth:`Forest.predict`): each molecule walks every tree (bit
  set: right child) and the probability of class 1 is the mean of its leaves' fractions, as
  :meth:`~sklearn.ensemble.RandomForestClassifier.predict_proba` computes it
  (tests/test_forest.py: equal to 1e-12).
* **Checked on receipt** (:func:`forest_problem`): plain tensors, dtypes, shapes, ranges; a
  child always comes after its parent in the tree it belongs to (scikit-learn numbers nodes
  depth-first) and differs from its sibling, so every walk ends at a leaf; trees at most 2048
  levels deep (a path never tests a bit twice), at most :data:`MAX_TREES` of them and at most
  ``2 n - 1`` nodes a tree (a binary tree with ``n`` training molecules in pure leaves), which
  bound a walk's length and memory.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from graph_urpe.data.fingerprints import ECFP4_BITS

__all__ = ["FIRST_TREES", "MAX_TREES", "NODE_BUDGET", "Forest", "forest_problem"]

MAX_TREES = 500
"""Trees a column's forest has at most (the anchor of ``benchmarks/README.md`` section 13a)."""

FIRST_TREES = 50
"""Trees grown first to measure a tree's nodes before the forest is sized."""

NODE_BUDGET = 400_000
"""Nodes the forests of a classical model hold at most together, shared equally by its label
columns (18 bytes a node: 7.2 MB, inside the room a received checkpoint has beside its weights,
:func:`graph_urpe.checkpoint_parts.check_tensor_bytes`); BACE's 1,210 training molecules need
about 560 a tree (one column, 500 trees: 280,000), HIV's 19,000 about 2,100 (190 trees)."""

_KEYS = ("roots", "left", "right", "feature", "value")
_BLOCK = 1024  # molecules walked at once: [1024, trees] int64 node indices


@dataclasses.dataclass
class Forest:
    """A fitted random forest of one label column as plain arrays (see the module docstring).

    Args:
        roots (numpy.ndarray): ``[R]`` int64, each tree's root node.
        left (numpy.ndarray): ``[M]`` int32, each node's child for a bit that is not set
            (``-1``: a leaf).
        right (numpy.ndarray): ``[M]`` int32, its child for a set bit (``-1``: a leaf).
        feature (numpy.ndarray): ``[M]`` int16, the ECFP4 bit a node tests (``-1``: a leaf).
        value (numpy.ndarray): ``[M]`` float64, a leaf's fraction of class-1 training molecules.
    """

    roots: np.ndarray
    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    value: np.ndarray

    @classmethod
    def fit(cls, bits: np.ndarray, labels: np.ndarray, seed: int = 0,
            node_budget: int = NODE_BUDGET) -> Forest:
        """Fit the forest of one column (two classes) on its labelled training rows.

        Args:
            bits (numpy.ndarray): ``[n, 2048]`` 0/1 ECFP4.
            labels (numpy.ndarray): ``[n]`` 0/1 labels, both classes present.
            seed (int, optional): the forest's ``random_state``. (default: :obj:`0`)
            node_budget (int, optional): nodes the forest holds at most (it keeps at least
                :data:`FIRST_TREES` trees). (default: :data:`NODE_BUDGET`, a one-column model's)

        Returns:
            Forest: its arrays.

        Raises:
            ValueError: labels that are not two classes 0 and 1.
        """
        from sklearn.ensemble import RandomForestClassifier

        labels = np.asarray(labels).astype(np.int64)
        if set(np.unique(labels).tolist()) != {0, 1}:
            raise ValueError("a forest needs labels of both classes 0 and 1")
        bits = np.asarray(bits, dtype=np.uint8)
        model = RandomForestClassifier(FIRST_TREES, random_state=seed, n_jobs=1, warm_start=True)
        model.fit(bits, labels)
        per_tree = np.mean([e.tree_.node_count for e in model.estimators_])
        trees = int(min(MAX_TREES, node_budget // per_tree))
        if trees > FIRST_TREES:
            model.n_estimators = trees
            model.fit(bits, labels)  # warm start: the first trees kept, the rest added
        nodes = np.cumsum([e.tree_.node_count for e in model.estimators_])
        keep = max(1, int(np.searchsorted(nodes, node_budget, side="right")))
        return cls.from_estimators(model.estimators_[:keep])

    @classmethod
    def from_estimators(cls, trees: list[Any]) -> Forest:
        """The arrays of fitted scikit-learn decision trees of a 0/1 problem on 0/1 bits (a
        prefix of a forest's ``estimators_`` is a forest too).

        Args:
            trees (list): fitted :class:`~sklearn.tree.DecisionTreeClassifier` of two classes.

        Returns:
            Forest: their nodes concatenated in order.

        Raises:
            ValueError: a split threshold other than 0.5 (features that are not 0/1 bits).
        """
        roots, left, right, feature, value, offset = [], [], [], [], [], 0
        for estimator in trees:
            tree = estimator.tree_
            leaf = tree.children_left < 0
            if not np.all(tree.threshold[~leaf] == 0.5):
                raise ValueError("a forest on ECFP4 splits its 0/1 bits at 0.5")
            counts = tree.value[:, 0, :]  # fractions (scikit-learn >= 1.4) or counts: same ratio
            roots.append(offset)
            left.append(np.where(leaf, -1, tree.children_left + offset))
            right.append(np.where(leaf, -1, tree.children_right + offset))
            feature.append(np.where(leaf, -1, tree.feature))
            value.append(counts[:, 1] / counts.sum(1))
            offset += tree.node_count
        return cls(np.array(roots, np.int64), np.concatenate(left).astype(np.int32),
                   np.concatenate(right).astype(np.int32),
                   np.concatenate(feature).astype(np.int16),
                   np.concatenate(value).astype(np.float64))

    def predict(self, bits: np.ndarray) -> np.ndarray:
        """The probability of class 1 of each molecule: the mean over the trees of the fraction
        of its leaf. The walk advances every (molecule, tree) pair of a block of 1,024 molecules
        by one level at a time and keeps only the pairs not yet at a leaf (memory ``1024 x R``
        int64 at a time; about 0.2 CPU ms a molecule for BACE's 500 trees of ~560 nodes).

        Args:
            bits (numpy.ndarray): ``[M, 2048]`` 0/1 ECFP4.

        Returns:
            numpy.ndarray: ``[M]`` float64 in ``[0, 1]``.
        """
        out = np.empty(len(bits))
        left, right = self.left.astype(np.int64), self.right.astype(np.int64)
        feature, trees = self.feature.astype(np.int64), len(self.roots)
        for start in range(0, len(bits), _BLOCK):
            block = np.asarray(bits[start:start + _BLOCK], dtype=bool)
            flat = block.ravel()  # bit b of molecule m at m * 2048 + b
            node = np.tile(self.roots, len(block))  # [molecule, tree] pairs, flattened
            offset = np.repeat(np.arange(len(block)) * block.shape[1], trees)
            walking = np.flatnonzero(feature[node] >= 0)  # pairs not yet at a leaf
            while len(walking):
                at = node[walking]
                step = np.where(flat[offset[walking] + feature[at]], right[at], left[at])
                node[walking] = step
                walking = walking[feature[step] >= 0]
            out[start:start + len(block)] = self.value[node].reshape(len(block), trees).mean(1)
        return out

    @property
    def num_trees(self) -> int:
        """The number of trees."""
        return len(self.roots)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The arrays as tensors for a checkpoint (:func:`forest_problem` checks them)."""
        return {key: torch.from_numpy(np.ascontiguousarray(getattr(self, key))) for key in _KEYS}

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor]) -> Forest:
        """A forest from a :meth:`state_dict` that :func:`forest_problem` accepted."""
        return cls(*(state[key].numpy().copy() for key in _KEYS))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(trees={self.num_trees}, nodes={len(self.value)})"


_DTYPES = {"roots": torch.int64, "left": torch.int32, "right": torch.int32,
           "feature": torch.int16, "value": torch.float64}


def forest_problem(state: Any, molecules: int, where: str = "forest") -> str | None:
    """What makes a received forest state differ from a :meth:`Forest.state_dict` of this
    version, or :obj:`None`: its keys, plain (strided, gradient-free) 1-dim tensors of the
    written dtypes, one length ``M`` for the node arrays, 1 to :data:`MAX_TREES` roots that
    start the trees in order (the first at 0), at most ``2 n - 1`` nodes a tree, children that
    come after their node within its tree and differ from each other (both ``-1`` at a leaf,
    never one), bits in ``[0, 2048)`` at inner nodes, at most 2048 levels, leaf values in
    ``[0, 1]``.

    Args:
        state (Any): the received entry.
        molecules (int): ``n``, the training molecules the forest was fitted on (at most).
        where (str, optional): how the line names it. (default: ``"forest"``)

    Returns:
        str or None: one line naming the first difference, or :obj:`None`.
    """
    if not isinstance(state, dict) or set(state) != set(_KEYS):
        return f"{where} is not a mapping of {list(_KEYS)}"
    for key, dtype in _DTYPES.items():
        value = state[key]
        if type(value) is not torch.Tensor or value.layout != torch.strided or \
                value.requires_grad or value.dtype != dtype or value.dim() != 1:
            return f"{where}.{key} is not a plain 1-dim {dtype} tensor"
    roots, value = state["roots"], state["value"]
    size = len(value)
    if any(len(state[k]) != size for k in ("left", "right", "feature")) or not len(roots):
        return f"{where} has node arrays of different lengths or no tree"
    if len(roots) > MAX_TREES:
        return f"{where} has {len(roots)} trees, more than the {MAX_TREES} this version fits"
    ends = torch.cat([roots[1:], torch.tensor([size])])
    if int(roots[0]) != 0 or bool((ends <= roots).any()):
        return f"{where}.roots do not start the trees in order, the first at node 0"
    if int((ends - roots).max()) > 2 * molecules - 1:
        return (f"{where} has a tree of more than {2 * molecules - 1} nodes, more than "
                f"{molecules} training molecules make")
    left, right, feature = (state[k].long() for k in ("left", "right", "feature"))
    index = torch.arange(size)
    tree_end = ends[torch.bucketize(index, roots, right=True) - 1]
    leaf = left < 0
    children_ok = torch.where(leaf, (right == -1) & (feature == -1) & (left == -1),
                              (left > index) & (right > index) & (left != right)
                              & (left < tree_end) & (right < tree_end) & (feature >= 0)
                              & (feature < ECFP4_BITS))
    if not bool(children_ok.all()):
        return (f"{where} has a node whose children or bit are not those of a tree this version "
                "writes (children after their node, in its tree; a bit of ECFP4)")
    level, depth = roots, 0  # a path tests each bit once at most (a split on a constant bit
    while len(level):        # is never made): depth <= 2048
        inner = level[left[level] >= 0]
        level, depth = torch.cat([left[inner], right[inner]]), depth + 1
        if depth > ECFP4_BITS + 1:
            return f"{where} has a tree deeper than the {ECFP4_BITS} bits of ECFP4"
    if not bool(torch.isfinite(value).all()) or bool(((value < 0) | (value > 1)).any()):
        return f"{where}.value holds values outside [0, 1]"
    return None
