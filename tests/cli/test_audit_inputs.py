"""Mistakes a new user makes, from the README audit: each gets a message naming the file and field and
what would be accepted, a non-zero exit, and no wrong answer.

- a label column named wrong: the suggestion is a column that is not a feature ('Class' suggested
  the feature 'WorkClass' beside the real label column 'label');
- a gzip-compressed CSV (the bundled data sets ship as ``.csv.gz``; docs/constraints.md passes one):
  read as its text would be, where it was "not UTF-8 text (byte 0x8b)"; a damaged one is an error;
- ``time_limit`` of 0, below 0 or NaN in ``lumber.counterfactual``: NaN meant no limit at all;
- a ``.lumber`` file cut short: it read "not a lumber IR file (File is not a zip file)", as if it were
  some other kind of file.
"""

from __future__ import annotations

import gzip
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import lumber
from lumber.compiler.cli import main
from lumber.ir import InputDataError


def test_a_wrong_label_name_suggests_the_column_that_is_not_a_feature(age_hours: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    m, train = str(age_hours / "model.txt"), str(age_hours / "train.csv")
    for argv in (["compile", m, "--passes", "polynomial,prune{alpha=auto}", "--train", train, "--valid", train,
                  "--label", "Class", "-o", str(age_hours / "p.lumber")],
                 ["report", m, str(age_hours / "cases.csv"), "--train", train, "--label", "Class", "-q",
                  "-o", str(age_hours / "rep")]):
        assert main(argv) != 0
        err = capsys.readouterr().err
        assert "no label column 'Class'" in err and "'label'" in err and "Age" not in err.split("note:")[1], err
    assert not (age_hours / "p.lumber").exists() and not (age_hours / "rep").exists()
    assert main(["compile", m, "--passes", "polynomial,prune{alpha=auto}", "--train", str(age_hours / "nolabel.csv"),
                 "--valid", train, "--label", "label", "-o", str(age_hours / "p.lumber")]) != 0
    assert "holds no label column" in capsys.readouterr().err


def test_a_gzip_csv_reads_as_its_text(age_hours: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = str(age_hours / "model.txt")
    (age_hours / "cases.csv.gz").write_bytes(gzip.compress((age_hours / "cases.csv").read_bytes()))
    assert main(["predict", m, str(age_hours / "cases.csv")]) == 0
    plain = capsys.readouterr().out
    assert main(["predict", m, str(age_hours / "cases.csv.gz")]) == 0
    assert capsys.readouterr().out == plain
    (age_hours / "cut.csv.gz").write_bytes((age_hours / "cases.csv.gz").read_bytes()[:20])
    assert main(["predict", m, str(age_hours / "cut.csv.gz")]) == 2
    err = capsys.readouterr().err
    assert "cut.csv.gz:1:1: error: damaged gzip file" in err and "Traceback" not in err


@pytest.mark.parametrize("limit", [0, -1.0, math.nan, "30"])
def test_a_time_limit_must_be_seconds_above_zero(age_hours: Path, limit: object) -> None:
    case = pd.read_csv(age_hours / "cases.csv").iloc[[0]]
    with pytest.raises(InputDataError, match="time_limit must be a number of seconds above 0"):
        lumber.counterfactual(str(age_hours / "model.txt"), case, target=1, options=lumber.CounterfactualOptions(time_limit=limit))  # type: ignore[arg-type]


def test_exported_csvs_print_whole_numbers_as_integers(tmp_path: Path) -> None:
    """The tour's cases.csv read "62.0,0.0,0.0,13.0,38.0,...": whole-number columns now print as integers,
    and the files read back to the same model input."""
    from lumber.runtime.data import read_rows

    assert main(["datasets", "export", "adult", str(tmp_path), "--trees", "3", "--leaves", "4", "--cases", "5"]) == 0
    head, first = (tmp_path / "cases.csv").read_text().splitlines()[:2]
    assert head.startswith("Age,CapitalGain") and not re.search(r"\d\.0\b", first), first
    forest = lumber.load(tmp_path / "model.txt")
    _, X = read_rows(tmp_path / "cases.csv", forest)
    ds = lumber.datasets.load("adult").labelled()
    _, Xte, _, _ = ds.split(test_size=0.25, seed=0)
    np.testing.assert_array_equal(X, forest.prepare_input(Xte.iloc[:5]))


def test_columns_in_another_order_give_the_same_numbers(age_hours: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Data binds by column name: the same cases with their columns reversed (cases and training rows) give
    the same predictions and explanations, to the character."""
    m = str(age_hours / "model.txt")
    for name in ("cases", "train"):
        frame = pd.read_csv(age_hours / f"{name}.csv")
        frame[frame.columns[::-1]].to_csv(age_hours / f"{name}_rev.csv", index=False)
    outs = []
    for cases, train in (("cases.csv", "train.csv"), ("cases_rev.csv", "train_rev.csv")):
        assert main(["predict", m, str(age_hours / cases)]) == 0
        assert main(["explain", m, str(age_hours / cases), "--sensitive", "--counterfactual", "--train",
                     str(age_hours / train), "--scale", "std", "--time-limit", "10"]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and "prediction" in outs[0]


def test_a_truncated_lumber_file_says_it_was_cut_short(age_hours: Path, capsys: pytest.CaptureFixture[str]) -> None:
    full = age_hours / "m.lumber"
    lumber.load(age_hours / "model.txt").save(full)
    cut = age_hours / "cut.lumber"
    cut.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    for argv in (["inspect", str(cut)], ["predict", str(cut), str(age_hours / "cases.csv")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"{cut}: truncated or damaged lumber IR file" in err and "not a zip file" not in err, err
    (age_hours / "other.lumber").write_bytes(b"PK\x03\x04garbage")
    assert main(["inspect", str(age_hours / "other.lumber")]) == 2
    assert "not a lumber IR file" in capsys.readouterr().err


def test_an_unsupported_booster_names_its_file_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``p.json, field '...': error: p.json: booster ...`` named the file twice."""
    import xgboost as xgb

    rng = np.random.default_rng(0)
    X = rng.random((60, 3))
    path = tmp_path / "linear.json"
    xgb.train({"booster": "gblinear", "objective": "binary:logistic"}, xgb.DMatrix(X, (X[:, 0] > 0.5).astype(int)),
              2).save_model(str(path))
    assert main(["inspect", str(path)]) == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert first.count(str(path)) == 1 and "booster 'gblinear' is a linear model" in first, first
