"""The command's own messages: each user error or warning is one line that says what to do; the
top-level help loads nothing heavy; shipped experiment files are named without a path."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

from graph_urpe.cli import COMMANDS, HELP, SUBCOMMANDS, main
from graph_urpe.cli.configs import CONFIG_DIR, resolve_config, shipped_configs
from graph_urpe.cli.messages import CLIError, format_warning
from graph_urpe.data.csv.row_errors import RowError, SkippedRowsWarning, handle_row_errors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_top_level_help_imports_neither_torch_nor_lightning():
    code = ("import sys; from graph_urpe.cli import main; main(['--help']); "
            "print(sorted(m for m in ('torch', 'lightning', 'rdkit') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": ROOT}, timeout=120, check=True)
    assert proc.stdout.strip().endswith("[]"), proc.stdout[-300:]
    assert "csv/template" in proc.stdout  # the help names the shipped template


def test_unknown_subcommand_lists_all_and_suggests_the_close_one(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fitt"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert all(sub in err for sub in SUBCOMMANDS)
    assert SUBCOMMANDS == ("fit", "validate", "test", "predict", *COMMANDS)
    assert all(f"\n  {sub} " in HELP for sub in COMMANDS)  # each command has its help line
    assert err.endswith("did you mean `graph-urpe fit --help`?")
    with pytest.raises(SystemExit):
        main(["zzz"])  # nothing close: no suggestion
    err = capsys.readouterr().err
    assert "did you mean" not in err and "unknown subcommand 'zzz'" in err


def test_abbreviated_option_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--trainer.max_epoch", "1", "--print_config"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --trainer.max_epoch" in err
    assert err.count("\n") == 2  # the error and the hint to --help


def test_config_names_resolve_to_the_shipped_files(tmp_path, monkeypatch):
    template = str(CONFIG_DIR / "csv" / "template.yaml")
    monkeypatch.chdir(tmp_path)
    for name in ("csv/template", "csv/template.yaml", "configs/csv/template.yaml"):
        assert resolve_config(name) == template
    assert "csv/template" in shipped_configs() and "default" not in shipped_configs()
    inline = '{"trainer": {"max_epochs": 1}}'
    assert resolve_config(inline) == inline
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "template.yaml").write_text("name: mine\n")
    assert resolve_config("csv/template.yaml") == "csv/template.yaml"  # a local file wins
    with pytest.raises(CLIError, match=r"did you mean --config csv/template\?"):
        resolve_config("template")


def test_shipped_name_runs_without_a_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", "zinc/zinc-like-rpe", "--print_config"])
    assert exit_info.value.code in (0, None)
    out = capsys.readouterr().out
    assert "name: zinc-like-rpe" in out and "attention: rpe" in out


def test_skipped_rows_warning_is_one_readable_line(tmp_path):
    long_smiles = "C" * 130 + "("  # a 130-atom chain with a stray bracket
    errors = [RowError(3, long_smiles, "invalid SMILES"), RowError(5, "xyz", "invalid SMILES"),
              RowError(8, "C1CC", "invalid SMILES"), RowError(9, "Q", "invalid SMILES")]
    report = tmp_path / "invalid_rows.csv"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle_row_errors(errors, 20, "my.csv", str(report), strict=False)
    (warning,) = caught
    assert warning.category is SkippedRowsWarning
    text = format_warning(warning.message, warning.category, warning.filename, warning.lineno,
                          "handle_row_errors(...)  # a code line Python would print")
    assert text.endswith("\n") and text.count("\n") == 1
    assert text.startswith("graph-urpe: warning: skipped 4 of 20 rows of my.csv")
    assert "row 3 (CSV line 5)" in text and "row 8 (CSV line 10)" in text and "and 1 more" in text
    assert long_smiles not in text and "C" * 40 + "... (131 characters)" in text
    assert f"Full list: {report}" in text and "splits.csv" in text
    assert "handle_row_errors" not in text and ".py" not in text
    # Warnings of other libraries keep Python's format.
    other = format_warning("x", UserWarning, "/elsewhere/lib.py", 1, "code")
    assert "/elsewhere/lib.py:1" in other


def test_skipped_rows_warning_gives_the_report_as_an_absolute_path(tmp_path, monkeypatch):
    """A dataset's root is often relative (``data/csv/...``): the warning names the report so
    that it can be opened from anywhere, as the fit summary does."""
    monkeypatch.chdir(tmp_path)
    with pytest.warns(SkippedRowsWarning) as caught:
        handle_row_errors([RowError(1, "C1CC", "invalid SMILES: unclosed ring")], 3, "my.csv",
                          "data/csv/processed/invalid_rows.csv", strict=False)
    assert str(caught[0].message) == (
        "skipped 1 of 3 rows of my.csv (with their labels): row 1 (CSV line 3) 'C1CC': invalid "
        f"SMILES: unclosed ring. Full list: {tmp_path.resolve()}/data/csv/processed/"
        "invalid_rows.csv (and splits.csv in a fit's run folder).")
