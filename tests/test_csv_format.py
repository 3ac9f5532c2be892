"""CSV files as spreadsheets export them: semicolon-separated with decimal commas (Excel under
German or French settings), semicolons with decimal points, tabs; read to the same labels as
the comma-separated file, by the dataset and by predict's input reader."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from graph_urpe.data.csv.dataset import SmilesCSVDataset
from graph_urpe.data.csv.reading import csv_format, csv_header, iter_csv_file, read_csv_file
from graph_urpe.data.predict_inputs import read_predict_inputs

ROWS = [("CCO", "-0,77", "train"), ("c1ccccc1", "-1,64", "train"), ("CC(=O)O", "0,17", "train"),
        ("CCCCCC", "-3,1e0", "valid"), ("OCCO", "1", "test"), ("CCN", "", "train")]
LABELS = [float(y.replace(",", ".")) if y else np.nan for _, y, _ in ROWS]  # by hand


def write(path, sep: str, decimal: str = ",", bom: bool = False) -> str:
    lines = [sep.join(["smiles", "logS", "fold"])]
    lines += [sep.join([s, y.replace(",", decimal), f]) for s, y, f in ROWS]
    path.write_text(("\ufeff" if bom else "") + "\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("sep, decimal, expected", [
    (";", ",", {"sep": ";", "decimal": ","}),  # Excel's "CSV" where the decimal mark is a comma
    (";", ".", {"sep": ";"}),
    ("\t", ".", {"sep": "\t"}),
    (",", ".", {"sep": ","}),
])
def test_separator_and_decimal_mark_are_read_from_the_file(tmp_path, sep, decimal, expected):
    path = write(tmp_path / "mols.csv", sep, decimal, bom=sep == ";")
    assert csv_format(path) == expected
    assert csv_header(path) == ["smiles", "logS", "fold"]
    frame = read_csv_file(path, dtype={"smiles": str})
    assert frame["smiles"].tolist() == [s for s, _, _ in ROWS]
    np.testing.assert_array_equal(frame["logS"].to_numpy(dtype=float), LABELS)
    chunks = list(iter_csv_file(path, 4, dtype={"smiles": str}))
    assert [len(c) for c in chunks] == [4, 2] and list(chunks[1].columns) == list(frame.columns)
    assert read_predict_inputs(path, None, "smiles")["smiles"].tolist() == frame["smiles"].tolist()


def test_a_semicolon_file_with_decimal_commas_trains_on_the_same_labels(tmp_path):
    def labels(path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = SmilesCSVDataset(str(tmp_path / f"root-{path.stem}"), str(path), "smiles",
                                  ["logS"], split="fold", log=False, min_train_labels=1)
        split = {k: v.tolist() for k, v in ds.get_idx_split().items()}
        return {g.smiles: float(g.y[0, 0]) for g in ds}, split

    write(tmp_path / "excel.csv", ";")
    write(tmp_path / "plain.csv", ",", ".")
    excel, excel_split = labels(tmp_path / "excel.csv")
    plain, plain_split = labels(tmp_path / "plain.csv")
    assert list(excel) == [s for s, _, _ in ROWS] and excel_split == plain_split
    np.testing.assert_allclose(list(excel.values()), LABELS, rtol=1e-6)  # float32 labels
    np.testing.assert_allclose(list(plain.values()), LABELS, rtol=1e-6)


@pytest.mark.parametrize("line, fields", [("CCN,2.5", 2), ("CCN,2.5,train,x", 4)])
def test_a_line_with_fewer_or_more_fields_than_the_header_is_refused_by_row_and_line(
        tmp_path, line, fields):
    """Before, pandas filled a short line's missing label with an empty cell (trained on as a
    missing label) while it refused an extra field; both are refused now, naming the row and the
    line (a quoted line break and a blank line before it counted), for fit and predict alike."""
    path = tmp_path / "mols.csv"
    path.write_text(f'smiles,logS,fold\nCCO,1.0,train\n"CC\nN",,train\n\n{line}\nOCCO,3,test\n')
    message = (rf"{path} is not a well-formed CSV \(row 3 \(CSV line 6\) has {fields} fields, "
               r"the header 3\): every line needs as many fields as the header")
    with pytest.raises(ValueError, match=message):
        SmilesCSVDataset(str(tmp_path / "root"), str(path), "smiles", ["logS"], split="fold",
                         log=False, min_train_labels=1)
    with pytest.raises(ValueError, match=message):
        read_predict_inputs(str(path), None, "smiles")
    with pytest.raises(ValueError, match=message):
        next(iter_csv_file(str(path), 1))  # before the first chunk
    # The same file with the cell left empty: read, the blank line a row of empty cells.
    path.write_text(path.read_text().replace(line, "CCN,,train"))
    frame = read_csv_file(str(path), keep_default_na=False, dtype=str, skip_blank_lines=False)
    assert frame["smiles"].tolist() == ["CCO", "CC\nN", "", "CCN", "OCCO"]
    assert frame["logS"].tolist() == ["1.0", "", "", "", "3"]


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz"])
def test_a_byte_that_is_not_utf8_is_named_by_line_column_and_file_offset(tmp_path, suffix):
    """Issue 43: the decoder said 'position 0' for a byte at byte 16, and 'position 4' for one on
    line 3,002; the message names the line, the column and the byte of the file (hand-counted)."""
    import gzip


    text = b"smiles,name\nCCO,\xe9t\n"  # 'smiles,name\n' is 12 bytes, 'CCO,' 4 more: byte 16
    many = b"smiles,y\n" + b"CCO,1\n" * 3000 + b"CCN,\xff\n"  # the bad byte: line 3,002
    for data, line, column, offset in ((text, 2, 5, 16), (many, 3002, 5, 9 + 6 * 3000 + 4)):
        path = tmp_path / f"f{line}{suffix}"
        path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
        with pytest.raises(ValueError, match=(rf"is not UTF-8 text \(byte 0x[0-9a-f]{{2}} on line "
                                              rf"{line:,}, column {column} \(byte {offset:,} of "
                                              r"the file\)")):
            read_csv_file(str(path))
