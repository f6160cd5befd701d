"""``lumber fmt FILE... [--check]``: print constraint files canonically.

Without ``--check`` or ``--diff`` each file is rewritten in place (atomically)
when its canonical form differs. With ``--check`` nothing is written and the
exit code is 1 when a file is not formatted; ``--diff`` prints the changes. A file with syntax errors is left alone and
the exit code is 2.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

READS_MODELS = False
NAME = "fmt"
HELP = "format constraint files canonically (comments kept)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="constraint files")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is not formatted")
    p.add_argument("--diff", action="store_true", help="print a unified diff of the changes instead of writing them")


def run(args: argparse.Namespace) -> int:
    from lumber.compiler.dsl import ConstraintError, format_program, parse_file
    from lumber.compiler.dsl.parse import decode
    from lumber.ir import InputDataError, atomic_write_text

    unformatted = 0
    failed = 0
    for name in args.files:
        path = Path(name)
        if not path.is_file():
            raise InputDataError(f"{name}: no such file" if not path.exists() else f"{name}: not a file")
        try:
            original = decode(path.read_bytes(), name)
            program = parse_file(path, name)
        except ConstraintError as exc:
            print(exc.render(), file=sys.stderr)
            failed += 1
            continue
        formatted = format_program(program)
        if formatted == original:
            continue
        unformatted += 1
        if args.diff:
            sys.stdout.writelines(difflib.unified_diff(
                original.splitlines(keepends=True), formatted.splitlines(keepends=True), f"{name}", f"{name} (formatted)"))
        if args.check or args.diff:
            print(f"would reformat {name}", file=sys.stderr)
        else:
            atomic_write_text(path, formatted)
            print(f"reformatted {name}", file=sys.stderr)
    if failed:
        return 2
    return 1 if args.check and unformatted else 0
