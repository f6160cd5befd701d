"""Counterfactual rules: local and regional recourse policies from a random forest (Amoukou and Brunel).

Layout, one job per module:

* ``table``: the rule forest's leaves as arrays, with training-row membership;
* ``estimators``: Projected Forest (CDP) and Regional RF (CRP), vectorized;
* ``actionable``: the moves the constraint model allows;
* ``divergent``: minimal divergent explanation (smallest S with CDP >= pi);
* ``boxes``: candidate leaf boxes and their greedy merge into disjoint rules;
* ``core``: one query (local or regional) from search to rules;
* ``local`` / ``regional``: the two kinds of queries, coverage;
* ``sampling`` / ``recourse``: counterfactual samples by simulated annealing;
* ``results`` / ``text`` / ``targets``: outputs, IF-THEN text, target sets.

Use through ``lumber.counterfactual_rules`` (``lumber/compiler/api/rules.py``),
which fits the surrogate forest and the isolation forest; here everything
takes lowered Forests::

    ctx = build_context(model_forest, rule_forest, X_train, constraints=cons, score=inlier_score)
    local_rules(ctx, X, target=1)          # RuleSet of CounterfactualRule
    regional_rules(ctx, [Region.from_bounds(schema, {"Age": (20, 30)})], target=1)
"""

from .actionable import ActionSpace, action_space
from .context import RuleContext, RuleOptions, build_context
from .cells import CellIndex, build_cells
from .estimators import cdp, crp, projected_weights, regional_probability
from .local import local_rules
from .recourse import rule_hit_rate, sample_cases
from .regional import Region, apply_regional, coverage, region_of, regional_rules
from .results import (
    ALREADY_TARGET, EMPTY_REGION, FOUND, NO_DIVERGENT_SET, NO_RULE, Change, CounterfactualRule,
    CounterfactualSample, Interval, Rule, RuleSet,
)
from .sampling import AnnealOptions
from .table import LeafTable, build_leaf_table
from .targets import decisions, resolve_target

__all__ = [
    "ALREADY_TARGET", "ActionSpace", "AnnealOptions", "CellIndex", "Change", "CounterfactualRule", "CounterfactualSample",
    "EMPTY_REGION", "FOUND", "Interval", "LeafTable", "NO_DIVERGENT_SET", "NO_RULE", "Region", "Rule",
    "RuleContext", "RuleOptions", "RuleSet", "action_space", "apply_regional", "build_cells",
    "build_context", "build_leaf_table", "cdp", "coverage", "crp", "decisions", "local_rules", "projected_weights",
    "region_of", "regional_probability", "regional_rules", "resolve_target", "rule_hit_rate", "sample_cases",
]
