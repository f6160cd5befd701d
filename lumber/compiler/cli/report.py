"""``lumber report MODEL CASES.csv [--train ...] [-o OUT]``, or ``lumber report --render report.json``.

The first form explains the cases without a build file (the same steps as
``lumber build``, with the options given here) and writes report.html,
report.md and report.json into OUT. The second re-renders a saved
report.json, e.g. after upgrading lumber, byte-for-byte reproducibly.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import _options

NAME = "report"
HELP = "explain cases and write a self-contained HTML/Markdown/JSON report (or re-render a report.json)"
OUTPUTS = {"output": "folder"}
"""Output options checked before any work (lumber.ir.atomic: the folder of a file must exist)."""
DESCRIPTION = __doc__.split("\n\n", 1)[1].strip() if __doc__ else HELP


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="?", help=_options.MODEL_HELP)
    p.add_argument("cases", nargs="?", help="CSV of cases to explain")
    p.add_argument("--render", metavar="REPORT_JSON", help="re-render a saved report.json instead")
    p.add_argument("-o", "--output", default="report", help="output folder (default: ./report)")
    p.add_argument("--valid", help="validation CSV (pruning, exactness checks)")
    p.add_argument("--label", help="label column of --train/--valid")
    _options.add_no_header(p)
    p.add_argument("--passes", default="", help="pass pipeline to report on")
    p.add_argument("--targets", default="", help="compile targets to check and report, e.g. c,onnx")
    p.add_argument("--analyses", help="default: attribution,sensitive,counterfactual,rules (rules need --train)")
    p.add_argument("--sections", default="model,attribution,cases,regional,constraints,checks",
                   help="report sections, in order (default: model,attribution,cases,regional,constraints,checks)")
    p.add_argument("--formats", default="html,md,json", help="files to write: html, md, json (default: all three)")
    _options.add_explainer_options(p)
    _options.add_reasons(p)
    p.add_argument("--max-cases", type=_options.positive_int, default=20,
                   help="explain the first N rows of CASES (default: 20); the report says how many it explains")
    p.add_argument("--title", default="", help="title of the report (default: from the model's file name)")
    p.add_argument("--timings", action="store_true", help="show measured speed-ups (bytes then vary)")
    _options.add_quiet(p, "print only the files written and failures (no progress)")


FLAGS = {"data": {"train": "--train", "validation": "--valid", "cases": "CASES", "label": "--label",
                  "max_cases": "--max-cases", "header": "--no-header", "id": "--id"},
         "explain": {"analyses": "--analyses", "scale": "--scale", "norm": "--norm", "target": "--target",
                     "threshold": "--threshold", "reasons": "--reasons"},
         "report": {"sections": "--sections", "formats": "--formats"}, "compile": {"passes": "--passes",
                                                                                  "targets": "--targets"},
         "check": {"require": "--require"}, "constraints": {"path": "--constraints"}}


def _flags(text: str) -> str:
    """Build-file terms in a message as this command's options (``[data] train = ...`` -> ``--train``)."""
    def sub(m: re.Match[str]) -> str:
        return FLAGS.get(m.group(1), {}).get(m.group(2), m.group(0))

    text = re.sub(r"\[(\w+)\] (\w+)(?: = \S+)?", sub, text)
    return re.sub(r"'(\w+)' in \[(\w+)\]", lambda m: FLAGS.get(m.group(2), {}).get(m.group(1), m.group(0)), text)


def _list(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def run(args: argparse.Namespace) -> int:
    from lumber.ir import InputDataError

    if args.render:
        return _render(args)
    if not args.model or not args.cases:
        raise InputDataError("lumber report needs MODEL and CASES (or --render REPORT_JSON)",
                             "e.g. lumber report model.txt cases.csv --train train.csv -o report")
    from lumber.compiler.build import BuildFileError, build_config, config_from_dict
    from lumber.runtime.progress import enabled

    cwd = Path.cwd()
    doc: dict[str, Any] = {
        "seed": args.seed,
        "model": {"path": args.model},
        "data": {k: v for k, v in (("train", args.train), ("validation", args.valid), ("cases", args.cases),
                                   ("label", args.label)) if v is not None} | {"max_cases": args.max_cases}
                | ({"header": False} if args.no_header else {}),
        "compile": {"passes": args.passes, "targets": _list(args.targets)},
        "explain": {"analyses": _list(args.analyses or ("attribution,sensitive,counterfactual"
                                                         + (",rules" if args.train else ""))),
                    **({"norm": args.norm} if args.norm else {}),  # else the build file's default
                    "scale": args.scale or ("std" if args.train or args.valid else "none"),
                    "time_limit": args.time_limit, "jobs": args.jobs},
        "report": {"title": args.title, "sections": _list(args.sections), "formats": _list(args.formats),
                   "timings": args.timings},
        "output": {"dir": args.output},
    }
    if args.constraints:
        doc["constraints"] = {"path": args.constraints}
    if args.target is not None:
        doc["explain"]["target"] = args.target
    cutoff = _options.cutoff_of(args)
    if cutoff is not None:
        if cutoff.on != "probability":
            raise InputDataError("lumber report --threshold takes a probability (e.g. 0.3)",
                                 "state a margin threshold in the constraint file: "
                                 "`target margin of class 1 <= -0.85`")
        doc["explain"]["threshold"] = cutoff.value
    if args.id is not None:
        doc["data"]["id"] = args.id
    doc["explain"]["reasons"] = args.reasons
    _say_cases(args)
    with tempfile.TemporaryDirectory(prefix="lumber-report-") as cache:
        doc["output"]["cache"] = cache
        try:
            cfg = config_from_dict(doc, cwd / "lumber report")
            result = build_config(cfg, progress=enabled(args.quiet))
        except BuildFileError as exc:
            raise BuildFileError([replace(d, message=_flags(d.message), notes=tuple(_flags(n) for n in d.notes))
                                  for d in exc.diagnostics]) from None
    for f in cfg.report.formats:
        print(result.output / {"html": "report.html", "md": "report.md", "json": "report.json"}[f])
    for c in result.failed:
        print(f"warning: {c.name}: {c.message}", file=sys.stderr)
    return 0


def _say_cases(args: argparse.Namespace) -> None:
    """How many cases the report explains and how to change it (on stderr, so stdout stays the file list)."""
    from lumber.runtime.data import read_frame
    from lumber.ir import LumberError

    if args.quiet:
        return
    try:
        n = _count_rows(args.cases) if args.no_header else len(read_frame(args.cases))
    except (LumberError, OSError, UnicodeDecodeError, csv.Error):
        return  # the build's input check reports it, at the right place
    k = min(n, args.max_cases)
    more = f"; --max-cases {n} explains all of them" if k < n else ""
    print(f"report: explaining {k} of the {n} cases in {args.cases}{more}", file=sys.stderr, flush=True)


def _count_rows(path: str) -> int:
    """Rows of a CSV without a header row (the build reads and checks it against the model later)."""
    with open(path, encoding="utf-8-sig", newline="") as fh:
        return sum(1 for rec in csv.reader(fh) if any(c.strip() for c in rec))


def _render(args: argparse.Namespace) -> int:
    from lumber.backends.report import write_report
    from lumber.ir import InputDataError

    src = Path(args.render)
    try:
        doc = json.loads(src.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputDataError(f"{src}: no such file") from None
    except (OSError, ValueError) as exc:
        raise InputDataError(f"{src}: not a JSON report ({exc})") from None
    if not isinstance(doc, dict) or doc.get("lumber_report") != 1:
        raise InputDataError(f"{src}: not a lumber report document (no \"lumber_report\": 1)",
                             "pass the report.json written by lumber build or lumber report")
    from lumber.ir.atomic import prepare_output_dir

    out = prepare_output_dir(Path(args.output))
    formats = [f for f in _list(args.formats) if f != "json"] or ["html"]
    for p in write_report(doc, out, formats):
        print(p)
    return 0


DEMO_CONSTRAINTS = """\
# lumber demo: who a person is does not change; age only grows
immutable Sex, NativeCountry, MaritalStatus, Relationship
Age: increase, <= 90
changes <= 3
"""


def demo_report(workdir: Path, model_path: Path, X_train: Any, y_train: Any, X_test: Any, *, seed: int = 0,
                cases: int = 3, train_rows: int = 2000) -> str:
    """``lumber demo``'s report stage: a build file beside the model, built; returns the stage's summary."""
    import numpy as np

    from lumber.compiler.build import build
    from lumber.runtime.data import csv_text

    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(X_train), size=min(train_rows, len(X_train)), replace=False))
    (workdir / "train.csv").write_text(csv_text(X_train.iloc[pick].assign(income=np.asarray(y_train)[pick])))
    (workdir / "cases.csv").write_text(csv_text(X_test.iloc[:cases]))
    (workdir / "recourse.lum").write_text(DEMO_CONSTRAINTS)
    (workdir / "lumber.toml").write_text(f"""seed = {seed}

[model]
path = "{model_path.name}"

[data]
train = "train.csv"
cases = "cases.csv"
label = "income"

[constraints]
path = "recourse.lum"

[compile]
targets = ["onnx"]

[explain]
analyses = ["sensitive", "counterfactual", "rules"]
time_limit = 20

[report]
title = "lumber demo: income model"
""")
    res = build(workdir / "lumber.toml")
    doc = json.loads((res.output / "report.json").read_text())
    n_cf = sum(1 for c in doc["cases"]["items"] if c.get("counterfactual", {}).get("status") == "optimal")
    n_rule = sum(1 for c in doc["cases"]["items"] if c.get("rule", {}).get("status") == "found")
    bad = [c.name for c in res.checks if c.passed is False and c.name.startswith("exact")]
    if bad:
        raise SystemExit(f"report stage: {', '.join(bad)} failed")
    return (f"{len(doc['cases']['items'])} cases: {n_cf} optimal counterfactuals, {n_rule} local rules, ONNX exact "
            f"on {res.checks[0].details['rows']:,} rows\n{res.output / 'report.html'} (+ .md, .json, manifest.json)")
