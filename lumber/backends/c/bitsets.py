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
from .build import BuildOptions, build_shared

ABI = 2
Bits = npt.NDArray[np.uint64]
IntArray = npt.NDArray[np.int64]


class BitsetCounts:
    """The kernel's two entry points (see ``bitsets.c``)."""

    def __init__(self, march_native: bool = True, cc: str | None = None) -> None:
        self._lib = _library(march_native, cc)

    def and_counts(self, bits: Bits, keys: IntArray, start: IntArray, hit: Bits) -> tuple[IntArray, IntArray]:
        """For group g, the AND of the bitsets ``bits[keys[start[g]:start[g + 1]]]`` (every row,
        ``bits[-1]``, when the group is empty): ``W[g]`` its set bits, ``H[g]`` those also in ``hit``."""
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

    def route_counts(self, routes: npt.NDArray[np.int8], node_inner: IntArray, left: IntArray, right: IntArray,
                     roots: IntArray, inner_seg: IntArray, inner_rank: IntArray, seg_key: IntArray, n_keys: int,
                     bits: Bits, hit: Bits) -> tuple[IntArray, IntArray, npt.NDArray[np.bool_]]:
        """Per (query, tree): the rows of the query's cell, its ``hit`` rows, and whether it reaches a
        leaf, from the route code of every internal node (``routes``: ``(q, V)``; 1 left, 2 right,
        3 both, 0 neither). ``node_inner``/``left``/``right`` per global node (-1 / children),
        ``roots`` per tree, ``inner_seg``/``inner_rank`` per internal node, ``seg_key`` per segment;
        left bitsets are ``bits[0:K]``, right ones ``bits[K:2K]``, every row ``bits[2K]``."""
        c = np.ascontiguousarray
        routes = c(routes, dtype=np.int8)
        arrs = [c(a, dtype=np.int64) for a in (node_inner, left, right, roots, inner_seg, inner_rank, seg_key)]
        node_inner, left, right, roots, inner_seg, inner_rank, seg_key = arrs
        bits = c(bits, dtype=np.uint64)
        hit = c(hit, dtype=np.uint64)
        q, V = routes.shape
        n_nodes, T, S = node_inner.shape[0], roots.shape[0], seg_key.shape[0]
        if (bits.ndim != 2 or bits.shape[0] != 2 * n_keys + 1 or hit.shape != (bits.shape[1],)
                or left.shape != (n_nodes,) or right.shape != (n_nodes,) or inner_seg.shape != (V,)
                or inner_rank.shape != (V,)):
            raise ValueError("route counts: array shapes disagree")
        inner = node_inner >= 0
        if (bool((node_inner >= V).any()) or (T and (int(roots.min()) < 0 or int(roots.max()) >= n_nodes))
                or bool(((left < 0) | (left >= n_nodes) | (right < 0) | (right >= n_nodes))[inner].any())
                or (V and (int(inner_seg.min()) < 0 or int(inner_seg.max()) >= S))
                or (S and (int((seg_key[inner_seg] + inner_rank).max()) >= n_keys or int(inner_rank.min()) < 0))):
            raise ValueError("route counts: an index is out of range")
        W = np.empty((q, T), dtype=np.int64)
        H = np.empty((q, T), dtype=np.int64)
        alive = np.empty((q, T), dtype=np.uint8)
        p = ctypes.c_void_p
        rc = self._lib.lb_route_counts(p(routes.ctypes.data), q, V, n_nodes, p(node_inner.ctypes.data),
                                       p(left.ctypes.data), p(right.ctypes.data), p(roots.ctypes.data), T,
                                       p(inner_seg.ctypes.data), p(inner_rank.ctypes.data), p(seg_key.ctypes.data),
                                       S, n_keys, p(bits.ctypes.data), bits.shape[1], p(hit.ctypes.data),
                                       p(W.ctypes.data), p(H.ctypes.data), p(alive.ctypes.data))
        if rc != 0:
            raise MemoryError("route counts: out of memory")
        return W, H, alive.astype(bool)


@lru_cache(maxsize=4)
def _library(march_native: bool, cc: str | None) -> ctypes.CDLL:
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
    lib.lb_route_counts.restype = ctypes.c_int32
    lib.lb_route_counts.argtypes = [p, i64, i64, i64, p, p, p, p, i64, p, p, p, i64, i64, p, i64, p, p, p, p]
    if lib.lb_abi() != ABI:
        raise CompileError("bitset kernel ABI mismatch (stale build)")
    return lib


__all__ = ["BitsetCounts"]
