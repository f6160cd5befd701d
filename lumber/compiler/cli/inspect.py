"""``lumber inspect MODEL``: the shape of a model, or of any ``.lumber`` IR file
(a Polynomial from ``compile --passes polynomial``, an ObliviousEnsemble)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from . import _options

NAME = "inspect"
HELP = "describe a model (trees, depth, leaves, splits per feature, memory) or a compiled artifact"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=_options.MODEL_HELP + " or an "
                                 "artifact from lumber compile (.so, .table, .onnx)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def run(args: argparse.Namespace) -> int:
    from lumber.compiler.frontends import load, read_model_bytes, sniff
    from lumber.compiler.frontends.untrusted import is_skops

    from lumber.compiler.targets.library import is_shared_library

    from ._artifacts import compiled_artifact, describe, describe_library

    data = read_model_bytes(args.model)
    if is_shared_library(data[:8]):  # read from its manifest, never loaded
        return _print_artifact(args, describe_library(args.model))
    art = compiled_artifact(args.model)
    if art is not None:
        return _print_artifact(args, describe(args.model, art.target, art.fingerprint, art.schema))
    if sniff(data[:4096]) == "lumber-ir" and not is_skops(data):
        from lumber.ir import Forest, load_ir

        ir = load_ir(args.model)
        if not isinstance(ir, Forest):
            return _print_statistics(args, ir)
    forest = load(args.model)
    s = forest.summary()
    s["source"] = dict(forest.schema.source)
    if args.json:
        print(json.dumps(s, indent=2, sort_keys=True))
        return 0
    _print_origin(args.model, forest.schema.source)
    print(f"task       {s['task']} ({s['outputs']} output{'s' if s['outputs'] != 1 else ''}), "
          f"post-transform {forest.schema.post_transform.name.lower()}, inputs {forest.schema.input_dtype}")
    print(f"trees      {s['trees']}  ({'averaged' if forest.schema.average else 'summed'})")
    print(f"nodes      {s['nodes']}  leaves {s['leaves']}  max depth {s['max_depth']}  "
          f"mean leaf depth {s['mean_leaf_depth']:.2f}")
    print(f"features   {s['features_used']} of {s['features']} used; categorical splits {s['categorical_splits']}")
    print(f"memory     {s['memory_bytes'] / 1e6:.2f} MB in the IR")
    print("splits per feature:")
    width = max((len(k) for k in s["splits_per_feature"]), default=0)
    for name, c in sorted(s["splits_per_feature"].items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {name:<{width}}  {c}")
    return 0


def _print_origin(model: str, src: dict[str, Any]) -> None:
    print(f"model      {model}")
    print(f"source     {src.get('library', '?')} {src.get('version', '')} {src.get('model_type', '')}".rstrip())


def _print_artifact(args: argparse.Namespace, d: dict[str, Any]) -> int:
    """A compiled artifact: what it is, which model it came from (fingerprint), what it reads and returns."""
    if args.json:
        print(json.dumps(d, indent=2, sort_keys=True, default=str))
        return 0
    _print_origin(f"{args.model} ({d['artifact']}, {d['bytes']:,} bytes)", d["source"])
    print(f"compiled   from the model with fingerprint {d['fingerprint']}")
    print(f"task       {d['task']} ({d['outputs']} output{'s' if d['outputs'] != 1 else ''}), "
          f"inputs {d['input_dtype']}" + (f", classes {', '.join(d['classes'])}" if d["classes"] else ""))
    names = d["feature_names"]
    print(f"features   {d['features']}: {', '.join(names[:12])}{' ...' if len(names) > 12 else ''}")
    if "sha256" in d:
        print(f"library    sha256 {d['sha256']}, built by lumber {d['lumber_version']} on {d['built_on']}, "
              f"{d['sources']} C source(s) inside")
        print(f"loads here {d['loads_here']}")
    return 0


def _print_statistics(args: argparse.Namespace, ir: Any) -> int:
    """Polynomial and ObliviousEnsemble files: their ``statistics()``, as text or JSON."""
    stats = dict(ir.statistics())
    stats["kind"] = type(ir).__name__
    stats["source"] = dict(ir.schema.source)
    if args.json:
        print(json.dumps(stats, indent=2, sort_keys=True, default=str))
        return 0
    _print_origin(f"{args.model} ({type(ir).__name__} IR)", ir.schema.source)
    print(f"task       {ir.schema.task.name.lower()} ({ir.schema.n_outputs} output"
          f"{'s' if ir.schema.n_outputs != 1 else ''}), inputs {ir.schema.input_dtype}")
    for key, value in stats.items():
        if key in ("kind", "source", "outputs"):
            continue
        if isinstance(value, dict):
            text = ", ".join(f"{k}: {v}" for k, v in value.items())
        elif isinstance(value, float):
            text = f"{value:.3f}"
        else:
            text = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)
        print(f"{key.replace('_', ' '):<22} {text}")
    return 0
