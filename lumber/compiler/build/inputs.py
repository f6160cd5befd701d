"""Everything a build needs, loaded and checked before any work starts.

Missing files, data whose columns do not match the model, a constraint file
that does not parse, a pipeline that does not type-check, a target this
lumber cannot emit, an output folder that cannot be written: each is reported
here, all together where possible, each naming the build-file line it comes
from. Nothing is compiled or explained until this passes.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from lumber.ir import (
    Constraints, Diagnostic, Forest, LumberError, ObliviousEnsemble, Polynomial, Severity, SourceSpan, Task,
)
from lumber.ir.binding import bind_frame, label_notes, suggest
from lumber.compiler.dsl import parse_constraints
from lumber.compiler.frontends import load
from lumber.compiler.targets import get_target, known_targets
from lumber.passes.manager import check_pipeline
from lumber.passes.pipeline_text import build_passes
from lumber.runtime.data import read_frame

from .spec import BuildConfig
from .validate import BuildFileError, locate
from .cache import digest

ROLE_KEYS = {"model": ("model", "path"), "train": ("data", "train"), "validation": ("data", "validation"),
             "cases": ("data", "cases"), "constraints": ("constraints", "path")}
@dataclass
class Table:
    """One data file: the frame as read, the rows as model input, the labels if any."""

    path: Path
    frame: pd.DataFrame
    X: npt.NDArray[np.float64]
    y: npt.NDArray[Any] | None


@dataclass
class Inputs:
    """A checked build: config, model, data, constraints, pipeline and the hash of every input."""

    config: BuildConfig
    forest: Forest
    hashes: dict[str, str]
    """sha256 of every input file by role, and of the build file (``build_file``)."""
    tables: dict[str, Table] = field(default_factory=dict)
    constraints: Constraints | None = None
    constraints_text: str = ""
    passes: list[Any] = field(default_factory=list)
    final_type: type = Forest
    targets: tuple[str, ...] = ()
    output: Path = Path("build")
    cache: Path = Path(".lumber-cache")

    def table(self, role: str) -> Table | None:
        return self.tables.get(role)

    @property
    def reference(self) -> Table | None:
        """Rows the statistics come from: training rows, else validation rows."""
        return self.tables.get("train") or self.tables.get("validation")


def _settings_hash(cfg: BuildConfig) -> str:
    """A configuration made in memory (``lumber report``) has no build file text: its settings stand for it.
    Without them a report re-run into the same folder with another --norm, --time-limit or --target was
    "up to date" and kept the earlier results. The cache folder (a fresh temporary one per report) is left out."""
    from dataclasses import replace

    return digest("settings", repr(replace(cfg, output=replace(cfg.output, cache=Path()), text="")))


class _Errors:
    def __init__(self, cfg: BuildConfig) -> None:
        self.cfg = cfg
        self.diags: list[Diagnostic] = []

    def span(self, section: str, name: str | None) -> tuple[SourceSpan | None, str | None]:
        """Where ``[section] name`` is in the build file (nothing for a configuration made in memory)."""
        if not self.cfg.text:
            return None, None
        line, col, src = locate(self.cfg.text, section, name)
        return SourceSpan(str(self.cfg.path), line, col, line, col + (len(name) if name else 1)), src

    def add(self, message: str, section: str, name: str | None, *notes: str) -> None:
        span, src = self.span(section, name)
        self.diags.append(Diagnostic(Severity.ERROR, message, span, tuple(notes), source_line=src))

    def from_exc(self, exc: LumberError, section: str, name: str | None) -> None:
        """The error at the build-file key that named the input; errors located in a text file
        (a constraint file) follow unchanged, so their caret lines are shown too."""
        first, *rest = exc.diagnostics
        span, src = self.span(section, name)
        if isinstance(first.location, SourceSpan):
            n = len(exc.diagnostics)
            what = f"{n} error{'s' if n > 1 else ''} in '{Path(str(first.location.file)).name}'"
            self.diags.append(Diagnostic(Severity.ERROR, f"{what}: {first.message}", span, (), source_line=src))
            self.diags.extend(exc.diagnostics)
            return
        notes = tuple(first.notes) + tuple(d.render() for d in rest)
        where = f" ({first.location})" if first.location is not None else ""
        self.diags.append(Diagnostic(Severity.ERROR, first.message + where, span, notes, source_line=src))

    def raise_if_any(self) -> None:
        if self.diags:
            raise BuildFileError(self.diags)


def file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_writable(folder: Path, what: str, parents: bool = False) -> str | None:
    """Why ``folder`` cannot be created or replaced, or None. Probes by creating a temp dir beside it.
    ``parents``: the folders above it may be missing (a cache); else its parent must exist (lumber.ir.atomic)."""
    parent = folder.parent
    probe = parent
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        return f"{what} '{folder}': '{probe}' is a file, not a folder"
    if folder.exists() and not folder.is_dir():
        return f"{what} '{folder}' exists and is not a folder"
    if probe != parent and not parents:
        return f"{what} '{folder}': the folder '{parent}' does not exist (create it first: mkdir -p {parent})"
    if probe != parent:
        return None if os.access(probe, os.W_OK) else f"{what} '{folder}': cannot create folders in '{probe}'"
    try:
        tmp = tempfile.mkdtemp(prefix=f".{folder.name}.probe-", dir=parent)
    except OSError as exc:
        return f"{what} '{folder}': cannot write in '{parent}' ({exc.strerror})"
    shutil.rmtree(tmp, ignore_errors=True)
    return None


def prepare(cfg: BuildConfig, output: Path | None = None) -> Inputs:
    """Load and check every input of ``cfg``; raises one BuildFileError listing every problem."""
    err = _Errors(cfg)
    files = cfg.inputs()
    for role, p in files.items():
        section, name = ROLE_KEYS[role]
        if not p.exists():
            err.add(f"{role} file '{cfg.relative(p) if p.is_relative_to(cfg.base_dir) else p}' not found",
                    section, name, f"looked for {p}")
        elif not p.is_file():
            err.add(f"{role} path '{p}' is not a file", section, name)
    out = (output if output is not None else cfg.output.dir).resolve()
    for folder, what, key_ in ((out, "output folder", "dir"), (cfg.output.cache.resolve(), "cache folder", "cache")):
        why = check_writable(folder, what, parents=key_ == "cache")
        if why is not None:
            err.add(why, "output", key_ if output is None or key_ == "cache" else None,
                    "choose a folder you can write (-o OUT or [output] dir)")
    _check_settings(cfg, err)
    err.raise_if_any()
    hashes = {role: file_hash(p) for role, p in files.items()}
    hashes["build_file"] = hashlib.sha256(cfg.text.encode()).hexdigest() if cfg.text else _settings_hash(cfg)
    if not cfg.data.header:  # the same bytes read another way (set by --no-header, not by the file's text)
        hashes["data_header"] = "none"
    forest = _load_model(cfg, err)
    inp = Inputs(cfg, forest, hashes, output=out, cache=cfg.output.cache.resolve())
    for role in ("train", "validation", "cases"):
        if role in files:
            table = _read_table(cfg, role, files[role], forest, err)
            if table is not None:
                inp.tables[role] = table
    if "constraints" in files:
        _load_constraints(cfg, inp, files["constraints"], err)
    _check_pipeline(cfg, inp, err)
    _check_targets(cfg, inp, err)
    _check_regions(cfg, forest, err)
    _check_goal(cfg, inp, err)
    err.raise_if_any()
    return inp


def _check_goal(cfg: BuildConfig, inp: Inputs, err: _Errors) -> None:
    """A regressor's cases can only be explained relative to a target interval."""
    per_case = {"sensitive", "counterfactual", "rules"} & set(cfg.explain.analyses)
    cons_target = inp.constraints is not None and inp.constraints.target is not None
    if inp.forest.schema.task == Task.REGRESSION and per_case and cfg.data.cases is not None and not cons_target:
        if not isinstance(cfg.explain.target, tuple):
            err.add("a regression model's cases are explained relative to a target interval", "explain",
                    "target" if cfg.explain.target is not None else None,
                    "set [explain] target = [lo, hi] (or 'target between LO and HI' in the constraint file)")


def _check_settings(cfg: BuildConfig, err: _Errors) -> None:
    ex, data = cfg.explain, cfg.data
    if not 0.0 < cfg.compile.agreement <= 1.0:
        err.add(f"[compile] agreement must be a share of rows in (0, 1], got {cfg.compile.agreement:g}", "compile",
                "agreement", "e.g. 0.999: at least 99.9% of validation rows decide as the model")
    elif cfg.compile.agreement != 1.0 and cfg.compile.tolerance is None:
        err.add("[compile] agreement applies with [compile] tolerance (the lossy forms' decision agreement)",
                "compile", "agreement", "set [compile] tolerance or drop agreement")
    if cfg.compile.tolerance is not None:
        for name, value in (("train", data.train), ("validation", data.validation), ("label", data.label)):
            if value is None:
                err.add(f"[compile] tolerance needs [data] {name}: the lossy form is fitted on train and checked on "
                        "validation rows against their labels", "compile", "tolerance", f"set [data] {name}")
        if "c" not in cfg.compile.targets:
            err.add("[compile] tolerance applies to the c target, which [compile] targets does not list", "compile",
                    "tolerance", "add \"c\" to [compile] targets")
        if cfg.compile.passes:
            err.add("[compile] tolerance compiles from the model; it cannot follow a pass pipeline", "compile",
                    "tolerance", "drop [compile] passes or tolerance")
    for a in cfg.check.require:
        if a not in ex.analyses:
            err.add(f"[check] require names '{a}', which [explain] analyses does not run", "check", "require",
                    f"add '{a}' to [explain] analyses or remove it from require")
    if not data.header and data.label is not None:
        err.add("a label column needs a header row naming it", "data", "label",
                "with header = false (--no-header) every column is a feature, in the model's order: "
                "add a header row, or drop the label column and the label key")
    if cfg.check.require and data.cases is None:
        err.add("[check] require needs cases to explain", "check", "require", "set [data] cases = \"cases.csv\"")
    needs_rows = "rules" in ex.analyses and ("cases" in cfg.report.sections or "regional" in cfg.report.sections)
    if needs_rows and data.train is None:
        err.add("counterfactual rules need training rows", "explain", "analyses",
                "set [data] train = \"train.csv\", or drop 'rules' from [explain] analyses")
    if ex.scale != "none" and data.train is None and data.validation is None and (
            {"sensitive", "counterfactual"} & set(ex.analyses)) and data.cases is not None:
        err.add(f"scale '{ex.scale}' needs training rows for its statistics", "explain", "scale",
                "set [data] train, or scale = \"none\"")


def _load_model(cfg: BuildConfig, err: _Errors) -> Forest:
    try:
        return load(cfg.model.path)
    except LumberError as exc:
        err.from_exc(exc, "model", "path")
        err.raise_if_any()
        raise  # pragma: no cover - raise_if_any raised


def _read_table(cfg: BuildConfig, role: str, path: Path, forest: Forest, err: _Errors) -> Table | None:
    section, name = ROLE_KEYS[role]
    try:
        frame = read_frame(path, header=cfg.data.header, names=forest.schema.feature_names)
    except LumberError as exc:
        err.from_exc(exc, section, name)
        return None
    cols = [str(c) for c in frame.columns]
    label = cfg.data.label
    y = None
    ignore = [label] if label is not None else []
    if cfg.data.id is not None:
        if role == "cases" and cfg.data.id not in cols:
            near = suggest(cfg.data.id, cols)
            err.add(f"cases file '{path.name}' has no ID column '{cfg.data.id}'", "data", "id",
                    *([f"did you mean '{near}'?"] if near else []), f"columns: {', '.join(cols[:15])}")
            return None
        ignore.append(cfg.data.id)
    if label is not None and role != "cases":
        if label not in cols:
            err.add(f"{role} file '{path.name}' has no label column '{label}'", "data", "label",
                    *label_notes(label, cols, forest.schema.feature_names))
            return None
        y = frame[label].to_numpy()
    try:
        X = forest.prepare_input(bind_frame(forest.schema.feature_names, frame, source=str(path), ignore=ignore))
    except LumberError as exc:
        err.from_exc(exc, section, name)
        return None
    if role == "cases":
        n = min(len(X), cfg.data.max_cases)
        frame, X = frame.iloc[:n].reset_index(drop=True), X[:n]
    if len(X) == 0:
        err.add(f"{role} file '{path.name}' has no rows", section, name)
        return None
    return Table(path, frame, X, y)


def _load_constraints(cfg: BuildConfig, inp: Inputs, path: Path, err: _Errors) -> None:
    try:
        inp.constraints_text = path.read_text(encoding="utf-8")
        inp.constraints = parse_constraints(path, schema=inp.forest.schema)
        inp.forest = inp.forest.replace(schema=inp.constraints.named(inp.forest.schema))  # names, for people
    except UnicodeDecodeError:
        err.add(f"constraint file '{path.name}' is not UTF-8 text", "constraints", "path")
    except LumberError as exc:
        err.from_exc(exc, "constraints", "path")


def _check_pipeline(cfg: BuildConfig, inp: Inputs, err: _Errors) -> None:
    text = cfg.compile.passes.strip()
    if not text:
        return
    try:
        inp.passes = build_passes(text)
        inp.final_type = check_pipeline(inp.passes, Forest)
    except LumberError as exc:
        err.from_exc(exc, "compile", "passes")
        return
    for p in inp.passes:
        if p.name not in ("prune", "prune-refit"):
            continue
        if cfg.data.train is None:
            err.add(f"pass '{p.pipeline_text()}' needs training rows", "compile", "passes",
                    "set [data] train = \"train.csv\"")
        if getattr(p, "alpha", None) == "auto" and (cfg.data.validation is None or cfg.data.label is None):
            err.add(f"pass '{p.pipeline_text()}' chooses alpha on labelled validation rows", "compile", "passes",
                    "set [data] validation and [data] label, or give alpha a number")


def _holds(final: type, accepts: tuple[type, ...]) -> bool:
    """Whether a target compiles the pipeline's result (lumber.passes.deploy: a Polynomial as exact
    oblivious tables, oblivious tables as their exact Forest where a target holds forests only)."""
    deployed = ObliviousEnsemble if issubclass(final, (Polynomial, ObliviousEnsemble)) else final
    return issubclass(deployed, accepts) or (deployed is ObliviousEnsemble and Forest in accepts)


def _check_targets(cfg: BuildConfig, inp: Inputs, err: _Errors) -> None:
    targets = known_targets()
    ok = []
    final = inp.final_type
    for t in cfg.compile.targets:
        if t not in targets:
            close = difflib.get_close_matches(t, list(targets), n=1)
            err.add(f"target '{t}' is not available in this lumber", "compile", "targets",
                    *([f"did you mean '{close[0]}'?"] if close else []), f"available targets: {', '.join(targets)}")
        elif not _holds(final, get_target(t).accepts):
            able = [n for n in targets if _holds(final, get_target(n).accepts)]
            err.add(f"target '{t}' cannot emit the {final.__name__} the pass pipeline produces", "compile",
                    "targets", f"targets for {final.__name__}: {', '.join(able)}; or end the pipeline in a Forest")
        else:
            ok.append(t)
    inp.targets = tuple(ok)


def _check_regions(cfg: BuildConfig, forest: Forest, err: _Errors) -> None:
    regions = cfg.explain.regions
    if not isinstance(regions, tuple):
        return
    names = forest.schema.feature_names
    for rname, bounds in regions:
        for feat, (lo, hi) in bounds:
            if feat not in names:
                close = difflib.get_close_matches(feat, names, n=1)
                err.add(f"region '{rname}' names unknown feature '{feat}'", "explain", "regions",
                        *([f"did you mean '{close[0]}'?"] if close else []))
            elif lo is not None and hi is not None and lo > hi:
                err.add(f"region '{rname}': empty interval [{lo:g}, {hi:g}] for '{feat}'", "explain", "regions")


__all__ = ["Inputs", "Table", "check_writable", "file_hash", "prepare"]
