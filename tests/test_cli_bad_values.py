"""Out-of-range numbers and unknown choices: one line, the reason first, no configuration dump,
no traceback."""

from __future__ import annotations

import pytest
from test_cli import write_config

from graph_urpe.cli import main
from graph_urpe.cli.messages import short as _short


@pytest.mark.parametrize(("option", "value", "reason"), [
    ("--trainer.max_epochs", "-5", "`max_epochs` must be a non-negative integer or -1"),
    ("--data.init_args.batch_size", "0", "batch_size must be a positive integer or None, got 0"),
    ("--model.init_args.model.init_args.attention", "urpee", "urpee"),
])
def test_bad_values_are_one_line_reason_first(tmp_path, capsys, option, value, reason):
    config, _ = write_config(tmp_path, max_epochs=1)
    with pytest.raises(SystemExit) as info:
        main(["fit", "--config", config, option, value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    error_lines = [line for line in err.splitlines() if line.startswith("graph-urpe: error:")]
    assert len(error_lines) == 1, err
    assert reason in error_lines[0]
    for dump in ("Namespace(", "Given value", "Subtypes:", "Traceback", "NoneType"):
        assert dump not in err, err
    # at most the error line and the hint how to see more
    assert len([line for line in err.splitlines() if line.strip()]) <= 2, err


def test_short_keeps_the_innermost_reason_and_names_the_option():
    """jsonargparse's message for a Literal choice inside the subclass-mode model (the form it
    takes once str choices are Literal types)."""
    message = '''Parser key "model":
  Does not validate against any of the Union subtypes
  Subtypes: [<class 'lightning.pytorch.core.module.LightningModule'>, <class 'NoneType'>]
  Errors:
    - Parser key "init_args.model.init_args.attention":
        Expected a Literal['none', 'rpe', 'urpe']. Got value: urpee
      Given value type: <class 'str'>
      Given value: urpee
    - Expected a <class 'NoneType'>
  Given value type: <class 'jsonargparse._namespace.Namespace'>
  Given value: Namespace(class_path='graph_urpe.models.graph.GraphPropertyModule', x=1)'''
    assert _short(message) == ("Expected a Literal['none', 'rpe', 'urpe']. Got value: urpee "
                               "(option init_args.model.init_args.attention)")
