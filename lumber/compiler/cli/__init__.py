# PYTHON_ARGCOMPLETE_OK  (shell completion: eval "$(register-python-argcomplete lumber)")
"""The ``lumber`` command line.

Each sub-command is a module in this package defining ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; they are discovered, so a
new command is a new module. Every command reading model files gets
``--trust-pickle`` (a module opts out with ``READS_MODELS = False``). A :class:`~lumber.ir.LumberError` is printed as
diagnostics on stderr with a non-zero exit code, never as a traceback.
Shell completion of commands and options comes from argcomplete, over the same parser.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import warnings
from typing import Sequence, TextIO

from lumber import __version__


EXAMPLES = """examples (files from `lumber datasets export adult tour`):
  lumber inspect model.txt                               shape of a model or a compiled artifact
  lumber predict model.txt cases.csv --format jsonl      predictions (columns bound by name)
  lumber compile model.txt --emit c -o model.so          an exact C library (also onnx, table, c-source)
  lumber explain model.txt cases.csv --rows 3 --counterfactual --constraints adult.lum --train train.csv
  lumber report model.txt cases.csv --train train.csv    HTML/Markdown/JSON report in ./report
  lumber check adult.lum --model model.txt               check a constraint file
  lumber build lumber.toml                               everything a build file asks for
  lumber demo                                            the whole tool on bundled data, offline

`lumber COMMAND --help` lists a command's options."""


def _commands() -> list:  # type: ignore[type-arg]
    mods = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.ispkg:
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(mod, "NAME") and hasattr(mod, "run"):
            mods.append(mod)
    return sorted(mods, key=lambda m: m.NAME)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lumber", description="A compiler for trained tree ensembles.", epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"lumber {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in _commands():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP))
        mod.add_arguments(p)
        if getattr(mod, "READS_MODELS", True):
            p.add_argument("--trust-pickle", action="store_true",
                           help="load pickle/joblib model files (unpickling runs the file's code: trusted files only)")
        p.set_defaults(_run=mod.run, _outputs=getattr(mod, "OUTPUTS", {}))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Ctrl-C is "interrupted" and exit 130 from the first moment: this module imports nothing heavy at its
    # top, so an interrupt while numpy and the commands load (the first second) is caught here too
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None) -> int:
    from lumber.ir import LumberError

    parser = build_parser()
    if argv is None:
        _complete(parser)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    from lumber.compiler.frontends.untrusted import trusting_pickles

    try:
        with trusting_pickles(bool(getattr(args, "trust_pickle", False))), warnings.catch_warnings():
            warnings.simplefilter("default")
            warnings.showwarning = _WarningPrinter()
            _check_outputs(args)
            return int(args._run(args) or 0)
    except LumberError as exc:
        print(exc.render(), file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse an output path that cannot be written before any work (a module's ``OUTPUTS`` names its
    options: ``file`` needs an existing folder, ``folder`` is created inside one; lumber.ir.atomic)."""
    from pathlib import Path

    from lumber.ir.atomic import check_output_dir, prepare_output

    for name, kind in args._outputs.items():
        value = getattr(args, name, None)
        if value:
            (prepare_output if kind == "file" else check_output_dir)(Path(value))


def _complete(parser: argparse.ArgumentParser) -> None:
    """Answer a shell's completion request (argcomplete sets ``_ARGCOMPLETE``) and exit; else do nothing."""
    import os

    if "_ARGCOMPLETE" not in os.environ:
        return
    try:
        import argcomplete
    except ImportError:  # pragma: no cover - a dependency; without it the shell just gets no completions
        return
    argcomplete.autocomplete(parser)


_PLAIN_SHOW = warnings.showwarning


class _WarningPrinter:
    """lumber's own warnings as one ``warning: ...`` line on stderr, each text once per command (the same
    file read as cases and as training rows is one file); others as Python prints them."""

    def __init__(self) -> None:
        self.said: set[str] = set()

    def __call__(self, message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
        if not category.__module__.startswith("lumber."):
            _PLAIN_SHOW(message, category, filename, lineno, file, line)
        elif str(message) not in self.said:
            self.said.add(str(message))
            print(f"warning: {message}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
