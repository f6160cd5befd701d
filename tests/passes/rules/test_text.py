"""How rule conditions print (rules/text.py through lumber.ir.display): a float threshold as the shortest
decimal in the same model cells, a categorical condition as set membership by label (never an order on
category codes), in the text and the JSON of local and regional rules."""

from __future__ import annotations

import json
import re

import numpy as np

from builders import make_forest
from rules_helpers import classifier
from lumber.ir import Feature, FeatureKind
from lumber.ir.display import Display
from lumber.ir.domains import infer_domains
from lumber.passes.analyses.rules import FOUND, RuleOptions, build_context, local_rules
from lumber.passes.analyses.rules.regional import Region, regional_rules
from lumber.passes.analyses.rules.text import condition

INF = np.inf
LONG = 0.4982340186834336
JOBS = ("clerk", "cook", "nurse", "pilot", "tailor")


def test_numeric_bounds_print_the_shortest_decimal_of_the_same_cells() -> None:
    f = classifier([("a", LONG, -5.0, ("a", 1.5000000000000002, 1.0, 5.0))], ["a"])
    shown = Display(f)
    assert condition(Feature("a"), -INF, LONG, shown, 0) == "a <= 0.4982"
    assert condition(Feature("a"), LONG, INF, shown, 0) == "a > 0.4982"
    assert condition(Feature("a"), LONG, 1.5000000000000002, shown, 0) == "0.4982 < a <= 1.5"
    # without a display: the exact float (the old form, still exact)
    assert condition(Feature("a"), -INF, LONG) == f"a <= {LONG!r}"


def test_categorical_conditions_are_set_membership_by_label() -> None:
    job = Feature("job", FeatureKind.CATEGORICAL, JOBS)
    f = classifier([("job", 1.5, -5.0, 5.0)], [job])
    shown = Display(f, infer_domains(f.schema))
    assert condition(job, 1.5, INF, shown, 0) == "job in {nurse, pilot, tailor}"
    assert condition(job, -INF, 1.5, shown, 0) == "job in {clerk, cook}"
    assert condition(job, 0.5, INF, shown, 0) == "job != clerk"
    assert condition(job, 2.5, 3.5, shown, 0) == "job = pilot"
    assert condition(job, -INF, 3.5, shown, 0) == "job != tailor"
    # without a display the schema's labels still print as a set
    assert condition(job, 1.5, INF) == "job in {nurse, pilot, tailor}"
    # a feature the data makes categorical (no labels in the schema): codes, still as a set
    plain = Feature("k")
    g = classifier([("k", 1.5, -5.0, 5.0)], [plain])
    doms = infer_domains(g.schema, categorical=[True], reference=np.array([[0.0], [1.0], [2.0], [3.0]]))
    assert condition(plain, 1.5, INF, Display(g, doms), 0) == "k in {2, 3}"


def _job_context() -> tuple[object, np.ndarray]:
    """The model predicts 1 for the jobs coded above 1.5 and a > LONG; the rule forest is the model."""
    job = Feature("job", FeatureKind.CATEGORICAL, JOBS)
    model = classifier([("job", 1.5, -5.0, ("a", LONG, -5.0, 5.0))], [job, "a"])
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(0, 5, 200).astype(float), rng.uniform(0, 1, 200)])
    return build_context(model, model, X, options=RuleOptions(pi=0.9, pi_c=0.9, n_samples=0)), X


def _numbers(text: str) -> list[str]:
    return re.findall(r"(?<![\w.])\d+\.\d+(?:e-?\d+)?", text)


def test_local_and_regional_rules_print_labels_sets_and_short_thresholds() -> None:
    ctx, _ = _job_context()
    res = local_rules(ctx, np.array([[0.0, 0.2]]), target=1)[0]
    assert res.status == FOUND
    text = res.to_text()
    assert "job in {nurse, pilot, tailor}" in text and "a > 0.4982" in text, text
    assert not re.search(r"job (<|<=|>|>=) ", text), text
    assert all(len(n) <= 8 for n in _numbers(text)), text
    assert "a > 0.4982" in json.dumps(res.to_dict())
    for r in res.to_dict()["rules"]:
        for iv in r["if"]:
            if iv["feature"] == "a":
                assert iv["lo"] == LONG  # the exact threshold beside the text
    region = Region.from_bounds(ctx.model.schema, {"job": (None, 1.0)})
    (reg,) = regional_rules(ctx, [region], target=1)
    rtext = reg.to_text()
    assert "job in {clerk, cook}" in rtext and not re.search(r"job (<|<=|>|>=) ", rtext), rtext
    assert all(len(n) <= 8 for n in _numbers(rtext)), rtext


def test_hand_built_forest_threshold_text() -> None:
    """A threshold that is already short prints as itself."""
    rule_forest = make_forest([("x1", 1.5, 4.0, 5.0)], ["x0", "x1"], average=True)
    assert Display(rule_forest).threshold(1, 1.5) == "1.5"


def test_a_sample_prints_its_changes_then_the_prediction_as_its_own_clause() -> None:
    """``sample: job 0 -> 3  -> 1`` read as a third value of job; each change is ``feature: a -> b``
    (labels for categories) and the prediction is ``prediction 0 -> 1`` (the case's, then the sample's)."""
    job = Feature("job", FeatureKind.CATEGORICAL, JOBS)
    model = classifier([("job", 1.5, -5.0, ("a", LONG, -5.0, 5.0))], [job, "a"])
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(0, 5, 200).astype(float), rng.uniform(0, 1, 200)])
    ctx = build_context(model, model, X, options=RuleOptions(pi=0.9, pi_c=0.9, n_samples=1))
    res = local_rules(ctx, np.array([[0.0, 0.2]]), target=1)[0]
    assert res.status == FOUND and res.samples
    lines = [x for x in res.to_text().splitlines() if x.lstrip().startswith("sample:")]
    assert lines
    for line in lines:
        m = re.match(r"^  sample: (?P<ch>.+); prediction 0 -> 1 \[", line)
        assert m, line
        for part in m["ch"].split("; "):
            assert re.fullmatch(r"(job: (clerk|cook|nurse|pilot|tailor) -> (clerk|cook|nurse|pilot|tailor)"
                                r"|a: [\d.]+ -> [\d.]+)", part), (part, line)


def test_a_condition_spanning_the_whole_domain_is_not_printed_as_one() -> None:
    """``Occupation is any value`` constrains nothing: the rule's IF lists only real conditions and names the
    free features of S beside "every other feature unchanged" (they may take any value, unlike the others);
    the JSON's ``if`` holds the conditions and ``unconstrained`` the free features."""
    from lumber.passes.analyses.rules.results import CounterfactualRule, Interval, Rule
    from lumber.passes.analyses.rules.text import spans_domain

    job = Feature("job", FeatureKind.CATEGORICAL, JOBS)
    flag = Feature("flag", FeatureKind.BINARY)
    a = Feature("a")
    f = classifier([("a", LONG, -5.0, 5.0)], [job, "a", flag])
    shown = Display(f, infer_domains(f.schema))
    assert spans_domain(a, -INF, INF) and not spans_domain(a, -INF, 1e300) and not spans_domain(a, LONG, INF)
    assert spans_domain(job, -0.5, 4.0, shown, 0) and not spans_domain(job, 0.5, 4.0, shown, 0)
    assert spans_domain(flag, -1.0, 1.0) and not spans_domain(flag, 0.5, INF)
    ivs = (Interval(job, 0, -INF, INF, shown), Interval(a, 1, LONG, INF, shown), Interval(flag, 2, -0.5, 1.5, shown))
    rule = Rule(ivs, probability=0.95, plausibility=0.5, support=0.25)
    assert rule.condition_text() == "a > 0.4982"
    assert rule.unconstrained == ("job", "flag")
    d = rule.to_dict()
    assert [iv["feature"] for iv in d["if"]] == ["a"] and d["unconstrained"] == ["job", "flag"]
    assert d["text"] == "a > 0.4982"
    # only free features: the condition names them, nothing is repeated after it
    only_free = Rule(ivs[:1], 0.95, 0.5, 0.25)
    assert only_free.condition_text() == "any value of job"
    assert only_free.scope_text("every other feature unchanged") == "every other feature unchanged"
    res = CounterfactualRule(FOUND, "", resolve(f), ("job", "a", "flag"), 0.5, 0.9, 0.9, rules=(rule,),
                             schema_features=f.schema.features, prediction=0, row=3)
    text = res.to_text()
    assert "rule 1: IF a > 0.4982 (job, flag: any value; every other feature unchanged)" in text, text
    assert "any value AND" not in text and "is any value" not in text
    regional = CounterfactualRule(FOUND, "", resolve(f), ("job", "a", "flag"), 0.5, 0.9, 0.9, rules=(rule,),
                                  schema_features=f.schema.features, prediction=0, region=(ivs[1],), region_rows=7)
    assert "IF a > 0.4982 (job, flag: any value; the rest of the region's conditions)" in regional.to_text()


def resolve(forest: object) -> object:
    from lumber.passes.analyses.rules.targets import resolve_target

    return resolve_target(forest, 1, 0.0)  # type: ignore[arg-type]
