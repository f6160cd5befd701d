"""Data binds to a model's features by name, strictly: wrongly named or ordered columns never give numbers."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from builders import make_forest
from lumber.compiler.cli import main
from lumber.ir import InputDataError
from lumber.ir.binding import ColumnsIgnoredWarning, PositionalBindingWarning, bind, read_csv

NAMES = ["Age", "WorkClass", "Hours"]


@pytest.fixture(scope="module")
def forest():  # type: ignore[no-untyped-def]
    return make_forest([("Age", 30.0, ("Hours", 40.0, -1.0, 0.5), 2.0), ("WorkClass", 1.5, 0.25, -0.75)], NAMES)


@pytest.fixture(scope="module")
def X() -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.c_[rng.integers(17, 80, 50), rng.integers(0, 4, 50), rng.integers(10, 70, 50)].astype(float)


def test_columns_bind_by_name_in_any_order(forest, X) -> None:
    want = forest.evaluate(X)
    frame = pd.DataFrame(X, columns=NAMES)[NAMES[::-1]]
    np.testing.assert_array_equal(forest.evaluate(frame), want)
    with pytest.warns(ColumnsIgnoredWarning, match="ignoring 1 column the model does not read: income"):
        got = forest.evaluate(frame.assign(income=1))
    np.testing.assert_array_equal(got, want)


def test_reversed_and_lowercased_columns_are_an_error_not_numbers(forest, X) -> None:
    """The issue's case: same count, one name lower-cased, order reversed -> it used to bind by position."""
    frame = pd.DataFrame(X, columns=NAMES)[NAMES[::-1]].rename(columns={"WorkClass": "workclass"})
    with pytest.raises(InputDataError, match="1 of the model's 3 features has no column: 'WorkClass'") as exc:
        forest.evaluate(frame)
    assert "did you mean 'workclass'?" in str(exc.value)
    with pytest.raises(InputDataError, match="did you mean 'Hors'"):
        forest.evaluate(pd.DataFrame(X, columns=["Age", "WorkClass", "Hors"]))


def test_duplicated_columns_are_an_error(forest, X) -> None:
    frame = pd.DataFrame(np.c_[X, X[:, :1]], columns=NAMES + ["Age"])
    with pytest.raises(InputDataError, match="column 'Age' appears more than once"):
        forest.evaluate(frame)


def test_positional_only_without_names(forest, X) -> None:
    want = forest.evaluate(X)
    np.testing.assert_array_equal(forest.evaluate(pd.DataFrame(X)), want)  # integer labels: no names
    with pytest.raises(InputDataError, match="2 columns but the model reads 3"):
        forest.evaluate(pd.DataFrame(X[:, :2]))
    unnamed = make_forest([("f0", 30.0, -1.0, 2.0), ("f2", 40.0, 0.25, -0.75)], ["f0", "f1", "f2"])
    with pytest.warns(PositionalBindingWarning, match="records no feature names"):
        got = unnamed.evaluate(pd.DataFrame(X, columns=NAMES))
    np.testing.assert_array_equal(got, unnamed.evaluate(X))
    with pytest.raises(InputDataError):
        unnamed.evaluate(pd.DataFrame(X[:, :2], columns=NAMES[:2]))


def test_label_columns_are_not_extra() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bind(NAMES, ["Hours", "y", "Age", "WorkClass"], ignore=["y"]) == [2, 3, 0]


def _write(tmp: Path, name: str, text: str | bytes) -> Path:
    p = tmp / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


@pytest.mark.parametrize("name, text, message", [
    ("empty.csv", "", ":1:1: error: file is empty"),
    ("blank.csv", "\n\n  \n", ":1:1: error: file is empty"),
    ("header_only.csv", "Age,WorkClass,Hours\n", ":1:1: error: has a header but no rows"),
    ("typed_header_only.csv", "Age,WorkClass,Hours\nD,E,F\n", "has a header but no rows"),
    ("ragged.csv", "Age,WorkClass,Hours\n30,1,40\n31,2\n", ":3:1: error: row has 2 fields, the header has 3"),
    ("long.csv", "Age,WorkClass,Hours\n30,1,40\n31,2,3,4\n", ":3:1: error: row has 4 fields, the header has 3"),
    ("dup.csv", "Age,Age,Hours\n30,1,40\n", "column 'Age' appears more than once (columns 1 and 2)"),
    ("noname.csv", "Age,,Hours\n30,1,40\n", "column 2 of the header has no name"),
    ("nohead.csv", "30,1,40\n31,2,41\n", ":1:1: error: the first line looks like data"),
    ("latin1.csv", b"Age,WorkClass,Hours\n30,1,40\n31,\xe9,40\n", ":3:1: error: not UTF-8 text"),
    ("misspelt.csv", "Age,Workclass,Hours\n30,1,40\n", "did you mean 'Workclass'?"),
])
def test_bad_csv_files_are_clear_errors_with_line_numbers(forest, tmp_path: Path, capsys, name, text,
                                                          message) -> None:
    path = _write(tmp_path, name, text)
    assert main(["predict", _model(forest, tmp_path), str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert str(path) in err


def _model(forest, tmp: Path) -> str:  # type: ignore[no-untyped-def]
    p = tmp / "m.lumber"
    if not p.exists():
        forest.save(p)
    return str(p)


def test_no_header_takes_every_row_by_position(forest, X, tmp_path: Path, capsys) -> None:
    path = tmp_path / "nohead.csv"
    pd.DataFrame(X).to_csv(path, index=False, header=False)
    model = _model(forest, tmp_path)
    assert main(["predict", model, str(path), "--no-header", "--raw"]) == 0
    out = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))
    assert len(out) == len(X)  # the first row is not eaten as a header
    np.testing.assert_array_equal(out["raw"].to_numpy(), forest.evaluate(X))
    bad = _write(tmp_path, "wide.csv", "1,2,3,4\n")
    assert main(["predict", model, str(bad), "--no-header"]) == 2
    assert ":1:1: error: row has 4 fields, the model reads" in capsys.readouterr().err


def test_csv_extra_columns_said_once_on_stderr(forest, X, tmp_path: Path, capsys) -> None:
    path = tmp_path / "cases.csv"
    pd.DataFrame(X, columns=NAMES).assign(id=range(len(X)))[["id", "Hours", "Age", "WorkClass"]].to_csv(
        path, index=False)
    assert main(["explain", _model(forest, tmp_path), str(path), "--sensitive", "--train", str(path), "-q",
                 "--rows", "0:2", "--target", "0:1", "-o", str(tmp_path / "o.json")]) == 0
    err = capsys.readouterr().err
    assert err.count("ignoring 1 column the model does not read: id") == 1, err
    frame = read_csv(path)
    assert list(frame.columns) == ["id", "Hours", "Age", "WorkClass"] and len(frame) == len(X)
