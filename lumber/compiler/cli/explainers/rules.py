"""``lumber explain MODEL DATA.csv --rules --train TRAIN.csv``: counterfactual rules per case.

For each chosen row: the feature set S to change, the rules (IF-THEN boxes over
S reaching the target with probability ``pi_c``) and one verified
counterfactual sample. The rules are estimated on the training rows (``--train``
is required) with a surrogate random forest fitted to the model's decisions;
``--constraints FILE`` keeps immutable features out of S and clips boxes to
directions and bounds; ``--target`` names the class wanted (``lo:hi`` for a
regressor); ``--seed`` fixes the surrogate, the isolation forest and the samples; ``--paper`` starts
from ``RuleOptions.paper()`` (the other rules flags override its fields).
A sample is "inlier" under an isolation forest fitted on the training rows and
calibrated so that 10% of them are outliers (``contamination=0.1``, as for
``lumber.counterfactual``'s plausibility). When no rule is found over the 10
most-used features, the search retries over the 30 most-used (the message says so).
"""

from __future__ import annotations

from typing import Any

from lumber.compiler.api.rules import RuleExplainer, RuleOptions
from lumber.compiler.cli.explainers import parse_target
from lumber.ir import InputDataError


RULE_FLAGS = {"pi": "pi", "pi_c": "pi_c", "k_max": "k_max", "fallback": "fallback", "rank": "rank",
              "min_cell_rows": "min_cell_rows", "robust_search": "robust_search"}
"""``lumber explain --rules`` flags (argparse names) -> RuleOptions fields; unset flags keep the preset's value."""


def rule_options(args: Any) -> RuleOptions:
    """The RuleOptions of the command line: ``--paper`` (``RuleOptions.paper()``) or the defaults, then every
    rules flag given, and ``--seed``."""
    changes: dict[str, Any] = {f: getattr(args, a) for a, f in RULE_FLAGS.items() if getattr(args, a, None) is not None}
    if getattr(args, "contamination", None) is not None:
        changes["contamination"] = _contamination(str(args.contamination))
    changes["seed"] = int(args.seed)
    return RuleOptions.paper(**changes) if getattr(args, "paper", False) else RuleOptions(**changes)


def explain(ctx: Any) -> tuple[dict[str, Any], str]:
    args = ctx.args
    if ctx.train_X is None:
        raise InputDataError("--rules needs training rows", "add --train TRAIN.csv (the rows the model was fitted on)")
    target = parse_target(args.target, ctx.forest.schema.task)
    explainer = RuleExplainer(ctx.request, ctx.train_X, options=rule_options(args))
    from lumber.runtime.progress import Progress, enabled

    rows = [int(r) for r in ctx.rows]
    with Progress(len(rows), 0, enabled(args.quiet) and len(rows) > 1, "rules") as bar:
        result = explainer.local(ctx.X[ctx.rows], target, rows=rows, progress=bar.update)
    return result.to_dict(), result.to_text()


def _contamination(text: str) -> float | str:
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 < value <= 0.5:
        raise InputDataError(f"--contamination {text!r} is not accepted", "give a share in (0, 0.5] or 'auto'")
    return value


__all__ = ["explain"]
