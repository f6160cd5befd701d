"""Options shared by commands: one ``--rows`` grammar with one validation, ``--metric`` as an alias of ``--scale``."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from lumber.compiler.cli._options import add_scale, parse_rows, scale_of
from lumber.ir import InputDataError


@pytest.mark.parametrize("spec, want", [
    (None, list(range(5))), ("0:5", [0, 1, 2, 3, 4]), ("3:", [3, 4]), (":2", [0, 1]), ("4", [4]),
    ("3,1", [3, 1]), ("0:2,4", [0, 1, 4]), (" 1 , 2 ", [1, 2]),
])
def test_rows_selections(spec: str | None, want: list[int]) -> None:
    assert parse_rows(spec, 5).tolist() == want
    assert parse_rows(spec, 5).dtype == np.int64


@pytest.mark.parametrize("spec, message", [
    ("5:2", "selects no rows"), ("2:2", "selects no rows"), ("3:500", "runs past the last row"),
    ("500", "row 500 is out of range"), ("-1", "row -1 is out of range"), ("-2:3", "negative row"),
    ("3,3", "selects row 3 more than once"), ("0:3,2", "selects row 2 more than once"),
    ("a", "is not a row selection"), ("1,,2", "empty part"), ("", "empty part"), ("1:2:3", "not a row selection"),
])
def test_bad_rows_are_errors(spec: str, message: str) -> None:
    with pytest.raises(InputDataError, match=message):
        parse_rows(spec, 5)


def test_scale_has_one_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    """``--scale`` only (``none`` reads as no scaling); the old ``--metric`` spelling is not accepted."""
    p = argparse.ArgumentParser()
    add_scale(p)
    assert scale_of(p.parse_args(["--scale", "std"])) == "std"
    assert scale_of(p.parse_args(["--scale", "none"])) is None
    with pytest.raises(SystemExit):
        p.parse_args(["--" + "metric", "minmax"])
    assert "unrecognized arguments: --metric" in capsys.readouterr().err
