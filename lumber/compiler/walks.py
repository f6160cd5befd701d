"""The C library's walk, chosen on the user's rows: ``lumber.compile(model, "c", sample=rows)``.

Two walks route every row exactly as the source model does: the branch-free binned walk
(``walk="binned"``; ``"values"`` where thresholds do not bin), whose time per row does not depend
on the data, and the code walk (``walk="code"``), if/else code per tree that is faster where the
rows' paths are predictable, as real data's often are, and slower where they are not. Which wins
depends on the rows, so both libraries are built and timed on the sample (thread CPU time, the
best of interleaved repetitions, one thread); the faster is kept. Both must give the same margins
on the sample, bit for bit, or the choice is an error (never a silent pick).

``predictor.report["walk"]`` says which walk was kept, what it was timed on and each walk's time.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from lumber.backends.base import Artifact
from lumber.backends.c import CEmitOptions, emit_source
from lumber.backends.c.layout import bin_tables, layout
from lumber.ir import CompileError, Forest
from lumber.ir.interp import prepare_input

from lumber.runtime.predictors import CPredictor

SAMPLE_MIN_ROWS = 4096
"""A shorter sample is tiled to this many rows (a walk's per-call costs would otherwise dominate)."""
SAMPLE_MAX_ROWS = 65536
"""At most this many sample rows are timed."""
REPEATS = 5
"""Interleaved timings per walk; the best of them counts."""


def sample_matrix(forest: Forest, sample: Any) -> tuple[npt.NDArray[np.float64], str]:
    """The sample as model input rows (validated as predict validates them), tiled or cut to size,
    and a description of what the walks are timed on."""
    X = prepare_input(forest.schema, sample)
    n = X.shape[0]
    if n == 0:
        raise CompileError("sample has no rows", "pass rows of the data the model will predict on")
    if n < SAMPLE_MIN_ROWS:
        return np.resize(X, (SAMPLE_MIN_ROWS, X.shape[1])), f"{n} sample rows, tiled to {SAMPLE_MIN_ROWS}"
    if n > SAMPLE_MAX_ROWS:
        return np.ascontiguousarray(X[:SAMPLE_MAX_ROWS]), f"the first {SAMPLE_MAX_ROWS} of {n} sample rows"
    return X, f"{n} sample rows"


def _thread_seconds(pred: CPredictor, X: npt.NDArray[np.float64]) -> float:
    t0 = time.thread_time()
    pred.predict_raw(X, threads=1)
    return time.thread_time() - t0


def compile_timed_walk(forest: Forest, options: CEmitOptions, sample: Any, build: Callable[[Artifact], CPredictor], *,
                       path: str | Path | None = None, fingerprint: str | None = None) -> CPredictor:
    """The C library of ``forest`` with the walk that is fastest on ``sample`` (see the module docstring).

    ``options``: the ``c`` target's options (their ``walk`` is ignored: every applicable walk is tried);
    ``build``: emitted C -> a loaded predictor (the target's compiler call).
    """
    X, timed_on = sample_matrix(forest, sample)
    walks = ["binned", "code"] if bin_tables(forest, layout(forest)) is not None else ["values"]
    preds = {w: build(emit_source(forest, replace(options, walk=w), fp=fingerprint)) for w in walks}
    ref = preds[walks[0]].predict_raw(X, threads=1)
    for w in walks[1:]:
        if not np.array_equal(preds[w].predict_raw(X, threads=1), ref):
            raise CompileError(f"the {w} walk and the {walks[0]} walk disagree on the sample (a lumber bug)",
                               f"compile with walk={walks[0]!r} and report the model")
    times: dict[str, list[float]] = {w: [] for w in walks}
    for _ in range(REPEATS if len(walks) > 1 else 0):
        for w in walks:
            times[w].append(_thread_seconds(preds[w], X))
    chosen = min(walks, key=lambda w: min(times[w])) if len(walks) > 1 else walks[0]
    pred = preds[chosen]
    per = max(1, X.shape[0] * max(1, forest.n_trees))
    pred.report["walk"] = {
        "chosen": pred.library.metadata.get("walk", chosen),
        "timed_on": timed_on,
        "ns_per_row_tree": {w: min(ts) / per * 1e9 for w, ts in times.items() if ts},
        "how": f"thread CPU time of one-thread predict_raw, best of {REPEATS} interleaved runs" if times[walks[0]]
               else "the only walk that applies",
    }
    if path is not None:
        pred.save(path)
    return pred


__all__ = ["compile_timed_walk", "sample_matrix"]
