"""A :class:`~lumber.ir.cascade.Cascade` as a C shared library: ``lumber.compile(cascade, "c")``.

The ``cascade`` pass and ``lumber.compile_within`` produce cascades; this builds one
(:func:`lumber.backends.cascade.build_cascade_library`) and wraps it in the ``c`` target's predictor. The
library records the source forest's fingerprint, so ``lumber.load_compiled(path, model)`` accepts the model
the cascade was made from.
"""

from __future__ import annotations

import time
from pathlib import Path

from lumber.backends.base import fingerprint
from lumber.backends.cascade import build_cascade_library
from lumber.ir import CompileError, atomic_write_bytes
from lumber.ir.cascade import Cascade
from lumber.passes.transforms.quantize import quantize_ensemble
from lumber.runtime.predictors import CPredictor

from .c import COptions


def build_cascade(cascade: Cascade, options: COptions | None = None, *, fp: str | None = None,
                  path: str | Path | None = None, threads: int = 1) -> CPredictor:
    """Link the cascade's tables (quantized here when they are not), its forest (when it has a band) and the
    wrapper into one library; write it to ``path`` when given."""
    opts = options or COptions()
    if not isinstance(opts, COptions):
        raise CompileError(f"a cascade compiles to a C library and takes lumber.COptions, not {type(opts).__name__}")
    if not cascade.tables.quantized:
        cascade = Cascade(cascade.forest, quantize_ensemble(cascade.tables), cascade.band, cascade.quality)
    t0 = time.perf_counter()
    lib, data = build_cascade_library(cascade, fp=fp or fingerprint(cascade.forest), prefix=opts.prefix,
                                      build=opts.build())
    pred = CPredictor(lib, data, threads=threads)
    pred.report = {"cascade": {"build_seconds": time.perf_counter() - t0}}
    if path is not None:
        atomic_write_bytes(path, data)
        pred.path = Path(path)
    return pred


__all__ = ["build_cascade"]
