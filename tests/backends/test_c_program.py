"""A C program links a lumber-built library with the header ``--emit c-source`` writes and calls it without
Python (docs/c-abi.md): the same margins as Python, NaN rows included, from several threads at once."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
from c_tools import needs_cc

from lumber.compiler.cli import main

PROGRAM = Path(__file__).resolve().parent / "c_program" / "main.c"


@needs_cc
def test_c_program_links_and_calls_the_library(tmp_path: Path) -> None:
    import lightgbm as lgb

    import lumber

    rng = np.random.default_rng(9)
    X = pd.DataFrame(rng.normal(size=(200, 6)), columns=[f"x{i}" for i in range(6)])
    X.iloc[::4, 1] = np.nan
    y = np.digitize(X.x0 + X.x2 * X.x3, [-0.7, 0.7])
    lgb.LGBMClassifier(n_estimators=9, num_leaves=6, verbose=-1).fit(X, y).booster_.save_model(str(tmp_path / "m.txt"))
    assert main(["compile", str(tmp_path / "m.txt"), "--emit", "c", "-o", str(tmp_path / "model.so")]) == 0
    assert main(["compile", str(tmp_path / "m.txt"), "--emit", "c-source", "-o", str(tmp_path / "model.c")]) == 0
    assert (tmp_path / "model.h").is_file()
    cc = shutil.which("cc") or shutil.which("gcc")
    exe = tmp_path / "service"
    subprocess.run([str(cc), "-O2", "-std=c99", "-Wall", "-Werror", str(PROGRAM), f"-I{tmp_path}",
                    str(tmp_path / "model.so"), "-lpthread", "-lm", "-o", str(exe)], check=True, capture_output=True)
    rows = X.to_numpy()
    text = "\n".join(" ".join("nan" if np.isnan(v) else repr(float(v)) for v in r) for r in rows)
    r = subprocess.run([str(exe), str(len(rows))], input=text, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    pred = lumber.load_compiled(tmp_path / "model.so")
    want = pred.predict_raw(X)  # (n, 3)
    got = np.array([[float(v) for v in line.split()] for line in lines[:-2]])
    np.testing.assert_array_equal(got[:, 0], want.ravel())  # predict_raw, row-major outputs
    np.testing.assert_array_equal(got[:, 1], want.ravel())  # predict_row
    assert lines[-2] == f"fingerprint {pred.fingerprint}" and lines[-1] == "threads agree"
