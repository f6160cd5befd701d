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


# UCI Adult's 45,222 complete rows: the count of each label (adult.names / the standard tabulations)
UCI_ADULT_COUNTS = {
    "MaritalStatus": {"Married-civ-spouse": 21055, "Never-married": 14598, "Divorced": 6297, "Separated": 1411,
                      "Widowed": 1277, "Married-spouse-absent": 552, "Married-AF-spouse": 32},
    "Relationship": {"Husband": 18666, "Not-in-family": 11702, "Own-child": 6626, "Unmarried": 4788,
                     "Wife": 2091, "Other-relative": 1349},
    "WorkClass": {"Private": 33307, "Self-emp-not-inc": 3796, "Local-gov": 3100, "State-gov": 1946,
                  "Self-emp-inc": 1646, "Federal-gov": 1406, "Without-pay": 21},
}


def test_adult_labels_match_uci_counts() -> None:
    """The OCEAN file's codes are UCI's labels in alphabetical order: every label keeps its UCI row count."""
    d = datasets.load("adult").labelled()
    for col, counts in UCI_ADULT_COUNTS.items():
        assert d.X[col].value_counts().to_dict() == counts
    occ = d.X["Occupation"].value_counts()
    assert occ["Prof-specialty"] == 6008 and occ["Armed-Forces"] == 14
    feat = {f.name: f for f in d.features}
    assert feat["MaritalStatus"].categories[:2] == ("Divorced", "Married-AF-spouse")


def test_binary_labels_match_their_sources_counts() -> None:
    """Adult's 0/1 columns: UCI Adult's 30,527 men and 41,292 United-States rows of its 45,222 complete rows.
    compas: ProPublica's two-year set (6,172 rows: 3,175 African-American, 2,103 Caucasian defendants, 1,175
    women, 2,202 misdemeanour charges) restricted to those two races; 0 cannot be Female (4,247 > 1,175) and
    1 cannot be Misdemeanor (3,440 > 2,202)."""
    a = datasets.load("adult").labelled().X
    assert a["Sex"].value_counts().to_dict() == {"Male": 30527, "Female": 14695}
    assert a["NativeCountry"].value_counts()["United-States"] == 41292
    c = datasets.load("compas").labelled().X
    assert c["Race"].value_counts().to_dict() == {"African-American": 3175, "Caucasian": 2103}
    assert c["Sex"].value_counts()["Male"] > 1175 and c["ChargeDegree"].value_counts()["Felony"] > 2202
    feat = {f.name: f for f in datasets.load("compas").labelled().features}
    assert feat["Race"].kind == FeatureKind.CATEGORICAL and feat["Race"].categories == ("African-American",
                                                                                         "Caucasian")


def test_labelled_keeps_rows_and_codes_in_order() -> None:
    for name in datasets.NAMES:
        plain, lab = datasets.load(name), datasets.load(name).labelled()
        assert lab.X.shape == plain.X.shape and not lab.X.isna().any().any()
        for f in lab.features:
            if f.kind == FeatureKind.CATEGORICAL and f.categories is not None:
                assert list(lab.X[f.name].cat.categories) == list(f.categories)
