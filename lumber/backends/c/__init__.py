"""C backend: a Forest as C99 tables plus a tight generic walker, built with the system compiler.

``emit_source`` prints the C (pure, deterministic); ``build_shared`` compiles
it atomically; ``CLibrary`` loads the result with ctypes.
"""

from __future__ import annotations

from typing import ClassVar

from lumber.ir import Diagnostic, Forest

from ..base import Artifact, EmitOptions
from .build import BuildOptions, BuildResult, build_shared, find_compiler, supports_openmp
from .emit import ABI_VERSION, COptions, check, emit_source
from .loader import CLibrary


class CBackend:
    """Backend protocol implementation for C source."""

    name: ClassVar[str] = "c"

    def check(self, ir: Forest, options: EmitOptions) -> list[Diagnostic]:
        return check(ir, options if isinstance(options, COptions) else COptions(name=options.name))

    def emit(self, ir: Forest, options: EmitOptions) -> Artifact:
        return emit_source(ir, options if isinstance(options, COptions) else COptions(name=options.name))


__all__ = [
    "ABI_VERSION", "BuildOptions", "BuildResult", "CBackend", "CLibrary", "COptions", "build_shared", "check",
    "emit_source", "find_compiler", "supports_openmp",
]
