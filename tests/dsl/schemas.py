"""Schemas the constraint-language tests compile against (see golden/README.md)."""

from __future__ import annotations

from lumber.ir import Feature, FeatureKind, Schema, Task

FEATURES = (
    Feature("Age", FeatureKind.ORDINAL),
    Feature("Income"),
    Feature("Debt"),
    Feature("Sex", FeatureKind.BINARY),
    Feature("Education", FeatureKind.CATEGORICAL, ("HS", "College", "Masters")),
    Feature("Housing", FeatureKind.CATEGORICAL, ("own", "rent", "free")),
    Feature("PAY_0_Pay_delay>=1", FeatureKind.BINARY),
    Feature("HoursPerWeek", FeatureKind.ORDINAL),
    Feature("CapitalGain"),
    Feature("Grade", FeatureKind.ORDINAL, ("C", "B", "A")),
    Feature("Region", FeatureKind.CATEGORICAL, (10, 20, 30)),
    Feature("Children", FeatureKind.ORDINAL),
)

SCHEMAS: dict[str, Schema | None] = {
    "classifier": Schema(FEATURES, Task.BINARY, 1, (0.0,), classes=("<=50K", ">50K")),
    "multiclass": Schema(FEATURES, Task.MULTICLASS, 3, (0.0, 0.0, 0.0)),
    "regression": Schema(FEATURES, Task.REGRESSION, 1, (0.0,)),
    "none": None,
}
