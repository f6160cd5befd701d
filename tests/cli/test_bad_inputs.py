"""Every CLI command over a corpus of bad inputs: a clear error and a non-zero exit, never a traceback.

Commands run in-process through the CLI's ``main`` (fast); an exception escaping
``main`` is what a user would see as a traceback, so it fails the test. Inputs
that are wrong but look plausible (columns renamed or reordered) must fail too:
they are where wrong numbers with exit 0 came from.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lumber.compiler.cli import main

FEATURES = ["Age", "Hours", "Sex"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import lightgbm as lgb

    d = tmp_path_factory.mktemp("bad")
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"Age": rng.integers(17, 90, 300), "Hours": rng.integers(1, 99, 300),
                      "Sex": rng.integers(0, 2, 300)}).astype(float)
    y = ((X.Age > 40) & (X.Hours > 35)).astype(int)
    lgb.LGBMClassifier(n_estimators=4, num_leaves=4, verbose=-1, min_child_samples=5).fit(X, y) \
        .booster_.save_model(str(d / "model.txt"))
    X.iloc[:5].to_csv(d / "cases.csv", index=False)
    X.assign(income=y).to_csv(d / "train.csv", index=False)
    labelled = X.assign(Sex=pd.Categorical(np.where(X.Sex > 0, "M", "F")))  # a feature that records its labels
    lgb.LGBMClassifier(n_estimators=4, num_leaves=4, verbose=-1, min_child_samples=5).fit(labelled, y) \
        .booster_.save_model(str(d / "labelled.txt"))
    files: dict[str, str | bytes] = {
        "empty.csv": "", "header_only.csv": "Age,Hours,Sex\n", "ragged.csv": "Age,Hours,Sex\n30,40,1\n31,2\n",
        "long_row.csv": "Age,Hours,Sex\n30,40,1,9\n", "dup.csv": "Age,Age,Sex\n30,40,1\n",
        "no_header.csv": "30,40,1\n50,45,0\n", "lowercase_reversed.csv": "Sex,hours,Age\n1,40,30\n",
        "misspelt.csv": "Age,Hour,Sex\n30,40,1\n", "text.csv": "Age,Hours,Sex\nold,40,1\n",
        "latin1.csv": b"Age,Hours,Sex\n30,\xe9,1\n", "binary.csv": bytes(range(256)) * 4,
        "unnamed_col.csv": "Age,,Sex\n30,40,1\n", "quote.csv": 'Age,Hours,Sex\n"30,40,1\n',
        "empty.txt": "", "garbage.txt": b"\x00\x01garbage\xff" * 50, "truncated.txt": "tree\nversion=v4\nnum_class=1\n",
        "bad.json": "{not json", "csv_as_model.txt": "Age,Hours,Sex\n1,2,3\n",
        "evil.pkl": pickle.dumps({"x": 1}, protocol=4),
        "bad.lum": "Age: incrase\nnorm l3\n", "nonutf8.lum": b"Age: increase \xff\n",
        "bad.toml": "[model\npath = 1\n", "wrong_keys.toml": '[model]\npath = "nope.txt"\nbogus = 3\n',
        "not_report.json": '{"a": 1}',
        "sex_as_code.csv": "Age,Hours,Sex\n30,40,1\n",  # 1 is a code of Sex, not one of its labels (F, M)
        "no_header_label.toml": '[model]\npath = "model.txt"\n[data]\ncases = "no_header.csv"\nheader = false\n'
                                'label = "income"\n',
    }
    files.update(_damaged_model_files(d / "model.txt", d))
    for name, text in files.items():
        (d / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    (d / "folder").mkdir()
    (d / "afile").write_text("x")
    return {p.name: p for p in d.iterdir()} | {"dir": d}


def _damaged_model_files(model_txt: Path, d: Path) -> dict[str, bytes]:
    """ONNX, treelite-checkpoint and YDF files of the same model, cut or edited (each sniffed as its format)."""
    import onnx
    import treelite

    import lumber
    from lumber.backends.onnx import emit_onnx

    art = emit_onnx(lumber.load(model_txt))
    good = art.files[art.main]
    proto = onnx.load_from_string(good)
    tree = next(n for n in proto.graph.node if n.op_type == "TreeEnsemble")
    for a in tree.attribute:
        if a.name == "nodes_featureids":
            a.ints[0] = 99
    checkpoint = treelite.frontend.load_lightgbm_model(str(model_txt)).serialize_bytes()
    out = {"cut.onnx": good[:len(good) // 2], "edited.onnx": proto.SerializeToString(),
           "cut.tl": checkpoint[:len(checkpoint) // 3]}
    try:
        import ydf
    except ImportError:  # ydf comes with the test extra; without it the YDF case is not built
        return out
    frame = pd.DataFrame({"a": np.arange(40.0), "label": np.arange(40) % 2})
    model_dir = d / "ydf_damaged"
    ydf.GradientBoostedTreesLearner(label="label", num_trees=2).train(frame, verbose=0).save(str(model_dir))
    (model_dir / "header.pb").write_bytes((model_dir / "header.pb").read_bytes()[:7])
    return out


BAD_MODELS = ["missing.txt", "folder", "empty.txt", "garbage.txt", "truncated.txt", "bad.json", "csv_as_model.txt",
              "evil.pkl", "cases.csv", "cut.onnx", "edited.onnx", "cut.tl", "ydf_damaged"]
BAD_DATA = ["missing.csv", "folder", "empty.csv", "header_only.csv", "ragged.csv", "long_row.csv", "dup.csv",
            "no_header.csv", "lowercase_reversed.csv", "misspelt.csv", "text.csv", "latin1.csv", "binary.csv",
            "unnamed_col.csv", "quote.csv"]
BAD_ROWS = ["5:2", "2:500", "3,3", "abc", "-1", "99", "1,,2"]
ANALYSES = ["--sensitive", "--counterfactual", "--rules", "--attribution"]


def _argvs(c: dict[str, Path]) -> list[list[str]]:
    d, m, cases, train = c["dir"], str(c["model.txt"]), str(c["cases.csv"]), str(c["train.csv"])
    out: list[list[str]] = []
    for bad in BAD_MODELS:
        b = str(d / bad)
        out += [["inspect", b], ["predict", b, cases], ["explain", b, cases, "--sensitive"], ["compile", b],
                ["check", str(c["bad.lum"]), "--model", b], ["init-constraints", b],
                ["batch", b, cases, "--sensitive", "-o", str(d / "o.jsonl")], ["report", b, cases, "-o", str(d / "r")]]
    for bad in BAD_DATA:
        b = str(d / bad)
        out += [["predict", m, b], ["batch", m, b, "--counterfactual", "-o", str(d / "o2.jsonl")],
                ["report", m, b, "--train", train, "-o", str(d / "r2")],
                ["check", str(c["bad.lum"]), "--model", m, "--data", b],
                ["compile", m, "--passes", "prune{alpha=auto}", "--train", b, "--label", "income", "-o",
                 str(d / "p.lumber")]]
        if bad != "text.csv":  # --data is a typed CSV: a text column is categorical there, by definition
            out += [["init-constraints", m, "--data", b]]
        out += [["explain", m, b, a] for a in ANALYSES]
        out += [["explain", m, cases, "--counterfactual", "--train", b]]
    for rows in BAD_ROWS:
        out += [["explain", m, cases, "--sensitive", "--rows", rows],
                ["batch", m, cases, "--sensitive", "--rows", rows, "-o", str(d / "o3.jsonl")]]
    folder, under_file = str(d / "folder"), str(d / "afile" / "x.out")
    for o in (folder, under_file):
        out += [["predict", m, cases, "-o", o], ["compile", m, "--emit", "onnx", "-o", o],
                ["compile", m, "--emit", "lumber", "--passes", "polynomial", "-o", o],
                ["explain", m, cases, "--attribution", "-o", o], ["init-constraints", m, "-o", o],
                ["batch", m, cases, "--sensitive", "-o", o]]
    for bad in ("cases.csv", "empty.csv", "ragged.csv", "long_row.csv"):  # --no-header: no header row, by position
        out += [["report", m, str(d / bad), "--no-header", "-o", str(d / "r4")],
                ["predict", m, str(d / bad), "--no-header"]]
    labelled = str(c["labelled.txt"])
    out += [["predict", labelled, str(c["sex_as_code.csv"])], ["explain", labelled, str(c["sex_as_code.csv"]),
                                                               "--sensitive"],
            ["build", str(c["no_header_label.toml"])], ["build", str(c["bad.toml"]), "--no-header"]]
    out += [["report", m, cases, "-o", str(d / "afile")], ["report", "--render", str(c["not_report.json"])],
            ["report", "--render", str(d / "missing.json")], ["report", "--render", str(c["garbage.txt"])],
            ["report", m], ["build", str(c["bad.toml"])], ["build", str(c["wrong_keys.toml"])],
            ["build", str(d / "missing.toml")], ["build", folder],
            ["explain", m, cases], ["explain", m, cases, "--counterfactual", "--constraints", str(c["bad.lum"])],
            ["explain", m, cases, "--counterfactual", "--constraints", str(c["nonutf8.lum"])],
            ["explain", m, cases, "--counterfactual", "--constraints", str(d / "missing.lum")],
            ["explain", m, cases, "--counterfactual", "--target", "7"],
            ["explain", m, cases, "--counterfactual", "--time-limit", "-1"],
            ["report", m, cases, "--max-cases", "0", "-o", str(d / "r3")], ["demo", "--trees", "0"],
            ["explain", m, cases, "--rules", "--train", train, "--pi-c", "2"],
            ["check", str(c["bad.lum"]), "--model", m], ["check", str(c["nonutf8.lum"]), "--model", m],
            ["check", folder, "--model", m], ["fmt", str(c["bad.lum"])], ["fmt", folder], ["fmt", str(d / "none.lum")],
            ["compile", m, "--emit", "onnx", "--opset", "3", "-o", str(d / "x.onnx")],
            ["compile", m, "--passes", "nosuchpass", "-o", str(d / "y.lumber")],
            ["compile", m, "--passes", "prune{alpha=", "-o", str(d / "y.lumber")],
            ["compile", m, "--emit", "table", "--max-depth", "lots", "-o", str(d / "t.table")],
            ["batch", m, cases, "--sensitive", "-o", str(c["cases.csv"])],
            ["demo", "--keep", str(c["afile"])], ["datasets", "export", "adlt", str(d / "ex")],
            ["datasets", "export", "adult", str(c["afile"])], ["datasets", "export"],
            ["init-constraints", "--example", "nope"], ["init-constraints"]]
    return out


def test_no_command_shows_a_traceback_on_bad_input(corpus: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    argvs = _argvs(corpus)
    assert len(argvs) > 250
    escaped, zero, silent = [], [], []
    for argv in argvs:
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse's own usage errors
            rc = exc.code if isinstance(exc.code, int) else 2
        except BaseException as exc:  # noqa: BLE001 - anything else is a traceback for the user
            escaped.append(f"{argv}: {type(exc).__name__}: {exc}")
            continue
        err = capsys.readouterr().err
        if "Traceback" in err:
            escaped.append(f"{argv}: printed a traceback")
        if rc == 0:
            zero.append(argv)
        elif not err.strip():
            silent.append(argv)
    assert not escaped, "\n".join(escaped)
    assert not zero, "bad input accepted with exit 0:\n" + "\n".join(map(str, zero))
    assert not silent, "failed without saying why:\n" + "\n".join(map(str, silent))
    assert not any((corpus["dir"] / "folder").iterdir()), "something was written into a directory given as output"
