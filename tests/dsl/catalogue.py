"""The error catalogue of docs/constraints.md, generated from the golden cases.

    .venv/bin/python -m tests.dsl.catalogue      # rewrite the catalogue section in place

``test_golden.test_docs_catalogue_is_current`` fails when the section differs
from what the goldens produce, so the documented messages are the real ones.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "constraints.md"
GOLDEN = Path(__file__).parent / "golden"
START, END = "<!-- catalogue:start -->", "<!-- catalogue:end -->"

GROUPS: list[tuple[str, list[str]]] = [
    ("Syntax", [
        "err_missing_colon", "err_unknown_statement", "err_unknown_statement_plain", "err_missing_clause",
        "err_unknown_clause", "err_trailing_comma", "err_empty_set", "err_unclosed_set", "err_order_form",
        "err_cost_form", "err_name_list", "err_keyword_as_name", "err_one_condition", "err_missing_then",
        "err_missing_operand", "err_missing_comparison", "err_setting_word", "err_target_form",
        "err_plausible_form", "err_include_path", "err_single_quote", "err_unterminated_string",
        "err_non_ascii", "err_semicolon", "err_quoted_name_number", "err_too_deep", "err_several_syntax"]),
    ("Names, kinds and categories", [
        "err_unknown_feature", "err_unknown_feature_list", "err_unknown_sugar", "err_range_on_categorical",
        "err_set_on_numerical", "err_set_on_numerical_condition", "err_unknown_category", "err_category_code",
        "err_binary_value", "err_no_labels", "err_label_without_schema", "err_duplicate_in_set",
        "err_order_on_numerical", "err_order_incomplete", "err_increase_unordered", "err_event_unordered",
        "err_relation_categorical"]),
    ("Contradictions and duplicates", [
        "err_empty_range", "err_empty_range_split", "err_empty_range_relative", "err_increase_upper_below",
        "err_decrease_lower_above", "err_allowed_outside_bounds", "err_immutable_and_increase",
        "err_increase_and_decrease", "err_duplicate_bound", "err_duplicate_immutable", "err_duplicate_cost",
        "err_duplicate_setting", "err_duplicate_target", "err_several"]),
    ("Arithmetic, bounds and relations", [
        "err_strict_comparison", "err_not_equal", "err_nonlinear", "err_division_by_feature",
        "err_division_by_zero", "err_number_out_of_range", "err_overflow", "err_per_zero",
        "err_bound_other_feature", "err_bound_scaled", "err_relation_only_originals", "err_relation_never_true",
        "err_membership_delta", "err_membership_expression", "err_consequence_original",
        "err_consequence_only_originals"]),
    ("Settings, plausibility and target", [
        "err_changes_negative", "err_changes_fraction", "err_changes_op", "err_changes_feature",
        "err_unknown_norm", "err_unknown_scale", "err_unknown_plausibility", "err_unknown_param",
        "err_bad_param_value", "err_duplicate_param", "err_target_class_regression",
        "err_target_interval_classifier", "err_unknown_class", "err_unknown_class_index",
        "err_empty_target_interval", "err_target_equals", "err_threshold_score", "err_threshold_equals",
        "err_words", "err_words_regression",
        "err_threshold_multiclass", "err_threshold_negative_class", "err_threshold_range"]),
    ("Value kinds, steps and one-hot groups", [
        "err_value_kinds", "err_onehot_categorical", "err_onehot_twice", "err_onehot_single"]),
    ("Includes", ["err_include_missing", "err_include_cycle", "err_include_syntax", "err_include_semantic"]),
    ("Warnings (the file is still valid)", [
        "warn_immutable_with_bounds", "warn_changes_zero", "warn_relation_always_true",
        "warn_asymmetric_cost_unordered"]),
]


def _strip_directive(text: str) -> str:
    return re.sub(r"\A#!.*\n", "", text)


def catalogue() -> str:
    listed = {c for _, cases in GROUPS for c in cases}
    present = {p.stem for p in GOLDEN.glob("*.lum") if p.stem.startswith(("err_", "warn_"))}
    missing = sorted(present - listed)
    if missing:
        raise SystemExit(f"catalogue.py: add these cases to GROUPS: {missing}")
    out = [START, ""]
    for title, cases in GROUPS:
        out += [f"### {title}", ""]
        for case in cases:
            src = _strip_directive((GOLDEN / f"{case}.lum").read_text(encoding="utf-8"))
            expected = (GOLDEN / f"{case}.expected").read_text(encoding="utf-8")
            if case.startswith("warn_"):
                expected = "\n".join(ln for ln in expected.split("--- canonical")[0].splitlines()
                                     if not ln.startswith("ok:")) + "\n"
            out += [f"`{case}`", "", "```", src.rstrip("\n"), "```", "", "```text", expected.rstrip("\n"), "```", ""]
    out.append(END)
    return "\n".join(out)


def current_section() -> str:
    text = DOCS.read_text(encoding="utf-8")
    a, b = text.index(START), text.index(END) + len(END)
    return text[a:b]


def main() -> None:
    text = DOCS.read_text(encoding="utf-8")
    a, b = text.index(START), text.index(END) + len(END)
    DOCS.write_text(text[:a] + catalogue() + text[b:], encoding="utf-8")


if __name__ == "__main__":
    main()
