"""EpochSoup and ``--test_checkpoint soup``: which epochs it keeps, the average against a hand
computation, its state's checks, the fit's soup.ckpt (predict writes what its test scored) and
an exact resume."""

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from graph_urpe.models.soup import EpochSoup

_FIT = SimpleNamespace(fn="fit")


class _Module(nn.Module):
    metric_name, metric_mode = "mae", "min"

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 1)
        self.register_buffer("count", torch.zeros((), dtype=torch.long))


def _validate(soup, module, epoch, score, value):
    with torch.no_grad():
        module.lin.weight.fill_(value)
        module.lin.bias.fill_(-value)
        module.count.fill_(epoch)
    trainer = SimpleNamespace(sanity_checking=False, current_epoch=epoch, state=_FIT,
                              callback_metrics={"val/mae": torch.tensor(score)})
    soup.on_validation_end(trainer, module)


def _fitted(size=3):
    module, soup = _Module(), EpochSoup(size)
    soup.setup(None, module, "fit")
    scores = [0.9, 0.5, 0.7, float("nan"), 0.4, 0.8, 0.5]
    for epoch, score in enumerate(scores):
        _validate(soup, module, epoch, score, float(epoch))
    return module, soup


def test_keeps_the_best_epochs_and_averages_them():
    _, soup = _fitted()
    assert soup.epochs == [4, 1, 6]  # 0.4, then the tie 0.5 in epoch order; NaN skipped
    avg = soup.averaged()
    assert torch.allclose(avg["lin.weight"], torch.full((1, 2), (4 + 1 + 6) / 3))
    assert torch.allclose(avg["lin.bias"], torch.full((1,), -(4 + 1 + 6) / 3))
    assert avg["count"].item() == 4 and avg["count"].dtype == torch.long  # the best epoch's


def test_max_mode_and_sanity_check():
    module, soup = _Module(), EpochSoup(2)
    module.metric_mode = "max"
    soup.setup(None, module, "fit")
    trainer = SimpleNamespace(sanity_checking=True, current_epoch=0, state=_FIT,
                              callback_metrics={"val/mae": torch.tensor(1.0)})
    soup.on_validation_end(trainer, module)
    assert soup.epochs == []
    for epoch, score in enumerate([0.2, 0.9, 0.5]):
        _validate(soup, module, epoch, score, float(epoch))
    assert soup.epochs == [1, 2]


def test_state_round_trip_and_checks():
    module, soup = _fitted()
    state = soup.state_dict()
    assert soup.state_difference(state) is None
    fresh = EpochSoup(3)
    fresh.setup(None, module, "fit")
    fresh.load_state_dict(state)
    assert fresh.epochs == soup.epochs
    assert all(torch.equal(a, b) for a, b in zip(fresh.averaged().values(),
                                                  soup.averaged().values()))
    bad = dict(state, weights=[{**w, "lin.weight": torch.zeros(3, 3)} for w in state["weights"]])
    assert "shape" in soup.state_difference(bad)
    too_many = EpochSoup(2)
    too_many.setup(None, module, "fit")
    assert "at most 2" in too_many.state_difference(state)
    assert "finite" in soup.state_difference(dict(state, scores=[float("inf")] * 3))
    assert "distinct" in soup.state_difference(dict(state, epochs=[1, 1, 2]))
    assert "not a soup state" in soup.state_difference({"size": 3})


def test_no_epoch_yet():
    module, soup = _Module(), EpochSoup()
    soup.setup(None, module, "fit")
    with pytest.raises(RuntimeError, match="no epoch"):
        soup.averaged()
    with pytest.raises(ValueError, match="at least 1"):
        EpochSoup(0)


def test_fit_tests_the_soup_of_its_best_epochs(tmp_path, capsys):
    from test_cli import write_config

    from graph_urpe.cli import main

    config, runs = write_config(tmp_path, max_epochs=4)
    main(["fit", "--config", config, "--test_checkpoint", "soup",
          "--model.init_args.optimizer.init_args.lr", "0.01"])
    out = capsys.readouterr().out
    folder = runs / "version_0" / "checkpoints"
    soup_path = folder / "soup.ckpt"
    # The soup's network weights are the mean of the kept epochs' weights that last.ckpt holds
    # (its calibration is fitted again on its own validation predictions, checked below).
    last = torch.load(folder / "last.ckpt", weights_only=True)
    kept = last["callbacks"]["EpochSoup"]
    epochs = ", ".join(str(e) for e in sorted(kept["epochs"]))
    # its own validation score beside the best epoch's: the last and the least val/mae rows of
    # metrics.csv (the soup's validation is logged after the fit's epochs)
    import pandas as pd

    val = pd.read_csv(runs / "version_0" / "metrics.csv")["val/mae"].dropna()
    assert (f"Soup checkpoint: {soup_path}  (the mean of the weights of epochs {epochs} (from "
            f"0, as in metrics.csv) by val/mae; its val/mae {val.iloc[-1]:.4f}, the best epoch's "
            f"{val.iloc[:-1].min():.4f}, tested)") in out
    assert 1 <= len(kept["epochs"]) <= 4
    soup = torch.load(soup_path, weights_only=True)["state_dict"]
    network = [k for k in soup if k.startswith("model.")]
    assert len(network) > 10
    for key in network:
        value = soup[key]
        if value.is_floating_point():
            mean = sum(w[key].double() for w in kept["weights"]) / len(kept["weights"])
            assert torch.allclose(value.double(), mean, atol=1e-6), key
    # A received-file check passes, and predict with it writes what the fit's test scored
    # (the soup's own calibration and blend, fitted on its validation predictions).
    tested = pd.read_csv(runs / "version_0" / "test_predictions.csv").sort_values("smiles")
    pred = tmp_path / "pred.csv"
    main(["predict", "--ckpt_path", str(soup_path), "--smiles", *tested["smiles"],
          "--output", str(pred)])
    again = pd.read_csv(pred).sort_values("smiles")
    for column in ("target_pred", "target_network", "target_lower", "target_upper"):
        assert again[column].to_numpy() == pytest.approx(tested[column].to_numpy(), abs=1e-5)


def test_an_interrupted_fit_resumes_to_the_same_soup(tmp_path, capsys):
    from test_cli import write_config

    from graph_urpe.cli import main

    config, runs = write_config(tmp_path, max_epochs=3)
    args = ["--test_checkpoint", "soup", "--model.init_args.optimizer.init_args.lr", "0.01"]
    main(["fit", "--config", config, "--name", "whole", *args])
    with pytest.raises(SystemExit):
        main(["fit", "--config", config, "--name", "split", *args,
              "--trainer.callbacks+=test_cli.InterruptAfterFirstEpoch"])
    main(["fit", "--config", config, "--name", "split", "--version", "0", "--ckpt_path", "last",
          *args])
    capsys.readouterr()
    whole, split = (torch.load(runs.parent / name / "version_0" / "checkpoints" / "soup.ckpt",
                               weights_only=True) for name in ("whole", "split"))
    assert whole["callbacks"]["EpochSoup"]["epochs"] == split["callbacks"]["EpochSoup"]["epochs"]
    for key, value in whole["state_dict"].items():
        torch.testing.assert_close(split["state_dict"][key], value, rtol=0, atol=0)


def test_a_validation_split_of_one_class_tests_last_and_says_why(tmp_path, capsys, monkeypatch):
    import numpy as np
    import pandas as pd
    from test_classical import MOLECULES
    from test_cli import write_config

    from graph_urpe.cli import main

    monkeypatch.chdir(tmp_path)
    config, runs = write_config(tmp_path, max_epochs=2, task="classification")
    frame = pd.DataFrame({"smiles": MOLECULES})
    frame["target"] = [float(len(s) > 4) for s in frame["smiles"]]
    frame["split"] = ["train"] * 30 + ["valid"] * 6 + ["test"] * (len(frame) - 36)
    frame.loc[30:35, "target"] = 0.0  # no positive among the validation rows: ROC-AUC is NaN
    frame.loc[36:37, "target"] = 0.0  # the test rows hold both classes
    assert frame.loc[frame["split"] == "test", "target"].nunique() == 2
    frame.to_csv(tmp_path / "mols.csv", index=False)
    with pytest.warns(UserWarning, match=r"no epoch had a finite val/rocauc \(a validation split "
                      r"without both classes"):
        main(["fit", "--config", config, "--test_checkpoint", "soup"])
    out = capsys.readouterr().out
    folder = runs / "version_0" / "checkpoints"
    assert not (folder / "soup.ckpt").exists()
    assert f"Last checkpoint: {folder / 'last.ckpt'}  (tested; " in out
    assert np.isfinite(pd.read_csv(runs / "version_0" / "metrics.csv")["test/rocauc"].dropna()).all()
