"""The MLflow flavor (optional extra ``lumber[mlflow]``): save, log to a real file store, load through pyfunc;
the same margins and probabilities as the predictor, columns bound by name, no pickle in the folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from c_tools import needs_cc

pytest.importorskip("mlflow")  # the optional extra lumber[mlflow]
import mlflow.pyfunc  # noqa: E402

import lumber  # noqa: E402
import lumber.mlflow  # noqa: E402
from lumber.ir import CompileError, ModelFormatError  # noqa: E402


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    import lightgbm as lgb

    d = tmp_path_factory.mktemp("mlf")
    rng = np.random.default_rng(2)
    X = pd.DataFrame(rng.normal(size=(300, 4)), columns=["a", "b", "c", "d"])
    X.iloc[::5, 3] = np.nan
    y = np.digitize(X.a + X.b * X.c, [-0.5, 0.5])  # three classes
    lgb.LGBMClassifier(n_estimators=5, num_leaves=5, verbose=-1).fit(X, y).booster_.save_model(str(d / "m.txt"))
    return d / "m.txt", X


@needs_cc
@pytest.mark.parametrize("target", ["c", "table-c", "table", "onnx", "numpy"])
def test_save_and_pyfunc(model_file: tuple[Path, pd.DataFrame], tmp_path: Path, target: str) -> None:
    path, X = model_file
    pred = lumber.compile(path, target=target)
    lumber.mlflow.save_model(pred, tmp_path / "saved")
    assert not [p for p in (tmp_path / "saved").rglob("*") if p.suffix in (".pkl", ".pickle")]
    meta = mlflow.models.Model.load(str(tmp_path / "saved" / "MLmodel"))
    assert meta.metadata["lumber_fingerprint"] == pred.fingerprint and meta.metadata["source_library"] == "lightgbm"
    assert meta.metadata["lumber_version"] == lumber.__version__ and meta.flavors["lumber"]["target"] == pred.target
    out = mlflow.pyfunc.load_model(str(tmp_path / "saved")).predict(X[["d", "c", "b", "a"]])  # bound by name
    np.testing.assert_array_equal(out[["raw_0", "raw_1", "raw_2"]].to_numpy(), pred.predict_raw(X))
    np.testing.assert_array_equal(out[["proba_0", "proba_1", "proba_2"]].to_numpy(), pred.predict_proba(X))
    np.testing.assert_array_equal(out["prediction"].to_numpy(), pred.predict(X))
    back = lumber.mlflow.load_model(tmp_path / "saved")
    assert back.fingerprint == pred.fingerprint
    np.testing.assert_array_equal(back.predict_raw(X), pred.predict_raw(X))


@needs_cc
def test_log_model_to_a_file_store(model_file: tuple[Path, pd.DataFrame], tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path, X = model_file
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    try:
        with mlflow.start_run():
            info = lumber.mlflow.log_model(path, name="model", target="c")
    finally:
        mlflow.set_tracking_uri(None)  # type: ignore[arg-type]
    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    try:
        want = lumber.compile(path, target="c").predict_raw(X)
        out = mlflow.pyfunc.load_model(info.model_uri).predict(X)
        np.testing.assert_array_equal(out[["raw_0", "raw_1", "raw_2"]].to_numpy(), want)
        np.testing.assert_array_equal(lumber.mlflow.load_model(info.model_uri).predict_raw(X), want)
    finally:
        mlflow.set_tracking_uri(None)  # type: ignore[arg-type]


@needs_cc
def test_saved_artifact_is_verified_on_load(model_file: tuple[Path, pd.DataFrame], tmp_path: Path) -> None:
    path, _ = model_file
    lumber.mlflow.save_model(path, tmp_path / "saved", target="c")
    so = tmp_path / "saved" / "model.so"
    so.write_bytes(so.read_bytes()[:5000])
    with pytest.raises(ModelFormatError, match="truncated shared library"):
        mlflow.pyfunc.load_model(str(tmp_path / "saved"))
    with pytest.raises(CompileError, match="already exists"):
        lumber.mlflow.save_model(path, tmp_path / "saved")


def test_c_source_has_no_artifact_to_save(model_file: tuple[Path, pd.DataFrame], tmp_path: Path) -> None:
    path, _ = model_file
    with pytest.raises(CompileError, match="writes no artifact that predicts"):
        lumber.mlflow.save_model(path, tmp_path / "s", target="c-source")
    assert not (tmp_path / "s").exists()
