"""Predictors: margins from a compiled artifact, probabilities and decisions from the schema.

Every predictor answers ``predict_raw`` from its artifact (C library, ONNX
session, oblivious tables, or the reference evaluator) and derives
``predict_proba``/``predict`` from those margins through the schema, exactly as
``Forest`` does; so equal margins mean equal answers. A predictor is made by a
target (:mod:`lumber.compiler.targets`) and knows nothing about how.

Every predictor pickles (joblib, Dask, Spark and ``multiprocessing`` send it to
their workers): it carries its artifact's bytes (a signed shared library, an
ONNX model, the IR) and fingerprint, never a handle, and :func:`reopen` opens
the artifact in the receiving process once per process, cached by target,
fingerprint and digest; copies share what was opened. A shared library that
cannot load there (another CPU or operating system) is rebuilt from the C source
it carries when a C compiler is present, else the unpickling says why not.
"""

from __future__ import annotations

import copy
import hashlib
import tempfile
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from lumber.backends.base import Artifact, fingerprint
from lumber.backends.c.build import BuildOptions, build_shared, find_compiler
from lumber.backends.c.loader import CLibrary, LibraryLoadError
from lumber.backends.c.manifest import ForeignLibraryError, verify_library
from lumber.ir import CompileError, Cutoff, Forest, InputDataError, ModelFormatError, ObliviousEnsemble, Schema, \
    atomic_write_bytes
from lumber.ir.binding import bind
from lumber.ir.decision import with_cutoff
from lumber.ir.interp import prepare_input
from lumber.ir.serialize import from_bytes, to_bytes


def _values_accepted(schema: Schema, rows: npt.NDArray[Any]) -> bool:
    """No NaN where the model refuses NaN, no infinity where it refuses infinities.

    Two reductions (max and min: NaN propagates through both) instead of elementwise isnan/isinf
    arrays: this check runs on every batch, before the compiled model's own pass over the rows.
    """
    if (schema.allow_nan and schema.allow_inf) or rows.size == 0:
        return True
    hi, lo = rows.max(), rows.min()
    if np.isnan(hi) or np.isnan(lo):
        return schema.allow_nan and (schema.allow_inf or not bool(np.isinf(rows).any()))
    return schema.allow_inf or bool(np.isfinite(hi) and np.isfinite(lo))


PARALLEL_CONVERT_ROWS = 16384
"""Batches at least this long are converted to the model's dtype on several threads (when asked)."""


def _convert(X: npt.NDArray[Any], dtype: np.dtype[Any], threads: int) -> npt.NDArray[Any]:
    """``np.ascontiguousarray(X, dtype)``, on ``threads`` row chunks at once for long batches (numpy's
    copy releases the GIL), so a multi-threaded predict has no single-threaded conversion in front."""
    if threads <= 1 or X.shape[0] < PARALLEL_CONVERT_ROWS or (X.dtype == dtype and X.flags.c_contiguous):
        with np.errstate(over="ignore"):
            return np.ascontiguousarray(X, dtype=dtype)
    from lumber.backends.c.loader import worker_pool

    rows = np.empty(X.shape, dtype=dtype)
    step = -(-X.shape[0] // threads)

    def part(lo: int) -> None:
        with np.errstate(over="ignore"):
            np.copyto(rows[lo:lo + step], X[lo:lo + step], casting="same_kind")

    list(worker_pool().map(part, range(0, X.shape[0], step)))
    return rows


def mapping_rows(X: Mapping[Any, Any]) -> Any:
    """A dict as a DataFrame: ``{feature: value}`` is one row, ``{feature: values}`` a column each."""
    import pandas as pd

    scalar = all(np.ndim(v) == 0 for v in X.values())
    try:
        return pd.DataFrame([dict(X)]) if scalar else pd.DataFrame(dict(X))
    except ValueError as exc:  # columns of different lengths
        raise InputDataError(f"data is not a rectangular table: {exc}",
                             "pass {feature: value} for one row, or {feature: values} of equal lengths") from None


class RowBinder:
    """One row of named data (a one-row DataFrame, a Series, a ``{feature: value}`` dict) as a float64
    vector in the model's feature order, without the batch conversion's per-call setup.

    Column order is bound once per distinct column tuple (``binding.bind``) and remembered; names that
    bind with a warning, labels to map to category codes, or values that are not plain numbers are left
    to ``prepare_input`` (:meth:`row` returns None), so errors and warnings stay the batch path's.
    """

    MAX_BINDINGS = 64
    """Column tuples remembered; beyond that, the least recently bound is forgotten."""

    def __init__(self, schema: Schema) -> None:
        self.names = schema.feature_names
        self.n_features = len(self.names)
        self.plain = all(f.categories is None for f in schema.features)
        self._bound: dict[tuple[Any, ...], npt.NDArray[np.intp] | None] = {}

    def _order(self, columns: tuple[Any, ...]) -> npt.NDArray[np.intp] | None | bool:
        """Positions of the model's features in ``columns`` (None: in order), or False to take the batch path."""
        order = self._bound.get(columns, False)
        if order is not False:
            return order
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                idx = bind(self.names, list(columns))
            except InputDataError:
                return False
        if caught:
            return False
        order = None if idx == list(range(len(columns))) else np.asarray(idx, dtype=np.intp)
        if len(self._bound) >= self.MAX_BINDINGS:
            self._bound.pop(next(iter(self._bound)))
        self._bound[columns] = order
        return order

    def row(self, X: Any) -> npt.NDArray[Any] | None:
        """The row as a 1-D float array in feature order, or None when ``X`` needs the general conversion."""
        if not self.plain:
            return None
        if isinstance(X, dict):
            columns = tuple(X)
            try:
                values = np.array(list(X.values()), dtype=np.float64)
            except (TypeError, ValueError):
                return None
            if values.ndim != 1 or values.shape[0] != len(columns):
                return None
        elif hasattr(X, "columns") and hasattr(X, "iloc") and getattr(X, "shape", (0,))[0] == 1:  # DataFrame
            values = X.to_numpy()
            if values.dtype.kind not in "fiub":
                return None
            values = values[0]
            columns = tuple(X.columns)
        elif hasattr(X, "index") and hasattr(X, "to_frame") and getattr(X, "ndim", 0) == 1:  # Series
            values = X.to_numpy()
            if values.dtype.kind not in "fiub":
                return None
            columns = tuple(X.index)
        else:
            return None
        order = self._order(columns)
        if order is False:
            return None
        if order is not None:
            values = values[order]
        return values if values.dtype.kind == "f" else values.astype(np.float64)


def as_rows(schema: Schema, X: Any, dtype: np.dtype[Any], threads: int = 1) -> npt.NDArray[Any]:
    """User data as a C-contiguous array of ``dtype`` holding the model's input values.

    Plain float arrays skip the general conversion; rounding float64 to float32
    here is the same rounding ``prepare_input`` does. A dict is one row
    (``{feature: value}``) or columns (``{feature: values}``), bound by name as a DataFrame.
    """
    if isinstance(X, Mapping):
        X = mapping_rows(X)
    if isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype.kind == "f" and X.shape[1] == schema.n_features:
        if schema.input_dtype == "float32" and dtype == np.float64:
            with np.errstate(over="ignore"):
                rows = np.ascontiguousarray(X.astype(np.float32), dtype=np.float64)
        else:
            rows = _convert(X, dtype, threads)
        if not _values_accepted(schema, rows):
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
        self.report: dict[str, Any] = {}
        """How the artifact was made (``tables`` statistics; ``lumber.compile_fastest``'s measured forms)."""
        self._last_cutoff: tuple[Schema, type, float | Cutoff, Schema] | None = None

    def _margins(self, X: Any) -> npt.NDArray[np.float64]:  # (n, n_outputs)
        raise NotImplementedError

    def predict_raw(self, X: Any) -> npt.NDArray[np.float64]:
        """Raw margins: ``(n,)`` for one output, else ``(n, n_outputs)`` (as ``Forest.evaluate``)."""
        m = self._margins(X)
        return m[:, 0] if self.schema.n_outputs == 1 else m

    def predict_proba(self, X: Any) -> npt.NDArray[np.float64]:
        return self.schema.proba(self.predict_raw(X))

    def predict(self, X: Any, threshold: float | Cutoff | None = None) -> npt.NDArray[Any]:
        """What the source model's ``predict`` returns; ``threshold`` (binary classifiers): class 1 iff
        P(class 1) is above it (a :class:`~lumber.ir.Cutoff` may compare the raw margin instead)."""
        if threshold is None:
            return self.schema.decide(self.predict_raw(X))
        return self._cutoff_schema(threshold).decide(self.predict_raw(X))

    def _cutoff_schema(self, threshold: float | Cutoff) -> Schema:
        """``with_cutoff(self.schema, threshold)``, kept for the last float or Cutoff threshold asked for."""
        last = self._last_cutoff
        if last is not None and last[0] is self.schema and type(threshold) is last[1] and threshold == last[2]:
            return last[3]
        schema = with_cutoff(self.schema, threshold)
        if type(threshold) is float or type(threshold) is Cutoff:
            self._last_cutoff = (self.schema, type(threshold), threshold, schema)
        return schema

    def save(self, path: str | Path) -> Path:
        """Write the artifact atomically; returns the path written."""
        raise NotImplementedError

    def _payload(self) -> tuple[str, tuple[Any, ...]]:
        """(digest of the artifact, the arguments its opener in ``OPENERS`` takes): what a pickle carries."""
        raise NotImplementedError

    def __dask_tokenize__(self) -> tuple[str, str, str, str, int]:
        """Dask's deterministic token: the same artifact (its digest: a forest's library and the same model's
        tables differ) with the same threads is the same predictor."""
        digest, _ = self._payload()
        return type(self).__name__, self.target, self.fingerprint, digest, int(getattr(self, "threads", 1))

    def __copy__(self) -> Predictor:
        """A copy sharing the opened artifact (pickling, not copying, goes through ``reopen``)."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        return new

    def __reduce__(self) -> tuple[Callable[..., Predictor], tuple[Any, ...]]:
        digest, payload = self._payload()
        return reopen, (self.target, self.fingerprint, digest, payload, getattr(self, "threads", 1), self.report)

    def __repr__(self) -> str:
        where = f", path='{self.path}'" if self.path else ""
        return f"<{type(self).__name__} target={self.target!r} fingerprint={self.fingerprint[:12]}{where}>"


class NumpyPredictor(Predictor):
    """The reference evaluator (no compiler needed)."""

    target = "numpy"

    def __init__(self, forest: Forest, fp: str | None = None) -> None:
        super().__init__(forest.schema, fp or fingerprint(forest))
        self.forest = forest

    def _margins(self, X: Any) -> npt.NDArray[np.float64]:
        if isinstance(X, Mapping):
            X = mapping_rows(X)
        return self.forest.evaluate(X).reshape(-1, self.schema.n_outputs)

    def save(self, path: str | Path) -> Path:
        self.forest.save(path)
        self.path = Path(path)
        return self.path

    def _payload(self) -> tuple[str, tuple[Any, ...]]:
        data = to_bytes(self.forest)
        return hashlib.sha256(data).hexdigest(), (data,)


class CSourcePredictor(NumpyPredictor):
    """C source (not built); predictions come from the reference evaluator."""

    target = "c-source"

    def __init__(self, forest: Forest, artifact: Artifact) -> None:
        super().__init__(forest, artifact.fingerprint)
        self.artifact = artifact

    @property
    def source(self) -> str:
        return self.artifact.text()

    def save(self, path: str | Path) -> Path:
        """Write ``NAME.c`` and ``NAME.h`` (the header beside the source)."""
        self.artifact.write(path)
        self.path = Path(path)
        return self.path

    def _payload(self) -> tuple[str, tuple[Any, ...]]:
        digest, (data,) = super()._payload()
        art = self.artifact
        return digest, (data, art.target, dict(art.files), art.fingerprint, dict(art.metadata))


_FLOAT64 = np.dtype(np.float64)


class CPredictor(Predictor):
    """A built shared library called through ctypes.

    One row — a ``(1, n_features)`` float array, a one-row DataFrame, a Series, or a
    ``{feature: value}`` dict — goes to the library's single-row entry point (``predict_one``:
    refused values checked in C) instead of the batch path, with the same validation, errors
    and results bit for bit; anything else takes the batch path.
    """

    target = "c"

    def __init__(self, library: Any, data: bytes, *, threads: int = 1, source: Artifact | None = None) -> None:
        super().__init__(library.schema, library.fingerprint)
        self.library = library
        self.threads = threads
        self.artifact = source
        self._data = data
        # rows that need no validation go straight to the library (see predict_row)
        self._row_direct = library.dtype if self.schema.allow_nan and self.schema.allow_inf else None
        self._check_rows = not (self.schema.allow_nan and self.schema.allow_inf)
        self._n_features = self.schema.n_features
        self._one_row = library.reads_one and library.dtype.kind == "f"
        self._binder = RowBinder(self.schema)
        # predict_raw's door for a (1, n_features) float64/float32 array: the library's CPython builtin
        # (refused values checked in C); anything it does not take goes the general way
        self._py_one: Any = library.py_one if self._one_row else None
        self._one_shape = (1, self._n_features) if self._py_one is not None else None
        self._one_options = 2 if self._check_rows else 0
        self._one_k = self.schema.n_outputs

    @property
    def source(self) -> str | None:
        """The C source of the model (from the library's manifest when the library was loaded)."""
        if self.artifact is not None:
            return self.artifact.text()
        texts = self.library.manifest.source_texts()
        return texts[0] if len(texts) == 1 else None

    def _one(self, x: npt.NDArray[Any], X: Any) -> npt.NDArray[np.float64]:
        """Margins ``(1, n_outputs)`` of float row ``x`` (``X``: the data as given, for the detailed error)."""
        lib = self.library
        if x.dtype != lib.dtype:  # float32 models round float64 values as numpy's astype does
            with np.errstate(over="ignore"):
                x = x.astype(lib.dtype)
        try:
            return lib.predict_one(x, check=self._check_rows).reshape(1, -1)  # type: ignore[no-any-return]
        except InputDataError:
            prepare_input(self.schema, mapping_rows(X) if isinstance(X, Mapping) else X)  # the detailed error
            raise

    def _margins(self, X: Any, threads: int | None = None) -> npt.NDArray[np.float64]:
        if self._one_row:
            if type(X) is np.ndarray:
                if X.ndim == 2 and X.shape[0] == 1 and X.shape[1] == self._n_features and X.dtype.kind == "f":
                    return self._one(X[0], X)
            else:
                x = self._binder.row(X)
                if x is not None:
                    return self._one(x, X)
        threads = threads or self.threads
        lib = self.library
        if (lib.reads_rows and type(X) is np.ndarray and X.ndim == 2 and X.shape[1] == self.schema.n_features
                and (X.dtype == _FLOAT64 or X.dtype == lib.dtype) and X.flags.c_contiguous):
            # the rows as they are: rounding and the refused-value check happen in C, on the threads
            try:
                return lib.predict_rows(X, threads, check=self._check_rows)  # type: ignore[no-any-return]
            except InputDataError:
                prepare_input(self.schema, X)  # raises the detailed error (column, row)
                raise
        rows = as_rows(self.schema, X, lib.dtype, threads)
        return lib.predict_raw(rows, threads)  # type: ignore[no-any-return]

    def predict_raw(self, X: Any, threads: int | None = None) -> npt.NDArray[np.float64]:
        if type(X) is np.ndarray and X.shape == self._one_shape:
            out = np.empty(self._one_k)
            if self._py_one(X, out, self._one_options) == 0:
                return out if self._one_k == 1 else out.reshape(1, -1)
            # a refused value, or not a float64/float32 array: the general path (and its detailed error)
        m = self._margins(X, threads)
        return m[:, 0] if self.schema.n_outputs == 1 else m

    def predict_row(self, x: Any) -> npt.NDArray[np.float64]:
        """Margins of one row ``(n_outputs,)`` through the single-row entry point.

        A ``(n_features,)`` array of the library's dtype (float64 for most models) is passed on as it
        is: no conversion, no copy beyond the bytes handed to C.
        """
        if type(x) is np.ndarray and x.shape == self.library._row_shape and self._row_direct is not None:
            if x.dtype is self._row_direct:
                return self.library.predict_row(x)  # type: ignore[no-any-return]
            if x.dtype is _FLOAT64:  # float32 models: the rounding as_rows does
                with np.errstate(over="ignore"):
                    return self.library.predict_row(x.astype(np.float32))  # type: ignore[no-any-return]
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

    def _payload(self) -> tuple[str, tuple[Any, ...]]:
        lib = self.library
        return lib.manifest.sha256, (lib.data, lib.prefix, str(self.path or lib.path.name))


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

    def _payload(self) -> tuple[str, tuple[Any, ...]]:
        # the session's thread count is fixed when it opens: one cached session per count
        return (f"{hashlib.sha256(self.data).hexdigest()}:{self.threads}",
                (self.data, self.schema.to_dict(), str(self.dtype), self.threads))


def check_runtime(version: str, model: Any) -> None:
    """Refuse to run an ml-5 TreeEnsemble on onnxruntime < 1.21 (older versions return NOT_IMPLEMENTED)."""
    ml = next((o.version for o in model.opset_import if o.domain == "ai.onnx.ml"), 0)
    parts = [int(p) for p in version.split(".")[:2] if p.isdigit()]
    if ml >= 5 and len(parts) == 2 and tuple(parts) < (1, 21):
        raise CompileError(f"onnxruntime {version} cannot run ai.onnx.ml opset 5 TreeEnsemble (needs >= 1.21)",
                           "upgrade onnxruntime, or compile with opset=3 and exact=False (float32 outputs)")


class TablePredictor(Predictor):
    """Oblivious decision tables: the C table runtime, or the numpy table evaluator without a compiler."""

    target = "table"

    def __init__(self, ens: ObliviousEnsemble, fp: str, *, threads: int = 1, engine: str = "auto",
                 isa: str = "auto") -> None:
        super().__init__(ens.schema, fp)
        self.ensemble = ens
        self.threads = threads
        self._runtime: Any = None
        self._numpy: Any = None
        self.engine_option = engine
        if engine not in ("auto", "c", "numpy"):
            raise CompileError(f"unknown table engine {engine!r}", "engines: auto, c, numpy")
        if engine in ("auto", "c"):
            try:
                from lumber.backends.table_c import TableRuntime

                self._runtime = TableRuntime(ens, isa=isa)
            except CompileError:
                if engine == "c" or isa != "auto":
                    raise
        if self._runtime is None:
            from lumber.backends.table import TableEvaluator

            self._numpy = TableEvaluator(ens)
        self.engine = "c" if self._runtime is not None else "numpy"
        self._one_row = self.schema.allow_nan and self.schema.allow_inf
        self._n_features = self.schema.n_features

    def _margins(self, X: Any, threads: int | None = None) -> npt.NDArray[np.float64]:
        if self._runtime is not None:
            if (self._one_row and type(X) is np.ndarray and X.ndim == 2 and X.shape[0] == 1
                    and X.shape[1] == self._n_features and X.dtype.kind == "f"):
                # one float row that needs no value check: the runtime's one-row kernel directly
                if X.dtype != self._runtime.dtype or not X.flags.c_contiguous:
                    with np.errstate(over="ignore"):  # float32 models round as as_rows does
                        X = np.ascontiguousarray(X, dtype=self._runtime.dtype)
                return self._runtime.predict_one(X)  # type: ignore[no-any-return]
            rows = as_rows(self.schema, X, self._runtime.dtype)
            return self._runtime.predict_raw(rows, threads or self.threads)  # type: ignore[no-any-return]
        return np.asarray(self._numpy.predict_raw(X)).reshape(-1, self.schema.n_outputs)

    def predict_raw(self, X: Any, threads: int | None = None) -> npt.NDArray[np.float64]:
        m = self._margins(X, threads)
        return m[:, 0] if self.schema.n_outputs == 1 else m

    def apply(self, X: Any) -> npt.NDArray[np.int64]:
        """Table row reached in every tree, ``(n, n_trees)``."""
        if self._runtime is not None:
            return self._runtime.apply(as_rows(self.schema, X, self._runtime.dtype)).astype(np.int64)
        return self._numpy.apply(X)  # type: ignore[no-any-return]

    def save(self, path: str | Path) -> Path:
        from lumber.backends.table import write_table

        self.path = write_table(self.ensemble, path, source_fingerprint=self.fingerprint)
        return self.path

    def _payload(self) -> tuple[str, tuple[Any, ...]]:
        data = to_bytes(self.ensemble)
        return hashlib.sha256(data).hexdigest(), (data, self.engine_option)


def _open_numpy(fp: str, ir: bytes) -> NumpyPredictor:
    return NumpyPredictor(from_bytes(ir, "a pickled numpy predictor"), fp)


def _open_c_source(fp: str, ir: bytes, target: str, files: dict[str, bytes], art_fp: str,
                   metadata: dict[str, Any]) -> CSourcePredictor:
    forest = from_bytes(ir, "a pickled c-source predictor")
    pred = CSourcePredictor(forest, Artifact(target=target, files=files, fingerprint=art_fp, metadata=metadata))
    pred.fingerprint = fp
    return pred


def open_library(label: str, prefix: str = "lumber", data: bytes | None = None) -> CLibrary:
    """A verified library loaded (:class:`CLibrary`); one that cannot load on this machine (another CPU,
    operating system or C runtime) is rebuilt from the C source its manifest carries, when a compiler is here."""
    try:
        return CLibrary(label, prefix, data=data)
    except (ForeignLibraryError, LibraryLoadError) as exc:
        return _rebuild(data if data is not None else Path(label).read_bytes(), prefix, label, exc)


def _open_c(fp: str, data: bytes, prefix: str, label: str) -> CPredictor:
    lib = open_library(label, prefix, data)
    if lib.fingerprint != fp:
        raise ModelFormatError(f"{label}: the library holds model {lib.fingerprint[:12]}, the pickle says {fp[:12]}")
    return CPredictor(lib, lib.data)


def _rebuild(data: bytes, prefix: str, label: str, why: ModelFormatError) -> CLibrary:
    """The library rebuilt from the C source its manifest carries (it cannot load on this machine)."""
    man = verify_library(data, label, binary=False)
    if not man.sources:
        raise ModelFormatError(f"{why}; the library carries no C source to rebuild it from",
                               "compile the model on this machine (lumber.compile)") from None
    try:
        find_compiler()
    except CompileError:
        raise ModelFormatError(f"{why}; no C compiler is present to rebuild it from the C source it carries",
                               "install gcc or clang where it runs, or pickle a target='numpy' or 'onnx' "
                               "predictor") from None
    with tempfile.TemporaryDirectory(prefix="lumber-rebuild-") as tmp:
        so = Path(tmp, "model.so")
        build_shared(man.source_texts(), so, BuildOptions(), models=man.models)
        return CLibrary(so, prefix)


def _open_onnx(fp: str, data: bytes, schema: dict[str, Any], dtype: str, threads: int) -> OnnxPredictor:
    pred = OnnxPredictor(data, Schema.from_dict(schema), fp, dtype, threads=threads)
    pred.session  # noqa: B018  opened here, once per process, not by the first copy that predicts
    return pred


def _open_table(fp: str, ir: bytes, engine: str) -> TablePredictor:
    return TablePredictor(from_bytes(ir, "a pickled table predictor"), fp, engine=engine)


OPENERS: dict[str, Callable[..., Predictor]] = {
    NumpyPredictor.target: _open_numpy, CSourcePredictor.target: _open_c_source, CPredictor.target: _open_c,
    OnnxPredictor.target: _open_onnx, TablePredictor.target: _open_table,
}
"""How each predictor kind reopens its pickled artifact: ``opener(fingerprint, *payload)``."""

_OPENED: dict[tuple[str, str, str], Predictor] = {}
_OPENING = threading.Lock()


def reopen(target: str, fp: str, digest: str, payload: tuple[Any, ...], threads: int,
           report: dict[str, Any]) -> Predictor:
    """The predictor a pickle carries: its artifact opened once per process (by target, fingerprint and
    digest), then a copy with the pickled threads and report (copies share the library or session)."""
    opener = OPENERS.get(target)
    if opener is None:
        raise ModelFormatError(f"a pickled predictor of unknown target {target!r}",
                               "unpickle it with the lumber version that pickled it")
    key = (target, fp, digest)
    with _OPENING:
        pred = _OPENED.get(key)
        if pred is None:
            pred = _OPENED[key] = opener(fp, *payload)
    out = copy.copy(pred)
    out.report = report
    if hasattr(out, "threads"):
        out.threads = threads
    return out


__all__ = ["OPENERS", "open_library", "reopen", "CPredictor", "CSourcePredictor", "NumpyPredictor", "OnnxPredictor", "Predictor",
           "RowBinder", "TablePredictor", "as_rows", "check_runtime", "mapping_rows"]
