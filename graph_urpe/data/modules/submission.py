"""The Lightning callback that ends a ``test`` on PCQM4Mv2's hidden test-dev (or test-challenge)
split in OGB's submission file (:func:`graph_urpe.data.ogb.save_submission`, which calls OGB's
``PCQM4Mv2Evaluator.save_test_submission``)::

    graph-urpe test --config configs/pcqm4mv2/graphormer-base-urpe.yaml --ckpt_path best.ckpt \\
        --data.init_args.test_split test-dev --data.init_args.submission_dir submission
"""

from __future__ import annotations

import torch
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_warn

from graph_urpe.data.ogb import save_submission

__all__ = ["SubmissionWriter"]


class SubmissionWriter(Callback):
    r"""Writes the predictions of the tested split, in split order, as OGB's submission file once
    ``test`` ends (global rank 0; the predictions are gathered over DDP ranks by the model).

    Reads ``pl_module.test_outputs`` (``(ids [N], pred [N, 1], labels [N, 1])``, ids = positions
    in the split, predictions in eV) of a :class:`~graph_urpe.models.graph.GraphPropertyModule`.
    A test that did not cover the whole split (``limit_test_batches``) writes nothing and warns.

    Args:
        mode (str): ``"test-dev"`` or ``"test-challenge"``.
        standin (bool, optional): the data are an offline stand-in (file named ``*_standin.npz``,
            see :func:`~graph_urpe.data.ogb.save_submission`). (default: :obj:`False`)
        dir_path (str, optional): output folder. (default: :obj:`None`: the Trainer's
            ``default_root_dir``, the run folder in ``fit``)
    """

    def __init__(self, mode: str, standin: bool = False, dir_path: str | None = None) -> None:
        self.mode, self.standin, self.dir_path = mode, standin, dir_path
        self.path: str | None = None

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        ids, pred, _ = (t.detach().cpu() for t in pl_module.test_outputs)
        size = len(trainer.datamodule.splits["test"])
        if not torch.equal(torch.sort(ids).values, torch.arange(size)):
            rank_zero_warn(
                f"no {self.mode} submission written: the test covered {ids.numel()} of {size} "
                "molecules (limit_test_batches?); test the whole split."
            )
            return
        order = torch.argsort(ids)
        self.path = save_submission(pred[order].reshape(-1), self.dir_path or
                                    trainer.default_root_dir, self.mode, self.standin)
        what = ("stand-in predictions in OGB's submission format (not a leaderboard entry)"
                if self.standin else "OGB's submission file: upload it to the leaderboard")
        print(f"Wrote {self.path}: {size} {self.mode} predictions, {what}.")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(mode={self.mode!r}, standin={self.standin})"
