"""A full disk during ``fit``: one line naming the checkpoint, no traceback, no temp file, the
previous ``last.ckpt`` intact."""

from __future__ import annotations

import pytest
import torch
from lightning.pytorch.callbacks import Callback
from test_cli import write_config

from graph_urpe.cli import main

TORCH_FULL_DISK = "[enforce fail at inline_container.cc:664] . unexpected pos 4864 vs 4758"


class DiskFullsUpAfterEpoch0(Callback):
    """From epoch 1 on, torch.save fails as it does on a full disk (a RuntimeError, not an
    OSError), after writing part of the file."""

    def on_train_epoch_start(self, trainer, pl_module):
        if trainer.current_epoch == 1:
            def full(obj, target, *args, **kwargs):
                with open(target, "wb") as handle:
                    handle.write(b"PK\x03\x04")
                raise RuntimeError(TORCH_FULL_DISK)

            torch.save = full  # restored by the test


def test_full_disk_while_fitting_is_one_line_and_keeps_last_ckpt(tmp_path, capsys):
    config, runs = write_config(tmp_path, max_epochs=3)
    real_save = torch.save
    try:
        with pytest.raises(SystemExit) as info:
            main(["fit", "--config", config, "--test_after_fit", "false",
                  "--trainer.callbacks+=test_full_disk.DiskFullsUpAfterEpoch0"])
    finally:
        torch.save = real_save  # the failing fit may skip the callback's teardown
    assert info.value.code == 2
    err = capsys.readouterr().err
    last = runs / "version_0" / "checkpoints" / "last.ckpt"
    assert "Traceback" not in err and "inline_container" in err, err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and str(last) in errors[0] and "disk may be full" in errors[0], err
    assert sorted(p.name for p in last.parent.iterdir()) == ["best.ckpt", "last.ckpt"]
    assert torch.load(last, weights_only=True)["global_step"] > 0  # epoch 0's, intact
