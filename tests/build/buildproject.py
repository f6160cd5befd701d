"""A small real project for build tests: a LightGBM model on the bundled Adult data, CSVs, a constraint file.

Everything is made once per session (training takes a fraction of a second);
tests copy it into their own folder before changing anything.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

CONSTRAINTS = """\
# recourse for the test model
immutable Sex, NativeCountry
Age: increase, <= 90
changes <= 3
"""

BUILD = """\
seed = 0

[model]
path = "model.txt"

[data]
train = "train.csv"
validation = "valid.csv"
cases = "cases.csv"
label = "income"

[constraints]
path = "recourse.lum"

[compile]
passes = "polynomial,prune{alpha=auto,tol=0.002}"
targets = {targets}

[explain]
time_limit = 10

[check]
prune_tolerance = 0.002

[report]
title = "Test income model"
"""


def make_project(root: Path, targets: str = '["c", "onnx"]') -> Path:
    """Write model.txt, train/valid/cases CSVs, recourse.lum and lumber.toml into ``root``."""
    import lightgbm as lgb

    from lumber import datasets

    root.mkdir(parents=True, exist_ok=True)
    ds = datasets.load("adult")
    X, y = ds.X, ds.y
    tr, va = slice(0, 800), slice(800, 1200)
    model = lgb.LGBMClassifier(n_estimators=12, num_leaves=6, learning_rate=0.2, random_state=0, n_jobs=1,
                               deterministic=True, verbose=-1)
    model.fit(X.iloc[tr], y[tr])
    model.booster_.save_model(str(root / "model.txt"))
    X.iloc[tr].assign(income=y[tr]).to_csv(root / "train.csv", index=False)
    X.iloc[va].assign(income=y[va]).to_csv(root / "valid.csv", index=False)
    pred = model.predict(X.iloc[1200:1400])
    rows = [1200 + int(np.flatnonzero(pred == 0)[k]) for k in (0, 1, 2)] + [1200 + int(np.flatnonzero(pred == 1)[0])]
    X.iloc[rows].to_csv(root / "cases.csv", index=False)
    (root / "recourse.lum").write_text(CONSTRAINTS)
    (root / "lumber.toml").write_text(BUILD.replace("{targets}", targets))
    return root


def copy_project(src: Path, dst: Path) -> Path:
    """A fresh copy of a project (inputs only: no output or cache)."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("model.txt", "train.csv", "valid.csv", "cases.csv", "recourse.lum", "lumber.toml"):
        shutil.copyfile(src / name, dst / name)
    return dst


def set_key(toml: Path, section: str, line: str) -> None:
    """Add or replace ``key = value`` under ``[section]`` of a build file."""
    key = line.split("=")[0].strip()
    out, current, done = [], "", False
    lines = toml.read_text().splitlines()
    for ln in lines:
        s = ln.strip()
        if s.startswith("["):
            if current == section and not done:
                out.append(line)
                done = True
            current = s.strip("[]")
        if current == section and s.split("=")[0].strip() == key and "=" in s:
            out.append(line)
            done = True
            continue
        out.append(ln)
    if not done:
        if current != section:
            out.append(f"[{section}]")
        out.append(line)
    toml.write_text("\n".join(out) + "\n")
