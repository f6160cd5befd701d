"""``lumber predict`` and ``lumber inspect`` take compiled artifacts (.so, .onnx, .table); predict writes csv/jsonl/parquet."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lumber.compiler.cli import main


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, np.ndarray]:
    import lightgbm as lgb

    d = tmp_path_factory.mktemp("art")
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(200, 4)), columns=["a", "b", "c", "d"])
    y = (X.a + X.b * X.c > 0).astype(int)
    booster = lgb.LGBMClassifier(n_estimators=8, num_leaves=6, verbose=-1).fit(X, y).booster_
    booster.save_model(str(d / "model.txt"))
    X.iloc[:30][["d", "c", "b", "a"]].to_csv(d / "cases.csv", index=False)  # another order: bound by name
    return d, d / "model.txt", booster.predict(X.iloc[:30].to_numpy(), raw_score=True)


@pytest.mark.parametrize("emit, suffix", [("c", ".so"), ("onnx", ".onnx"), ("table", ".table")])
def test_artifacts_predict_and_inspect(files, emit: str, suffix: str, capsys: pytest.CaptureFixture[str]) -> None:
    d, model, want = files
    art = d / f"m{suffix}"
    assert main(["compile", str(model), "--emit", emit, "-o", str(art)]) == 0
    printed = capsys.readouterr().out
    assert main(["inspect", str(model), "--json"]) == 0
    capsys.readouterr()
    assert main(["inspect", str(art), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["target"] == emit and info["fingerprint"][:16] in printed and info["features"] == 4
    from lumber.compiler.targets import get_target

    assert info["artifact"] == get_target(emit).what  # the target registry's words, not a copy of them
    assert main(["inspect", str(art)]) == 0
    assert f"from the model with fingerprint {info['fingerprint']}" in capsys.readouterr().out
    assert main(["predict", str(art), str(d / "cases.csv")]) == 0
    got = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(got.columns) == ["raw", "proba_0", "proba_1", "prediction"] and len(got) == 30
    np.testing.assert_allclose(got["raw"].to_numpy(), want, rtol=1e-12, atol=1e-12)


def test_predict_formats(files, capsys: pytest.CaptureFixture[str]) -> None:
    d, model, want = files
    assert main(["predict", str(model), str(d / "cases.csv"), "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 30 and set(rows[0]) == {"raw", "proba_0", "proba_1", "prediction"}
    np.testing.assert_array_equal([r["raw"] for r in rows], want)  # JSON floats round-trip exactly
    assert main(["predict", str(model), str(d / "cases.csv"), "-o", str(d / "p.jsonl")]) == 0
    assert len((d / "p.jsonl").read_text().splitlines()) == 30  # format from the suffix
    out = d / "p.parquet"
    rc = main(["predict", str(model), str(d / "cases.csv"), "-o", str(out)])
    if importlib.util.find_spec("pyarrow") is None:
        assert rc == 2 and "needs pyarrow" in capsys.readouterr().err and not out.exists()
    else:
        assert rc == 0 and len(pd.read_parquet(out)) == 30
    assert main(["predict", str(model), str(d / "cases.csv"), "--format", "parquet"]) == 2
    assert "give -o" in capsys.readouterr().err
