"""Small real data sets shipped with lumber, loaded offline.

``load("adult")`` returns a :class:`Dataset`: features as a float DataFrame
(categorical text encoded to integer codes), the target, and a feature schema
read from the file's second header row. ``X`` and ``features`` agree: codes
with codes (a categorical feature's ``categories`` are its codes ``0..k-1``),
so ``features=ds.features`` binds ``ds.X``; ``Dataset.labelled()`` gives labels
with labels. A column that holds one value in every row carries nothing a model
or a constraint could use and is not shipped as a feature (credit's SEX is
"Male" in all 29,986 rows of the source file). Provenance: ``data/PROVENANCE.md``.

The typed-CSV reader is shared with the CLI: a CSV whose second row holds one
type code per column (F, D, B, E, T) is read with those kinds.
"""

from __future__ import annotations

import gzip
import io
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import IO, Any, Mapping

import numpy as np
import numpy.typing as npt
import pandas as pd

from lumber.ir import Feature, FeatureKind, InputDataError

NAMES = ("adult", "compas", "credit")
TYPE_CODES = {"F": FeatureKind.NUMERICAL, "D": FeatureKind.ORDINAL, "B": FeatureKind.BINARY,
              "E": FeatureKind.CATEGORICAL}


@dataclass(frozen=True)
class Dataset:
    """A bundled data set: ``X`` (features), ``y`` (0/1 target) and the feature schema.

    ``labels`` maps a feature with known category labels to ``{code: label}``; ``X`` holds the codes
    and ``features`` their kinds (categorical ``categories`` are the codes), so the schema binds ``X``
    as it is. ``labelled()`` turns the codes into their labels, in frame and schema alike.
    """

    name: str
    X: pd.DataFrame
    y: npt.NDArray[np.int64]
    features: tuple[Feature, ...]
    target: str
    labels: Mapping[str, Mapping[float, str]] = field(default_factory=dict)
    class_names: tuple[str, str] | None = None
    """What ``y = 0`` and ``y = 1`` mean (credit: ``("paid", "default")``): pass them on with
    ``Schema.named`` or a constraint file's ``class 0 means paid, 1 means default``."""

    @property
    def feature_names(self) -> list[str]:
        return [f.name for f in self.features]

    def split(self, test_size: float = 0.25, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, npt.NDArray, npt.NDArray]:
        """Stratified train/test split (scikit-learn's), reproducible by seed."""
        from sklearn.model_selection import train_test_split

        return train_test_split(self.X, self.y, test_size=test_size, random_state=seed, stratify=self.y)  # type: ignore[no-any-return]

    def labelled(self) -> "Dataset":
        """The same rows with every labelled categorical or binary feature as a pandas ``Categorical`` of
        its labels.

        A model trained on this frame records the labels (LightGBM's ``pandas_categorical``), so
        explanations and reports name categories (``MaritalStatus = Never-married``, not ``5``;
        ``Sex = Female``, not ``1``). The features' ``categories`` become the labels, in the
        Categorical's code order (a labelled binary feature becomes categorical: code 0 is the first
        label)."""
        X = self.X.copy()
        feats = []
        for f in self.features:
            names = self.labels.get(f.name)
            if names is None:
                feats.append(f)
                continue
            X[f.name] = pd.Categorical(X[f.name].map(names), categories=list(names.values()))
            feats.append(Feature(f.name, FeatureKind.CATEGORICAL, tuple(names.values()), f.words))
        return Dataset(self.name, X, self.y, tuple(feats), self.target, self.labels, self.class_names)


ADULT_LABELS: dict[str, dict[float, str]] = {
    "MaritalStatus": {1: "Divorced", 2: "Married-AF-spouse", 3: "Married-civ-spouse", 4: "Married-spouse-absent",
                      5: "Never-married", 6: "Separated", 7: "Widowed"},
    "Occupation": {1: "Adm-clerical", 2: "Armed-Forces", 3: "Craft-repair", 4: "Exec-managerial",
                   5: "Farming-fishing", 6: "Handlers-cleaners", 7: "Machine-op-inspct", 8: "Other-service",
                   9: "Priv-house-serv", 10: "Prof-specialty", 11: "Protective-serv", 12: "Sales",
                   13: "Tech-support", 14: "Transport-moving"},
    "Relationship": {0: "Husband", 1: "Not-in-family", 2: "Other-relative", 3: "Own-child", 4: "Unmarried",
                     5: "Wife"},
    "WorkClass": {1: "Federal-gov", 2: "Local-gov", 3: "Private", 4: "Self-emp-inc", 5: "Self-emp-not-inc",
                  6: "State-gov", 7: "Without-pay"},
}
"""UCI Adult's labels of the OCEAN file's integer codes: the labels in alphabetical order (how the file
was encoded; see data/PROVENANCE.md). Every code's row count equals its label's count in UCI Adult's
45,222 complete rows (tests/test_datasets.py checks them)."""


BINARY_LABELS: dict[str, dict[str, dict[float, str]]] = {
    "adult": {"Sex": {0: "Male", 1: "Female"}, "NativeCountry": {0: "United-States", 1: "Other"}},
    "compas": {"Race": {0: "African-American", 1: "Caucasian"}, "Sex": {0: "Male", 1: "Female"},
               "ChargeDegree": {0: "Misdemeanor", 1: "Felony"}},
}
"""Labels of the OCEAN files' 0/1 columns, read off the row counts (tests/test_datasets.py checks them):
adult's 30,527 Sex = 0 rows and 41,292 NativeCountry = 0 rows are UCI Adult's male and United-States
counts among its 45,222 complete rows; compas's 5,278 rows are ProPublica's two-year set (6,172 rows)
restricted to its 3,175 African-American and 2,103 Caucasian defendants, and its 4,247 Sex = 0 and
3,440 ChargeDegree = 1 rows exceed that set's 1,175 women and 2,202 misdemeanours. Credit's PAY_*
flags stay 0/1 flags with words (``WORDS``). The compas codes
also match the encoding of MACE's compas loader (Karimi et al., the source of OCEAN's preprocessing:
African-American 1 / Caucasian 2, Male 1 / Female 2, charge M 1 / F 2), shifted to 0/1 in this file."""


CLASS_NAMES: dict[str, tuple[str, str]] = {
    "adult": ("income at most 50K", "income above 50K"),
    "compas": ("no recidivism", "recidivism"),
    "credit": ("paid", "default"),
}
"""What each data set's target means (data/PROVENANCE.md): adult's 11,208 rows of class 1 are UCI Adult's
">50K" rows among its 45,222 complete rows; credit's 6,636 rows of class 1 are UCI's "default payment next
month = yes" rows; compas's class 1 is two-year recidivism. The example constraint files name them alike."""

PAY_MONTHS = {"PAY_0": "September", "PAY_2": "August", "PAY_3": "July", "PAY_4": "June", "PAY_5": "May",
              "PAY_6": "April"}
"""UCI's repayment status columns: PAY_0 is September 2005, PAY_2 .. PAY_6 the months before it."""

WORDS: dict[str, dict[str, tuple[tuple[float, str], ...]]] = {
    "credit": {f"{k}_Pay_delay>=1": ((0.0, f"{m} payment not delayed 1+ month"),
                                     (1.0, f"{m} payment delayed 1+ month")) for k, m in PAY_MONTHS.items()},
}
"""Words for engineered 0/1 flags (``Feature.words``): credit's ``PAY_0_Pay_delay>=1 = 1`` is a delay of at least
one month in the September 2005 repayment. The flags stay binary features (their order and ``decrease`` rules
hold); the words are for people. The example constraint files state the same words."""


def _label_map(name: str, f: Feature) -> dict[float, str] | None:
    """``{code: label}`` of a categorical or binary feature whose labels are known, else None.

    ``f`` is the feature as ``read_typed_csv`` reads it: a text column's ``categories`` are its labels."""
    if f.kind == FeatureKind.BINARY and f.name in BINARY_LABELS.get(name, {}):
        return {float(k): v for k, v in BINARY_LABELS[name][f.name].items()}
    if f.kind != FeatureKind.CATEGORICAL:
        return None
    if name == "adult" and f.name in ADULT_LABELS:
        return {float(k): v for k, v in ADULT_LABELS[f.name].items()}
    if f.categories is not None and all(isinstance(c, str) for c in f.categories):
        return {float(i): str(c) for i, c in enumerate(f.categories)}
    return None


def _with_codes(f: Feature) -> Feature:
    """``f`` whose categories name the codes ``X`` holds: a text column's labels become ``0..k-1``."""
    if f.kind == FeatureKind.CATEGORICAL and f.categories is not None and all(isinstance(c, str)
                                                                             for c in f.categories):
        return Feature(f.name, f.kind, tuple(range(len(f.categories))))
    return f


@dataclass(frozen=True)
class TypedTable:
    frame: pd.DataFrame
    features: tuple[Feature, ...]
    target: str | None


def _is_type_row(row: list[str]) -> bool:
    return bool(row) and all(str(v).strip() in ("F", "D", "B", "E", "T") for v in row)


def read_typed_csv(source: str | Path | IO[str], name: str | None = None) -> TypedTable:
    """Read a CSV, honouring an optional second header row of type codes.

    Categorical text columns become integer codes (sorted labels); the labels
    are kept in ``Feature.categories``. Without a type row every column is
    numerical (text columns are categorical) and no target is known.
    """
    label = name or str(source)
    if isinstance(source, (str, Path)):
        from lumber.ir.binding import checked_csv_text

        source = io.StringIO(checked_csv_text(source))  # shape errors with line numbers, as for every CSV
    try:
        raw = pd.read_csv(source, dtype=str, keep_default_na=False, na_values=["", "NA", "NaN", "nan", "?"])
    except FileNotFoundError:
        raise InputDataError(f"{label}: no such file") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError) as exc:
        raise InputDataError(f"{label}: cannot read as CSV ({exc})",
                             "expected comma-separated values with a header row") from None
    kinds: dict[str, str] = {}
    if len(raw) and _is_type_row(list(raw.iloc[0].fillna(""))):
        kinds = {c: str(v).strip() for c, v in zip(raw.columns, raw.iloc[0])}
        raw = raw.iloc[1:].reset_index(drop=True)
    target = next((c for c, k in kinds.items() if k == "T"), None)
    feats: list[Feature] = []
    cols: dict[str, Any] = {}
    for c in raw.columns:
        col = raw[c]
        num = pd.to_numeric(col, errors="coerce")
        textual = bool((num.isna() & col.notna()).any())
        code = kinds.get(c)
        if c == target:
            cols[c] = col
            continue
        if textual:
            labels = tuple(sorted(col.dropna().unique()))
            lookup = {v: i for i, v in enumerate(labels)}
            cols[c] = col.map(lookup).astype(float)
            feats.append(Feature(c, FeatureKind.CATEGORICAL, labels))
            continue
        cols[c] = num.astype(float)
        kind = TYPE_CODES.get(code or "F", FeatureKind.NUMERICAL)
        cats = None
        if kind == FeatureKind.CATEGORICAL:
            vals = num.dropna()
            if len(vals) and (vals >= 0).all() and (vals == np.trunc(vals)).all():
                cats = tuple(range(int(vals.max()) + 1))
        feats.append(Feature(c, kind, cats))
    frame = pd.DataFrame({f.name: cols[f.name] for f in feats})
    if target is not None:
        frame[target] = cols[target]
    return TypedTable(frame, tuple(feats), target)


def example_constraints(name: str) -> str:
    """The example constraint file shipped for a bundled data set (``adult``, ``compas``, ``credit``)."""
    if name not in NAMES:
        import difflib

        close = difflib.get_close_matches(name, NAMES, n=1)
        raise InputDataError(f"no example constraint file {name!r}", *([f"did you mean '{close[0]}'?"] if close else []),
                             f"examples: {', '.join(NAMES)}")
    return resources.files(__name__).joinpath(f"examples/{name}.lum").read_text(encoding="utf-8")


def load(name: str) -> Dataset:
    """Load a bundled data set by name (``adult``, ``compas`` or ``credit``).

    ``X`` holds codes and ``features`` agree with them; a column constant in every row of the file is
    left out (credit's SEX). ``labelled()`` gives the category labels."""
    if name not in NAMES:
        raise InputDataError(f"unknown data set {name!r}", f"bundled data sets: {', '.join(NAMES)}")
    data = resources.files(__name__).joinpath(f"data/{name}.csv.gz").read_bytes()
    text = gzip.decompress(data).decode()
    table = read_typed_csv(io.StringIO(text), name=f"{name}.csv")
    assert table.target is not None, "bundled data sets always name their target"
    y = pd.to_numeric(table.frame[table.target]).to_numpy().astype(np.int64)
    X = table.frame.drop(columns=[table.target])
    constant = [c for c in X.columns if X[c].nunique(dropna=False) <= 1]
    kept = [f for f in table.features if f.name not in constant]
    labels = {f.name: m for f in kept if (m := _label_map(name, f)) is not None}
    words = WORDS.get(name, {})
    feats = tuple(replace(_with_codes(f), words=words.get(f.name)) for f in kept)
    return Dataset(name, X.drop(columns=constant), y, feats, table.target, labels, CLASS_NAMES[name])


def provenance() -> str:
    return resources.files(__name__).joinpath("data/PROVENANCE.md").read_text()
