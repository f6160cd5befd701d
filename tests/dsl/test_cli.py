"""The constraint commands end to end: ``lumber check``, ``lumber fmt``, ``lumber init-constraints``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lumber.compiler.cli import main
from lumber.ir import Feature, FeatureKind, Task

from builders import make_forest

FEATURES = [Feature("Age", FeatureKind.ORDINAL), Feature("Income"),
            Feature("Housing", FeatureKind.CATEGORICAL, ("own", "rent", "free")), Feature("Sex", FeatureKind.BINARY),
            Feature("PAY_0_Pay_delay>=1", FeatureKind.BINARY)]
EXAMPLES = Path(__file__).resolve().parents[2] / "lumber" / "datasets" / "examples"


@pytest.fixture
def model(tmp_path: Path) -> Path:
    f = make_forest([("Age", 30.5, ("Housing", {1}, 0.1, 0.5), ("Income", 1000.0, -1.0, 2.0))], FEATURES,
                    task=Task.BINARY)
    path = tmp_path / "m.lumber"
    f.save(path)
    return path


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_check_ok(tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "c.lum", "immutable Sex\nAge: increase\nHousing: in {own, rent}\ntarget class 1\n")
    assert main(["check", str(f), "--model", str(model)]) == 0
    assert capsys.readouterr().out == "ok: 4 statements\n"


def test_check_counts_files_and_warnings(tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "common.lum", "immutable Sex\n")
    f = write(tmp_path, "c.lum", 'include "common.lum"\nchanges <= 0\n')
    assert main(["check", str(f), "--model", str(model)]) == 0
    out = capsys.readouterr()
    assert out.out == "ok: 2 statements (2 files, 1 warning)\n"
    assert "warning: `changes <= 0` forbids every change" in out.err


def test_check_json(tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "c.lum", "Age: increase, cost 1 per 10\n")
    assert main(["check", str(f), "--model", str(model), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["rules"][0]["direction"] == "increase" and d["rules"][0]["cost_up"] == 0.1


def test_check_reports_all_errors_with_exit_1(tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "bad.lum", "Agee: increase\nHousing: between 0 and 1\nnorm l3\n")
    assert main(["check", str(f), "--model", str(model)]) == 1
    err = capsys.readouterr().err
    assert f"{f}:1:1: error: unknown feature 'Agee'" in err
    assert "note: did you mean 'Age'?" in err
    assert f"{f}:2:10: error: a range on categorical feature 'Housing'" in err
    assert f"{f}:3:6: error: unknown norm 'l3'" in err
    assert "Traceback" not in err


def test_check_syntax_error_exit_1(tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "bad.lum", "Age increase\n")
    assert main(["check", str(f), "--model", str(model)]) == 1
    assert "1:5: error: expected ':' after the feature name" in capsys.readouterr().err


def test_check_missing_file_exit_2(tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "nope.lum"), "--model", str(model)]) == 2
    assert "nope.lum: no such file" in capsys.readouterr().err


def test_check_bad_model_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "c.lum", "norm l1\n")
    junk = write(tmp_path, "junk.bin", "not a model")
    assert main(["check", str(f), "--model", str(junk)]) == 2
    assert "junk.bin" in capsys.readouterr().err


def test_check_needs_model(tmp_path: Path) -> None:
    f = write(tmp_path, "c.lum", "norm l1\n")
    with pytest.raises(SystemExit) as exc:
        main(["check", str(f)])
    assert exc.value.code == 2


def test_check_data_gives_kinds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A model that sees only numbers learns from a typed CSV that Housing holds categories."""
    f = make_forest([("Housing", 0.5, 0.0, 1.0)], ["Age", "Housing"], task=Task.BINARY)
    model = tmp_path / "num.lumber"
    f.save(model)
    c = write(tmp_path, "c.lum", "Housing: in {rent}\n")
    assert main(["check", str(c), "--model", str(model)]) == 1
    assert "a category set on numerical feature 'Housing'" in capsys.readouterr().err
    data = write(tmp_path, "train.csv", "Age,Housing\nD,E\n30,own\n40,rent\n")
    assert main(["check", str(c), "--model", str(model), "--data", str(data)]) == 0


def test_fmt_check_and_rewrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "# keep me\nimmutable  Sex,Race\n\n\n\nAge:increase,<=90   # and me\n"
    f = write(tmp_path, "c.lum", text)
    assert main(["fmt", "--check", str(f)]) == 1
    assert f.read_text() == text
    assert "would reformat" in capsys.readouterr().err
    assert main(["fmt", "--diff", str(f)]) == 0
    assert "+Age: increase, <= 90  # and me" in capsys.readouterr().out
    assert f.read_text() == text
    assert main(["fmt", str(f)]) == 0
    assert f.read_text() == "# keep me\nimmutable Sex, Race\n\nAge: increase, <= 90  # and me\n"
    assert main(["fmt", "--check", str(f)]) == 0
    assert not list(tmp_path.glob(".*.tmp"))


def test_fmt_syntax_error_leaves_file_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path, "c.lum", "Age  increase\n")
    assert main(["fmt", str(f)]) == 2
    assert f.read_text() == "Age  increase\n"
    assert "expected ':'" in capsys.readouterr().err


def test_fmt_missing_file(tmp_path: Path) -> None:
    assert main(["fmt", str(tmp_path / "nope.lum")]) == 2


@pytest.mark.parametrize("name", ["adult", "compas", "credit"])
def test_examples_are_formatted(name: str) -> None:
    assert main(["fmt", "--check", str(EXAMPLES / f"{name}.lum")]) == 0


def test_init_constraints_passes_check(tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "start.lum"
    assert main(["init-constraints", str(model), "-o", str(out)]) == 0
    text = out.read_text()
    for feat in ("Age", "Income", "Housing", "Sex", "`PAY_0_Pay_delay>=1`"):
        assert f"#   {feat} " in text
    assert "categories {0=own, 1=rent, 2=free}" in text
    assert all(line.startswith("#") for line in text.splitlines())
    assert main(["check", str(out), "--model", str(model)]) == 0
    assert capsys.readouterr().out.endswith("ok: 0 statements\n")
    assert main(["fmt", "--check", str(out)]) == 0


def test_init_constraints_with_data(tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write(tmp_path, "train.csv", "Age,Income,Housing,Sex,PAY_0_Pay_delay>=1\n"
                                        "20,100,own,0,1\n30,2000,rent,1,0\n40,,own,1,0\n")
    assert main(["init-constraints", str(model), "--data", str(data)]) == 0
    text = capsys.readouterr().out
    assert "Age" in text and "data: 20 .. 40 (3 distinct)" in text
    assert "data: 100 .. 2000 (2 distinct), 1 missing" in text
    assert "data: {own, rent}" in text
    # the value kinds the data shows are written as statements the checker accepts
    assert "\nIncome: integer  # observed 100 .. 2000" in text
    out = tmp_path / "start.lum"
    out.write_text(text)
    assert main(["check", str(out), "--model", str(model)]) == 0


def test_init_constraints_refuses_to_overwrite(tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = write(tmp_path, "mine.lum", "Age: increase\n")
    assert main(["init-constraints", str(model), "-o", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert out.read_text() == "Age: increase\n"
    assert main(["init-constraints", str(model), "-o", str(out), "--force"]) == 0
    assert out.read_text().startswith("# Constraints for m.lumber")


def test_init_constraints_data_without_features(tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write(tmp_path, "other.csv", "a,b\n1,2\n")
    assert main(["init-constraints", str(model), "--data", str(data)]) == 2
    assert "features have no column" in capsys.readouterr().err


def test_real_sklearn_model_with_bundled_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """examples/adult.lum checks against a scikit-learn forest trained on the bundled adult data."""
    import lumber.compiler.frontends.sklearn  # noqa: F401
    import skops.io as sio
    from sklearn.ensemble import RandomForestClassifier

    from lumber.datasets import load

    ds = load("adult")
    rf = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(ds.X[:1500], ds.y[:1500])
    path = tmp_path / "adult_rf.skops"
    sio.dump(rf, path)
    assert main(["check", str(EXAMPLES / "adult.lum"), "--model", str(path)]) == 0
    assert capsys.readouterr().out == "ok: 15 statements\n"
    start = tmp_path / "start.lum"
    assert main(["init-constraints", str(path), "-o", str(start)]) == 0
    assert main(["check", str(start), "--model", str(path)]) == 0


def test_init_constraints_follows_the_model_where_it_splits_numerically(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A typed CSV calling a column categorical (type code E, or text) does not override a model that splits the
    feature at numeric thresholds: the file describes it as the model reads it, and a note says so."""
    f = make_forest([("Grade", 2.5, -1.0, ("Hours", 40.0, 0.5, 1.0))], [Feature("Grade"), Feature("Hours")])
    f.save(tmp_path / "m.lumber")
    typed = write(tmp_path, "typed.csv", "Grade,Hours\nE,F\n1,30\n3,45\n2,50\n")
    assert main(["init-constraints", str(tmp_path / "m.lumber"), "--data", str(typed)]) == 0
    out, err = capsys.readouterr()
    assert "'Grade' has a categorical type code but the model splits it at numeric thresholds" in err
    assert "data: 1 .. 3 (3 distinct)" in out and "Grade: integer" in out  # numbers, as the model reads them
    text = write(tmp_path, "text.csv", "Grade,Hours\nlow,30\nhigh,45\n")
    assert main(["init-constraints", str(tmp_path / "m.lumber"), "--data", str(text)]) == 2
    err = capsys.readouterr().err
    assert "'Grade' has text labels but the model splits it at numeric thresholds" in err
    assert "column 'Grade' holds non-numeric value 'low'" in err  # the model reads numbers: text is an error


def test_starter_file_prints_split_ranges_as_explanations_do(tmp_path: Path) -> None:
    """``lumber init-constraints`` described CapitalGain as "splits 1e-35 .. 70654.5": LightGBM's zero band
    and the model file's float, beside "data: 0 .. 99999". The range now prints as the explanations print
    thresholds: with the training rows' whole dollars, 0.5 .. 70654.5; without data, 0 (the zero band)."""
    import re

    from lumber.compiler.cli import main

    assert main(["datasets", "export", "adult", str(tmp_path), "--trees", "10", "--leaves", "8"]) == 0
    for args, name in ((["--data", str(tmp_path / "train.csv")], "with.lum"), ([], "without.lum")):
        assert main(["init-constraints", str(tmp_path / "model.txt"), *args, "-o", str(tmp_path / name)]) == 0
        text = (tmp_path / name).read_text()
        ranges = re.findall(r"splits (\S+) \.\. (\S+) \(", text) + [(m, m) for m in re.findall(r"splits at (\S+);?", text)]
        assert ranges, text
        for lo, hi in ranges:
            for v in (lo, hi):
                assert "e-" not in v and len(v.replace(".", "").replace("-", "")) <= 8, (name, v)
        assert main(["check", str(tmp_path / name), "--model", str(tmp_path / "model.txt")]) == 0
