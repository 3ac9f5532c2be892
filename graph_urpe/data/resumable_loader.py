"""The training loader that resumes mid-epoch: a PyG loader over a
:class:`~graph_urpe.data.sampler.SizeBucketBatchSampler` whose place in the epoch is saved in
checkpoints (Lightning's stateful-loader protocol), so a resumed run trains exactly the batches the
uninterrupted run would have trained next.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch_geometric.loader import DataLoader

from graph_urpe.data.sampler import SizeBucketBatchSampler

__all__ = ["ResumableDataLoader"]


class ResumableDataLoader(DataLoader):
    r"""PyG :class:`~torch_geometric.loader.DataLoader` over a
    :class:`~graph_urpe.data.sampler.SizeBucketBatchSampler` whose place in the epoch is saved in
    checkpoints, so a run interrupted mid-epoch (Ctrl-C, a checkpoint every ``n`` steps) resumes
    with exactly the batches the uninterrupted run would have trained next.

    It implements Lightning's stateful-loader protocol (``state_dict`` / ``load_state_dict``,
    :class:`lightning.fabric.utilities.types._Stateful`): Lightning stores the training loader's
    state in ``checkpoint["loops"]["fit_loop"]["state_dict"]["combined_loader"]`` and, on resume,
    loads it before the first batch. The state is ``{"epoch": int, "batches": int}``: the
    sampler's epoch and how many batches this loader has handed out in it (counted where the
    batches leave the loader, so the batches that worker processes prefetch are not counted).
    Loading it makes the sampler skip those batches if the resumed epoch is that epoch
    (:meth:`~graph_urpe.data.sampler.SizeBucketBatchSampler.resume_at`); a checkpoint from an
    epoch's end resumes at the next epoch, which is then whole. :obj:`len` stays the whole epoch's number of batches, as
    Lightning's progress counters expect. Starting an iteration does not draw from the global
    torch RNG (the workers' base seed comes from the loader's own generator, seeded with the
    sampler's ``seed + epoch``), so a resumed run's dropout masks follow the restored RNG state.

    Args:
        dataset: the dataset (as for PyG's ``DataLoader``).
        batch_sampler (SizeBucketBatchSampler): the batches.
        **kwargs: other arguments of PyG's ``DataLoader`` (``num_workers``, ...).

    Raises:
        TypeError: if ``batch_sampler`` is not a
            :class:`~graph_urpe.data.sampler.SizeBucketBatchSampler`.
    """

    def __init__(self, dataset, batch_sampler: SizeBucketBatchSampler, **kwargs: Any) -> None:
        if not isinstance(batch_sampler, SizeBucketBatchSampler):
            raise TypeError("ResumableDataLoader needs a SizeBucketBatchSampler as batch_sampler, "
                            f"got {type(batch_sampler).__name__}")
        kwargs.setdefault("generator", torch.Generator())
        super().__init__(dataset, batch_sampler=batch_sampler, **kwargs)
        self._position = (batch_sampler.epoch, 0)

    def __iter__(self) -> Iterator:
        sampler = self.batch_sampler
        # The body runs at the first batch, after Lightning's set_epoch for the epoch.
        skip, epoch = sampler.resume_offset, sampler.epoch
        self._position = (epoch, skip)
        # PyTorch draws the workers' base seed when an iterator starts: from this generator, set
        # by the epoch, not from the global RNG, whose restored state a resumed run must not move
        self.generator.manual_seed(sampler.seed + epoch)
        for count, batch in enumerate(super().__iter__(), start=skip + 1):
            self._position = (epoch, count)
            yield batch

    def state_dict(self) -> dict[str, int]:
        """``{"epoch": e, "batches": n}``: ``n`` batches of epoch ``e`` handed out so far."""
        epoch, batches = self._position
        return {"epoch": int(epoch), "batches": int(batches)}

    def load_state_dict(self, state_dict: dict[str, int]) -> None:
        """Resume after ``state_dict["batches"]`` batches of epoch ``state_dict["epoch"]`` (the
        next iteration of that epoch skips them; see
        :meth:`~graph_urpe.data.sampler.SizeBucketBatchSampler.resume_at`).

        Raises:
            ValueError: if the state is not of this loader's form.
        """
        try:
            epoch, batches = int(state_dict["epoch"]), int(state_dict["batches"])
        except (KeyError, TypeError, ValueError):
            raise ValueError("the checkpoint's training-loader state is not one of "
                             f"ResumableDataLoader ({{'epoch', 'batches'}}): {state_dict!r}") from None
        self.batch_sampler.resume_at(epoch, batches)
        self._position = (epoch, batches)
