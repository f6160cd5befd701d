"""Load a lumber-built shared library with ctypes and call it from numpy.

ctypes releases the GIL during a call, so a library built without OpenMP is
run on row chunks from a Python thread pool. A library is verified before it is
loaded (:mod:`.manifest`), and each load maps a private copy of the verified
bytes: the dynamic loader caches libraries by path, a rebuilt file at the same
path must not resolve to the old code, and a file changed after the check must
not be what runs. Forest libraries also export
``predict_rows``: float64 rows for a float32 model (rounded block by block in C)
and the model's refused values checked in the same pass, so a batch needs no
serial conversion or check in front of the threads.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.ir import CompileError, InputDataError, ModelFormatError, Schema

from .emit import ABI_VERSION
from .manifest import verify_library

_POOL: ThreadPoolExecutor | None = None
CHUNK_ALIGN = 1024
"""Row chunks handed to Python threads are multiples of this (whole C blocks)."""


def worker_pool() -> ThreadPoolExecutor:
    """The process's threads for row chunks (C calls, and input conversion in lumber.runtime.predictors)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="lumber-c")
    return _POOL


class LibraryLoadError(ModelFormatError):
    """The dynamic loader refused a verified library (a missing system library, another C runtime)."""


def _open_private(library: bytes, label: str) -> ctypes.CDLL:
    """dlopen a private copy of ``library`` (bytes already verified: the file on disk is never mapped)."""
    fd, private = tempfile.mkstemp(prefix="lumber-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(library)
        return ctypes.CDLL(private, mode=getattr(ctypes, "RTLD_LOCAL", 0))
    except OSError as exc:
        raise LibraryLoadError(f"{label}: cannot load as a shared library ({exc})") from None
    finally:
        os.unlink(private)


class _MethodDef(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("meth", ctypes.c_void_p), ("flags", ctypes.c_int),
                ("doc", ctypes.c_char_p)]


class _PyBuffer(ctypes.Structure):  # CPython's Py_buffer (stable ABI since 3.11)
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_METH_FASTCALL = 0x0080
_PY_API = ("PyObject_GetBuffer", "PyBuffer_Release", "PyLong_FromLong", "PyLong_AsLong", "PyEval_SaveThread",
           "PyEval_RestoreThread", "PyErr_Clear")


def _python_door(lib: ctypes.CDLL, prefix: str) -> Any:
    """The library's ``py_one`` as a builtin function (None when it has none, or this Python's buffer
    layout differs from the one it was written for). The method definition lives as long as the builtin."""
    init = getattr(lib, f"{prefix}_py_init", None)
    one = getattr(lib, f"{prefix}_py_one", None)
    if init is None or one is None or sys.implementation.name != "cpython" or sys.version_info < (3, 11):
        return None
    api = (ctypes.c_void_p * len(_PY_API))(*(ctypes.cast(getattr(ctypes.pythonapi, n), ctypes.c_void_p).value
                                             for n in _PY_API))
    init.argtypes, init.restype = [ctypes.c_void_p], ctypes.c_int32
    if init(api) != ctypes.sizeof(_PyBuffer):
        return None
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.argtypes, new.restype = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p], ctypes.py_object
    definition = _MethodDef(f"{prefix}_py_one".encode(), ctypes.cast(one, ctypes.c_void_p).value, _METH_FASTCALL,
                            None)
    door = new(ctypes.byref(definition), definition, None)  # self: the definition, kept alive by the builtin
    return door


def read_library(path: str | Path) -> bytes:
    """A library file's bytes, or a ModelFormatError naming what is missing."""
    p = Path(path)
    if not p.is_file():
        raise ModelFormatError(f"{p}: no such compiled model")
    try:
        return p.read_bytes()
    except OSError as exc:
        raise ModelFormatError(f"{p}: cannot read ({exc.strerror})") from None


class CLibrary:
    """A compiled forest: raw margins, single rows and leaf ids through its C entry points.

    The library is verified before it is loaded (:func:`.manifest.verify_library`: lumber's
    manifest, digest and headers), then a private copy of the verified bytes is loaded, so
    what runs is what was checked. ``data``: the file's bytes when the caller has them
    (a pickled predictor); ``path`` then only names it in messages.

    Every entry point keeps its state on the caller's stack or in memory it allocates per
    call: several threads may call one library at once.
    """

    def __init__(self, path: str | Path, prefix: str = "lumber", *, data: bytes | None = None) -> None:
        self.path = Path(path)
        self.prefix = prefix
        self.data = read_library(self.path) if data is None else data
        """The signed file: library, sources and manifest."""
        self.manifest = verify_library(self.data, str(self.path))
        recorded = self.manifest.model(prefix)
        self._lib = _open_private(self.manifest.library, str(self.path))
        try:
            fn = {name: getattr(self._lib, f"{prefix}_{name}") for name in (
                "predict_raw", "predict_transformed", "predict_row", "apply", "n_features", "n_outputs", "n_trees",
                "input_is_float32", "has_openmp", "abi_version", "fingerprint", "metadata")}
        except AttributeError:
            raise ModelFormatError(f"{self.path}: not a lumber-compiled model with symbol prefix '{prefix}'",
                                   "pass the prefix it was compiled with") from None
        for name in ("n_features", "n_outputs", "n_trees", "input_is_float32", "has_openmp", "abi_version"):
            fn[name].restype = ctypes.c_int32
            fn[name].argtypes = []
        for name in ("fingerprint", "metadata"):
            fn[name].restype = ctypes.c_char_p
            fn[name].argtypes = []
        abi = fn["abi_version"]()
        if abi != ABI_VERSION:
            raise ModelFormatError(f"{self.path}: compiled for lumber C ABI {abi}, this lumber reads ABI {ABI_VERSION}",
                                   "recompile the model with this lumber version")
        self.n_features = int(fn["n_features"]())
        self.n_outputs = int(fn["n_outputs"]())
        self.n_trees = int(fn["n_trees"]())
        self.dtype = np.dtype(np.float32 if fn["input_is_float32"]() else np.float64)
        self.has_openmp = bool(fn["has_openmp"]())
        self.fingerprint = fn["fingerprint"]().decode()
        self.metadata: dict[str, Any] = json.loads(fn["metadata"]().decode())
        self.schema = Schema.from_dict(self.metadata["schema"])
        if recorded is not None and recorded.get("fingerprint") != self.fingerprint:
            raise ModelFormatError(f"{self.path}: the library's fingerprint differs from its manifest's")
        ptr = ctypes.c_void_p
        for name in ("predict_raw", "predict_transformed"):
            fn[name].argtypes = [ptr, ctypes.c_int64, ptr, ctypes.c_int32]
            fn[name].restype = ctypes.c_int32
        fn["predict_row"].argtypes = [ptr, ptr]
        fn["predict_row"].restype = None
        # Single rows: numpy's ctypes bridge (X.ctypes.data) costs about a microsecond per array, more
        # than the rest of the call. The row goes in as the bytes of x.tobytes() (ctypes passes a
        # bytes object's own buffer, 8-byte aligned in CPython), the margins come back in a ctypes
        # array that numpy wraps without copying.
        self._row_out = ctypes.c_double * self.n_outputs
        self._row_shape = (self.n_features,)
        self._row_call = ctypes.CFUNCTYPE(None, ctypes.c_char_p, self._row_out)(
            ctypes.cast(fn["predict_row"], ctypes.c_void_p).value)
        probe = bytes(8 * self.n_features)
        self._row_bytes_ok = (ctypes.cast(probe, ctypes.c_void_p).value or 1) % 8 == 0
        fn["apply"].argtypes = [ptr, ctypes.c_int64, ptr]
        fn["apply"].restype = ctypes.c_int32
        try:  # forest libraries; oblivious-table libraries (same ABI) may not have it
            rows = getattr(self._lib, f"{prefix}_predict_rows")
            rows.argtypes = [ptr, ctypes.c_int32, ctypes.c_int64, ptr, ctypes.c_int32, ctypes.c_int32]
            rows.restype = ctypes.c_int32
            fn["predict_rows"] = rows
        except AttributeError:
            pass
        self.reads_rows = "predict_rows" in fn
        """Whether :meth:`predict_rows` takes float64 rows for any model and checks refused values in C."""
        self._one_call: Any = None
        if self._row_bytes_ok and hasattr(self._lib, f"{prefix}_predict_one"):  # forest libraries
            self._one_call = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_char_p, self._row_out, ctypes.c_int32)(
                ctypes.cast(getattr(self._lib, f"{prefix}_predict_one"), ctypes.c_void_p).value)
        self.reads_one = self._one_call is not None
        self.py_one = _python_door(self._lib, prefix) if self.reads_one else None
        """``py_one(X, out, options) -> int``: a CPython builtin calling ``predict_one`` on a (1, n_features)
        float64/float32 array X into a float64 array ``out`` of n_outputs values, without ctypes' per-call
        conversions; returns 0, 2 (a refused value), or -1 (not such arrays: nothing computed). None when
        the library has no such door."""
        """Whether :meth:`predict_one` (one row, refused values checked in C) is available."""
        self._fn = fn

    def _check(self, X: npt.NDArray[Any]) -> None:
        if X.dtype != self.dtype or X.ndim != 2 or X.shape[1] != self.n_features or not X.flags.c_contiguous:
            raise ValueError(f"expected a C-contiguous {self.dtype} array with {self.n_features} columns")

    def _run(self, call: Any, X: npt.NDArray[Any], threads: int, parallel: str) -> npt.NDArray[np.float64]:
        """``call(rows, n, out, threads)`` over X: OpenMP threads in C, or row chunks on Python threads."""
        n = X.shape[0]
        out = np.empty((n, self.n_outputs), dtype=np.float64)
        threads = max(1, int(threads))
        if threads == 1 or n <= CHUNK_ALIGN or (parallel == "auto" and self.has_openmp) or parallel == "openmp":
            status = call(X.ctypes.data, n, out.ctypes.data, threads)
        else:
            step = -(-n // threads)
            step = -(-step // CHUNK_ALIGN) * CHUNK_ALIGN
            rb, ob = X.itemsize * self.n_features, 8 * self.n_outputs
            jobs = [worker_pool().submit(call, X.ctypes.data + s * rb, min(step, n - s), out.ctypes.data + s * ob, 1)
                    for s in range(0, n, step)]
            status = 0
            for j in jobs:
                status |= j.result()
        if status & 1:
            raise MemoryError(f"{self.path}: the compiled model could not allocate its working memory")
        if status & 2:
            raise InputDataError("the data holds a value the model refuses (NaN, or an infinity after rounding to "
                                 f"{self.dtype})")
        return out

    def predict_raw(self, X: npt.NDArray[Any], threads: int = 1, parallel: str = "auto") -> npt.NDArray[np.float64]:
        """Margins ``(n, n_outputs)`` of prepared rows; ``parallel`` is auto, openmp or python."""
        self._check_parallel(parallel, threads)
        self._check(X)
        return self._run(self._fn["predict_raw"], X, threads, parallel)

    def predict_transformed(self, X: npt.NDArray[Any], threads: int = 1,
                            parallel: str = "auto") -> npt.NDArray[np.float64]:
        """Margins after the post-transform, computed in C."""
        self._check_parallel(parallel, threads)
        self._check(X)
        return self._run(self._fn["predict_transformed"], X, threads, parallel)

    def predict_rows(self, X: npt.NDArray[Any], threads: int = 1, parallel: str = "auto", *,
                     transformed: bool = False, check: bool = False) -> npt.NDArray[np.float64]:
        """Margins of C-contiguous float64 rows, or rows of the library's dtype (only when ``reads_rows``).

        A float32 library rounds float64 rows as ``astype(np.float32)`` does, block by block; with
        ``check``, a value the model refuses (its schema's allow_nan / allow_inf) raises InputDataError.
        """
        if not self.reads_rows:
            raise CompileError(f"{self.path}: this library has no predict_rows entry point", "use predict_raw")
        self._check_parallel(parallel, threads)
        dbl = X.dtype == np.float64
        if not (dbl or X.dtype == self.dtype) or X.ndim != 2 or X.shape[1] != self.n_features \
                or not X.flags.c_contiguous:
            raise ValueError(f"expected a C-contiguous float64 or {self.dtype} array with {self.n_features} columns")
        f, opts = self._fn["predict_rows"], (1 if transformed else 0) | (2 if check else 0)
        return self._run(lambda r, n, o, k: f(r, int(dbl), n, o, k, opts), X, threads, parallel)

    def _check_parallel(self, parallel: str, threads: int) -> None:
        if parallel == "openmp" and not self.has_openmp and threads > 1:
            raise CompileError(f"{self.path}: built without OpenMP", "use parallel='python' or rebuild with OpenMP")

    def predict_row(self, x: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        """Margins ``(n_outputs,)`` of one row: a ``(n_features,)`` array of the library's dtype."""
        if type(x) is not np.ndarray or x.dtype != self.dtype or x.shape != self._row_shape:
            raise ValueError(f"expected a {self.dtype} vector of {self.n_features} values")
        if self._row_bytes_ok:
            out = self._row_out()
            self._row_call(x.tobytes(), out)
            return np.frombuffer(out)
        row = np.ascontiguousarray(x)
        res = np.empty(self.n_outputs, dtype=np.float64)
        self._fn["predict_row"](row.ctypes.data, res.ctypes.data)
        return res

    def predict_one(self, x: npt.NDArray[Any], *, check: bool = False) -> npt.NDArray[np.float64]:
        """Margins ``(n_outputs,)`` of one row of the library's dtype, as :meth:`predict_row` (only when
        ``reads_one``); with ``check``, a value the model refuses raises InputDataError (checked in C)."""
        if type(x) is not np.ndarray or x.dtype != self.dtype or x.shape != self._row_shape:
            raise ValueError(f"expected a {self.dtype} vector of {self.n_features} values")
        out = self._row_out()
        if self._one_call(x.tobytes(), out, 2 if check else 0):
            raise InputDataError("the row holds a value the model refuses (NaN, or an infinity after rounding to "
                                 f"{self.dtype})")
        return np.frombuffer(out)

    def apply(self, X: npt.NDArray[Any]) -> npt.NDArray[np.int32]:
        """Leaf per row and tree, as local node ids (as ``Forest.apply``)."""
        self._check(X)
        out = np.empty((X.shape[0], self.n_trees), dtype=np.int32)
        if self._fn["apply"](X.ctypes.data, X.shape[0], out.ctypes.data):
            raise MemoryError(f"{self.path}: the compiled model could not allocate its working memory")
        return out

    @property
    def raw_function(self) -> Any:
        """The ctypes function ``predict_row(const T *row, double *out)`` (for latency measurements)."""
        return self._fn["predict_row"]
