"""Issue 43 item 3: an input error is the only thing printed, and it points at the line.

``predict`` reads (and so checks: encoding and field counts of the whole file, the SMILES column)
its input before the parts folder and the progress bar: a missing column printed a "Predicting:
0%" bar before the error, and left an empty ``<output>.parts`` behind.
"""

from __future__ import annotations

import pytest

from graph_urpe.cli import main
from graph_urpe.data.csv.reading import missing_columns
from tests.test_rows_every_path import checkpoint  # noqa: F401  (the fixture: a tiny fit)


def _predict(ckpt, csv, output, *extra):
    with pytest.raises(SystemExit) as stop:
        main(["predict", "--ckpt_path", ckpt, "--csv", str(csv), "--output", str(output),
              *extra])
    return stop.value.code


def test_a_missing_column_is_reported_before_any_progress_bar(checkpoint, tmp_path,  # noqa: F811
                                                              capsys):
    csv = tmp_path / "new.csv"
    csv.write_text("SMILES,name\nCCO,ethanol\nCCN,ethylamine\n")
    output = tmp_path / "pred.csv"
    assert _predict(checkpoint, csv, output) == 2
    captured = capsys.readouterr()
    assert "Predicting" not in captured.out + captured.err
    line = captured.err.strip().splitlines()[0]
    assert line == (f"graph-urpe: error: column 'smiles' not found in the header (line 1) of "
                    f"{csv}, whose columns are ['SMILES', 'name']; 'smiles' may be 'SMILES': "
                    "name yours with --smiles_column NAME.")
    assert not output.exists() and not (tmp_path / "pred.csv.parts").exists()


def test_a_bad_byte_in_a_later_chunk_is_reported_first(checkpoint, tmp_path,  # noqa: F811
                                                       capsys):
    csv = tmp_path / "latin1.csv"
    csv.write_bytes("smiles\nCCO\nCCN\nCCC\nOC\u00e9\n".encode("latin-1"))  # line 5, column 3
    assert _predict(checkpoint, csv, tmp_path / "pred.csv", "--chunk_rows", "2") == 2
    captured = capsys.readouterr()
    assert "Predicting" not in captured.out + captured.err
    assert "is not UTF-8 text (byte 0xe9 on line 5, column 3" in captured.err
    assert not (tmp_path / "pred.csv.parts").exists()


def test_missing_columns_names_the_closest_column():
    err = missing_columns("d.csv", "label columns ['logs', 'pKa']", ["logs", "pKa"],
                          ["smiles", "logS", "mass"], "set them.")
    assert str(err) == ("label columns ['logs', 'pKa'] not found in the header (line 1) of "
                        "d.csv, whose columns are ['smiles', 'logS', 'mass']; 'logs' may be "
                        "'logS': set them.")


def test_predict_bar_counts_every_row_and_estimates_the_rest_once(checkpoint, tmp_path,  # noqa: F811
                                                                 capsys):
    csv = tmp_path / "ok.csv"
    csv.write_text("smiles\nCCO\nCCN\nxx\nCCC\n")
    main(["predict", "--ckpt_path", checkpoint, "--csv", str(csv), "--output",
          str(tmp_path / "p.csv"), "--chunk_rows", "2"])
    err = capsys.readouterr().err
    # After the first chunk (2 rows), once: the 2 rows after it; the bar ends at every row.
    estimates = [line for line in err.splitlines() if line.startswith("Time estimate")]
    assert len(estimates) == 1 and " more for the other 2 rows, at the first chunk's " \
        in estimates[0]
    bars = [f for f in err.replace("\r", "\n").splitlines() if f.startswith("Predicting:")]
    assert bars[0].startswith("Predicting:   0%") and "| 0/4 [" in bars[0]
    assert bars[-1].startswith("Predicting: 100%") and "| 4/4 [" in bars[-1]
