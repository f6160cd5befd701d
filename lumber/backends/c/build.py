"""Build emitted C into a shared library with the system compiler (into a temp dir, then an atomic move)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from lumber.ir import CompileError, atomic_write_bytes

from .manifest import sign_library

BASE_FLAGS = ("-O3", "-fPIC", "-shared", "-std=c99", "-ffp-contract=off")
"""-ffp-contract=off: no fused multiply-adds, so sums round exactly as the reference's."""
WARN_FLAGS = ("-Wall", "-Wextra")
COMPILER_TIMEOUT = 900.0


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    """How to call the compiler."""

    cc: str | None = None
    """Compiler command; default: $CC, then cc, gcc, clang."""
    march_native: bool = False
    """Tune for this CPU (the library may then not run on older CPUs)."""
    openmp: bool | None = None
    """Use OpenMP threads; None: when the compiler supports -fopenmp."""
    warnings_as_errors: bool = False
    """Add -Wall -Wextra -Werror (the tests use it: emitted C must compile warning-free)."""
    extra_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompilerRun:
    path: Path
    command: tuple[str, ...]
    seconds: float
    openmp: bool
    diagnostics: str
    """Compiler output (warnings), empty when clean."""


def find_compiler(cc: str | None = None) -> str:
    """Path of a working C compiler or a CompileError saying what was tried and what to do."""
    tried = []
    for cand in ([cc] if cc else []) + ([os.environ["CC"]] if os.environ.get("CC") else []) + ["cc", "gcc", "clang"]:
        tried.append(cand)
        exe = shutil.which(cand.split()[0]) if cand.strip() else None
        if exe:
            return exe
        if cc:
            break
    raise CompileError(
        f"no C compiler found (tried: {', '.join(dict.fromkeys(tried))})",
        "install gcc or clang, or set CC to a compiler command",
        "target 'c-source' (CLI: --emit c-source) writes the C file without building it; "
        "target 'numpy' predicts without a compiler")


@lru_cache(maxsize=8)
def supports_openmp(cc: str) -> bool:
    """Whether ``cc -fopenmp`` builds and links a shared library here (probed once per compiler)."""
    src = "#include <omp.h>\nint lumber_probe(void) { return omp_get_max_threads(); }\n"
    with tempfile.TemporaryDirectory(prefix="lumber-omp-") as tmp:
        c = Path(tmp, "probe.c")
        c.write_text(src)
        try:
            r = subprocess.run([cc, "-fPIC", "-shared", "-fopenmp", str(c), "-o", str(Path(tmp, "p.so"))],
                               capture_output=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return r.returncode == 0


def compile_command(cc: str, sources: Sequence[Path], out: Path, options: BuildOptions, openmp: bool) -> list[str]:
    cmd = [cc, *BASE_FLAGS, *WARN_FLAGS]
    if options.warnings_as_errors:
        cmd.append("-Werror")
    if options.march_native:
        cmd.append("-march=native")
    if openmp:
        cmd.append("-fopenmp")
    cmd += [*options.extra_flags, *map(str, sources), "-o", str(out), "-lm"]
    return cmd


def build_shared(source: str | Sequence[str], out: str | Path, options: BuildOptions | None = None, *,
                 models: Mapping[str, Mapping[str, Any]] | None = None) -> CompilerRun:
    """Compile C ``source`` (one file's text, or several) to the shared library ``out``, atomically.

    Several sources (models emitted with distinct prefixes) link into one library. The
    library is signed (:func:`.manifest.sign_library`): its sources, digest and ``models``
    (metadata by symbol prefix, what ``lumber inspect`` shows) follow its bytes.
    """
    options = options or BuildOptions()
    cc = find_compiler(options.cc)
    openmp = supports_openmp(cc) if options.openmp is None else options.openmp
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="lumber-cc-") as tmp:
        texts = [source] if isinstance(source, str) else list(source)
        srcs = [Path(tmp, f"model{i}.c") for i in range(len(texts))]
        for p, text in zip(srcs, texts):
            p.write_text(text, encoding="ascii")
        lib = Path(tmp, "model.so")
        cmd = compile_command(cc, srcs, lib, options, openmp)
        t0 = time.perf_counter()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILER_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise CompileError(f"C compiler timed out after {COMPILER_TIMEOUT:.0f} s", " ".join(cmd)) from None
        except OSError as exc:
            raise CompileError(f"cannot run the C compiler {cc}: {exc.strerror}") from None
        seconds = time.perf_counter() - t0
        if r.returncode != 0:
            tail = "\n".join(r.stderr.strip().splitlines()[-15:])
            raise CompileError(f"C compiler failed (exit {r.returncode}): {' '.join(cmd[:1])}",
                               tail or "no compiler output")
        atomic_write_bytes(out, sign_library(lib.read_bytes(), models=models, sources=texts))
    return CompilerRun(path=out, command=tuple(cmd), seconds=seconds, openmp=openmp, diagnostics=r.stderr.strip())
