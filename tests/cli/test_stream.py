"""``lumber predict`` and ``predict_file`` stream CSV, gzip, Parquet and stdin chunk by chunk: the answer does not
depend on the chunk size, no chunk is larger than asked, and a bad row deep in the file names its line."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import lumber
from lumber.compiler.cli import main
from lumber.runtime.stream import StreamOptions, predict_file
from lumber.ir import InputDataError


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import lightgbm as lgb

    d = tmp_path_factory.mktemp("stream")
    rng = np.random.default_rng(8)
    X = pd.DataFrame(rng.normal(size=(500, 4)), columns=["a", "b", "c", "d"])
    X.iloc[::9, 1] = np.nan
    y = (X.a + X.c * X.d > 0).astype(int)
    lgb.LGBMClassifier(n_estimators=10, num_leaves=6, verbose=-1).fit(X, y).booster_.save_model(str(d / "m.txt"))
    pred = lumber.compile(d / "m.txt", target="numpy")
    framed = X[["d", "b", "a", "c"]].assign(id=[f'"row, {i}"' for i in range(len(X))])  # reordered, an extra
    framed.to_csv(d / "rows.csv", index=False)
    (d / "rows.csv.gz").write_bytes(gzip.compress((d / "rows.csv").read_bytes()))
    X.to_parquet(d / "rows.parquet", row_group_size=97)
    return {"dir": d, "X": X, "pred": pred, "want": pred.predict_raw(X), "model": str(d / "m.txt")}


class Counting:
    """A predictor that records the size of every batch it is given."""

    def __init__(self, pred: Any) -> None:
        self.pred, self.schema, self.sizes = pred, pred.schema, []

    def predict_raw(self, X: Any) -> Any:
        self.sizes.append(len(X))
        return self.pred.predict_raw(X)


@pytest.mark.parametrize("name", ["rows.csv", "rows.csv.gz", "rows.parquet"])
@pytest.mark.parametrize("chunk", [1, 7, 64, 10_000])
def test_chunks_change_nothing(setup: dict[str, Any], name: str, chunk: int) -> None:
    out = io.StringIO()
    counting = Counting(setup["pred"])
    with pytest.warns(UserWarning, match="ignoring 1 column") if name != "rows.parquet" else _nothing():
        n = predict_file(counting, setup["dir"] / name, out, options=StreamOptions(chunk_rows=chunk, raw=True))
    assert n == len(setup["X"]) and max(counting.sizes) <= chunk and sum(counting.sizes) == n
    got = pd.read_csv(io.StringIO(out.getvalue()))["raw"].to_numpy()
    np.testing.assert_array_equal(got, setup["want"])


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_cli_stdin_threads_and_formats(setup: dict[str, Any], tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(lumber.__file__).resolve().parents[1]))
    so = tmp_path / "m.so"
    assert main(["compile", setup["model"], "--emit", "c", "-o", str(so)]) == 0
    for name in ("rows.csv", "rows.parquet"):
        r = subprocess.run([sys.executable, "-m", "lumber", "predict", str(so), "-", "--threads", "2",
                            "--chunk-rows", "50", "--raw"], input=(setup["dir"] / name).read_bytes(),
                           capture_output=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        np.testing.assert_array_equal(pd.read_csv(io.BytesIO(r.stdout))["raw"].to_numpy(), setup["want"])
    out = tmp_path / "p.parquet"
    assert main(["predict", str(so), str(setup["dir"] / "rows.parquet"), "-o", str(out), "--chunk-rows", "33"]) == 0
    back = pd.read_parquet(out)
    np.testing.assert_array_equal(back["raw"].to_numpy(), setup["want"])
    assert list(back.columns) == ["raw", "proba_0", "proba_1", "prediction"]


@pytest.mark.parametrize("text, message", [
    ("a,b,c,d\n" + "1,2,3,4\n" * 300 + "1,2,3\n", ":302:1: error: row has 3 fields, the header has 4"),
    ("a,b,c,d\n" + "1,2,3,4\n" * 300 + "1,2,3,4,5\n", ":302:1: error: row has 5 fields, the header has 4"),
    ("a,b,c,d\n" + '1,"2",3,4\n' * 200 + '1,"2,5",3\n', ":202:1: error: row has 3 fields, the header has 4"),
    ("a,b,c,d\n" + "1,2,3,4\n" * 200 + "1,x,3,4\n", "rows from line 194"),
    ("a,b,c,d\n" + '1,"2,3,4\n' * 3, "a quoted field is never closed"),
    ("a,b,c,d\nF,F,F,F\n", ":1:1: error: has a header but no rows"),
])
def test_bad_rows_deep_in_a_file(setup: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 text: str, message: str) -> None:
    p = tmp_path / "bad.csv"
    p.write_text(text)
    out = tmp_path / "out.csv"
    assert main(["predict", setup["model"], str(p), "--chunk-rows", "64", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert not out.exists()  # nothing half-written


def test_options_are_checked() -> None:
    with pytest.raises(InputDataError, match="chunk_rows must be at least 1"):
        StreamOptions(chunk_rows=0)
    with pytest.raises(InputDataError, match="unknown output format 'xml'"):
        StreamOptions(output_format="xml")


def test_progress_on_stderr(setup: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    predict_file(setup["pred"], setup["dir"] / "rows.parquet", out, options=StreamOptions(chunk_rows=200,
                                                                                         progress=True))
    err = capsys.readouterr().err
    assert "rows.parquet: 200 rows" in err and "500 rows (100% of the file)" in err, err
    assert out.getvalue().count("\n") == 501  # header and rows: stdout-like output untouched by progress
