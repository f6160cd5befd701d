"""treelite checkpoints (``treelite.Model.serialize`` files) -> Forest, read in a guarded child process.

A checkpoint starts with treelite's serialization header: three little-endian
int32 version numbers (major 4 for the v4 format treelite 4.x writes) and two
``TypeInfo`` bytes (threshold and leaf types). treelite's own reader is the only
complete reader of the format, and on edited bytes it crashes the process
(segmentation fault) or allocates without bound. So lumber runs it in a child
process with a memory limit and a time limit: the child deserializes the bytes,
lowers the model exactly as :func:`~lumber.compiler.frontends.treelite.from_treelite`
does (semantics: treelite's reference predictor GTIL) and writes the Forest as a
``.lumber`` file, which the parent reads. A crash, a hang or treelite's own error
becomes one :class:`ModelFormatError` naming the file.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from lumber.ir import Forest, LumberError, ModelFormatError, UnsupportedModelError, load_ir
from .files import read_model_bytes
from .treelite import from_treelite

SUPPORTED_MAJOR = 4
MEMORY_LIMIT = 3 << 30
"""Address-space limit of the child (bytes, plus 16x the file): a damaged length field must not exhaust the machine."""
TIME_LIMIT = 15.0
"""Seconds the child may take (plus one per 20 MB of file): reading a checkpoint copies arrays, so this
only stops a runaway read of a damaged file."""
_TYPES = (2, 3)  # TypeInfo kFloat32, kFloat64


def is_treelite_checkpoint(head: bytes) -> bool:
    """Whether bytes start like a treelite serialization header (any major version 3 or 4)."""
    if len(head) < 14:
        return False
    major, minor, patch = struct.unpack_from("<iii", head)
    return major in (3, 4) and 0 <= minor < 100 and 0 <= patch < 100 and head[12] in _TYPES \
        and head[13] in _TYPES


def load_treelite_checkpoint(path: str | Path, *, data: bytes | None = None, **options: Any) -> Forest:
    """A ``treelite.Model.serialize`` file -> Forest (``data``: its bytes when already read).

    Options as :func:`~lumber.compiler.frontends.treelite.from_treelite`
    (``feature_names``, ``raw_output``).
    """
    blob = data if data is not None else read_model_bytes(path, "a treelite checkpoint")
    if len(blob) < 22:
        raise ModelFormatError(f"{path}: truncated treelite checkpoint ({len(blob)} bytes, the header needs 22)")
    major, minor, patch = struct.unpack_from("<iii", blob)
    if major != SUPPORTED_MAJOR:
        raise UnsupportedModelError(f"{path}: a treelite checkpoint in format v{major} ({major}.{minor}.{patch})",
                                    "lumber reads the v4 format of treelite 4.x: load the model with the treelite "
                                    "that wrote it and serialize it again with treelite 4")
    opts = {k: (list(v) if k == "feature_names" and v is not None else v) for k, v in options.items()}
    unknown = sorted(set(opts) - {"feature_names", "raw_output"})
    if unknown:
        raise UnsupportedModelError(f"unknown option(s) for a treelite checkpoint: {', '.join(unknown)}",
                                    "accepted: feature_names, raw_output")
    seconds = TIME_LIMIT + len(blob) / 20e6
    memory = MEMORY_LIMIT + 16 * len(blob)
    with tempfile.TemporaryDirectory(prefix="lumber-treelite-") as tmp:
        out = Path(tmp) / "forest.lumber"
        try:
            proc = subprocess.run(
                [sys.executable, "-m", __name__, str(out), json.dumps(opts)], input=blob, capture_output=True,
                timeout=seconds, preexec_fn=(lambda: _limit_memory(memory)) if os.name == "posix" else None,
                env={**os.environ, "OMP_NUM_THREADS": "1"})
        except subprocess.TimeoutExpired:
            raise ModelFormatError(f"{path}: treelite did not finish reading the checkpoint in {seconds:.0f} s",
                                   "the file is damaged (a length field promises more than the file holds)") from None
        if proc.returncode < 0:
            raise ModelFormatError(f"{path}: treelite crashed reading the checkpoint (signal {-proc.returncode})",
                                   "the file is truncated or edited; serialize the model again") from None
        if proc.returncode != 0:
            raise _child_error(str(path), proc.stdout, proc.stderr)
        forest = load_ir(out, Forest)
    return forest  # type: ignore[no-any-return]


def _limit_memory(limit: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _child_error(path: str, stdout: bytes, stderr: bytes) -> LumberError:
    try:
        report = json.loads(stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        return ModelFormatError(f"{path}: treelite could not read the checkpoint ({tail[0][:200]})",
                                "the file is truncated or edited; serialize the model again")
    kind = {"ModelFormatError": ModelFormatError, "UnsupportedModelError": UnsupportedModelError}.get(
        str(report.get("kind")), ModelFormatError)
    return kind(f"{path}: {report.get('message', 'unreadable checkpoint')}", *report.get("notes", []))


def _child(out: str, options: str) -> int:
    """In the child: bytes on stdin -> ``.lumber`` file at ``out``; errors as one JSON line on stdout."""
    import treelite

    data = sys.stdin.buffer.read()
    try:
        model = treelite.Model.deserialize_bytes(data)
    except treelite.core.TreeliteError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(json.dumps({"kind": "ModelFormatError", "message": f"treelite cannot read the checkpoint ({first})",
                          "notes": ["the file is truncated or edited; serialize the model again"]}))
        return 3
    try:
        forest = from_treelite(model, **json.loads(options))
        forest.save(out)
    except LumberError as exc:
        d = exc.diagnostics[0]
        where = str(d.location).replace("<treelite.Model>", "").strip(", ") if d.location is not None else ""
        where = f"{where}: " if where and where != "<model>" else ""
        print(json.dumps({"kind": type(exc).__name__, "message": where + d.message, "notes": list(d.notes)}))
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], sys.argv[2]))
