"""``lumber.compile``: a model in, a predictor backed by a compiled artifact out.

The driver only resolves: the target by name from :mod:`lumber.compiler.targets`,
the model as IR, the keyword options as the target's options dataclass; the
target emits, builds and wraps the artifact in a predictor
(:mod:`lumber.compiler.predictors`). ``optimize="speed"`` hands the forest to
:mod:`lumber.compiler.speed`. Artifacts record the fingerprint of the model
they were built from; :func:`load_compiled` refuses one that does not match.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lumber.backends.base import fingerprint
from lumber.ir import CompileError, ModelLike, ObliviousEnsemble

from ..predictors import Predictor
from ..speed import compile_fastest
from ..targets import get_target, known_targets, load_artifact
from ..targets.base import model_ir

TARGETS = known_targets()
OPTIMIZE_GOALS = ("speed",)


def compile(model: ModelLike, target: str = "c", *, path: str | Path | None = None, threads: int = 1,
            prefix: str = "lumber", unroll: bool | None = False, block: int | None = None, march_native: bool = False,
            openmp: bool | None = None, cc: str | None = None, opset: int = 5, input_dtype: str | None = None,
            base_score: str = "exact", exact: bool = True, name: str = "model", optimize: str | None = None,
            max_depth: int | str = "auto", strategy: str = "pack", time_passes: bool = False,
            sample: Any = None, walk: str = "auto", tolerance: float | None = None, data: Any = None,
            metric: str = "auto", fit: Any = None, agreement: float = 1.0) -> Predictor:
    """Compile ``model`` (anything :func:`lumber.load` accepts, or an IR object) for ``target``.

    Every IR compiles (:mod:`lumber.compiler.deploy`): a Polynomial (pruned or not, object or
    ``.lumber`` file) as its exact oblivious tables, an ObliviousEnsemble for ``onnx``/``numpy``/
    ``c-source`` as its exact Forest.

    Parameters
    ----------
    target : ``"c"`` (shared library via the system compiler), ``"c-source"`` (C file only),
        ``"onnx"`` (``ai.onnx.ml`` TreeEnsemble, run with onnxruntime), ``"numpy"`` (reference),
        ``"table"`` (oblivious decision tables) or ``"table-c"`` (those tables as a C library);
        see :func:`lumber.compiler.targets.known_targets`.
    path : where to write the artifact. For ``"c"`` an existing library at ``path``
        built from the same model (same fingerprint) is reused instead of rebuilt.
    threads : default thread count for batch prediction.
    prefix, unroll, block, march_native, openmp, cc, walk : C backend options (``walk``: ``"binned"`` codes each
        row's values as threshold ranks before walking, ``"values"`` compares the values, ``"code"`` walks
        the codes through if/else code, ``"auto"`` binned where every feature has at most 65534 thresholds,
        or with ``sample`` the faster of binned and code on those rows, see ``predictor.report["walk"]``).
    opset, input_dtype, base_score, exact : ONNX backend options.
    max_depth, strategy, time_passes : how ``table``/``table-c`` re-compose a forest into oblivious trees
        (``time_passes`` prints the re-composition passes' timings). Tables sum in float64:
        ``exact=False`` accepts that for models summed in float32 (XGBoost).
    optimize : ``"speed"`` (target ``"c"``): build the forest (binned and value walks) and the oblivious-table
        forms, time them
        on ``sample`` (default: rows spread over the model's splits), keep the faster; both are
        reported in ``predictor.report``.
    tolerance, data, metric : with ``optimize="speed"``, also try lossy forms (a formula-5 oblivious fit on
        ``data["train"]`` behind the exact forest for rows near the decision) and keep the fastest form whose
        loss on ``data["valid"]`` (rows the fit never read) is at most ``tolerance``: AUC drop for binary
        classifiers (``metric="accuracy"``: accuracy drop), relative RMSE rise for regressors
        (:mod:`lumber.compiler.tolerance`). Without ``tolerance`` nothing lossy ever happens.
        ``fit``: a :class:`~lumber.passes.transforms.oblivious_fit.FitOptions` (or a dict of its fields).
        ``agreement`` (binary classifiers): the share of validation rows whose decision must stay the source's
        (default 1: every one); 0.999 lets the few disagreements farthest from the decision stay on the fast path.
    """
    tgt = get_target(target)
    options = {"prefix": prefix, "unroll": unroll, "block": block, "march_native": march_native, "openmp": openmp,
               "cc": cc, "opset": opset, "input_dtype": input_dtype, "base_score": base_score, "exact": exact,
               "name": name, "max_depth": max_depth, "strategy": strategy, "time_passes": time_passes, "walk": walk}
    if tolerance is not None and optimize is None:
        raise CompileError("tolerance applies to optimize='speed' (the fastest form within the tolerance)",
                           "pass optimize='speed' as well")
    if (data is not None or fit is not None or agreement != 1.0) and tolerance is None:
        raise CompileError("data, fit and agreement are read only with a tolerance: without one nothing is fitted",
                           "pass tolerance=... (e.g. 0.0005) or drop data")
    if optimize is not None:
        if optimize not in OPTIMIZE_GOALS:
            raise CompileError(f"unknown optimize goal {optimize!r}", f"accepted: {', '.join(map(repr, OPTIMIZE_GOALS))}")
        if tgt.name != "c":
            raise CompileError(f"optimize='speed' applies to target 'c', not {target!r}",
                               "use target 'c' (a shared library) or 'table'")
        ir = model_ir(model)
        if isinstance(ir, ObliviousEnsemble):
            raise CompileError("optimize='speed' compares the forest and oblivious forms of a forest model",
                               "pass the model (or its Forest), not an ObliviousEnsemble")
        if tolerance is not None:
            from ..tolerance import compile_within

            return compile_within(ir, options, tolerance=tolerance, data=data, path=path, threads=threads,
                                  metric=metric, fit=fit, agreement=agreement)
        return compile_fastest(ir, options, path=path, threads=threads, sample=sample)
    src = model_ir(model)
    ir = tgt.lower(src)
    tgt = tgt.for_ir(ir)
    # a lowered form records the fingerprint of the IR it stands for, so load_compiled(path, model) checks
    fp = None if ir is src else fingerprint(src)
    timed = {"sample": sample} if sample is not None and tgt.name == "c" else {}  # the walk is timed on it
    return tgt.compile(ir, tgt.options(options), path=path, threads=threads, fingerprint=fp, **timed)


def load_compiled(path: str | Path, model: ModelLike | None = None, *, prefix: str = "lumber", threads: int = 1) -> Predictor:
    """A predictor for a saved artifact (``.so``, ``.onnx``, ``.table``, ...; see ``load_artifact``).

    With ``model``, the artifact's recorded fingerprint must match the model's,
    else a ``CompileError`` says the artifact is stale.
    """
    return load_artifact(path, model, prefix=prefix, threads=threads)


__all__ = ["OPTIMIZE_GOALS", "TARGETS", "compile", "load_compiled"]
