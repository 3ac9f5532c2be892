"""The molecular dataset families: one Lightning data module per dataset, each holding its
:class:`~graph_urpe.data.families.DatasetFamily` (which states the facts, task, label columns,
featurization, metric, evaluator, once and builds the splits), on top of
:class:`~graph_urpe.data.modules.graph.GraphDataModule` (loaders, SMILES prediction):

* :class:`ZincLikeDataModule`: the embedded ZINC-like 12k default (no download);
* :class:`ZINCDataModule`: PyG's ZINC benchmark (``subset=True``: the 12k subset of the paper);
* :class:`OGBDataModule`: OGB ``ogbg-mol*`` datasets (e.g. ``ogbg-molhiv``) with OGB's split;
* :class:`PCQM4Mv2DataModule`: OGB-LSC PCQM4Mv2 (or a stand-in in its folder format);
* :class:`CSVDataModule`: your own CSV of SMILES and labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph_urpe.data.csv.labels import CSVTask
from graph_urpe.data.families import (
    CSVFamily,
    OGBFamily,
    PCQM4Mv2Family,
    PyGZincFamily,
    ZincLikeFamily,
)
from graph_urpe.data.featurize import Featurization
from graph_urpe.data.modules.graph import GraphDataModule
from graph_urpe.data.modules.submission import SubmissionWriter
from graph_urpe.data.ogb import SUBMISSION_SIZES

__all__ = [
    "CSVDataModule",
    "OGBDataModule",
    "PCQM4Mv2DataModule",
    "ZINCDataModule",
    "ZincLikeDataModule",
]


class ZincLikeDataModule(GraphDataModule):
    r"""The embedded ZINC-like 12k default (``zinc-like``,
    :class:`graph_urpe.data.zinc.ZincLikeDataset`): 10,000 / 1,000 / 1,000 real ZINC
    molecules with the constrained-solubility target. Regression, MAE. Always available offline.
    OGB's atom and bond features by default, so a model trained on it predicts any molecule RDKit
    parses (ions, metals, isotopes); ``featurization="zinc"`` gives ZINC's 28 atom types.

    Args:
        featurization (str, optional): ``"ogb"`` or ``"zinc"``. (default: ``"ogb"``)
        **kwargs: see :class:`GraphDataModule`.
    """

    def __init__(self, featurization: Featurization = "ogb", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.family = ZincLikeFamily(featurization)


class ZINCDataModule(GraphDataModule):
    r"""PyG's ZINC benchmark (:class:`torch_geometric.datasets.ZINC`; Dwivedi et al.,
    "Benchmarking Graph Neural Networks"), the paper's ZINC data: ``subset=True`` is the 12k subset
    (10,000 / 1,000 / 1,000), ``subset=False`` full ZINC (220,011 / 24,445 / 5,000). Raw files in
    ``root/zinc`` (or ``root/zinc_full``): downloaded with ``download=True``, or written offline by
    ``datasets/build_pyg_zinc.py``. Regression (constrained solubility), MAE.

    Args:
        subset (bool, optional): the 12k subset. (default: :obj:`True`)
        **kwargs: see :class:`GraphDataModule`.
    """

    def __init__(self, subset: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.family = PyGZincFamily(subset)


class OGBDataModule(GraphDataModule):
    r"""An OGB molecular graph property prediction dataset (``ogbg-mol*``; Hu et al., "Open Graph
    Benchmark", NeurIPS 2020) with OGB's split and scored by OGB's
    :class:`~ogb.graphproppred.Evaluator` (ROC-AUC for ``ogbg-molhiv``, AP for ``ogbg-molpcba``,
    RMSE for the regression sets). OGB features: 9 atom, 3 bond columns. The folder
    ``root/ogbg_<name>`` is downloaded with ``download=True`` or written offline by
    ``datasets/build_ogb.py``. Task count, type and metric come from OGB's metadata
    (``master.csv``), without reading the data.

    Args:
        name (str, optional): dataset name. (default: ``"ogbg-molhiv"``)
        **kwargs: see :class:`GraphDataModule`.

    Raises:
        ValueError: for a dataset that is not an OGB molecular dataset.
    """

    def __init__(self, name: str = "ogbg-molhiv", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not name.startswith("ogbg-mol"):
            raise ValueError(
                f"OGBDataModule supports the molecular ogbg-mol* datasets, got {name!r}."
            )
        self.family = OGBFamily(name)


class PCQM4Mv2DataModule(GraphDataModule):
    r"""OGB-LSC PCQM4Mv2 (HOMO-LUMO gap in eV, 3.7M molecules), scored with
    :class:`ogb.lsc.PCQM4Mv2Evaluator` (MAE). ``standin=True`` uses the offline QM9 stand-in in the
    same folder format (``root/pcqm4mv2_qm9``, built by ``datasets/build_pcqm4mv2.py`` in a clone),
    whose hidden test-dev labels are restored for testing.

    Testing on a hidden split (``test_split="test-dev"`` or ``"test-challenge"``) writes OGB's
    submission file (:class:`~graph_urpe.data.modules.submission.SubmissionWriter`).

    Args:
        standin (bool, optional): use the QM9 stand-in. (default: :obj:`False`)
        test_split (str, optional): split used by ``test``: ``"valid"``, ``"test-dev"``,
            ``"test-challenge"`` or the stand-in's labelled ``"test"``. (default: :obj:`None`:
            ``"test"`` for the stand-in, else ``"valid"``, the split PCQM4Mv2 results are
            reported on since test labels are hidden)
        submission_dir (str, optional): folder of the submission file. (default: :obj:`None`:
            the run folder in ``fit``, the Trainer's ``default_root_dir`` in ``test``)
        **kwargs: see :class:`GraphDataModule`.
    """

    def __init__(self, standin: bool = False, test_split: str | None = None,
                 submission_dir: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.standin = standin
        self.test_split = test_split or ("test" if standin else "valid")
        self.submission_dir = submission_dir
        self.family = PCQM4Mv2Family(standin)

    def test_callbacks(self) -> list[SubmissionWriter]:
        """OGB's submission writer when :attr:`test_split` is a hidden split (run by the
        Lightning module when testing)."""
        if self.test_split not in SUBMISSION_SIZES:
            return []
        return [SubmissionWriter(self.test_split, self.standin, self.submission_dir)]


class CSVDataModule(GraphDataModule):
    r"""Your own molecules: a CSV with a SMILES column and one or more label columns
    (:class:`graph_urpe.data.csv.dataset.SmilesCSVDataset`), regression or binary
    classification, NaN labels allowed; random, scaffold or explicit (column) split. Unusable rows
    are skipped with their labels and listed (or refused with ``strict``). The monitored metric
    follows the task: MAE for regression, ROC-AUC for classification.

    Args:
        path (str): the CSV file.
        target_columns (list[str], optional): label columns. (default: ``["target"]``)
        task (str, optional): ``"regression"`` or ``"classification"``.
            (default: ``"regression"``)
        split (str, optional): ``"random"``, ``"scaffold"`` or the name of a column with
            ``train``/``valid``/``test``. (default: ``"random"``)
        split_seed (int, optional): seed of the random split. (default: :obj:`0`)
        smiles_column (str, optional): the SMILES column. (default: ``"smiles"``)
        featurization (str, optional): ``"ogb"`` or ``"zinc"``. (default: ``"ogb"``)
        **kwargs: see :class:`GraphDataModule`.

    Raises:
        ValueError: for an unknown task or featurization.
    """

    def __init__(
        self,
        path: str,
        target_columns: Sequence[str] = ("target",),
        task: CSVTask = "regression",
        split: str = "random",
        split_seed: int = 0,
        smiles_column: str = "smiles",
        featurization: Featurization = "ogb",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.family = CSVFamily(path, smiles_column, target_columns, task, split, featurization,
                                split_seed)
