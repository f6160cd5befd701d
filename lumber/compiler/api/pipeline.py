"""The driver: run a pass pipeline over a model and return the final IR.

```python
poly = lumber.run(model, "polynomial,prune{alpha=auto,tol=0.0005}",
                  data={"train": (X_train, y_train), "valid": (X_valid, y_valid)})
```

The model may be an IR object (Forest, Polynomial, ...), anything
:func:`lumber.load` accepts, or a path. The pipeline is text (see
:mod:`lumber.passes.pipeline_text`) or a list of Pass objects. The whole chain
is type-checked before the first pass runs. ``lumber compile --passes`` calls
:func:`run` with ``time_passes`` from ``--time-passes``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, Any, Mapping, Sequence

from lumber.ir import Forest, ModelLike, Polynomial, load_ir
from lumber.passes.base import Instrument, Pass, PassContext, PassData
from lumber.passes.manager import DumpInstrument, VerifyInstrument, format_timings, run_passes
from lumber.passes.pipeline_text import build_passes
from lumber.compiler.frontends import load


def as_ir(ir_or_model: ModelLike) -> Any:
    """An IR object as is; a ``.lumber`` file as the IR it holds; anything else through ``lumber.load``."""
    if isinstance(ir_or_model, (Forest, Polynomial)) or type(ir_or_model).__module__.startswith("lumber.ir"):
        return ir_or_model
    if isinstance(ir_or_model, (str, Path)):
        p = Path(ir_or_model)
        try:
            with p.open("rb") as fh:
                head = fh.read(4)
        except OSError:
            head = b""
        if head == b"PK\x03\x04":
            return load_ir(p)
    return load(ir_or_model)


def run(ir_or_model: ModelLike, pipeline_text: str | Sequence[Pass | str],
        data: PassData | Mapping[str, Any] | None = None, *,
        time_passes: bool = False, verify: bool = True, dump: str | Path | None = None,
        instruments: Sequence[Instrument] = (), context: PassContext | None = None,
        stream: IO[str] | None = None) -> Any:
    """Run ``pipeline_text`` over a model; returns the final IR.

    data : PassData, or a mapping ``{"train": (X, y), "valid": (X, y)}`` (or ``X_train=...`` keys)
        Rows for passes that need them (``prune``, ``attribution``, ``cascade``); the explainer passes
        (``counterfactual``, ``sensitive-tests``, ``contributions``) also read ``cases``, ``constraints``
        (a ``lumber.Constraints``) and ``target``.
    time_passes : print the per-pass timing table and the passes' reports to ``stream`` (stderr).
    verify : validate the IR after every pass (a broken invariant names the pass).
    dump : write the IR after every pass into this directory (``NN-<pass>.lumber``).
    context : a PassContext to collect reports, timings and analysis results (``ctx.results``).
    """
    passes = build_passes(pipeline_text)
    ir = as_ir(ir_or_model)
    ctx = context if context is not None else PassContext()
    if data is not None:
        ctx.data = PassData.coerce(data)
    saved = list(ctx.instruments)
    extra: list[Instrument] = []
    if verify:
        extra.append(VerifyInstrument())
    if dump is not None:
        extra.append(DumpInstrument(Path(dump)))
    ctx.instruments = saved + extra + list(instruments)
    try:
        out = run_passes(passes, ir, ctx)
    finally:
        ctx.instruments = saved
    if time_passes:
        print(format_timings(ctx), file=stream if stream is not None else sys.stderr)
    return out


__all__ = ["as_ir", "run"]
