"""Popcounts of AND-ed row bitsets in C (``bitsets.c``), built once per process.

The rule estimators (``lumber.passes.analyses.rules.cells``) count the training rows of
each query's cell in every tree: the AND of a few row bitsets, then two popcounts. numpy
gathers every bitset into a temporary, reduces and counts in separate passes; this
kernel streams them through an L1-sized accumulator with the CPU's popcount. The counts
are integers, so they equal numpy's exactly.
"""

from __future__ import annotations

import atexit
import ctypes
import shutil
import tempfile
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
import numpy.typing as npt

from lumber.ir import CompileError

ABI = 1
Bits = npt.NDArray[np.uint64]
IntArray = npt.NDArray[np.int64]


class BitsetCounts:
    """``counts(bits, keys, start, hit) -> (W, H)``: for group g, the AND of the bitsets
    ``bits[keys[start[g]:start[g + 1]]]`` (every row, ``bits[-1]``, when the group is empty);
    ``W[g]`` its set bits, ``H[g]`` those also set in ``hit``."""

    def __init__(self, march_native: bool = True, cc: str | None = None) -> None:
        self._lib = _library(march_native, cc)

    def __call__(self, bits: Bits, keys: IntArray, start: IntArray, hit: Bits) -> tuple[IntArray, IntArray]:
        bits = np.ascontiguousarray(bits, dtype=np.uint64)
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        start = np.ascontiguousarray(start, dtype=np.int64)
        hit = np.ascontiguousarray(hit, dtype=np.uint64)
        if bits.ndim != 2 or bits.shape[0] < 1 or hit.shape != (bits.shape[1],) or start.ndim != 1 or start.size < 1:
            raise ValueError("bitset counts: bits must be (keys, words), hit (words,), start (groups + 1,)")
        if keys.size and (int(keys.min()) < 0 or int(keys.max()) >= bits.shape[0]):
            raise ValueError("bitset counts: a key is out of range")
        if int(start[0]) != 0 or int(start[-1]) != keys.size or (start.size > 1 and bool((np.diff(start) < 0).any())):
            raise ValueError("bitset counts: start must rise from 0 to len(keys)")
        g = start.size - 1
        W = np.empty(g, dtype=np.int64)
        H = np.empty(g, dtype=np.int64)
        ptr = ctypes.c_void_p
        self._lib.lb_and_counts(ptr(bits.ctypes.data), bits.shape[1], ptr(keys.ctypes.data), ptr(start.ctypes.data), g,
                                bits.shape[0] - 1, ptr(hit.ctypes.data), ptr(W.ctypes.data), ptr(H.ctypes.data))
        return W, H


@lru_cache(maxsize=4)
def _library(march_native: bool, cc: str | None) -> ctypes.CDLL:
    from .build import BuildOptions, build_shared

    source = resources.files("lumber.backends.c").joinpath("bitsets.c").read_text(encoding="utf-8")
    tmp = tempfile.mkdtemp(prefix="lumber-bitsets-")
    atexit.register(shutil.rmtree, tmp, True)
    so = Path(tmp, "bitsets.so")
    try:
        build_shared(source, so, BuildOptions(cc=cc, march_native=march_native, openmp=False))
    except CompileError:
        if not march_native:
            raise
        build_shared(source, so, BuildOptions(cc=cc, openmp=False))  # a compiler without -march=native
    lib = ctypes.CDLL(str(so))
    lib.lb_abi.restype = ctypes.c_int32
    lib.lb_and_counts.restype = ctypes.c_int32
    i64, p = ctypes.c_int64, ctypes.c_void_p
    lib.lb_and_counts.argtypes = [p, i64, p, p, i64, i64, p, p, p]
    if lib.lb_abi() != ABI:
        raise CompileError("bitset kernel ABI mismatch (stale build)")
    return lib


__all__ = ["BitsetCounts"]
