"""A checkpoint or run folder someone sent: resuming from it deletes, truncates and overwrites
nothing outside the run's own folder, and a changed Lightning state is refused with one line
(issue 39, cases 1, 3 and 9). The victims live outside the work folder and must survive."""

from __future__ import annotations

import os

import pytest
import torch
from test_cli import write_config

from graph_urpe.cli import main

pytestmark = pytest.mark.usefixtures("one_thread")

_RUN: dict[str, object] = {}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished 2-epoch run: ``(config, run folder)``, fit once for the module."""
    if "run" not in _RUN:
        tmp = tmp_path_factory.mktemp("trained")
        config, runs = write_config(tmp)
        main(["fit", "--config", config, "--test_after_fit", "false"])
        _RUN["run"] = (config, runs / "version_0")
    return _RUN["run"]


def victims(tmp_path):
    """A folder with a file, and a file, outside every run folder."""
    folder = tmp_path / "victim_folder"
    folder.mkdir()
    (folder / "data.txt").write_text("precious\n")
    file = tmp_path / "victim.txt"
    file.write_text("precious\n")
    return folder, file


def changed(run, tmp_path, edit) -> str:
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    edit(ckpt)
    path = tmp_path / "received.ckpt"
    torch.save(ckpt, path)
    return str(path)


def resume(config, ckpt, tmp_path, epochs=4):
    return ["fit", "--config", config, "--test_after_fit", "false", "--trainer.max_epochs",
            str(epochs), "--ckpt_path", ckpt, "--trainer.default_root_dir", str(tmp_path / "mine")]


def model_checkpoint_keys(ckpt):
    return [k for k in ckpt["callbacks"] if k.startswith("ModelCheckpoint")]


@pytest.mark.parametrize("attack", ["local_url", "best_k_dotdot", "absolute"])
def test_a_received_checkpoint_cannot_make_fit_delete_a_path(tmp_path, trained, attack):
    config, run = trained
    folder, file = victims(tmp_path)

    def edit(ckpt):
        for key in model_checkpoint_keys(ckpt):
            state = ckpt["callbacks"][key]
            if attack == "local_url":
                state["best_model_path"] = f"local://{folder}"
                state["last_model_path"] = f"local://{file}"
            elif attack == "best_k_dotdot":
                escape = os.path.join(state["dirpath"], *[".."] * 8, str(folder).lstrip("/"))
                state["best_k_models"] = {escape: torch.tensor(0.0)}
                state["kth_best_model_path"] = escape
            else:
                state["best_model_path"] = str(folder)
                state["last_model_path"] = str(file)
                state["best_model_score"] = torch.tensor(-1e9)  # "better" than any real score

    with pytest.warns(UserWarning, match="names other files than this run's"):
        main(resume(config, changed(run, tmp_path, edit), tmp_path))
    assert (folder / "data.txt").read_text() == "precious\n"
    assert file.read_text() == "precious\n"
    assert (tmp_path / "mine" / "tiny" / "version_0" / "checkpoints" / "last.ckpt").is_file()


def test_a_folder_named_like_a_checkpoint_in_a_received_run_folder_is_refused(tmp_path, trained,
                                                                              capsys):
    import shutil

    config, run = trained
    root = tmp_path / "received_runs"
    shutil.copytree(run.parent, root / "tiny")
    best = root / "tiny" / "version_0" / "checkpoints" / "best.ckpt"
    best.unlink()
    best.mkdir()
    (best / "keep.txt").write_text("precious\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", config, "--test_after_fit", "false", "--trainer.max_epochs",
              "4", "--trainer.default_root_dir", str(root), "--ckpt_path", "last"])
    assert exit_info.value.code == 2
    assert "best.ckpt is a folder where the run keeps its checkpoint file" in \
        capsys.readouterr().err
    assert (best / "keep.txt").read_text() == "precious\n"


def test_resuming_a_received_run_folder_with_ckpt_path_last_deletes_nothing_outside(tmp_path,
                                                                                   trained):
    import shutil

    config, run = trained
    folder, _ = victims(tmp_path)
    root = tmp_path / "received_runs"
    shutil.copytree(run.parent, root / "tiny")
    last = root / "tiny" / "version_0" / "checkpoints" / "last.ckpt"
    ckpt = torch.load(last, weights_only=True)
    for key in model_checkpoint_keys(ckpt):
        ckpt["callbacks"][key]["best_model_path"] = f"local://{folder}"
    torch.save(ckpt, last)
    with pytest.warns(UserWarning, match="names other files"):
        main(["fit", "--config", config, "--test_after_fit", "false", "--trainer.max_epochs",
              "4", "--trainer.default_root_dir", str(root), "--ckpt_path", "last"])
    assert (folder / "data.txt").read_text() == "precious\n"


@pytest.mark.parametrize("name", ["metrics.csv", "hparams.yaml", "config.yaml",
                                  "checkpoints/best.ckpt"])
def test_a_link_in_a_received_run_folder_is_refused_before_anything_is_written(
        tmp_path, trained, capsys, name):
    import shutil

    config, run = trained
    _, file = victims(tmp_path)
    root = tmp_path / "received_runs"
    shutil.copytree(run.parent, root / "tiny")
    link = root / "tiny" / "version_0" / name
    link.unlink()
    link.symlink_to(file)
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", config, "--test_after_fit", "false", "--trainer.max_epochs",
              "4", "--trainer.default_root_dir", str(root), "--ckpt_path", "last"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"{name.split('/')[-1]} in the run folder is a symbolic link" in err
    assert "Traceback" not in err
    assert file.read_text() == "precious\n"


def _scheduler(ckpt):
    ckpt["lr_schedulers"][0]["base_lrs"] = "not a list"


def _optimizer_shape(ckpt):
    state = ckpt["optimizer_states"][0]["state"]
    first = next(iter(state))
    state[first]["exp_avg"] = torch.zeros(3, 3, 3)


def _loops(ckpt):
    ckpt["loops"]["fit_loop"]["epoch_progress"]["current"]["completed"] = "two"


def _rng(ckpt):
    key = next(k for k in ckpt["callbacks"] if k.startswith("RNGStateCheckpoint"))
    ckpt["callbacks"][key]["numpy"][1] = torch.zeros(3, dtype=torch.int64)


def _no_optimizer(ckpt):
    del ckpt["optimizer_states"]


def _no_scheduler(ckpt):
    del ckpt["lr_schedulers"]


def _no_loops(ckpt):
    del ckpt["loops"]


def _no_rng(ckpt):
    del ckpt["callbacks"][next(k for k in ckpt["callbacks"] if k.startswith("RNGState"))]


def _negative_counter(ckpt):
    ckpt["loops"]["fit_loop"]["epoch_progress"]["current"]["completed"] = -10**12


def _future_lightning(ckpt):
    ckpt["pytorch-lightning_version"] = "99.0"


def _two_schedulers(ckpt):
    ckpt["lr_schedulers"] = ckpt["lr_schedulers"] * 2


@pytest.mark.parametrize(("edit", "named"), [
    (_scheduler, "lr_schedulers[0].base_lrs"),
    (_optimizer_shape, "optimizer_states[0].state"),
    (_loops, "loops.fit_loop.epoch_progress.current.completed"),
    (_rng, "callbacks[RNGStateCheckpoint].numpy[1]"),
    (_two_schedulers, "lr_schedulers is not a list of 1 states"),
    (_no_loops, "loops are missing"),
    (_no_rng, "callbacks[RNGStateCheckpoint] is missing"),
    (_negative_counter, "epoch_progress.current.completed is -1000000000000"),
    (_future_lightning, "is not a Lightning 2 version"),
    (lambda c: c.update(global_step=-3), "global_step is -3"),
    (lambda c: c.update(epoch="x"), "epoch is x"),
    (_no_optimizer, "optimizer_states are missing (saved without its training state"),
    (_no_scheduler, "lr_schedulers are missing"),
])
def test_a_changed_lightning_state_is_refused_with_one_line(tmp_path, trained, capsys, edit,
                                                            named):
    config, run = trained
    ckpt = changed(run, tmp_path, edit)
    with pytest.raises(SystemExit) as exit_info:
        main(resume(config, ckpt, tmp_path))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [line for line in err.splitlines() if f"refusing {ckpt}: " in line]
    assert named in line


def test_an_unchanged_checkpoint_still_resumes(tmp_path, trained):
    config, run = trained
    ckpt = changed(run, tmp_path, lambda c: None)
    main(resume(config, ckpt, tmp_path, epochs=3))
    done = torch.load(tmp_path / "mine" / "tiny" / "version_0" / "checkpoints" / "last.ckpt",
                      weights_only=True)
    assert done["epoch"] == 2


def _leaves(value, path=()):
    """Every (path, leaf) of a nested checkpoint section."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _leaves(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _leaves(child, (*path, i))
    else:
        yield path, value


def _fuzz_values(victim):
    from hypothesis import strategies as st

    return st.one_of(
        st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(), st.text(max_size=8),
        st.sampled_from([str(victim), f"local://{victim}", "../../../../victim", "/", ""]),
        st.builds(lambda n, d: torch.zeros(n, dtype=d), st.integers(0, 5),
                  st.sampled_from([torch.float32, torch.int64, torch.uint8])),
        st.lists(st.integers(0, 3), max_size=3), st.dictionaries(st.text(max_size=4),
                                                                 st.integers(), max_size=2))


def test_fuzzed_lightning_states_resume_or_are_refused_in_one_line(tmp_path, trained):
    """Hypothesis replaces one leaf of the callbacks', loops', optimizers' or schedulers' state
    (paths to a victim included): every resume either trains on or stops with one line, and the
    victim folder survives."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    config, run = trained
    folder, _ = victims(tmp_path)
    base = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    sections = ["callbacks", "loops", "optimizer_states", "lr_schedulers"]
    leaves = [(s, p) for s in sections for p, _ in _leaves(base[s])]

    @settings(max_examples=30, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def resume_one(data):
        section, path = data.draw(st.sampled_from(leaves))
        ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
        node = ckpt[section]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = data.draw(_fuzz_values(folder))
        received = tmp_path / "fuzz.ckpt"
        torch.save(ckpt, received)
        code = 0
        import contextlib
        import io

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                main(resume(config, str(received), tmp_path / "r", epochs=3))
            except SystemExit as exit_info:
                code = exit_info.code
        assert code in (0, 2), (section, path, err.getvalue()[-800:])
        assert "Traceback" not in err.getvalue()
        if code == 2:
            assert "refusing" in err.getvalue() or "error:" in err.getvalue()
        assert (folder / "data.txt").read_text() == "precious\n"

    resume_one()
