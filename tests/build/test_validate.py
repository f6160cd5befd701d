"""The build file's shape: TOML errors, unknown keys with the nearest valid one, value kinds."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumber.compiler.build import BuildFileError, key_table, load_build_file
from lumber.compiler.build.spec import SECTION_TYPES


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "lumber.toml"
    p.write_text(text)
    return p


def errors(tmp_path: Path, text: str) -> str:
    with pytest.raises(BuildFileError) as info:
        load_build_file(write(tmp_path, text))
    return info.value.render()


def test_minimal_file_and_defaults(tmp_path: Path) -> None:
    cfg = load_build_file(write(tmp_path, '[model]\npath = "m.txt"\n'))
    assert cfg.model.path == (tmp_path / "m.txt").resolve()
    assert cfg.compile.targets == ("c",) and cfg.explain.norm == "l1" and cfg.seed == 0
    assert cfg.output.dir == (tmp_path / "build").resolve()
    assert cfg.output.cache == (tmp_path / ".lumber-cache").resolve()
    assert cfg.report.sections == ("model", "attribution", "cases", "regional", "constraints", "checks")
    assert not cfg.report.timings


def test_values_are_converted(tmp_path: Path) -> None:
    cfg = load_build_file(write(tmp_path, """seed = 7
[model]
path = "/abs/model.txt"
[data]
train = "d/train.csv"
max_cases = 3
[compile]
targets = "onnx"
[explain]
target = [0.5, 2]
time_limit = 5
regions = [{name = "young", bounds = {Age = ["", 30]}}]
[check]
prune_tolerance = 0
require = ["counterfactual"]
"""))
    assert cfg.seed == 7 and cfg.model.path == Path("/abs/model.txt")
    assert cfg.data.train == (tmp_path / "d" / "train.csv").resolve() and cfg.data.max_cases == 3
    assert cfg.compile.targets == ("onnx",)
    assert cfg.explain.target == (0.5, 2.0) and cfg.explain.time_limit == 5.0
    assert cfg.explain.regions == (("young", (("Age", (None, 30.0)),)),)
    assert cfg.check.prune_tolerance == 0.0 and cfg.check.require == ("counterfactual",)


@pytest.mark.parametrize("text,where,message,hint", [
    ('[model]\npath = "m"\n[compile]\ntagets = ["c"]\n', "lumber.toml:4:1", "unknown key 'tagets' in [compile]",
     "did you mean 'targets'?"),
    ('[model]\npath = "m"\n\n[reprot]\ntitle = "x"\n', "lumber.toml:4:1", "unknown section 'reprot'",
     "did you mean 'report'?"),
    ('sed = 1\n[model]\npath = "m"\n', "lumber.toml:1:1", "unknown key 'sed'", "did you mean 'seed'?"),
    ('[model]\npath = "m"\n[explain]\nnorm = "l3"\n', "lumber.toml:4:1", "'norm' in [explain]: 'l3' is not accepted",
     "accepted: l0, l1, l2, linf"),
    ('[model]\npath = "m"\n[report]\nsections = ["model", "casse"]\n', "lumber.toml:4:1", "'casse' is not accepted",
     "did you mean 'cases'?"),
    ('[model]\npath = "m"\n[data]\nmax_cases = 0\n', "lumber.toml:4:1", "'max_cases' in [data] must be >= 1", ""),
    ('[model]\npath = "m"\n[check]\nexact = "yes"\n', "lumber.toml:4:1", "'exact' in [check] must be true or false",
     ""),
    ('[model]\npath = 3\n', "lumber.toml:2:1", "'path' in [model] must be a file path", ""),
    ('[data]\ntrain = "t.csv"\n', "lumber.toml:1:1", "missing required key 'path' in section [model]", ""),
    ('model = "m.txt"\n', "lumber.toml:1:1", "'model' must be a table ([model])", ""),
    ('[model]\npath = "m"\n[explain]\nregions = [{name = "a", bonds = {Age = [1, 2]}}]\n', "lumber.toml:4:1",
     "region 1 is malformed: unknown key(s) bonds", ""),
    ('[model]\npath = "m"\n[explain]\ntarget = true\n', "lumber.toml:4:1",
     "'target' in [explain] must be a class label or an interval", ""),
])
def test_bad_keys_and_values(tmp_path: Path, text: str, where: str, message: str, hint: str) -> None:
    err = errors(tmp_path, text)
    assert where in err and message in err and hint in err
    assert "Traceback" not in err


def test_every_error_is_reported_at_once(tmp_path: Path) -> None:
    err = errors(tmp_path, '[model]\npath = "m"\nformat = "x"\n[compile]\ntargts = ["c"]\n[output]\ndri = "o"\n')
    assert "unknown key 'format' in [model]" in err
    assert "did you mean 'targets'?" in err and "did you mean 'dir'?" in err
    assert err.count("error:") == 3


def test_toml_syntax_error_points_at_the_line(tmp_path: Path) -> None:
    err = errors(tmp_path, '[model]\npath = "m"\n[compile]\ntargets = ["c",\npasses = "x"\n')
    assert "lumber.toml:5:" in err and "invalid TOML" in err
    assert "    passes = " in err  # the offending line is shown


def test_missing_build_file(tmp_path: Path) -> None:
    with pytest.raises(BuildFileError, match="no such build file"):
        load_build_file(tmp_path / "nope.toml")
    with pytest.raises(BuildFileError, match="is a directory"):
        load_build_file(tmp_path)


def test_key_table_lists_every_field() -> None:
    rows = key_table()
    assert ("", "seed", "0", "random seed of every randomized step") in rows
    assert ("compile", "targets", '["c"]', "artifacts: c, c-source, onnx, table, numpy") in rows
    assert ("check", "exact", "true", "compiled artifacts reproduce the model's margins on every data row") in rows
    n = sum(len(cls.__dataclass_fields__) for cls in SECTION_TYPES.values())
    assert len(rows) == n + 1
    assert all(doc for _, _, _, doc in rows)


def test_keys_template_is_a_valid_build_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lumber.compiler.cli import main

    assert main(["build", "--keys"]) == 0
    text = capsys.readouterr().out
    cfg = load_build_file(write(tmp_path, text))
    assert cfg.model.path == (tmp_path / "...").resolve() and cfg.report.formats == ("html", "md", "json")
