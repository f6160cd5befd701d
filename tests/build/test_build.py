"""`lumber build` end to end on a real LightGBM model: artifacts, manifest, checks, incremental, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import lumber
from lumber.compiler.build import build
from lumber.compiler.build.manifest import sha256
from lumber.ir import LumberError
from buildproject import set_key

ARTIFACTS = {"model.so", "model.onnx", "ir.lumber", "report.html", "report.md", "report.json", "explanations.json",
             "manifest.json"}


def test_artifacts_and_manifest(built) -> None:  # type: ignore[no-untyped-def]
    proj, res = built
    out = proj / "build"
    assert res.output == out and not res.up_to_date
    assert {p.name for p in out.iterdir()} == ARTIFACTS
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "passed" and m["seed"] == 0
    # input hashes are the files' sha256
    for role, name in (("model", "model.txt"), ("train", "train.csv"), ("validation", "valid.csv"),
                       ("cases", "cases.csv"), ("constraints", "recourse.lum")):
        assert m["inputs"][role] == {"file": name, "sha256": sha256(proj / name), "bytes": (proj / name).stat().st_size}
    # every artifact listed with its hash; nothing else in the folder but the manifest
    listed = {a["file"]: a for a in m["artifacts"]}
    assert set(listed) == ARTIFACTS - {"manifest.json"}
    assert all(listed[f]["sha256"] == sha256(out / f) for f in listed)
    assert m["versions"]["lumber"] == lumber.__version__ and m["versions"]["lightgbm"]
    steps = {s["step"] for s in m["steps"]}
    assert {"passes", "compile-c", "compile-onnx", "attribution", "sensitive", "counterfactual", "rules",
            "regional", "plausibility"} <= steps
    assert all(s["seconds"] >= 0 for s in m["steps"])
    checks = {c["name"]: c for c in m["checks"]}
    assert checks["exact[c]"]["passed"] and checks["exact[onnx]"]["passed"] and checks["prune"]["passed"]
    assert checks["exact[c]"]["details"]["rows"] == 800 + 400 + 4
    for t in m["targets"]:  # speed is measured and recorded even when the report leaves it out
        assert t["speed"]["speedup"] > 0


def test_compiled_artifacts_reproduce_the_pipelines_result(built) -> None:  # type: ignore[no-untyped-def]
    """The pipeline prunes: the targets are compiled from the pruned polynomial (as its exact oblivious
    tables), check against it (fingerprint and margins), and are not the unpruned model."""
    from lumber.compiler.api.compile import load_compiled
    from lumber.passes.analyses.equivalence import model_scale

    proj, _ = built
    model = lumber.load(proj / "model.txt")
    pruned = lumber.ir.load_ir(proj / "build" / "ir.lumber")
    assert isinstance(pruned, lumber.ir.Polynomial)
    X = pd.read_csv(proj / "valid.csv").drop(columns="income")
    ref = pruned.evaluate(X)
    for name in ("model.so", "model.onnx"):
        pred = load_compiled(proj / "build" / name, pruned)
        np.testing.assert_allclose(pred.predict_raw(X.to_numpy()).reshape(-1), ref, rtol=0,
                                   atol=1e-12 * max(model_scale(pruned), 1.0))
        with pytest.raises(lumber.ir.CompileError, match="stale artifact"):
            load_compiled(proj / "build" / name, model)
    manifest = json.loads((proj / "build" / "manifest.json").read_text())
    assert {t["compiled_from"] for t in manifest["targets"]} == {"passes"}


def test_report_content_matches_the_analyses(built) -> None:  # type: ignore[no-untyped-def]
    proj, _ = built
    doc = json.loads((proj / "build" / "report.json").read_text())
    assert doc["sections"] == ["model", "attribution", "cases", "regional", "constraints", "checks"]
    assert doc["model"]["shape"]["trees"] == 12 and len(doc["model"]["features"]) == 11
    cases = doc["cases"]["items"]
    assert len(cases) == 4
    X = pd.read_csv(proj / "cases.csv")
    model = lumber.load(proj / "model.txt")
    assert [c["prediction"] for c in cases] == model.predict(X).tolist()
    cons = lumber.parse_constraints(proj / "recourse.lum", schema=model.schema)
    train = pd.read_csv(proj / "train.csv").drop(columns="income")
    for i, c in enumerate(cases):
        cf = lumber.counterfactual(model, X.iloc[[i]].to_numpy()[0], constraints=cons, reference=train, options=lumber.CounterfactualOptions(scale="std", time_limit=10))
        assert c["counterfactual"]["status"] == cf.status
        assert c["counterfactual"]["cost"] == pytest.approx(cf.cost, rel=1e-9)
        assert [ch["feature"] for ch in c["counterfactual"]["changes"]] == [ch.feature for ch in cf.changes]
        assert "Sex" not in [ch["feature"] for ch in c["counterfactual"]["changes"]]  # immutable
        s = c["sensitive"]
        assert s["status"] == "ok" and s["distance"] > 0 and s["trace"] > 0 and s["tests"]
        assert c["rule"]["status"] in ("found", "no_rule", "no_divergent_set")
        assert set(c["plausibility"]) >= {"case", "counterfactual", "sensitive"}
    assert doc["constraints"]["text"] == (proj / "recourse.lum").read_text()
    assert doc["attribution"]["outputs"][0]["features"]
    reg = doc["regional"]
    assert len(reg["regions"]) == 2 and set(reg["coverage"]) == {"cases", "validation", "train"}


def test_unchanged_inputs_are_not_rebuilt(built) -> None:  # type: ignore[no-untyped-def]
    proj, first = built
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (proj / "build").iterdir()}
    again = build(proj / "lumber.toml")
    assert again.up_to_date and again.rebuilt == []
    assert [c.to_dict() for c in again.checks] == [c.to_dict() for c in first.checks]
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (proj / "build").iterdir()} == before


def test_a_changed_input_rebuilds_only_what_reads_it(project: Path) -> None:
    toml = project / "lumber.toml"
    set_key(toml, "compile", 'targets = ["onnx"]')
    set_key(toml, "explain", 'analyses = ["attribution", "counterfactual"]')
    set_key(toml, "explain", 'regions = "none"')
    first = build(toml)
    assert set(first.rebuilt) == {"passes", "compile-onnx", "attribution", "counterfactual", "reasons",
                                  "plausibility"}
    (project / "recourse.lum").write_text((project / "recourse.lum").read_text() + "HoursPerWeek: <= 60\n")
    second = build(toml)
    assert not second.up_to_date
    # compile steps and attribution (which does not read the constraints) come from the cache; the reasons
    # read them (the feature domains their values are worded by)
    assert {"counterfactual"} <= set(second.rebuilt) <= {"counterfactual", "reasons", "plausibility"}
    assert "HoursPerWeek: <= 60" in json.loads((project / "build" / "report.json").read_text())["constraints"]["text"]
    third = build(toml, force=True)
    assert set(third.rebuilt) == set(first.rebuilt)


def test_same_inputs_give_identical_reports(built, project: Path) -> None:  # type: ignore[no-untyped-def]
    proj, _ = built
    set_key(project / "lumber.toml", "output", 'cache = "other-cache"')
    other = build(project / "lumber.toml", output=project / "elsewhere")
    assert not other.up_to_date and "compile-c" in other.rebuilt  # computed afresh, no shared cache
    for name in ("report.html", "report.md", "report.json", "explanations.json", "ir.lumber", "model.onnx"):
        assert (project / "elsewhere" / name).read_bytes() == (proj / "build" / name).read_bytes(), name


def test_a_failed_build_leaves_the_previous_output(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = project / "lumber.toml"
    set_key(toml, "compile", 'targets = ["numpy"]')
    set_key(toml, "explain", "analyses = []")
    build(toml)
    before = {p.name: p.read_bytes() for p in (project / "build").iterdir()}
    set_key(toml, "report", 'title = "changed"')

    def boom(*a: object, **k: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr("lumber.compiler.build.driver.write_report", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        build(toml)
    assert {p.name: p.read_bytes() for p in (project / "build").iterdir()} == before
    assert not [p for p in project.iterdir() if p.name.startswith(".build.")]  # no staging folder left behind


def test_report_timings_opt_in(project: Path) -> None:
    toml = project / "lumber.toml"
    set_key(toml, "compile", 'targets = ["onnx"]')
    set_key(toml, "explain", "analyses = []")
    set_key(toml, "report", "timings = true")
    build(toml)
    doc = json.loads((project / "build" / "report.json").read_text())
    t = doc["compile"]["targets"][0]
    assert t["speedup"] > 0 and t["speed"]["us_per_row"] > 0
    assert "speed-up" in (project / "build" / "report.md").read_text()


def test_output_option_and_relative_paths(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = project / "lumber.toml"
    set_key(toml, "compile", "targets = []")
    set_key(toml, "explain", "analyses = []")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LumberError, match="the folder '.*out' does not exist"):  # its folder must exist
        build(toml, output="out/nested")
    assert not (tmp_path / "out").exists()
    (tmp_path / "out").mkdir()
    res = build(toml, output="out/nested")  # the output folder itself is created
    assert res.output == (tmp_path / "out" / "nested").resolve()
    doc = (res.output / "report.json").read_text()
    assert str(tmp_path) not in doc and str(project) not in doc  # reports never carry absolute paths


def test_oblivious_pipeline_to_tables(project: Path) -> None:
    """A pipeline ending in oblivious tables: targets compile it, exactness is checked against the model."""
    toml = project / "lumber.toml"
    set_key(toml, "compile", 'passes = "polynomial,oblivious"')
    set_key(toml, "compile", 'targets = ["table"]')
    set_key(toml, "explain", "analyses = []")
    res = build(toml)
    checks = {c.name: c for c in res.checks}
    assert checks["exact[table]"].passed and checks["exact[table]"].gate
    assert "equal the model's on every data row (1,204 rows" in checks["exact[table]"].message
    assert res.manifest["targets"][0]["compiled_from"] == "passes"
    assert (project / "build" / "model.table").is_file()
    # with pruning the comparison with the model is reported, the prune gate bounds it
    set_key(toml, "compile", 'passes = "polynomial,prune{alpha=0.001},oblivious"')
    res = build(toml)
    checks = {c.name: c for c in res.checks}
    assert checks["exact[table]"].passed and "the pipeline's IR" in checks["exact[table]"].message
    agree = checks["agreement[table]"]
    assert not agree.gate and "decisions equal the model's on" in agree.message
    assert checks["equivalence"].passed is None


@pytest.mark.parametrize("strategy", ["greedy", "pack", "grow"])
def test_build_recomposes_with_each_strategy(project: Path, strategy: str) -> None:
    """``passes = "polynomial,oblivious{strategy=S}"``: the build's IR is that strategy's re-composition
    (the tree count ``recompose`` gives), and the table and C targets compiled from it equal the model
    on every data row."""
    from lumber.compiler.frontends import load_any
    from lumber.ir import ObliviousEnsemble
    from lumber.passes.transforms.polynomial import forest_to_polynomial
    from lumber.passes.transforms.recompose_oblivious import recompose

    toml = project / "lumber.toml"
    set_key(toml, "compile", f'passes = "polynomial,oblivious{{strategy={strategy}}}"')
    set_key(toml, "compile", 'targets = ["table", "c"]')
    set_key(toml, "explain", "analyses = []")
    res = build(toml)
    checks = {c.name: c for c in res.checks}
    assert checks["exact[table]"].passed and checks["exact[c]"].passed, {k: c.message for k, c in checks.items()}
    ir = load_any(project / "build" / "ir.lumber")
    assert isinstance(ir, ObliviousEnsemble)
    poly = forest_to_polynomial(lumber.load(project / "model.txt"))
    want, _ = recompose(poly, max_depth="auto", strategy=strategy)
    assert ir.n_trees == want.n_trees


def test_a_target_the_backend_refuses_is_named_at_its_line(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's build run in the tour's folder: ONNX refused the pruned polynomial's trees (too many
    category-set members for onnxruntime) and the build said ``<model>: error: ...`` with no way to tell
    which target or which IR. Now the error sits at ``[compile] targets`` and says what was compiled."""
    from lumber.ir import CompileError, IRLocation
    from lumber.ir.diagnostics import error

    toml = project / "lumber.toml"
    set_key(toml, "explain", "analyses = []")
    real = lumber.compile

    def refuse_onnx(ir, target="c", **kw):  # type: ignore[no-untyped-def]
        if target == "onnx":
            raise CompileError([error("78532 category set members in all exceed 40000", IRLocation(),
                                      "onnxruntime crashes on huge BRANCH_MEMBER sets (ORT #25400)")])
        return real(ir, target=target, **kw)

    monkeypatch.setattr(lumber, "compile", refuse_onnx)
    with pytest.raises(CompileError) as got:
        build(toml)
    text = got.value.render()
    line = next(i for i, x in enumerate(toml.read_text().splitlines(), 1) if x.startswith("targets"))
    assert text.startswith(f"{toml}:{line}:1: error: target 'onnx' cannot be built: 78532 category set"), text
    assert "ORT #25400" in text and "passes 'polynomial,prune{alpha=auto,tol=0.002}'" in text
    assert "drop 'onnx' from [compile] targets" in text


def test_sensitive_tests_leave_out_what_they_cannot_apply_and_say_so(project: Path) -> None:
    """A constraint file with an implication and a plausibility requirement: the sensitive tests run on
    every case under the per-feature rules, and the report names the lines they do not apply."""
    lum = project / "recourse.lum"
    lum.write_text(lum.read_text() + "if EducationNumber increases then Age >= Age0 + 2\n"
                   "plausible isolation-forest(contamination=0.1)\n")
    lines = lum.read_text().splitlines()
    imp, plaus = lines.index("if EducationNumber increases then Age >= Age0 + 2") + 1, len(lines)
    toml = project / "lumber.toml"
    set_key(toml, "compile", "targets = []")
    set_key(toml, "explain", 'analyses = ["sensitive"]')
    set_key(toml, "data", "max_cases = 3")
    res = build(toml)
    checks = {c.name: c for c in res.checks}
    assert checks["analysis[sensitive]"].passed, checks["analysis[sensitive]"].message
    assert not res.failed
    doc = json.loads((res.output / "report.json").read_text())
    assert doc["cases"]["sensitive_not_applied"] == [
        {"kind": "implication", "line": imp, "file": "recourse.lum"},
        {"kind": "plausibility", "line": plaus, "file": "recourse.lum"}]
    md = (res.output / "report.md").read_text()
    assert f"do not apply recourse.lum line {imp} (implication); recourse.lum line {plaus} (plausibility):" in md
