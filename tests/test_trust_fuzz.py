"""Fuzzing the readers of received files: mutated checkpoint hyperparameters and run-folder
configurations (hostile strings, class entries, huge numbers, unknown keys, removed keys).

For every example: no file is created, no module outside graph-urpe's own and its libraries' is
imported, the marker that the payloads would write never appears, and every failure is one line
of :class:`~graph_urpe.trust.ReceivedFileError`. Bounded and reproducible: hypothesis with
``derandomize=True`` and a fixed number of examples.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
import torch
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graph_urpe.models.graph import GraphPropertyModule
from graph_urpe.trust import ReceivedFileError, read_checkpoint, read_run_data
from tests.test_trust import checkpoint, hparams, outside_allow_list

MARK = "FUZZ_MARKER"
NAMES = ["Graphormer", "AdamW", "PolynomialDecayLR", "CSVDataModule", "GraphPropertyModule",
         "torch.nn.Linear", "torch.optim.lr_scheduler.LambdaLR", "evilmod.Net", "Softsign",
         "graph_urpe.cli.__main__.Foo", "this.Foo", "joblib.logger.PrintTime", "os.system",
         "graph_urpe.nn.graphormer.Graphormer", "graph_urpe.tasks.molecule_data.CSVDataModule"]
STRINGS = [f"{{class_path: joblib.logger.PrintTime, init_args: {{logfile: {MARK}}}}}",
           "{class_path: this.Foo}", "cfgfile", "test.csv", "random.csv", "os.system",
           f"!!python/object/apply:os.system ['touch {MARK}']", "other.yaml", "Softsign",
           "evilmod.Net", "x" * 5000, "", "null", "regression", "urpe", "1e300"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(STRINGS),
                    st.text(max_size=20))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.fixed_dictionaries({"class_path": st.sampled_from(NAMES)},
                              optional={"init_args": st.dictionaries(
                                  st.sampled_from(["lr", "num_layers", "logfile", "path",
                                                   "lr_lambda", "embed_dim"]), inner,
                                  max_size=3)}),
        st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8)


def mutate(config: dict, data: st.DataObject) -> dict:
    """``config`` with one entry, somewhere in it, replaced, added or removed."""
    node = config
    while True:
        keys = sorted(k for k in node if isinstance(k, str))
        key = data.draw(st.sampled_from([*keys, "<new>"]))
        child = node.get(key)
        if isinstance(child, dict) and data.draw(st.booleans()):
            node = child
            continue
        action = data.draw(st.sampled_from(["replace", "add", "remove"]))
        if action == "remove" and key in node:
            del node[key]
        elif action == "add" or key == "<new>":
            node[data.draw(st.sampled_from(["transform", "params", "_class_path", "class_path",
                                            "init_args", "lr_lambda", "x"]))] = data.draw(values)
        else:
            node[key] = data.draw(values)
        return config


def check_failure(err: Exception) -> None:
    assert isinstance(err, ReceivedFileError), repr(err)
    assert "\n" not in str(err) and str(err).startswith("refusing "), str(err)


@pytest.fixture
def arena(tmp_path, monkeypatch):
    """cwd = tmp_path holding ``evilmod`` and ``cfgfile`` (payload targets); a warm-up read."""
    (tmp_path / "evilmod.py").write_text(f"open({MARK!r}, 'w').write('imported')\n")
    (tmp_path / "cfgfile").write_text("class_path: evilmod.Net\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    GraphPropertyModule.load_from_checkpoint(checkpoint(tmp_path / "warm.ckpt"))
    with pytest.raises(ReceivedFileError):
        read_checkpoint(checkpoint(tmp_path / "warm.ckpt", hparams(loss="x")))
    return tmp_path


FUZZ = settings(max_examples=20, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(data=st.data())
def test_mutated_checkpoints_are_built_or_refused_in_one_line(arena, data):
    hp = mutate(hparams(), data)
    path = checkpoint(arena / "fuzz.ckpt", hp)
    files, modules = set(arena.iterdir()), set(sys.modules)
    try:
        module = GraphPropertyModule.load_from_checkpoint(path)
    except Exception as err:  # noqa: BLE001  (every failure must be ours, one line)
        check_failure(err)
    else:  # what was built is what the hyperparameters say, plain values only
        assert isinstance(module, GraphPropertyModule)
        _plain(module.hparams)
    assert set(arena.iterdir()) == files
    assert outside_allow_list(modules) == set()


@FUZZ
@given(data=st.data())
def test_mutated_run_folder_configurations_are_read_or_refused_in_one_line(arena, data):
    config = {"data": {"class_path": "graph_urpe.data.modules.molecule.CSVDataModule",
                       "init_args": {"path": "test.csv", "target_columns": ["y"],
                                     "batch_size": 4, "split": "random"}},
              "trainer": {"max_epochs": 1}}
    path = arena / "config.yaml"
    path.write_text(yaml.safe_dump(mutate(config, data)))
    files, modules = set(arena.iterdir()), set(sys.modules)
    try:
        result = read_run_data(str(path))
    except Exception as err:  # noqa: BLE001
        check_failure(err)
    else:
        if result is not None:
            _plain(result)
    assert set(arena.iterdir()) == files
    assert outside_allow_list(modules) == set()
    assert not (arena / MARK).exists()


def _plain(value: Any) -> None:
    """Only plain values (and class entries of the registry, already checked)."""
    if isinstance(value, dict):
        for item in value.values():
            _plain(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _plain(item)
    else:
        assert value is None or isinstance(value, (bool, int, float, str)), type(value)
        assert not isinstance(value, torch.Tensor)
