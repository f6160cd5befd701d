"""C backend: a Forest as C99 tables plus a tight generic walker, built with the system compiler.

``emit_source`` prints the C (pure, deterministic); ``build_shared`` compiles
it atomically; ``CLibrary`` loads the result with ctypes.
"""

from __future__ import annotations

from .build import BuildOptions, CompilerRun, build_shared, find_compiler, supports_openmp
from .emit import ABI_VERSION, CEmitOptions, check, emit_source
from .loader import CLibrary


__all__ = [
    "ABI_VERSION", "BuildOptions", "CompilerRun", "CLibrary", "CEmitOptions", "build_shared", "check",
    "emit_source", "find_compiler", "supports_openmp",
]
