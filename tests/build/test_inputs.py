"""Bad inputs are reported before any work starts: nothing compiled, nothing written."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from buildproject import set_key
from lumber.compiler.build import BuildFileError, build
from lumber.compiler.cli import main


def fails(project: Path, *match: str) -> str:
    """Build; expect a BuildFileError whose text holds every ``match``; check no work was done."""
    with pytest.raises(BuildFileError) as info:
        build(project / "lumber.toml")
    text = info.value.render()
    for m in match:
        assert m in text, text
    assert not (project / "build").exists() and not (project / ".lumber-cache").exists()
    return text


def test_missing_files_are_all_named(project: Path) -> None:
    (project / "train.csv").unlink()
    (project / "recourse.lum").unlink()
    text = fails(project, "train file 'train.csv' not found", "constraints file 'recourse.lum' not found",
                 "lumber.toml:7:1", "lumber.toml:13:1")
    assert text.count("error:") == 2


def test_missing_model_file(project: Path) -> None:
    set_key(project / "lumber.toml", "model", 'path = "models/nope.txt"')
    fails(project, "model file 'models/nope.txt' not found", f"looked for {project / 'models' / 'nope.txt'}")


def test_unreadable_model(project: Path) -> None:
    (project / "model.txt").write_text("not a model\n")
    fails(project, "unrecognised model file format", "lumber.toml:4:1")


def test_data_columns_must_match_the_model(project: Path) -> None:
    frame = pd.read_csv(project / "valid.csv").rename(columns={"Age": "age", "HoursPerWeek": "Hours"})
    frame.to_csv(project / "valid.csv", index=False)
    fails(project, "1 error in 'valid.csv': 2 of the model's 11 features have no column: 'Age', 'HoursPerWeek'",
          "'Age': no such column; did you mean 'age'?", "'HoursPerWeek': no such column",
          "lumber.toml:8:1", "valid.csv:1:1")


def test_label_column_must_exist(project: Path) -> None:
    set_key(project / "lumber.toml", "data", 'label = "incme"')
    fails(project, "train file 'train.csv' has no label column 'incme'", "did you mean 'income'?")


def test_non_numeric_data(project: Path) -> None:
    frame = pd.read_csv(project / "cases.csv")
    frame["Age"] = frame["Age"].astype(object)
    frame.loc[1, "Age"] = "old"
    frame.to_csv(project / "cases.csv", index=False)
    fails(project, "column 'Age' holds non-numeric value 'old' (row 2)", "lumber.toml:9:1")


def test_output_folder_must_be_writable(project: Path) -> None:
    (project / "afile").write_text("x")
    set_key(project / "lumber.toml", "output", 'dir = "afile/build"')
    with pytest.raises(BuildFileError, match="output folder .*afile' is a file, not a folder"):
        build(project / "lumber.toml")
    assert not (project / ".lumber-cache").exists()
    with pytest.raises(BuildFileError, match="output folder .* exists and is not a folder"):
        build(project / "lumber.toml", output=project / "afile")


def test_constraint_errors_are_located(project: Path) -> None:
    (project / "recourse.lum").write_text("immutable Sx\n")
    text = fails(project, "lumber.toml:13:1", "1 error in 'recourse.lum': unknown feature 'Sx'", "recourse.lum:1:11",
                 "did you mean 'Sex'?")
    assert "    immutable Sx\n" in text  # the constraint file's line, with its caret


def test_pipeline_and_targets_are_checked(project: Path) -> None:
    set_key(project / "lumber.toml", "compile", 'passes = "polynomial,prnue"')
    set_key(project / "lumber.toml", "compile", 'targets = ["c", "onx"]')
    fails(project, "unknown pass 'prnue'", "did you mean 'prune'?", "target 'onx' is not available",
          "did you mean 'onnx'?")


def test_prune_needs_labelled_validation_rows(project: Path) -> None:
    toml = project / "lumber.toml"
    toml.write_text(toml.read_text().replace('validation = "valid.csv"\n', ""))
    fails(project, "pass 'prune{tol=0.002}' chooses alpha on labelled validation rows")


def test_settings_that_contradict(project: Path) -> None:
    toml = project / "lumber.toml"
    set_key(toml, "check", 'require = ["rules"]')
    set_key(toml, "explain", 'analyses = ["counterfactual"]')
    fails(project, "[check] require names 'rules', which [explain] analyses does not run")


def test_regions_name_model_features(project: Path) -> None:
    set_key(project / "lumber.toml", "explain", 'regions = [{name = "r", bounds = {Agee = [1, 2]}}]')
    fails(project, "region 'r' names unknown feature 'Agee'", "did you mean 'Age'?")


def test_cli_reports_bad_input_without_traceback(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "cases.csv").unlink()
    assert main(["build", str(project / "lumber.toml")]) == 2
    err = capsys.readouterr().err
    assert "cases file 'cases.csv' not found" in err and "Traceback" not in err
    assert not (project / "build").exists()


def test_regressor_cases_need_a_target_interval(project: Path) -> None:
    import lightgbm as lgb

    from lumber.compiler.build import load_build_file
    from lumber.compiler.build.inputs import prepare

    train = pd.read_csv(project / "train.csv")
    X, y = train.drop(columns="income"), train["Age"].to_numpy(dtype=float) / 10
    lgb.LGBMRegressor(n_estimators=3, num_leaves=4, verbose=-1).fit(X, y).booster_.save_model(
        str(project / "model.txt"))
    toml = project / "lumber.toml"
    set_key(toml, "compile", 'passes = ""')
    fails(project, "a regression model's cases are explained relative to a target interval",
          "set [explain] target = [lo, hi]")
    set_key(toml, "explain", "target = [2, 3.5]")
    inp = prepare(load_build_file(toml))
    assert inp.config.explain.target == (2.0, 3.5) and inp.forest.schema.task.name == "REGRESSION"


def test_every_target_takes_every_pipeline_result() -> None:
    """A Polynomial deploys as exact oblivious tables, tables as their exact Forest where a target
    holds forests only: no pipeline result is refused by a target any more."""
    from lumber.compiler.build.inputs import _holds
    from lumber.compiler.targets import get_target, known_targets
    from lumber.ir import Forest, ObliviousEnsemble, Polynomial

    for final in (Forest, Polynomial, ObliviousEnsemble):
        assert all(_holds(final, get_target(t).accepts) for t in known_targets())
    assert not _holds(Polynomial, ())
