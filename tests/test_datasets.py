"""Bundled data sets load offline with the schema from their type row."""

from __future__ import annotations

import io

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lumber import datasets
from lumber.ir import FeatureKind, InputDataError


@pytest.mark.parametrize("name,rows,features", [("adult", 45222, 11), ("compas", 5278, 5), ("credit", 29986, 22)])
def test_bundled_sets(name: str, rows: int, features: int) -> None:
    d = datasets.load(name)
    assert d.X.shape == (rows, features)
    assert set(np.unique(d.y)) == {0, 1}
    assert len(d.features) == features
    assert d.X.dtypes.map(lambda t: t.kind == "f").all()


def test_text_categories_become_codes() -> None:
    """``load()`` gives codes with codes: the categories of a text column are the codes ``X`` holds, and
    ``labels`` keeps the text; ``labelled()`` gives labels with labels."""
    d = datasets.load("credit")
    edu = next(f for f in d.features if f.name == "EDUCATION")
    assert edu.kind == FeatureKind.CATEGORICAL and edu.categories == (0, 1, 2, 3)
    assert set(d.X["EDUCATION"].unique()) == {0.0, 1.0, 2.0, 3.0}
    assert d.labels["EDUCATION"] == {0.0: "Graduate_school", 1.0: "High_school", 2.0: "Others", 3.0: "University"}
    lab = d.labelled()
    edu_l = next(f for f in lab.features if f.name == "EDUCATION")
    assert edu_l.categories == ("Graduate_school", "High_school", "Others", "University")
    assert set(lab.X["EDUCATION"].astype(str)) == set(edu_l.categories)
    assert (lab.X["EDUCATION"].cat.codes.to_numpy() == d.X["EDUCATION"].to_numpy()).all()


def test_no_constant_column_is_shipped() -> None:
    """A column with one value in every row is no feature to constrain: credit's SEX is "Male" in every row of
    the source file and is left out."""
    raw = pd.read_csv(Path(datasets.__file__).parent / "data" / "credit.csv.gz", skiprows=[1])
    assert set(raw["SEX"]) == {"Male"}
    for name in datasets.NAMES:
        d = datasets.load(name)
        assert (d.X.nunique() > 1).all(), name
    assert "SEX" not in datasets.load("credit").feature_names


@pytest.mark.parametrize("name", datasets.NAMES)
@pytest.mark.parametrize("labelled", [False, True])
def test_schema_binds_the_frame(name: str, labelled: bool) -> None:
    """``features=ds.features`` on ``ds.X`` works for every data set, plain and labelled: the schema reads
    the frame to exactly the codes the model sees."""
    from lumber.ir import Schema, Task
    from lumber.ir.interp import prepare_input

    d = datasets.load(name)
    ds = d.labelled() if labelled else d
    schema = Schema(ds.features, Task.BINARY, 1, (0.0,), classes=(0, 1))
    arr = prepare_input(schema, ds.X.iloc[:500])
    if labelled:  # labels bind to the Categorical's codes
        expect = np.column_stack([ds.X[c].cat.codes.to_numpy(dtype=float) if hasattr(ds.X[c], "cat")
                                  else ds.X[c].to_numpy(dtype=float) for c in ds.X.columns])[:500]
    else:
        expect = d.X.iloc[:500].to_numpy(dtype=float)
    assert np.array_equal(arr, expect)


def test_counterfactual_with_the_bundled_schema() -> None:
    """The issue's failing call: ``lumber.counterfactual(..., features=ds.features)`` on ``ds.X``."""
    import lightgbm as lgb

    import lumber

    ds = datasets.load("credit")
    X, y = ds.X.iloc[:2000], ds.y[:2000]
    model = lgb.LGBMClassifier(n_estimators=10, num_leaves=8, verbose=-1).fit(X, y)
    row = X.iloc[[int(np.flatnonzero(model.predict(X) == 0)[0])]]
    r = lumber.counterfactual(model, row, target=1, features=ds.features)
    assert r.verified and model.predict(pd.DataFrame([r.x], columns=X.columns))[0] == 1


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


@pytest.mark.parametrize("name", datasets.NAMES)
def test_example_files_name_the_classes_and_flags_as_the_data_set(name: str) -> None:
    """A data set's class names and value words (``Dataset.class_names``, ``Feature.words``) are the ones its
    example constraint file states; credit's PAY flags stay binary features with words, never categories."""
    from lumber.compiler.dsl import parse_constraints
    from lumber.ir import Schema, Task

    ds = datasets.load(name)
    schema = Schema(ds.labelled().features, Task.BINARY, 1, (0.0,))  # the example files name categories
    c = parse_constraints(datasets.example_constraints(name), schema)
    named = c.named(schema)
    assert named.class_names == ds.class_names
    assert {f.name: f.words for f in named.features if f.words} == {f.name: f.words for f in ds.features if f.words}
    if name == "credit":
        assert ds.class_names == ("paid", "default")
        flag = next(f for f in ds.features if f.name == "PAY_0_Pay_delay>=1")
        assert flag.kind == FeatureKind.BINARY and flag.word(1.0) == "September payment delayed 1+ month"
        assert c.rule("PAY_0_Pay_delay>=1").direction.name == "DECREASE"
        assert [f.words for f in ds.labelled().features] == [f.words for f in ds.features]
