"""The explainers' shared command-line options (lumber/compiler/cli/_options.py): declared once, the same in
``lumber explain``, ``lumber batch`` and ``lumber report``, and mapped onto the options dataclasses in one place."""

from __future__ import annotations

import argparse

import pytest

import lumber
from lumber.compiler.cli import batch, explain, report
from lumber.compiler.cli.explainers.rules import rule_options
from lumber.ir import InputDataError

SHARED = ("--constraints", "--target", "--norm", "--scale", "--train", "--time-limit", "--jobs", "--seed")


def _parser(command: object) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    command.add_arguments(p)  # type: ignore[attr-defined]
    return p


def _option(p: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in p._actions if flag in a.option_strings)


@pytest.mark.parametrize("flag", SHARED)
def test_every_explaining_command_declares_the_shared_options_alike(flag: str) -> None:
    actions = [_option(_parser(c), flag) for c in (explain, batch, report)]
    for a in actions[1:]:
        assert (a.choices, a.type, a.help) == (actions[0].choices, actions[0].type, actions[0].help), flag
    if flag != "--jobs":  # lumber batch runs all cores by default (the shared help says so)
        assert len({a.default for a in actions}) == 1, flag
    assert _option(_parser(explain), "--time-limit").default == lumber.SensitiveOptions().time_limit == 30.0


def test_rules_flags_map_onto_rule_options_and_paper_is_a_preset() -> None:
    p = _parser(explain)
    assert rule_options(p.parse_args(["m", "d"])) == lumber.RuleOptions()
    got = rule_options(p.parse_args(["m", "d", "--pi", "0.8", "--k-max", "12", "--contamination", "auto",
                                     "--seed", "3"]))
    assert got == lumber.RuleOptions(pi=0.8, k_max=12, contamination="auto", seed=3)
    paper = rule_options(p.parse_args(["m", "d", "--paper", "--min-cell-rows", "2"]))
    assert paper == lumber.RuleOptions.paper(min_cell_rows=2)
    assert (paper.k_max, paper.rank, paper.contamination, paper.widen) == (0, "impurity", "auto", 0)
    with pytest.raises(InputDataError, match="--contamination"):
        rule_options(p.parse_args(["m", "d", "--contamination", "0.9"]))


def test_options_objects_check_their_fields() -> None:
    with pytest.raises(InputDataError, match="unknown method"):
        lumber.SensitiveOptions(method="magic")
    with pytest.raises(InputDataError, match="time_limit"):
        lumber.SensitiveOptions(time_limit=0)
    with pytest.raises(InputDataError, match="contamination"):
        lumber.RuleOptions(contamination=0.9).check()
    with pytest.raises(InputDataError, match="options must be a lumber.SensitiveOptions"):
        lumber.sensitive_tests(_tiny(), [[0.0]], options=lumber.RuleOptions())  # type: ignore[arg-type]
    with pytest.raises(InputDataError, match="options must be a lumber.RuleOptions"):
        lumber.counterfactual_rules(_tiny(), [[0.0], [1.0]], [0.0], options=lumber.SensitiveOptions())  # type: ignore[arg-type]


def _tiny() -> lumber.Forest:
    from builders import make_forest

    from lumber.ir import Task

    return make_forest([("x", 0.5, 0.0, 1.0)], ["x"], task=Task.BINARY)
