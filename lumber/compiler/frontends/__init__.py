"""Frontends: lower a model object or file from any supported library to a Forest.

One module per source library, one entry function each, importing the library
inside. :func:`load` dispatches on the object's library or the file's content
(never on the file name alone) and refuses anything it does not recognise with
a message listing what is accepted.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable

from lumber.ir import Forest, ModelFormatError, ModelLike, ObliviousEnsemble, Polynomial, UnsupportedModelError, load_ir
from lumber.passes.deploy import as_forest

from .files import content_hash as content_hash  # re-exported for callers
from .files import read_model_bytes
from . import untrusted
from .treelite_checkpoint import is_treelite_checkpoint
from .ydf import is_ydf_dir, load_ydf_dir

ACCEPTED = (
    "scikit-learn DecisionTree*/RandomForest*/ExtraTrees*/GradientBoosting*/HistGradientBoosting*/IsolationForest, "
    "LightGBM Booster/LGBMModel or model text file, XGBoost Booster/XGBModel or JSON/UBJSON model file, "
    "treelite.Model or checkpoint file (Model.serialize), CatBoost model or JSON export, YDF GBT/RF model or saved directory, an ONNX file or ModelProto holding one ai.onnx.ml tree ensemble, "
    "a lumber .lumber IR file, a scikit-learn .skops file, "
    "or (with --trust-pickle) a pickle/joblib file of one of these"
)

_OBJECT_FRONTENDS: dict[str, str] = {
    "sklearn": "lumber.compiler.frontends.sklearn:from_sklearn",
    "lightgbm": "lumber.compiler.frontends.lightgbm:from_lightgbm",
    "xgboost": "lumber.compiler.frontends.xgboost:from_xgboost",
    "treelite": "lumber.compiler.frontends.treelite:from_treelite",
    "catboost": "lumber.compiler.frontends.catboost:from_catboost",
    "onnx": "lumber.compiler.frontends.onnx:from_onnx",
    "ydf": "lumber.compiler.frontends.ydf:from_ydf",
}


def _resolve(target: str) -> Callable[..., Forest]:
    mod, name = target.split(":")
    return getattr(importlib.import_module(mod), name)  # type: ignore[no-any-return]


def load(model_or_path: ModelLike, *, trust_pickle: bool | None = None, **options: Any) -> Forest:
    """Any supported model object or file -> a validated :class:`~lumber.ir.Forest`.

    Pickle/joblib files are refused unless ``trust_pickle=True`` (unpickling runs
    the file's code); ``.skops`` files load safely. Keyword options are passed to
    the frontend (e.g. ``feature_names=``).
    """
    if isinstance(model_or_path, Forest):
        return model_or_path
    if isinstance(model_or_path, (str, Path)):
        return load_file(Path(model_or_path), trust_pickle=trust_pickle, **options)
    top = type(model_or_path).__module__.split(".")[0]
    target = _OBJECT_FRONTENDS.get(top)
    if target is None:
        raise UnsupportedModelError(
            f"cannot load an object of type {type(model_or_path).__module__}.{type(model_or_path).__name__}",
            f"accepted: {ACCEPTED}")
    return _resolve(target)(model_or_path, **options)


def is_onnx(data: bytes) -> bool:
    """Whether bytes look like a serialized ONNX ModelProto (field 1 ``ir_version`` first, then a known field)."""
    if len(data) < 3 or data[0] != 0x08 or data[1] == 0 or data[1] >= 0x80:
        return False
    return data[2] in (0x12, 0x1a, 0x22, 0x28, 0x32, 0x3a, 0x42, 0x72)


def sniff(data: bytes) -> str:
    """Name the format of a model file from its first bytes."""
    head = data[:4096]
    if head.startswith(b"PK\x03\x04"):
        return "lumber-ir"
    if head[:1] in (b"\x80",) or head.startswith(b"\x80\x04") or head.startswith(b"\x80\x05"):
        return "pickle"
    stripped = head.lstrip()
    if head[:1] == b"{" and head[1:2] in (b"L", b"l", b"i", b"U", b"I", b"$", b"#"):
        return "xgboost-ubjson"  # UBJSON object: a length marker follows '{' (JSON has '"' or whitespace)
    if stripped.startswith(b"{"):
        if b'"learner"' in data[:1 << 20]:
            return "xgboost-json"
        if b'"oblivious_trees"' in data or b'"features_info"' in data[:1 << 20]:
            return "catboost-json"
        if b'"tree_info"' in data[:1 << 22]:
            return "lightgbm-json"
        return "json"
    if head.startswith(b"{L") or head.startswith(b"{$") or head.startswith(b"{i") or head.startswith(b"{U"):
        return "xgboost-ubjson"
    if head.startswith(b"tree\n") or head.startswith(b"tree\r\n") or b"\nversion=v" in head[:200]:
        return "lightgbm-text"
    if head.startswith(b"CBM1") or b"CBM1" in head[:16]:
        return "catboost-cbm"
    if is_onnx(head):
        return "onnx"
    if is_treelite_checkpoint(head):
        return "treelite-checkpoint"
    return "unknown"


_FILE_FRONTENDS: dict[str, str] = {
    "lightgbm-text": "lumber.compiler.frontends.lightgbm:load_lightgbm_text",
    "xgboost-json": "lumber.compiler.frontends.xgboost:load_xgboost_file",
    "xgboost-ubjson": "lumber.compiler.frontends.xgboost:load_xgboost_file",
    "catboost-json": "lumber.compiler.frontends.catboost:load_catboost_file",
    "catboost-cbm": "lumber.compiler.frontends.catboost:load_catboost_file",
    "onnx": "lumber.compiler.frontends.onnx:load_onnx_file",
    "treelite-checkpoint": "lumber.compiler.frontends.treelite_checkpoint:load_treelite_checkpoint",
}


def load_file(path: Path, *, trust_pickle: bool | None = None, **options: Any) -> Forest:
    if path.is_dir():
        if is_ydf_dir(path):
            return load_ydf_dir(path, **options)
    data = read_model_bytes(path)
    if not data.strip():
        raise ModelFormatError(f"{path}: file is empty", f"accepted: {ACCEPTED}")
    kind = sniff(data)
    if kind in ("pickle", "unknown") and untrusted.is_pickle(data) or kind == "lumber-ir" and untrusted.is_skops(data):
        if kind == "lumber-ir":
            obj = untrusted.load_skops(path, data)
        elif untrusted.pickles_trusted(trust_pickle):
            obj = untrusted.unpickle(path, data)
        else:
            raise untrusted.refuse_pickle(path)
        try:
            return load(obj, **options)
        except UnsupportedModelError as exc:
            raise UnsupportedModelError(f"{path}: {exc.diagnostics[0].message}", *exc.diagnostics[0].notes) from None
    if kind == "lumber-ir":
        ir = load_ir(path)
        if not isinstance(ir, Forest):  # a Polynomial or ObliviousEnsemble: its exactly equal Forest
            return as_forest(ir)
        return ir
    target = _FILE_FRONTENDS.get(kind)
    if target is None:
        if kind == "lightgbm-json":
            raise UnsupportedModelError(f"{path}: looks like a LightGBM dump_model() JSON",
                                        "save the model with booster.save_model('model.txt') and load that")
        raise ModelFormatError(f"{path}: unrecognised model file format", f"accepted: {ACCEPTED}")
    return _resolve(target)(path, data=data, **options)


def load_any(model: Any, **options: Any) -> Any:
    """A model object or file as IR: ``.lumber`` files give the IR they hold (any kind: Forest,
    Polynomial, ObliviousEnsemble), IR objects are returned as they are, everything else goes
    through :func:`load` (a Forest); :mod:`lumber.passes.deploy` makes any of them deployable."""
    if isinstance(model, (Forest, Polynomial, ObliviousEnsemble)):
        return model
    if isinstance(model, (str, Path)):
        path = Path(model)
        data = read_model_bytes(path)
        if sniff(data) == "lumber-ir":
            if not untrusted.is_skops(data):
                ir = load_ir(path)
                if isinstance(ir, (Forest, Polynomial, ObliviousEnsemble)):
                    return ir
            return load_file(path, **options)
    return load(model, **options)
