"""A hand-written report document covering every section and every status a section can show."""

from __future__ import annotations

import copy
from typing import Any

CASE_OK: dict[str, Any] = {
    "row": 0, "prediction": 0, "probability": 0.91, "margin": -2.3,
    "values": [["Age", 29], ["Job", "clerk"], ["Hours", 40.5]],
    "sensitive": {"status": "ok", "distance": 3.5, "trace": 35, "target": 1, "exact": True, "method": "milp",
                  "verified": True, "message": "", "n_tests": 2,
                  "tests": [{"feature": "Age", "op": "<=", "threshold": 29.5, "value": 29, "new_value": 29.5,
                             "margin": 0.5},
                            {"feature": "Job", "op": "in", "threshold": None, "value": 1, "new_value": 2,
                             "margin": 3.0, "categories": [2, 3]}]},
    "counterfactual": {"status": "optimal", "cost": 3.5, "norm": "l1", "verified": True, "gap": 0.0,
                       "prediction": 1, "original_prediction": 0, "message": "",
                       "changes": [{"feature": "Age", "before": 29, "after": 29.5, "delta": 0.5},
                                   {"feature": "Job", "before": "clerk", "after": "manager", "delta": None}]},
    "rule": {"status": "found", "message": "", "features": ["Age", "Hours"], "cdp": 0.93, "reached_pi": True,
             "pi": 0.9, "pi_c": 0.9, "target": {"classes": [1]},
             "rules": [{"text": "Age > 35 AND Hours in (40, 60]", "probability": 0.95, "plausibility": 0.4,
                        "support": 0.12}],
             "sample": {"changes": [{"feature": "Age", "before": 29, "after": 36},
                                    {"feature": "Job", "before": 1, "after": 2, "before_text": "clerk",
                                     "after_text": "manager"}],
                        "original_prediction": 0, "prediction": 1, "verified": True, "inlier_score": 0.05}},
    "plausibility": {"case": 0.1, "counterfactual": -0.02, "sensitive": 0.03, "rule_sample": 0.05},
}

CASE_BAD: dict[str, Any] = {
    "row": 1, "prediction": 1, "probability": 0.6, "margin": 0.4,
    "values": [["Age", 61], ["Job", None], ["Hours", 20]],
    "sensitive": {"status": "unreachable", "distance": "inf", "trace": 30, "target": None, "exact": True,
                  "method": "milp", "verified": False, "message": "no class change reachable under these constraints",
                  "n_tests": 0, "tests": []},
    "counterfactual": {"status": "infeasible", "cost": "inf", "norm": "l1", "verified": False, "gap": None,
                       "prediction": None, "original_prediction": 1,
                       "message": "no point reaches class 0 under the constraints", "changes": []},
    "rule": {"status": "error", "message": "InputDataError: something <odd> & wrong"},
    "plausibility": {"case": -0.04, "counterfactual": None},
}


def document() -> dict[str, Any]:
    """A fresh copy of the synthetic document."""
    return copy.deepcopy({
        "lumber_report": 1, "generator": "lumber 0.1.0", "title": "Synthetic <report> & co", "seed": 3,
        "sections": ["model", "attribution", "cases", "regional", "constraints", "checks"],
        "inputs": {"model": {"file": "m.txt", "sha256": "ab" * 32}},
        "model": {
            "file": "m.txt", "sha256": "ab" * 32, "fingerprint": "cd" * 32, "library": "lightgbm",
            "model_type": "", "task": "binary", "classes": None, "outputs": 1, "post_transform": "sigmoid",
            "input_dtype": "float64",
            "shape": {"trees": 12, "nodes": 130, "leaves": 71, "max_depth": 5, "mean_leaf_depth": 3.1,
                      "features": 3, "features_used": 3, "categorical_splits": 4, "memory_bytes": 8000},
            "features": [{"name": "Age", "kind": "numerical", "categories": None, "splits": 20},
                         {"name": "Job", "kind": "categorical", "categories": 4, "splits": 4},
                         {"name": "Hours", "kind": "numerical", "categories": None, "splits": 9}],
        },
        "compile": {"passes": "polynomial,prune{alpha=auto}", "compiled_from": "model",
                    "final_ir": "Polynomial(40 monomials, 20 conditions)",
                    "pass_reports": [{"pass": "prune", "summary": "kept 40 of 90 monomials", "metrics": {}}],
                    "timings": False,
                    "targets": [{"target": "c", "file": "model.so", "bytes": 25040, "compiled_from": "model",
                                 "fingerprint": "ef" * 32,
                                 "exact": {"rows": 1204, "exact": True, "max_abs_diff": 0.0, "max_rel_diff": 0.0,
                                           "decisions_equal": True, "differing_rows": 0}},
                                {"target": "onnx", "file": "model.onnx", "bytes": 4051, "compiled_from": "model",
                                 "fingerprint": "ef" * 32,
                                 "exact": {"rows": 1204, "exact": False, "max_abs_diff": 1e-7,
                                           "max_rel_diff": 2e-7, "decisions_equal": True, "differing_rows": 3}}],
                    "equivalence": {"equal": True, "method": "identity", "reason": "same IR"}},
        "attribution": {"method": "monoforest-nu", "rows": 800, "data": "train", "outputs": [{
            "output": "1", "expected_margin": -1.2,
            "features": [{"feature": "Age", "nu": 0.8}, {"feature": "Job", "nu": -0.55},
                         {"feature": "Hours", "nu": 0.1}],
            "top_conditions": [{"condition": "Age > 35.5", "nu": 0.6}, {"condition": "Job in {2, 3}", "nu": -0.5}],
        }]},
        "cases": {"count": 2, "file": "cases.csv", "analyses": ["sensitive", "counterfactual", "rules"],
                  "target": None, "items": [CASE_OK, CASE_BAD],
                  "metric": {"norm": "l1", "scale": "std", "immutable": ["Sex"], "increase_only": ["Age"],
                             "decrease_only": [], "max_changes": 3}, "sensitive_method": "milp"},
        "regional": {"coverage": {"cases": 0.5, "validation": 0.4}, "regions": [
            {"name": "Age <= 37", "status": "found", "message": "", "training_rows": 400, "cases_in_region": 1,
             "majority": 0, "target": {"classes": [1]}, "features": ["Hours"], "cdp": 0.95,
             "region": ["Age <= 37"], "rules": [{"text": "Hours > 45", "probability": 0.92, "plausibility": 0.3,
                                                 "support": 0.2}]},
            {"name": "Age > 37", "status": "no_rule", "message": "no rule reaches pi_c=0.9", "training_rows": 300,
             "cases_in_region": 1, "majority": 1, "target": {"classes": [0]}, "features": [], "cdp": 0.2,
             "region": ["Age > 37"], "rules": []}]},
        "constraints": {"file": "recourse.lum", "sha256": "12" * 32, "text": "immutable Sex\nAge: increase\n",
                        "immutable": ["Sex"], "max_changes": None, "norm": None, "plausibility": None},
        "checks": [{"name": "exact[c]", "passed": True, "gate": True, "message": "c: margins equal"},
                   {"name": "exact[onnx]", "passed": False, "gate": True, "message": "onnx: 3 rows differ"},
                   {"name": "equivalence", "passed": None, "gate": False, "message": "not applicable"}],
    })
