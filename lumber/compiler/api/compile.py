"""``lumber.compile``: a model in, a predictor backed by a compiled artifact out.

Every predictor answers ``predict_raw`` from its artifact (C library, ONNX
session, or the reference evaluator) and derives ``predict_proba``/``predict``
from those margins through the schema, exactly as ``Forest`` does; so equal
margins mean equal answers. Artifacts record the fingerprint of the model they
were built from; :func:`load_compiled` refuses one that does not match.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.backends.base import Artifact, fingerprint
from lumber.ir import CompileError, Forest, ModelFormatError, ObliviousEnsemble, Schema, atomic_write_bytes
from lumber.ir.interp import prepare_input

TARGETS = ("c", "c-source", "onnx", "numpy", "table")


def as_rows(schema: Schema, X: Any, dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    """User data as a C-contiguous array of ``dtype`` holding the model's input values.

    Plain float arrays skip the general conversion; rounding float64 to float32
    here is the same rounding ``prepare_input`` does.
    """
    if isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype.kind == "f" and X.shape[1] == schema.n_features:
        if schema.input_dtype == "float32" and dtype == np.float64:
            with np.errstate(over="ignore"):
                rows = np.ascontiguousarray(X.astype(np.float32), dtype=np.float64)
        else:
            with np.errstate(over="ignore"):
                rows = np.ascontiguousarray(X, dtype=dtype)
        if (not schema.allow_nan and np.isnan(rows).any()) or (not schema.allow_inf and np.isinf(rows).any()):
            prepare_input(schema, X)  # raises the detailed InputDataError
        return rows
    return np.ascontiguousarray(prepare_input(schema, X), dtype=dtype)


class Predictor:
    """Margins from an artifact; probabilities and decisions from the schema (as ``Forest``)."""

    target: str = ""

    def __init__(self, schema: Schema, fingerprint: str) -> None:
        self.schema = schema
        self.fingerprint = fingerprint
        self.path: Path | None = None

    def _margins(self, X: Any) -> npt.NDArray[np.float64]:  # (n, n_outputs)
        raise NotImplementedError

    def predict_raw(self, X: Any) -> npt.NDArray[np.float64]:
        """Raw margins: ``(n,)`` for one output, else ``(n, n_outputs)`` (as ``Forest.evaluate``)."""
        m = self._margins(X)
        return m[:, 0] if self.schema.n_outputs == 1 else m

    def predict_proba(self, X: Any) -> npt.NDArray[np.float64]:
        return self.schema.proba(self.predict_raw(X))

    def predict(self, X: Any) -> npt.NDArray[Any]:
        return self.schema.decide(self.predict_raw(X))

    def save(self, path: str | Path) -> Path:
        """Write the artifact atomically; returns the path written."""
        raise NotImplementedError

    def __repr__(self) -> str:
        where = f", path='{self.path}'" if self.path else ""
        return f"<{type(self).__name__} target={self.target!r} fingerprint={self.fingerprint[:12]}{where}>"


class NumpyPredictor(Predictor):
    """The reference evaluator (no compiler needed)."""

    target = "numpy"

    def __init__(self, forest: Forest) -> None:
        super().__init__(forest.schema, fingerprint(forest))
        self.forest = forest

    def _margins(self, X: Any) -> npt.NDArray[np.float64]:
        return self.forest.evaluate(X).reshape(-1, self.schema.n_outputs)

    def save(self, path: str | Path) -> Path:
        self.forest.save(path)
        self.path = Path(path)
        return self.path


class CSourcePredictor(NumpyPredictor):
    """C source (not built); predictions come from the reference evaluator."""

    target = "c-source"

    def __init__(self, forest: Forest, artifact: Artifact) -> None:
        super().__init__(forest)
        self.artifact = artifact

    @property
    def source(self) -> str:
        return self.artifact.text()

    def save(self, path: str | Path) -> Path:
        """Write ``NAME.c`` and ``NAME.h`` (the header beside the source)."""
        self.artifact.write(path)
        self.path = Path(path)
        return self.path


class CPredictor(Predictor):
    """A built shared library called through ctypes."""

    target = "c"

    def __init__(self, library: Any, data: bytes, *, threads: int = 1, source: Artifact | None = None) -> None:
        super().__init__(library.schema, library.fingerprint)
        self.library = library
        self.threads = threads
        self.artifact = source
        self._data = data

    @property
    def source(self) -> str | None:
        return self.artifact.text() if self.artifact is not None else None

    def _margins(self, X: Any, threads: int | None = None) -> npt.NDArray[np.float64]:
        rows = as_rows(self.schema, X, self.library.dtype)
        return self.library.predict_raw(rows, threads or self.threads)  # type: ignore[no-any-return]

    def predict_raw(self, X: Any, threads: int | None = None) -> npt.NDArray[np.float64]:
        m = self._margins(X, threads)
        return m[:, 0] if self.schema.n_outputs == 1 else m

    def predict_row(self, x: Any) -> npt.NDArray[np.float64]:
        """Margins of one row ``(n_outputs,)`` through the single-row entry point."""
        row = np.asarray(x)
        if row.shape != (self.schema.n_features,) or row.dtype.kind != "f" or not (
                self.schema.allow_nan and self.schema.allow_inf):
            row = as_rows(self.schema, np.asarray(x, dtype=np.float64).reshape(1, -1), self.library.dtype)[0]
        elif row.dtype != self.library.dtype or not row.flags.c_contiguous:
            with np.errstate(over="ignore"):
                row = np.ascontiguousarray(row, dtype=self.library.dtype)
        return self.library.predict_row(row)  # type: ignore[no-any-return]

    def apply(self, X: Any) -> npt.NDArray[np.int32]:
        """Leaf per row and tree (local node ids), from the compiled code."""
        return self.library.apply(as_rows(self.schema, X, self.library.dtype))  # type: ignore[no-any-return]

    def save(self, path: str | Path) -> Path:
        atomic_write_bytes(path, self._data)
        self.path = Path(path)
        return self.path


class OnnxPredictor(Predictor):
    """An ONNX model run by onnxruntime (one intra-op thread unless told otherwise)."""

    target = "onnx"

    def __init__(self, data: bytes, schema: Schema, fp: str, input_dtype: str, threads: int = 1) -> None:
        super().__init__(schema, fp)
        self.data = data
        self.dtype = np.dtype(input_dtype)
        self.threads = threads
        self._session: Any = None

    @property
    def session(self) -> Any:
        if self._session is None:
            import onnxruntime as ort

            check_runtime(ort.__version__, self.model)
            so = ort.SessionOptions()
            so.intra_op_num_threads = self.threads
            so.inter_op_num_threads = 1
            self._session = ort.InferenceSession(self.data, so, providers=["CPUExecutionProvider"])
        return self._session

    @property
    def model(self) -> Any:
        import onnx

        return onnx.load_from_string(self.data)

    def run(self, X: Any) -> dict[str, npt.NDArray[Any]]:
        """Both graph outputs, ``margin`` and ``output``, as onnxruntime returns them."""
        rows = as_rows(self.schema, X, self.dtype)
        margin, output = self.session.run(["margin", "output"], {"X": rows})
        return {"margin": margin, "output": output}

    def _margins(self, X: Any) -> npt.NDArray[np.float64]:
        rows = as_rows(self.schema, X, self.dtype)
        (margin,) = self.session.run(["margin"], {"X": rows})
        return np.asarray(margin, dtype=np.float64).reshape(-1, self.schema.n_outputs)

    def save(self, path: str | Path) -> Path:
        atomic_write_bytes(path, self.data)
        self.path = Path(path)
        return self.path


def check_runtime(version: str, model: Any) -> None:
    """Refuse to run an ml-5 TreeEnsemble on onnxruntime < 1.21 (older versions return NOT_IMPLEMENTED)."""
    ml = next((o.version for o in model.opset_import if o.domain == "ai.onnx.ml"), 0)
    parts = [int(p) for p in version.split(".")[:2] if p.isdigit()]
    if ml >= 5 and len(parts) == 2 and tuple(parts) < (1, 21):
        raise CompileError(f"onnxruntime {version} cannot run ai.onnx.ml opset 5 TreeEnsemble (needs >= 1.21)",
                           "upgrade onnxruntime, or compile with opset=3 and exact=False (float32 outputs)")


def _forest(model: Any) -> Forest:
    if isinstance(model, Forest):
        return model
    from lumber.compiler.frontends import load

    return load(model)


def compile(model: Any, target: str = "c", *, path: str | Path | None = None, threads: int = 1,
            prefix: str = "lumber", unroll: bool | None = False, block: int = 64, march_native: bool = False,
            openmp: bool | None = None, cc: str | None = None, opset: int = 5, input_dtype: str | None = None,
            base_score: str = "exact", exact: bool = True, name: str = "model", optimize: str | None = None,
            max_depth: int | str = "auto", sample: Any = None) -> Predictor:
    """Compile ``model`` (anything :func:`lumber.load` accepts) for ``target``.

    Parameters
    ----------
    target : ``"c"`` (shared library via the system compiler), ``"c-source"`` (C file only),
        ``"onnx"`` (``ai.onnx.ml`` TreeEnsemble, run with onnxruntime) or ``"numpy"`` (reference).
    path : where to write the artifact. For ``"c"`` an existing library at ``path``
        built from the same model (same fingerprint) is reused instead of rebuilt.
    threads : default thread count for batch prediction.
    prefix, unroll, block, march_native, openmp, cc : C backend options.
    opset, input_dtype, base_score, exact : ONNX backend options.
    optimize : ``"speed"`` (target ``"c"``): build the forest and the oblivious-table forms, time both
        on ``sample`` (default: rows spread over the model's splits), keep the faster; both are
        reported in ``predictor.report``. Target ``"table"`` writes oblivious decision tables
        (:mod:`lumber.compiler.api.oblivious`); ``max_depth`` caps their re-composition. Tables
        sum in float64: ``exact=False`` accepts that for models summed in float32 (XGBoost).
    """
    if target not in TARGETS:
        raise CompileError(f"unknown target {target!r}", f"targets: {', '.join(TARGETS)}")
    if target == "table" or optimize is not None or isinstance(model, ObliviousEnsemble):
        from .oblivious import compile_oblivious_forms

        return compile_oblivious_forms(
            model, target, optimize=optimize, path=path, threads=threads, prefix=prefix, march_native=march_native,
            openmp=openmp, cc=cc, name=name, max_depth=max_depth, sample=sample, exact=exact,
            forest_c=lambda forest: compile(forest, "c", threads=threads, prefix=prefix, unroll=unroll, block=block,
                                            march_native=march_native, openmp=openmp, cc=cc, name=name))
    forest = _forest(model)
    pred: Predictor
    if target == "numpy":
        pred = NumpyPredictor(forest)
    elif target in ("c", "c-source"):
        from lumber.backends.c import COptions, emit_source

        if target == "c" and path is not None:
            fresh = _fresh_library(path, fingerprint(forest), prefix, threads)
            if fresh is not None:
                return fresh
        art = emit_source(forest, COptions(name=name, prefix=prefix, unroll=unroll, block=block))
        if target == "c-source":
            pred = CSourcePredictor(forest, art)
        else:
            pred = _build_c(art, path, threads=threads, prefix=prefix, march_native=march_native, openmp=openmp,
                            cc=cc)
            if path is not None:
                pred.path = Path(path)
            return pred
    else:
        from lumber.backends.onnx import OnnxOptions, emit_onnx

        art = emit_onnx(forest, OnnxOptions(name=name, opset=opset, input_dtype=input_dtype,
                                            base_score=base_score, exact=exact))
        pred = OnnxPredictor(art.files[art.main], forest.schema, art.fingerprint, str(art.metadata["input_dtype"]),
                             threads=threads)
    if path is not None:
        pred.save(path)
    return pred


def _fresh_library(path: str | Path, fp: str, prefix: str, threads: int) -> CPredictor | None:
    """The library already at ``path`` if it was built from this very model (same fingerprint)."""
    from lumber.backends.c import CLibrary

    if not Path(path).is_file():
        return None
    try:
        lib = CLibrary(path, prefix=prefix)
    except ModelFormatError:
        return None
    if lib.fingerprint != fp:
        return None
    pred = CPredictor(lib, Path(path).read_bytes(), threads=threads)
    pred.path = Path(path)
    return pred


def _build_c(art: Artifact, path: str | Path | None, *, threads: int, prefix: str, march_native: bool,
             openmp: bool | None, cc: str | None) -> CPredictor:
    from lumber.backends.c import BuildOptions, CLibrary, build_shared

    opts = BuildOptions(cc=cc, march_native=march_native, openmp=openmp)
    with tempfile.TemporaryDirectory(prefix="lumber-build-") as tmp:
        so = Path(tmp, "model.so")
        build_shared(art.text(), so, opts)
        data = so.read_bytes()
        lib = CLibrary(so, prefix=prefix)
    if path is not None:
        atomic_write_bytes(path, data)
    return CPredictor(lib, data, threads=threads, source=art)


def load_compiled(path: str | Path, model: Any = None, *, prefix: str = "lumber", threads: int = 1) -> Predictor:
    """A predictor for a saved artifact (``.so``, ``.onnx`` or ``.table``).

    With ``model``, the artifact's recorded fingerprint must match the model's,
    else a ``CompileError`` says the artifact is stale.
    """
    p = Path(path)
    try:
        head = p.read_bytes()[:4]
    except FileNotFoundError:
        raise ModelFormatError(f"{p}: no such file") from None
    except OSError as exc:
        raise ModelFormatError(f"{p}: cannot read ({exc.strerror})") from None
    pred: Predictor
    if head == b"LUMB":  # an oblivious table file (lumber.backends.table)
        from .oblivious import load_table

        pred = load_table(p, threads=threads)
    elif head == b"\x7fELF" or head[:2] == b"MZ" or head in (b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe"):
        from lumber.backends.c import CLibrary

        lib = CLibrary(p, prefix=prefix)
        pred = CPredictor(lib, p.read_bytes(), threads=threads)
    else:
        pred = _load_onnx(p, threads)
    pred.path = p
    if model is not None:
        expected = fingerprint(_forest(model))
        if expected != pred.fingerprint:
            raise CompileError(
                f"{p}: stale artifact: built from model {pred.fingerprint[:12]}, the given model is {expected[:12]}",
                "recompile it (lumber compile MODEL --emit ... -o PATH)")
    return pred


def _load_onnx(p: Path, threads: int) -> OnnxPredictor:
    import json

    import onnx

    data = p.read_bytes()
    try:
        m = onnx.load_from_string(data)
    except Exception as exc:  # protobuf decode errors have no common base class
        raise ModelFormatError(f"{p}: neither a shared library nor an ONNX model ({type(exc).__name__})") from None
    props = {q.key: q.value for q in m.metadata_props}
    if "lumber.fingerprint" not in props:
        raise ModelFormatError(f"{p}: an ONNX model not produced by lumber (no lumber.fingerprint metadata)")
    schema = Schema.from_dict(json.loads(props["lumber.schema"]))
    return OnnxPredictor(data, schema, props["lumber.fingerprint"], props["lumber.input_dtype"], threads=threads)


__all__ = ["CPredictor", "CSourcePredictor", "NumpyPredictor", "OnnxPredictor", "Predictor", "TARGETS", "as_rows",
           "compile", "load_compiled"]
