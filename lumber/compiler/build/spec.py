"""The build file (``lumber.toml``): its sections and keys, as frozen dataclasses.

Each section is a dataclass whose fields are its keys; a field's metadata
gives the key's kind (how a TOML value is checked and converted) and its help
text. :mod:`lumber.compiler.build.validate` derives the valid keys, the
nearest-key suggestions and ``docs``' table from these classes, so adding a
key is adding a field here.

```toml
seed = 0

[model]
path = "model.txt"

[data]
train = "train.csv"
validation = "valid.csv"
cases = "cases.csv"
label = "income"

[constraints]
path = "recourse.lum"

[compile]
passes = "polynomial,prune{alpha=auto}"
targets = ["c", "onnx"]

[explain]
target = 1

[check]
prune_tolerance = 0.001
require = ["counterfactual"]

[report]
title = "Income model"

[output]
dir = "build"
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ANALYSES = ("attribution", "sensitive", "counterfactual", "rules")
SECTIONS = ("model", "attribution", "cases", "regional", "constraints", "checks")
FORMATS = ("html", "md", "json")
NORMS = ("l0", "l1", "l2", "linf")
SCALES = ("none", "std", "minmax")


def key(kind: str, doc: str, default: Any = None, *, choices: tuple[str, ...] = (), minimum: float | None = None,
        required: bool = False) -> Any:
    """A build-file key: a dataclass field carrying its kind, help text and limits."""
    meta = {"kind": kind, "doc": doc, "choices": choices, "minimum": minimum, "required": required}
    if isinstance(default, (list, dict)):
        raise TypeError("use a tuple default")
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ModelSpec:
    """``[model]``: the trained model to compile and explain."""

    path: Path = key("path", "model file: LightGBM text, XGBoost JSON/UBJSON, .skops, .lumber (pickle/joblib with --trust-pickle)",
                     required=True)


@dataclass(frozen=True)
class DataSpec:
    """``[data]``: CSV files whose header names the model's features."""

    train: Path | None = key("path", "training rows: scaling statistics, rules, plausibility, pruning")
    validation: Path | None = key("path", "validation rows: pruning's alpha=auto and exactness checks")
    cases: Path | None = key("path", "cases to explain in the report")
    label: str | None = key("str", "label column of train/validation (not a feature)")
    id: str | None = key("str", "column of the cases naming each one (e.g. application_id; not a feature): "
                                "report cases carry it")
    max_cases: int = key("int", "explain at most this many cases (the first rows)", 20, minimum=1)
    header: bool = key("bool", "the CSV files start with a header row naming their columns, which bind by name "
                               "(false, as --no-header: the columns are the model's features, in order)", True)


@dataclass(frozen=True)
class ConstraintsSpec:
    """``[constraints]``: the recourse constraint file (see docs/constraints.md)."""

    path: Path | None = key("path", "constraint file (.lum); echoed in the report")


@dataclass(frozen=True)
class CompileSpec:
    """``[compile]``: the pass pipeline and the artifacts to emit."""

    passes: str = key("str", "pass pipeline, e.g. \"polynomial,prune{alpha=auto}\"", "")
    targets: tuple[str, ...] = key("targets", "artifacts: c, c-source, onnx, table, numpy", ("c",))
    name: str = key("str", "base name of the artifact files", "model")
    threads: int = key("int", "threads for the speed measurement of compiled artifacts", 1, minimum=1)
    tolerance: float | None = key(
        "float", "target c: the fastest form whose validation loss (AUC drop, relative RMSE rise) is at most this; "
                 "lossy forms only with it (needs [data] train, validation, label)", minimum=0.0)
    agreement: float = key(
        "float", "with tolerance, binary classifiers: the share of validation rows whose decision must stay the "
                 "model's (1: every one; e.g. 0.999)", 1.0, minimum=0.0)


@dataclass(frozen=True)
class ExplainSpec:
    """``[explain]``: analyses of the cases and their options (a constraint file overrides them)."""

    analyses: tuple[str, ...] = key("choices", "analyses to run", ANALYSES, choices=ANALYSES)
    target: Any = key("target", "class label to reach, or [lo, hi] for a regressor (default: any other class)")
    threshold: float | None = key("float", "binary classifiers: decide class 1 when P(class 1) is above this "
                                           "(e.g. 0.3; default: the model's own rule)", minimum=0.0)
    reasons: int = key("int", "principal reasons listed per case", 4, minimum=1)
    norm: str = key("choice", "distance norm of sensitive tests and counterfactuals", "l1", choices=NORMS)
    scale: str = key("choice", "feature scaling from the training rows", "std", choices=SCALES)
    time_limit: float = key("float", "seconds per case of a search (counterfactual MILP, sensitive tests)", 30.0, minimum=0.0)
    jobs: int = key("int", "parallel workers for per-case explanations", 1, minimum=1)
    pi: float = key("float", "counterfactual rules: CDP threshold of the divergent set", 0.9, minimum=0.0)
    pi_c: float = key("float", "counterfactual rules: CRP threshold of a rule", 0.9, minimum=0.0)
    samples: int = key("int", "counterfactual samples drawn per local rule", 1, minimum=0)
    regions: Any = key("regions", "regional rules: \"auto\", \"none\" or [{name=..., bounds={Feature=[lo, hi]}}]",
                       "auto")


@dataclass(frozen=True)
class CheckSpec:
    """``[check]``: what ``lumber build --check`` gates on."""

    exact: bool = key("bool", "compiled artifacts reproduce the model's margins on every data row", True)
    equivalence: bool = key("bool", "the compiled IR computes the same function as the model (lossless passes)",
                            True)
    prune_tolerance: float | None = key(
        "float", "largest validation metric loss a prune pass may cause (default: the pass's own tol)", minimum=0.0)
    require: tuple[str, ...] = key("choices", "explanations every case must have (infeasible fails the gate)",
                                   (), choices=("sensitive", "counterfactual", "rules"))


@dataclass(frozen=True)
class ReportSpec:
    """``[report]``: what the report shows and which files are written."""

    title: str = key("str", "report title (default: the model file's name)", "")
    sections: tuple[str, ...] = key("choices", "report sections, in order", SECTIONS, choices=SECTIONS)
    formats: tuple[str, ...] = key("choices", "files written: report.html, report.md, report.json", FORMATS,
                                   choices=FORMATS)
    timings: bool = key("bool", "show measured speed-ups (they vary run to run; the report's bytes then do too)",
                        False)
    max_tests: int = key("int", "sensitive tests listed per case", 8, minimum=1)


@dataclass(frozen=True)
class OutputSpec:
    """``[output]``: where artifacts go (replaced atomically) and the incremental cache."""

    dir: Path = key("path", "output folder (relative to the build file)", Path("build"))
    cache: Path = key("path", "cache of step results for incremental builds", Path(".lumber-cache"))


SECTION_TYPES: dict[str, type] = {
    "model": ModelSpec, "data": DataSpec, "constraints": ConstraintsSpec, "compile": CompileSpec,
    "explain": ExplainSpec, "check": CheckSpec, "report": ReportSpec, "output": OutputSpec,
}
TOP_LEVEL: dict[str, dict[str, Any]] = {
    "seed": {"kind": "int", "doc": "random seed of every randomized step", "default": 0, "minimum": 0},
}


@dataclass(frozen=True)
class BuildConfig:
    """A validated build file: every path absolute, every value checked."""

    path: Path
    """The build file itself."""
    text: str
    seed: int
    model: ModelSpec
    data: DataSpec
    constraints: ConstraintsSpec
    compile: CompileSpec
    explain: ExplainSpec
    check: CheckSpec
    report: ReportSpec
    output: OutputSpec

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    def inputs(self) -> dict[str, Path]:
        """Every input file by role (``model``, ``train``, ... ``constraints``)."""
        out = {"model": self.model.path}
        for role in ("train", "validation", "cases"):
            p = getattr(self.data, role)
            if p is not None:
                out[role] = p
        if self.constraints.path is not None:
            out["constraints"] = self.constraints.path
        return out

    def relative(self, p: Path) -> str:
        """``p`` as written relative to the build file when below it (reports never show absolute paths)."""
        try:
            return p.relative_to(self.base_dir).as_posix()
        except ValueError:
            return p.name


__all__ = ["ANALYSES", "BuildConfig", "CheckSpec", "CompileSpec", "ConstraintsSpec", "DataSpec", "ExplainSpec",
           "FORMATS", "ModelSpec", "OutputSpec", "ReportSpec", "SECTIONS", "SECTION_TYPES", "TOP_LEVEL", "key"]
