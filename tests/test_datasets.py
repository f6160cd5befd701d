"""Bundled data sets load offline with the schema from their type row."""

from __future__ import annotations

import io

import numpy as np
import pytest

from lumber import datasets
from lumber.ir import FeatureKind, InputDataError


@pytest.mark.parametrize("name,rows,features", [("adult", 45222, 11), ("compas", 5278, 5), ("credit", 29986, 23)])
def test_bundled_sets(name: str, rows: int, features: int) -> None:
    d = datasets.load(name)
    assert d.X.shape == (rows, features)
    assert set(np.unique(d.y)) == {0, 1}
    assert len(d.features) == features
    assert d.X.dtypes.map(lambda t: t.kind == "f").all()


def test_text_categories_become_codes() -> None:
    d = datasets.load("credit")
    edu = next(f for f in d.features if f.name == "EDUCATION")
    assert edu.kind == FeatureKind.CATEGORICAL and "High_school" in edu.categories
    codes = d.X["EDUCATION"].dropna().unique()
    assert set(codes) <= set(range(len(edu.categories)))


def test_unknown_dataset_and_bad_csv() -> None:
    with pytest.raises(InputDataError, match="bundled data sets: adult"):
        datasets.load("iris")
    t = datasets.read_typed_csv(io.StringIO("a,b\nF,T\n1,0\n2,1\n"))
    assert t.target == "b" and t.features[0].kind == FeatureKind.NUMERICAL
    with pytest.raises(InputDataError, match="no such file"):
        datasets.read_typed_csv("/nonexistent/file.csv")


def test_provenance_is_shipped() -> None:
    assert "49b64f7dfacc360bfb3362e202551855b30b04d0" in datasets.provenance()
