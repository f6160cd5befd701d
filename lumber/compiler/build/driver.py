"""``lumber build``: read the build file, check every input, run the steps, publish the output folder.

Order: validate the build file and every input (no work before that passes),
then compile (passes, targets, exactness, equivalence), explain (attribution,
per-case analyses, regional rules, plausibility), evaluate the checks,
assemble the report document, and publish. The output folder is built as a
hidden sibling and renamed into place, so it always holds one complete
build. A build whose inputs (and build file) are unchanged since the last one
does nothing; otherwise each step is reused from the cache when what it
reads is unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable
from lumber.backends.report import write_report
from lumber.ir import atomic_write_bytes
from lumber.ir.atomic import existing_parent


from .cache import StepCache, digest
from .compile_steps import State, check_equivalence, compile_targets, run_passes
from .document import build_document, clean
from .explain_steps import attribution, per_case, plausibility, reasons, regional
from .gates import Check, all_checks
from .inputs import Inputs, prepare
from .manifest import intact, make_manifest, read_manifest
from .spec import BuildConfig
from .validate import load_build_file


@dataclass
class BuildResult:
    output: Path
    manifest: dict[str, Any]
    checks: list[Check]
    up_to_date: bool
    seconds: float

    @property
    def failed(self) -> list[Check]:
        """Gated checks that failed (``--check`` exits non-zero when any)."""
        return [c for c in self.checks if c.failed]

    @property
    def rebuilt(self) -> list[str]:
        return [s["step"] for s in self.manifest.get("steps", []) if not s["cached"]] if not self.up_to_date else []


def build(build_file: str | Path, *, output: str | Path | None = None, force: bool = False,
          log: Callable[[str], None] | None = None, progress: bool = False) -> BuildResult:
    """Run the build described by ``build_file``; see the module docstring."""
    return build_config(load_build_file(build_file), output=output, force=force, log=log, progress=progress)


def build_config(cfg: BuildConfig, *, output: str | Path | None = None, force: bool = False,
                 log: Callable[[str], None] | None = None, progress: bool = False) -> BuildResult:
    """Run a build from a configuration (a build file's, or one made in memory by ``lumber report``).

    ``progress``: a bar on stderr while the cases are explained (the CLI passes it on a terminal).
    """
    say = log or (lambda s: None)
    t0 = time.perf_counter()
    inp = prepare(cfg, Path(output) if output is not None else None)
    key = digest("build", inp.hashes, inp.output.name)
    old = read_manifest(inp.output)
    if not force and old is not None and old.get("build_key") == key and intact(inp.output, old):
        checks = [Check(**c) for c in old.get("checks", [])]
        say(f"{inp.output}: up to date (inputs unchanged since the last build)")
        return BuildResult(inp.output, old, checks, True, time.perf_counter() - t0)
    st = State(inp, StepCache(inp.cache, enabled=not force), progress=progress)
    stages: list[tuple[str, Callable[[State], None]]] = [
        ("passes", run_passes), ("compile", compile_targets), ("equivalence", check_equivalence)]
    analyses = cfg.explain.analyses
    if "attribution" in analyses and "attribution" in cfg.report.sections:
        stages.append(("attribution", attribution))
    stages += [("explain", per_case), ("reasons", reasons), ("regional", regional), ("plausibility", plausibility)]
    for name, fn in stages:
        n = len(st.steps)
        fn(st)
        for s in st.steps[n:]:
            took = "cached" if s["cached"] else f"{s['seconds']:.2f} s"
            say(f"  {s['step']:<18} {took}")
    checks = all_checks(st)
    doc = build_document(st, [c.to_dict() for c in checks])
    manifest = publish(st, checks, doc, key, t0)
    return BuildResult(inp.output, manifest, checks, False, time.perf_counter() - t0)


def publish(st: State, checks: list[Check], doc: dict[str, Any], key: str, t0: float) -> dict[str, Any]:
    """Write everything into a hidden sibling of the output folder, then swap it into place."""
    inp: Inputs = st.inp
    out = inp.output
    existing_parent(out, "an output folder")  # checked by prepare(); the folder may have gone since
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        files: list[Path] = []
        for name, src in st.artifacts:
            dst = stage / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            files.append(dst)
        files += write_report(doc, stage, inp.config.report.formats)
        raw = {k: st.results[k] for k in ("attribution", "sensitive", "counterfactual", "rules", "regional")
               if k in st.results}
        if raw:
            p = stage / "explanations.json"
            atomic_write_bytes(p, (json.dumps(clean(raw), indent=1, sort_keys=True, ensure_ascii=False) + "\n")
                               .encode("utf-8"))
            files.append(p)
        manifest = make_manifest(st, checks, files, stage, key, time.perf_counter() - t0)
        atomic_write_bytes(stage / "manifest.json", (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
        os.chmod(stage, 0o755)
        _swap(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    st.cache.prune()
    return manifest


def _swap(stage: Path, out: Path) -> None:
    """Rename ``stage`` to ``out``; an existing ``out`` is moved aside first and removed after."""
    if not out.exists():
        os.rename(stage, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    os.rmdir(old)
    os.rename(out, old)
    try:
        os.rename(stage, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def print_summary(result: BuildResult, stream: IO[str]) -> None:
    """What the CLI prints after a build: artifacts, checks, and where the report is."""
    m = result.manifest
    for t in m.get("targets") or []:
        sp = t.get("speed") or {}
        speed = f", {sp['speedup']:.1f}x the reference evaluator" if sp.get("speedup") else ""
        print(f"  {t['target']:<9} {t['file']} ({t['bytes']:,} bytes){speed}", file=stream)
    for c in result.checks:
        mark = {True: "ok  ", False: "FAIL" if c.gate else "warn", None: "n/a "}[c.passed]
        print(f"  [{mark}] {c.name}: {c.message}", file=stream)
    print(f"{result.output}: {'up to date' if result.up_to_date else 'built'} in {result.seconds:.2f} s "
          f"({m.get('status')})", file=stream)


__all__ = ["BuildResult", "build", "build_config", "print_summary", "publish"]
