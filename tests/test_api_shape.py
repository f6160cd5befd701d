"""The public API's shape: few parameters per entry point, options as one dataclass, one spelling per idea."""

from __future__ import annotations

import inspect
import typing

import pytest

import lumber

MAX_PARAMETERS = 10
ENTRY_POINTS = ("compile", "compile_fastest", "compile_within", "load_compiled", "counterfactual",
                "counterfactual_rules", "sensitive_tests", "contributions")
"""Every entry point that takes an options dataclass (those not merged yet are checked once they exist)."""


def _public_functions() -> list[str]:
    return [n for n in lumber.__all__ if inspect.isfunction(getattr(lumber, n))]


@pytest.mark.parametrize("name", _public_functions())
def test_each_public_function_takes_at_most_ten_parameters(name: str) -> None:
    params = inspect.signature(getattr(lumber, name)).parameters
    assert len(params) <= MAX_PARAMETERS, f"lumber.{name} takes {len(params)} parameters: {', '.join(params)}"
    if name in ENTRY_POINTS:
        assert not any(p.kind == p.VAR_KEYWORD for p in params.values()), f"lumber.{name} takes **keywords"


def test_the_entry_points_are_public_functions() -> None:
    missing = [n for n in ("compile", "compile_fastest", "compile_within", "counterfactual", "counterfactual_rules",
                           "sensitive_tests") if n not in _public_functions()]
    assert not missing


@pytest.mark.parametrize("name", [n for n in ENTRY_POINTS if n in lumber.__all__])
def test_options_are_one_dataclass_of_frozen_keyword_fields(name: str) -> None:
    """``options=`` is a frozen, keyword-only dataclass re-exported from ``lumber`` (compile: the target's)."""
    fn = getattr(lumber, name)
    if "options" not in inspect.signature(fn).parameters:
        return
    hint = eval(inspect.signature(fn).parameters["options"].annotation, fn.__globals__)  # noqa: S307
    classes = [a for a in typing.get_args(hint) or (hint,) if isinstance(a, type) and a is not type(None)]
    if name == "compile":
        classes = [lumber.COptions, lumber.CSourceOptions, lumber.OnnxOptions, lumber.NumpyOptions,
                   lumber.TableOptions, lumber.TableCOptions]
    assert classes, f"lumber.{name}: options has no dataclass type"
    for cls in classes:
        assert getattr(lumber, cls.__name__) is cls, f"{cls.__name__} is not re-exported as lumber.{cls.__name__}"
        params = cls.__dataclass_params__
        assert params.frozen, f"{cls.__name__} is not frozen"
        assert all(f.kw_only for f in cls.__dataclass_fields__.values()), f"{cls.__name__} is not keyword-only"


def test_one_spelling_per_idea() -> None:
    """threads = threads in one process, n_jobs = worker processes, time_limit defaults to 30 s."""
    for name in ("counterfactual", "counterfactual_rules", "sensitive_tests"):
        params = inspect.signature(getattr(lumber, name)).parameters
        assert "n_jobs" in params and "threads" not in params, name
    for name in ("compile", "compile_fastest", "compile_within", "load_compiled"):
        params = inspect.signature(getattr(lumber, name)).parameters
        assert "threads" in params and "n_jobs" not in params, name
    assert lumber.SensitiveOptions().time_limit == 30.0
    if "CounterfactualOptions" in lumber.__all__:
        assert lumber.CounterfactualOptions().time_limit == 30.0
