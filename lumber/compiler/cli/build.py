"""``lumber build [lumber.toml] [--check] [-o OUT] [--force]``: the build file's artifacts, report and manifest."""

from __future__ import annotations

import argparse
import sys

from . import _options

NAME = "build"
HELP = "compile, check and explain a model as a lumber.toml build file says; write artifacts + report"
OUTPUTS = {"output": "folder"}
"""Output options checked before any work (lumber.ir.atomic: the folder of a file must exist)."""
DESCRIPTION = (
    "Read a build file (TOML: model, data, constraints, passes, targets, report sections), check every input "
    "before any work, then compile the targets, verify them on the data, explain the cases and write the "
    "artifacts, report.html/.md/.json and manifest.json into the output folder, replaced atomically. Unchanged "
    "inputs are not rebuilt. With --check the command fails (exit 1) when a gated check fails: an artifact not "
    "exact on the data, a compiled IR not equivalent to the model, pruning beyond its tolerance, or a required "
    "explanation that is infeasible.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("build_file", nargs="?", default="lumber.toml", help="the build file (default: lumber.toml)")
    p.add_argument("--check", action="store_true", help="exit 1 when a gated check fails")
    p.add_argument("-o", "--output", help="output folder (default: [output] dir of the build file)")
    p.add_argument("--force", action="store_true", help="rebuild every step, ignoring the cache")
    p.add_argument("--keys", action="store_true",
                   help="print every build-file key with its default (a template) and exit")
    _options.add_no_header(p, "(overrides the build file's [data] header)")
    _options.add_quiet(p, "print only failures (no progress)")


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from lumber.compiler.build import build_config, key_table, load_build_file, print_summary

    if args.keys:
        section = None
        for sec, key, default, doc in key_table():
            if sec != section:
                print(f"\n[{sec}]" if sec else "# top level")
                section = sec
            if default == "(required)":
                print(f'{key} = "..."'.ljust(40) + f"  # required: {doc}")
            else:
                print((f"{key} = {default}" if default else f"# {key} =").ljust(40) + f"  # {doc}")
        return 0
    log = None if args.quiet else (lambda s: print(s, flush=True))
    cfg = load_build_file(args.build_file)
    if args.no_header:
        cfg = replace(cfg, data=replace(cfg.data, header=False))
    from lumber.runtime.progress import enabled

    result = build_config(cfg, output=args.output, force=args.force, log=log, progress=enabled(args.quiet))
    if not args.quiet:
        print_summary(result, sys.stdout)
    failed = result.failed
    if failed:
        stream = sys.stderr
        verb = "build check failed" if args.check else "warning: gated check failed"
        for c in failed:
            print(f"{verb}: {c.name}: {c.message}", file=stream)
        if args.check:
            print(f"{len(failed)} gated check(s) failed; see {result.output / 'manifest.json'}", file=stream)
            return 1
    return 0
