"""The pass manager: check a pipeline's IR types, then run it with instruments.

``check`` walks the chain before anything runs, so a pipeline that feeds a
Forest to a pass that takes a Polynomial fails at once with the fix in the
message. ``run`` times each pass into ``ctx.timings`` and calls every
instrument before and after each pass (verify, dump; xDSL's pipeline callback).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from lumber.ir import CompileError, LumberError, atomic_write_text
from lumber.ir.atomic import prepare_output_dir
from lumber.ir.serialize import save_ir

from .base import Analysis, Pass, PassContext, PassData, PassTiming, article, describe_ir
from .registry import get_all_passes


def _converters(have: type, need: type) -> list[str]:
    """Registered transforms that turn ``have`` into ``need`` (for the error's suggestion)."""
    out = []
    for name, load in get_all_passes().items():
        try:
            cls = load()
        except ImportError:
            continue
        if getattr(cls, "takes", None) and issubclass(have, cls.takes) and issubclass(cls.gives, need) \
                and cls.takes is not cls.gives:
            out.append(name)
    return out


def check_pipeline(passes: Sequence[Pass], ir_type: type) -> type:
    """Raise CompileError if some pass receives an IR type it does not take; return the final type."""
    current = ir_type
    for i, p in enumerate(passes):
        takes = type(p).takes
        if not issubclass(current, takes):
            fix = _converters(current, takes)
            hint = (f"add {' or '.join(repr(f) for f in fix)} before it" if fix else
                    f"no registered pass turns {article(current.__name__)} into {article(takes.__name__)}")
            raise CompileError(
                f"pass '{p.name}' (position {i + 1}) takes {article(takes.__name__)} "
                f"but receives {article(current.__name__)}; {hint}")
        current = type(p).gives
    return current


@dataclass
class VerifyInstrument:
    """Validate the IR after every pass: a broken invariant names the pass that broke it."""

    def before_pass(self, p: Pass, ir: Any, ctx: PassContext) -> None:
        return None

    def after_pass(self, p: Pass, ir_in: Any, ir_out: Any, ctx: PassContext) -> None:
        if ir_out is ir_in or not hasattr(ir_out, "validate"):
            return
        try:
            ir_out.validate()
        except LumberError as exc:
            raise CompileError(f"pass '{p.name}' produced an invalid {type(ir_out).__name__}: "
                               f"{exc.diagnostics[0].message}", "this is a bug in lumber; please report it") from exc


@dataclass
class DumpInstrument:
    """Write the IR after every pass to ``directory/NN-<pass>.lumber`` (and a text summary)."""

    directory: Path

    def before_pass(self, p: Pass, ir: Any, ctx: PassContext) -> None:
        return None

    def after_pass(self, p: Pass, ir_in: Any, ir_out: Any, ctx: PassContext) -> None:
        prepare_output_dir(self.directory)
        stem = self.directory / f"{len(ctx.timings) - 1:02d}-{p.name}"
        try:
            save_ir(ir_out, stem.with_suffix(".lumber"))
        except TypeError:
            pass  # not a serializable IR kind
        atomic_write_text(stem.with_suffix(".txt"), f"{p.pipeline_text()}\n{describe_ir(ir_out)}\n")


def run_passes(passes: Sequence[Pass], ir: Any, ctx: PassContext) -> Any:
    """Check the chain, then run it; every pass is timed into ``ctx.timings``."""
    check_pipeline(passes, type(ir))
    if ctx.source is None:
        ctx.source = ir
    for p in passes:
        for inst in ctx.instruments:
            inst.before_pass(p, ir, ctx)
        start = time.perf_counter()
        out = p.apply(ir, ctx)
        elapsed = time.perf_counter() - start
        ctx.timings.append(PassTiming(p.pipeline_text(), elapsed, describe_ir(ir), describe_ir(out)))
        for inst in ctx.instruments:
            inst.after_pass(p, ir, out, ctx)
        ir = out
    return ir


def run_analysis(analysis: Analysis[Any, Any], ir: Any, data: PassData | None = None, *,
                 source: Any = None) -> Any:
    """One analysis on ``ir`` with ``data`` (and ``source``, the IR ``equivalence`` compares with), outside a
    pipeline: its result (what the public API's explainers return; in a pipeline the result goes to
    ``ctx.results``). The IR type is checked first."""
    check_pipeline([analysis], type(ir))
    return PassContext(data=data, source=source).analysis(analysis, ir)


def format_timings(ctx: PassContext) -> str:
    """The ``--time-passes`` table followed by the passes' reports."""
    rows = [(t.pass_text, f"{t.seconds:.3f}", f"{t.ir_in} -> {t.ir_out}") for t in ctx.timings]
    total = sum(t.seconds for t in ctx.timings)
    w0 = max([len("pass")] + [len(r[0]) for r in rows] + [len("total")])
    w1 = max([len("seconds")] + [len(r[1]) for r in rows])
    lines = ["===== pass timing =====", f"{'pass':<{w0}}  {'seconds':>{w1}}  ir"]
    lines += [f"{a:<{w0}}  {b:>{w1}}  {c}" for a, b, c in rows]
    lines.append(f"{'total':<{w0}}  {total:>{w1}.3f}")
    if ctx.reports:
        lines.append("===== pass reports =====")
        lines += [r.render() for r in ctx.reports]
    return "\n".join(lines)


__all__ = ["DumpInstrument", "VerifyInstrument", "check_pipeline", "format_timings", "run_analysis", "run_passes"]
