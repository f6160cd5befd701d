"""What every frontend shares: reading a model file and hashing its bytes.

A leaf module, so frontends import it without importing the package that
dispatches to them (``lumber.compiler.frontends`` re-exports both names).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from lumber.ir import ModelFormatError


def content_hash(data: bytes) -> str:
    """The fingerprint recorded in artifacts (sha256 of the model's canonical bytes)."""
    return hashlib.sha256(data).hexdigest()


def read_model_bytes(path: str | Path, expected: str = "a model file") -> bytes:
    """The bytes of a model file, or a :class:`ModelFormatError` naming the file and what was expected."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise ModelFormatError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ModelFormatError(f"{path}: is a directory, expected {expected}") from None
    except OSError as exc:
        raise ModelFormatError(f"{path}: cannot read ({exc.strerror})") from None


__all__ = ["content_hash", "read_model_bytes"]
