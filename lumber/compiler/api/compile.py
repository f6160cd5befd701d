"""``lumber.compile``, ``lumber.compile_fastest``, ``lumber.compile_within``: a model in, a predictor backed by
a compiled artifact out.

The drivers only resolve: the target by name from :mod:`lumber.compiler.targets`, the model as IR, and
the options, which are the target's own dataclass (``lumber.COptions``, ``lumber.OnnxOptions``, ...; another
target's options are a CompileError, never dropped). The target emits, builds and wraps the artifact in a
predictor (:mod:`lumber.runtime.predictors`). :func:`compile_fastest` times the exact forms of a forest
(:mod:`lumber.compiler.speed`); :func:`compile_within` adds lossy forms under a loss tolerance
(:mod:`lumber.compiler.tolerance`). Artifacts record the fingerprint of the model they were built from;
:func:`load_compiled` refuses one that does not match.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from lumber.backends.base import fingerprint
from lumber.ir import CompileError, Forest, ModelLike, ObliviousEnsemble
from lumber.ir.cascade import Cascade
from lumber.passes.transforms.oblivious_fit import FitOptions

from .. import speed
from .. import tolerance as lossy
from lumber.runtime.predictors import Predictor
from ..targets import get_target, known_targets, load_artifact
from ..targets.base import model_ir, project
from ..targets.c import FastestOptions
from ..targets.cascade import build_cascade

TARGETS = known_targets()


def compile(model: ModelLike, target: str = "c", *, path: str | Path | None = None, threads: int = 1,
            sample: Any = None, options: Any = None) -> Predictor:
    """Compile ``model`` (anything :func:`lumber.load` accepts, or an IR object) for ``target``.

    Every IR compiles (:mod:`lumber.passes.deploy`): a Polynomial (pruned or not, object or
    ``.lumber`` file) as its exact oblivious tables, an ObliviousEnsemble for ``onnx``/``numpy``/
    ``c-source`` as its exact Forest, and for ``c`` as the ``table-c`` library. A Cascade (the ``cascade``
    pass) compiles for ``c`` only, tables and forest in one library.

    Parameters
    ----------
    target : ``"c"`` (shared library via the system compiler), ``"c-source"`` (C file only),
        ``"onnx"`` (``ai.onnx.ml`` TreeEnsemble, run with onnxruntime), ``"numpy"`` (reference),
        ``"table"`` (oblivious decision tables) or ``"table-c"`` (those tables as a C library);
        see :func:`lumber.compiler.targets.known_targets`.
    path : where to write the artifact. For ``"c"`` an existing library at ``path``
        built from the same model (same fingerprint) is reused instead of rebuilt.
    threads : default thread count for batch prediction.
    sample : rows the target times a measured choice on: the ``c`` library's walk with ``COptions(walk="auto")``
        (the faster of the binned and code walks on them; ``predictor.report["walk"]``). ``compile_fastest``
        times its forms on them.
    options : the target's options dataclass: ``lumber.COptions`` (``c``), ``lumber.CSourceOptions``
        (``c-source``), ``lumber.OnnxOptions`` (``onnx``), ``lumber.NumpyOptions`` (``numpy``),
        ``lumber.TableOptions`` (``table``), ``lumber.TableCOptions`` (``table-c``); None: its defaults.
        Any other object is a CompileError naming the class to pass.
    """
    tgt = get_target(target)
    opts = tgt.options(options)
    if isinstance(model, Cascade):
        if tgt.name != "c":
            raise CompileError(f"a Cascade compiles to target 'c' (one library: tables, then the forest), not "
                               f"{target!r}", "lumber.compile(cascade, 'c')")
        return build_cascade(model, opts, path=path, threads=threads)
    src = model_ir(model)
    ir = tgt.lower(src)
    impl = tgt.for_ir(ir)
    if impl is not tgt:  # an ObliviousEnsemble for "c" is built by "table-c": the options carry over, or say why not
        opts = project(opts, impl.Options)
    # a lowered form records the fingerprint of the IR it stands for, so load_compiled(path, model) checks
    fp = None if ir is src else fingerprint(src)
    timed = {"sample": sample} if sample is not None and impl.name == "c" else {}  # the walk is timed on them
    return impl.compile(ir, opts, path=path, threads=threads, fingerprint=fp, **timed)


def compile_fastest(model: ModelLike, *, sample: Any = None, path: str | Path | None = None, threads: int = 1,
                    options: FastestOptions | None = None) -> Predictor:
    """The faster of ``model``'s exact C libraries: the forest (binned and value walks) and its oblivious tables,
    timed on ``sample``, rows like those the model will see (required: which form wins depends on the rows).
    Both forms compute the source model's predictions exactly; ``predictor.report`` holds every form's time,
    the choice and ``timed_on`` (the rows timed: how many, from where, tiled to how many, the clock).

    ``options``: a ``lumber.FastestOptions`` (the ``c`` library's fields plus the tables'
    ``max_depth``, ``strategy``, ``exact``, ``time_passes``).
    """
    return speed.compile_fastest(_forest(model, "compile_fastest"), _fastest_options(options), path=path,
                                 threads=threads, sample=sample)


def compile_within(model: ModelLike, tolerance: float, data: Mapping[str, Any], *, metric: str = "auto",
                   agreement: float = 1.0, fit: FitOptions | None = None, path: str | Path | None = None,
                   threads: int = 1, options: FastestOptions | None = None) -> Predictor:
    """The fastest form of ``model`` whose validation loss is at most ``tolerance``: the exact forms of
    :func:`compile_fastest`, and lossy ones (a formula-5 oblivious fit on ``data["train"]`` behind the exact
    forest for rows near the decision; :mod:`lumber.compiler.tolerance`).

    Parameters
    ----------
    tolerance : the largest loss accepted on ``data["valid"]`` (rows the fit never reads): AUC drop for binary
        classifiers (``metric="accuracy"``: accuracy drop), relative RMSE rise for regressors.
    data : ``{"train": (X, y), "valid": (Xv, yv)}``.
    agreement : binary classifiers: the share of validation rows whose decision must stay the source's
        (default 1: every one); 0.999 lets the few disagreements farthest from the decision stay on the fast path.
    fit : a :class:`~lumber.passes.transforms.oblivious_fit.FitOptions` for the lossy fit (default: its
        defaults).
    options : a ``lumber.FastestOptions`` for the libraries built.
    """
    if fit is not None and not isinstance(fit, FitOptions):
        raise CompileError(f"fit must be a FitOptions, not {type(fit).__name__}",
                           f"pass fit=FitOptions(...) (fields: {', '.join(FitOptions.__dataclass_fields__)})")
    return lossy.compile_within(_forest(model, "compile_within"), _fastest_options(options), tolerance=tolerance,
                                data=data, path=path, threads=threads, metric=metric, fit=fit, agreement=agreement)


def _forest(model: ModelLike, entry: str) -> Forest:
    ir = model_ir(model)
    if isinstance(ir, ObliviousEnsemble):
        raise CompileError(f"{entry} compares the forest and oblivious forms of a forest model",
                           "pass the model (or its Forest), not an ObliviousEnsemble; lumber.compile(m, 'c') builds "
                           "oblivious tables as they are")
    return ir


def _fastest_options(options: Any) -> FastestOptions:
    if options is None:
        return FastestOptions()
    if type(options) is not FastestOptions:
        raise CompileError(f"compile_fastest and compile_within take lumber.FastestOptions, not "
                           f"{type(options).__name__}", "its fields: the c library's and the tables' "
                           "(max_depth, strategy, exact, time_passes)")
    return options


def load_compiled(path: str | Path, model: ModelLike | None = None, *, prefix: str = "lumber",
                  threads: int = 1) -> Predictor:
    """A predictor for a saved artifact: a shared library (``.so``), ``.onnx``, ``.table``, ``.lumber`` or ``.c``.

    The kind is read from the file's first bytes, so a renamed file still loads.

    Parameters
    ----------
    path : str or Path
        The artifact ``lumber.compile(..., path=...)`` or ``lumber compile -o`` wrote.
    model : model, model file or IR, optional
        With a model, the artifact's recorded fingerprint must match the model's, else a
        ``CompileError`` says the artifact is stale.
    prefix : str
        The symbol prefix of the model inside a shared library (``COptions.prefix``).
    threads : int
        Threads inside this process for each ``predict_*`` call.

    Returns
    -------
    Predictor
        ``predict_raw`` (margins), ``predict_proba`` and ``predict``, columns of a DataFrame bound by name.
        It pickles (joblib, Dask, Spark): the pickle carries the artifact's bytes and fingerprint and the
        receiving process opens it once, however many copies it receives.

    Raises
    ------
    ModelFormatError
        The file is missing, not an artifact lumber wrote, truncated or edited. A shared library is verified
        before it is loaded: lumber's manifest at its end, its sha256 digest and its ELF headers are checked
        in Python, so a library lumber did not build is never loaded (its code never runs). A library built
        for another machine is rebuilt from the C source it carries when a C compiler is present, else the
        error says so.
    """
    return load_artifact(path, model, prefix=prefix, threads=threads)


__all__ = ["TARGETS", "compile", "compile_fastest", "compile_within", "load_compiled"]
