"""The pass manager: pipeline text, option types, chain type-checking, instruments, registry."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

import lumber
from builders import make_forest
from lumber.ir import CompileError, Forest, Polynomial, load_ir
from lumber.passes.base import PassContext, PassData, Transform
from lumber.passes.pipeline_text import build_passes, format_pipeline, parse_pipeline
from lumber.passes.registry import get_all_passes, get_pass
from lumber.passes.transforms.prune_monomials import PruneMonomials
from lumber.passes.transforms.polynomial import ToPolynomial

F = make_forest([("x0", 0.5, ("x1", 1.0, 1.0, 2.0), 4.0), ("x1", 0.0, -1.0, 1.0)], ["x0", "x1"])


def test_parse_keeps_names_options_and_columns() -> None:
    text = " polynomial , prune{ alpha = auto , tol=0.0005 },oblivious{max-depth=8}"
    specs = parse_pipeline(text)
    assert [s.name for s in specs] == ["polynomial", "prune", "oblivious"]
    assert [(o.key, o.value) for o in specs[1].options] == [("alpha", "auto"), ("tol", "0.0005")]
    assert specs[2].options[0].column == text.index("max-depth") + 1 and specs[1].column == text.index("prune") + 1
    assert parse_pipeline('prune{metric="rmse"}')[0].options[0].value == "rmse"


def test_build_converts_options_to_field_types_and_round_trips() -> None:
    passes = build_passes("polynomial{max-monomials=1e6},prune{alpha=0.25,tol=1e-3,metric=rmse}")
    assert passes == [ToPolynomial(max_monomials=1_000_000), PruneMonomials(alpha=0.25, tol=0.001, metric="rmse")]
    text = format_pipeline(passes)
    assert text == "polynomial{max-monomials=1000000},prune{alpha=0.25,tol=0.001,metric=rmse}"
    assert build_passes(text) == passes
    assert build_passes("prune{alpha=auto}") == [PruneMonomials()]
    assert format_pipeline(build_passes("prune{alpha=auto}")) == "prune"
    assert build_passes([ToPolynomial(), "prune"]) == [ToPolynomial(), PruneMonomials()]


@pytest.mark.parametrize("text, match", [
    ("", "empty pipeline"),
    ("polynomial,", "expected a pass name at the end"),
    ("polynomial prune", "expected ',' between passes, found 'p'"),
    ("Polynomial", "expected a pass name, found 'P'"),
    ("polynomial,prun", r"unknown pass 'prun'(.|\n)*did you mean 'prune'\?(.|\n)*known passes: (.*, )?attribution, (.*, )?polynomial, prune"),
    ("polynomial{max-monomials=lots}", "option 'max-monomials' of pass 'polynomial' expects an integer, got 'lots'"),
    ("polynomial{max-monomial=3}", r"has no option 'max-monomial'(.|\n)*did you mean 'max-monomials'\?"),
    ("polynomial{max-monomials=3", r"'\{' of pass 'polynomial' is never closed"),
    ("polynomial{max-monomials}", "expected '=' after option 'max-monomials'"),
    ("polynomial{max-monomials=}", "expected a value after '='"),
    ("prune{tol=1,tol=2}", "option 'tol' given twice"),
    ("prune{alpha=fast}", "expects a number or 'auto', got 'fast'"),
    ("prune{metric=f1}", "expects 'auto' or 'auc' or 'accuracy' or 'logloss' or 'rmse', got 'f1'"),
    ("prune{alpha=-1}", "alpha must be a non-negative number"),
    ('prune{metric="auc}', "unterminated string"),
])
def test_pipeline_text_errors_point_at_the_token(text: str, match: str) -> None:
    with pytest.raises(CompileError, match=match) as info:
        build_passes(text)
    rendered = info.value.render()
    assert rendered.startswith("<pipeline>:1:") and "^" in rendered


def test_caret_sits_under_the_offending_token() -> None:
    with pytest.raises(CompileError) as info:
        build_passes("polynomial,prune{alpha=fast}")
    lines = info.value.render().splitlines()
    assert lines[1].strip() == "polynomial,prune{alpha=fast}"
    assert lines[2].index("^") - lines[1].index("p") == len("polynomial,prune{alpha=") and lines[2].count("^") == 4


def test_the_chain_is_type_checked_before_any_pass_runs() -> None:
    with pytest.raises(CompileError, match="pass 'prune' .position 1. takes a Polynomial but receives a Forest; "
                                           "add 'polynomial' before it"):
        lumber.run(F, "prune{alpha=0}")
    with pytest.raises(CompileError, match="pass 'polynomial' .position 2. takes a Forest but receives a Polynomial; "
                                           "no registered pass turns a Polynomial into a Forest"):
        lumber.run(F, "polynomial,polynomial")
    ctx = PassContext()
    with pytest.raises(CompileError):
        lumber.run(F, "polynomial,attribution,polynomial", context=ctx)
    assert ctx.timings == []  # nothing ran


@dataclass(frozen=True)
class Corrupt(Transform[Polynomial, Polynomial]):
    """A broken transform: duplicates the first monomial."""

    name: ClassVar[str] = "corrupt"

    def run(self, ir: Polynomial, ctx: PassContext) -> Polynomial:
        ids = np.concatenate([ir.mono_cond, ir.mono_cond[:ir.mono_offset[1]]])
        off = np.append(ir.mono_offset, ir.mono_offset[-1] + ir.mono_offset[1])
        return ir.replace(mono_cond=ids, mono_offset=off, weight=np.vstack([ir.weight, ir.weight[:1]]))


def test_verify_instrument_names_the_pass_that_broke_the_ir() -> None:
    with pytest.raises(CompileError, match="pass 'corrupt' produced an invalid Polynomial: two monomials"):
        lumber.run(F, [ToPolynomial(), Corrupt()])
    bad = lumber.run(F, [ToPolynomial(), Corrupt()], verify=False)  # verification off: no check
    assert bad.n_monomials == lumber.run(F, "polynomial").n_monomials + 1


def test_time_passes_dump_and_context(tmp_path) -> None:  # type: ignore[no-untyped-def]
    X = np.random.default_rng(0).uniform(-1, 3, size=(50, 2))
    stream = io.StringIO()
    ctx = PassContext()
    out = lumber.run(F, "polynomial,prune{alpha=0.01},attribution", data={"X_train": X}, time_passes=True,
                     dump=tmp_path / "dump", context=ctx, stream=stream)
    text = stream.getvalue()
    assert "===== pass timing =====" in text and "prune{alpha=0.01}" in text and "total" in text
    assert "prune: kept" in text and "polynomial: 5 leaves" in text
    assert [t.pass_text for t in ctx.timings] == ["polynomial", "prune{alpha=0.01}", "attribution"]
    assert set(ctx.results) == {"attribution"} and len(ctx.reports) == 2
    dumped = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert dumped == ["00-polynomial.lumber", "00-polynomial.txt", "01-prune.lumber", "01-prune.txt",
                      "02-attribution.lumber", "02-attribution.txt"]
    assert isinstance(load_ir(tmp_path / "dump" / "00-polynomial.lumber"), Polynomial)
    assert isinstance(out, Polynomial)
    assert ctx.instruments == []  # run() does not leave its instruments behind


def test_run_accepts_files_and_keeps_results_identical(tmp_path) -> None:  # type: ignore[no-untyped-def]
    F.save(tmp_path / "f.lumber")
    p = lumber.run(tmp_path / "f.lumber", "polynomial")
    p.save(tmp_path / "p.lumber")
    q = lumber.run(str(tmp_path / "p.lumber"), "prune{alpha=0}", data={"X_train": np.zeros((2, 2))})
    assert (tmp_path / "p.lumber").read_bytes() == lumber.ir.serialize.to_bytes(q)
    with pytest.raises(lumber.LumberError, match="no such file"):
        lumber.run(tmp_path / "missing.txt", "polynomial")


def test_registry_names_match_classes() -> None:
    for name, load in get_all_passes().items():
        cls = load()
        assert cls.name == name and isinstance(cls.takes, type) and isinstance(cls.gives, type)
    assert get_pass("polynomial").takes is Forest and get_pass("polynomial").gives is Polynomial
    assert get_pass("attribution").gives is Polynomial
    with pytest.raises(CompileError, match="unknown pass 'oblivius'"):
        get_pass("oblivius")


def test_pass_data_coercion() -> None:
    X = np.zeros((2, 1))
    assert PassData.coerce({"train": (X, [0, 1]), "valid": (X, [1, 0])}).y_valid == [1, 0]
    assert PassData.coerce({"X_train": X}).X_train is X
    with pytest.raises(CompileError, match="unknown data key.*Xtrain"):
        PassData.coerce({"Xtrain": X})
    with pytest.raises(CompileError, match=r"data\['train'\] must be a pair"):
        PassData.coerce({"train": X})
    with pytest.raises(CompileError, match="PassData or a mapping"):
        PassData.coerce([X])
