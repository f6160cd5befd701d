"""An MLflow flavor for compiled models: ``save_model``, ``log_model``, ``load_model`` and pyfunc.

The saved model is a folder holding the compiled artifact itself (a signed shared
library, an ONNX file, a table file or a ``.lumber`` IR file: never a pickle) and an
``MLmodel`` file whose ``lumber`` flavor and metadata record the artifact's target,
the source model's fingerprint, the library it was trained with and lumber's
version. ``mlflow.pyfunc.load_model(uri).predict(frame)`` returns a DataFrame with
the raw margins (``raw``, or ``raw_k`` per output), the probabilities
(``proba_<class>``, classifiers) and the ``prediction``, the frame's columns
bound to the model's features by name. Needs the optional extra ``lumber[mlflow]``.

>>> import lumber.mlflow                                   # doctest: +SKIP
>>> lumber.mlflow.save_model("model.txt", "saved", target="c")
>>> mlflow.pyfunc.load_model("saved").predict(frame)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from lumber.compiler.api.compile import compile as compile_model
from lumber.compiler.api.compile import load_compiled
from lumber.runtime.predictors import Predictor
from lumber.runtime.stream import prediction_frame
from lumber.compiler.targets import get_target
from lumber.ir import CompileError, InputDataError
from lumber import __version__
from lumber.compiler.cli._artifacts import compiled_artifact

try:
    import mlflow.pyfunc
    from mlflow.models import Model
    from mlflow.models.model import MLMODEL_FILE_NAME
except ImportError as _exc:  # the optional extra is missing
    raise ImportError("lumber.mlflow needs MLflow: pip install 'lumber[mlflow]' (or mlflow-skinny)") from _exc

FLAVOR_NAME = "lumber"
ARTIFACT_STEM = "model"


def _version() -> str:
    return __version__


def _predictor(model_or_artifact: Any, target: str, options: Any) -> Predictor:
    """A Predictor as is; a path to a compiled artifact loaded (verified); anything else compiled for ``target``."""
    if isinstance(model_or_artifact, Predictor):
        return model_or_artifact
    if isinstance(model_or_artifact, (str, Path)) and Path(model_or_artifact).is_file():
        art = compiled_artifact(model_or_artifact)
        if art is not None:
            return art  # type: ignore[no-any-return]
    return compile_model(model_or_artifact, target=target, options=options)


def save_model(model_or_artifact: Any, path: str | Path, *, target: str = "c", options: Any = None,
               mlflow_model: Any = None, signature: Any = None, input_example: Any = None,
               metadata: dict[str, Any] | None = None) -> None:
    """Save a compiled model as an MLflow model folder at ``path`` (which must not exist).

    Parameters
    ----------
    model_or_artifact : model, model file, compiled artifact file or Predictor
        A trained model (or its file) is compiled for ``target``; a compiled artifact
        (``.so``, ``.onnx``, ``.table``) or a Predictor is saved as it is.
    target : str
        ``c``, ``table-c``, ``table``, ``onnx`` or ``numpy``: what the folder holds.
    options : the target's options dataclass, optional
    signature, input_example, metadata :
        As in every MLflow flavor's ``save_model``.
    """
    path = Path(path)
    if path.exists():
        raise CompileError(f"{path}: already exists", "MLflow model folders are written once: choose a new path")
    pred = _predictor(model_or_artifact, target, options)
    tgt = get_target(pred.target)
    if not tgt.artifact_predicts and pred.target != "numpy":
        raise CompileError(f"target {pred.target!r} writes no artifact that predicts",
                           "use target 'c', 'table-c', 'table', 'onnx' or 'numpy'")
    path.mkdir(parents=True)
    try:
        name = ARTIFACT_STEM + tgt.suffix
        pred.save(path / name)
        schema = pred.schema
        model = mlflow_model if mlflow_model is not None else Model()
        if signature is not None:
            model.signature = signature
        if input_example is not None:
            from mlflow.models.utils import _save_example

            _save_example(model, input_example, str(path))
        source = dict(schema.source)
        model.metadata = {**(metadata or {}), "lumber_fingerprint": pred.fingerprint, "lumber_version": _version(),
                          "lumber_target": pred.target, "source_library": str(source.get("library", "")),
                          "source_library_version": str(source.get("version", ""))}
        model.add_flavor(FLAVOR_NAME, artifact=name, target=pred.target, fingerprint=pred.fingerprint,
                         lumber_version=_version(), source_library=str(source.get("library", "")),
                         features=list(schema.feature_names), task=schema.task.name.lower())
        mlflow.pyfunc.add_to_model(model, loader_module="lumber.mlflow", data=name)
        (path / "requirements.txt").write_text(f"lumber=={_version()}\nnumpy\npandas\n")
        model.save(str(path / MLMODEL_FILE_NAME))
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise


def log_model(model_or_artifact: Any, name: str = "model", *, target: str = "c", options: Any = None,
              registered_model_name: str | None = None, signature: Any = None, input_example: Any = None,
              metadata: dict[str, Any] | None = None) -> Any:
    """Log a compiled model to the active MLflow run (one is started when none is); returns the ModelInfo."""
    return Model.log(artifact_path=None, name=name, flavor=sys.modules[__name__],
                     registered_model_name=registered_model_name, signature=signature, input_example=input_example,
                     metadata=metadata, model_or_artifact=model_or_artifact, target=target, options=options)


def _local(model_uri: str | Path) -> Path:
    from mlflow.artifacts import download_artifacts

    p = Path(str(model_uri))
    return p if p.is_dir() else Path(download_artifacts(artifact_uri=str(model_uri)))


def _artifact(local: Path) -> tuple[Path, dict[str, Any]]:
    conf = Model.load(str(local / MLMODEL_FILE_NAME)).flavors.get(FLAVOR_NAME)
    if conf is None:
        raise CompileError(f"{local}: an MLflow model without the '{FLAVOR_NAME}' flavor",
                           "load it with its own flavor, or save it with lumber.mlflow.save_model")
    return local / str(conf["artifact"]), conf


def load_model(model_uri: str | Path, *, threads: int = 1) -> Predictor:
    """The Predictor saved at ``model_uri`` (a folder, ``runs:/...``, ``models:/...``), verified as
    ``lumber.load_compiled`` verifies any artifact, and checked against the fingerprint MLmodel records."""
    path, conf = _artifact(_local(model_uri))
    pred = load_compiled(path, threads=threads)
    if pred.fingerprint != conf.get("fingerprint"):
        raise CompileError(f"{path}: the artifact's fingerprint {pred.fingerprint[:12]} differs from MLmodel's "
                           f"{str(conf.get('fingerprint'))[:12]}", "save the model again")
    return pred


class _PyFuncModel:
    """What ``mlflow.pyfunc.load_model`` runs: margins, probabilities and decisions as a DataFrame."""

    def __init__(self, pred: Predictor) -> None:
        self.predictor = pred

    def get_raw_model(self) -> Predictor:
        return self.predictor

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> pd.DataFrame:
        if not isinstance(model_input, pd.DataFrame):
            if getattr(model_input, "ndim", 2) != 2:
                raise InputDataError("pyfunc input must be a DataFrame (columns named as the model's features) "
                                     "or a 2-D array")
            model_input = pd.DataFrame(model_input, columns=list(self.predictor.schema.feature_names))
        return prediction_frame(self.predictor, model_input, raw=False)


def _load_pyfunc(data_path: str) -> _PyFuncModel:
    """pyfunc's loader: ``data_path`` is the artifact file the flavor names."""
    p = Path(data_path)
    pred = load_compiled(p)
    return _PyFuncModel(pred)


__all__ = ["FLAVOR_NAME", "load_model", "log_model", "save_model"]
