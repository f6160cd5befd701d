"""Options shared by several commands, defined once so they read and behave the same everywhere.

``--rows`` (one grammar, one validation), ``--no-header`` (positional binding on
request), ``--scale``, ``--quiet``, and the explainers' shared group
(:func:`add_explainer_options`: constraints, norm, scale, target, training rows,
time limit, workers, seed) used by ``lumber explain``, ``lumber batch`` and
``lumber report``.
"""

from __future__ import annotations

import argparse

import numpy as np
import numpy.typing as npt

from lumber.ir import Cutoff, InputDataError

MODEL_HELP = "model file (LightGBM text, XGBoost JSON/UBJSON, CatBoost JSON/.cbm, .skops, .lumber; pickle with --trust-pickle)"
"""One description of the model files every command reads (README: Command line tour)."""
ROWS_HELP = "rows to use, 0-based: 'START:STOP' (STOP excluded), 'I,J,K', or both ('0:10,15') (default: all)"


def positive_float(text: str) -> float:
    """An argparse type: a finite number above zero (seconds, tolerances)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (v > 0 and v != float("inf")):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number above 0")
    return v


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (counts)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number of at least 1")
    return v


def add_rows(p: argparse.ArgumentParser, what: str = "explain") -> None:
    p.add_argument("--rows", metavar="SELECTION", help=ROWS_HELP.replace("rows to use", f"rows to {what}"))


def add_no_header(p: argparse.ArgumentParser, more: str = "") -> None:
    """The one ``--no-header``: every CSV the command reads has no header row (positional binding on request)."""
    p.add_argument("--no-header", action="store_true",
                   help="the CSV files have no header row: take their columns by position, in the model's "
                        "feature order (default: a header row names the columns, which bind by name)"
                        + (f" {more}" if more else ""))


NORMS = ("l0", "l1", "l2", "linf")
SCALES = ("none", "std", "minmax")
TIME_LIMIT = 30.0
"""Seconds per case of every explainer's search (the API's ``time_limit`` default too)."""


def add_scale(p: argparse.ArgumentParser | argparse._ArgumentGroup, default_help: str = "default: the constraint "
              "file's, else none") -> None:
    p.add_argument("--scale", choices=SCALES, default=None,
                   help=f"feature scaling of distances: std or minmax statistics from --train, else from the data rows "
                        f"({default_help})")


def scale_of(args: argparse.Namespace) -> str | None:
    """``--scale``, with ``none`` as None."""
    return None if args.scale in (None, "none") else args.scale  # type: ignore[no-any-return]


def add_explainer_options(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The options every explaining command shares, declared once (names, choices, defaults, help)."""
    g = p.add_argument_group("explanations")
    g.add_argument("--constraints", help="constraint file (.lum): actionability, costs, norm, scale and target")
    g.add_argument("--target", default=None, help="target class label (or lo:hi interval for regression)")
    g.add_argument("--norm", choices=NORMS, default=None,
                   help="distance norm (default: the constraint file's, else l2 for sensitive tests and l1 for "
                        "counterfactuals; lumber report: the build file's, l1)")
    add_scale(g)
    g.add_argument("--train", help="training CSV (scaling statistics, feature domains, rules, plausibility; "
                   "without it the rows of DATA give the statistics and domains)")
    g.add_argument("--time-limit", type=positive_float, default=TIME_LIMIT,
                   help=f"seconds per case of a search (counterfactual: the whole query; default {TIME_LIMIT:g})")
    g.add_argument("--jobs", type=int, default=1, help="worker processes (default: 1; lumber batch: all cores)")
    g.add_argument("--seed", type=int, default=0, help="random seed of sampling steps (rules, isolation forest)")
    add_threshold(g)
    add_id(g)
    return g


def add_rule_options(p: argparse.ArgumentParser) -> None:
    """The counterfactual rules' options (``lumber.RuleOptions`` fields; see ``explainers/rules.py``)."""
    g = p.add_argument_group("counterfactual rules")
    g.add_argument("--paper", action="store_true",
                   help="rules: the paper's protocol (RuleOptions.paper(): no second search, impurity ranking, "
                        "cells of 5 rows, scikit-learn's isolation threshold); the flags below override it")
    g.add_argument("--pi", type=float, default=None, help="rules: CDP a feature set should reach (default 0.9)")
    g.add_argument("--pi-c", type=float, default=None, help="rules: probability every rule must reach (default 0.9)")
    g.add_argument("--k-max", type=int, default=None,
                   help="rules: most-used features the second search may change when none of the 10 first "
                        "reaches pi_c (default 30; 10 or less turns the second search off)")
    g.add_argument("--fallback", choices=["max_cdp", "smallest"], default=None,
                   help="rules: feature sets tried when none reaches pi: by CDP, highest first (default), or the "
                        "best of each size, smallest first")
    g.add_argument("--rank", choices=["splits", "impurity"], default=None,
                   help="rules: candidate features by the rule forest's split counts (default) or impurity "
                        "importance")
    g.add_argument("--min-cell-rows", type=int, default=None,
                   help="rules: training rows a Projected Forest cell keeps at least (default 1)")
    g.add_argument("--robust-search", action="store_true", default=None,
                   help="rules: when a case's sample keeps the target in fewer than 0.99 of its noisy copies "
                        "(sigma^2 = 0.01), search every admissible box for the most robust point (seconds per case)")
    g.add_argument("--contamination", default=None,
                   help="rules: share of training rows the isolation forest calls outliers (default 0.1), "
                        "or 'auto' for scikit-learn's fixed threshold")


def add_threshold(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The user's decision rule for a binary classifier (``--threshold``)."""
    p.add_argument("--threshold", metavar="CUTOFF", default=None,
                   help="binary classifiers: decide class 1 when P(class 1) is above CUTOFF (e.g. 0.3), or when the "
                        "raw margin is above M with 'margin:M' (default: the model's own rule, 0.5)")


def cutoff_of(args: argparse.Namespace) -> Cutoff | None:
    """``--threshold`` as a :class:`~lumber.ir.Cutoff` (None when not given)."""
    text = getattr(args, "threshold", None)
    if text is None:
        return None
    on, _, value = text.rpartition(":")
    on = on.strip() or "probability"
    accepted = "give a probability such as 0.3, or 'margin:-0.85' for the raw margin"
    if on not in ("probability", "margin"):
        raise InputDataError(f"--threshold {text!r}: unknown score {on!r}", accepted)
    try:
        return Cutoff(float(value), on)
    except ValueError as exc:
        raise InputDataError(f"--threshold {text!r}: {exc}", accepted) from None


def add_id(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--id COLUMN``: a column of the data naming each case (carried to every output row and case)."""
    p.add_argument("--id", metavar="COLUMN", default=None,
                   help="a column of the data that names each case (e.g. application_id); it is not a feature, "
                        "and every output row and report case carries it")


def add_reasons(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reasons", type=positive_int, default=4, metavar="N",
                   help="principal reasons per case: the N features that most pushed the decision toward the "
                        "outcome received, from the per-row contributions (default 4)")


def add_quiet(p: argparse.ArgumentParser, what: str = "no text summary on stdout, no progress") -> None:
    p.add_argument("-q", "--quiet", action="store_true", help=what)


def parse_rows(spec: str | None, n: int) -> npt.NDArray[np.int64]:
    """A ``--rows`` selection over ``n`` rows; reversed or empty ranges, duplicates and rows out of range are errors."""
    if spec is None:
        return np.arange(n, dtype=np.int64)
    accepted = f"use 'START:STOP', 'I,J,K' or both, with rows in 0..{n - 1}" if n else "the data has no rows"
    parts = [s.strip() for s in spec.split(",")]
    if not spec.strip() or any(not s for s in parts):
        raise InputDataError(f"--rows {spec!r} is not a row selection (empty part)", accepted)
    rows: list[int] = []
    for part in parts:
        try:
            if ":" in part:
                a_s, b_s = part.split(":", 1)
                a = int(a_s) if a_s.strip() else 0
                b = int(b_s) if b_s.strip() else n
                if a < 0 or b < 0:
                    raise InputDataError(f"--rows {spec!r}: negative row in '{part}'", accepted)
                if b <= a:
                    raise InputDataError(f"--rows {spec!r}: range '{part}' selects no rows (STOP must be above "
                                         "START; STOP is excluded)", accepted)
                if b > n:
                    raise InputDataError(f"--rows {spec!r}: range '{part}' runs past the last row ({n - 1}); "
                                         f"the data has {n} rows", accepted)
                rows.extend(range(a, b))
            else:
                i = int(part)
                if i < 0 or i >= n:
                    raise InputDataError(f"--rows {spec!r}: row {i} is out of range; the data has {n} rows", accepted)
                rows.append(i)
        except ValueError:
            raise InputDataError(f"--rows {spec!r} is not a row selection ('{part}' is not a number or range)",
                                 accepted) from None
    out = np.asarray(rows, dtype=np.int64)
    uniq, counts = np.unique(out, return_counts=True)
    if (counts > 1).any():
        dup = ", ".join(str(int(r)) for r in uniq[counts > 1][:5])
        raise InputDataError(f"--rows {spec!r} selects row{'s' if (counts > 1).sum() > 1 else ''} {dup} more "
                             "than once", accepted)
    return out
