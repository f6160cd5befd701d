"""Model files that can run code: pickle/joblib refused unless trusted, ``.skops`` through its safe loader.

lumber runs in CI on model files pulled from registries, so no command
unpickles by default: unpickling executes whatever the file holds. A pickle is
loaded only when the caller says it trusts it (``--trust-pickle`` on the command
line, ``lumber.load(path, trust_pickle=True)`` in Python). ``.skops`` files are
loaded by skops' own loader, which builds objects without running their code,
with only scikit-learn's tree types trusted.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import zipfile
from pathlib import Path
from typing import Any, Iterator

from lumber.ir import ModelFormatError, UnsupportedModelError

SAFE_FORMS = (
    "safe forms: the library's own model file (LightGBM model.txt, XGBoost .json/.ubj, CatBoost .cbm/.json), "
    "a lumber .lumber file, a scikit-learn model saved with skops (skops.io.dump(model, 'model.skops')), "
    "or for serving an ONNX file from lumber compile --emit onnx")

_COMPRESSED = (b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda", b"\x1f\x8b", b"BZh", b"\xfd7zXZ", b"\x5d\x00\x00",
               b"\x04\x22\x4d\x18", b"ZF")
"""Magic bytes of joblib's compressed files (zlib, gzip, bz2, xz, lzma, lz4, joblib's old zlib format)."""

SKOPS_TRUSTED = frozenset({
    "sklearn.tree._tree.Tree",
    "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
    # HistGradientBoosting with categorical features keeps partial(check_array, ...) as a preprocessor;
    # skops checks the partial's function separately, so only this one function is admitted through it.
    "functools.partial",
    "sklearn.utils.validation.check_array",
})
"""Types skops does not trust by itself that scikit-learn tree ensembles need; nothing else is admitted."""

_TRUST: contextvars.ContextVar[bool] = contextvars.ContextVar("lumber_trust_pickle", default=False)


@contextlib.contextmanager
def trusting_pickles(trust: bool = True) -> Iterator[None]:
    """Within the block, pickle/joblib model files load (the CLI's ``--trust-pickle``)."""
    token = _TRUST.set(trust)
    try:
        yield
    finally:
        _TRUST.reset(token)


def pickles_trusted(trust_pickle: bool | None = None) -> bool:
    """The explicit choice if given, else the ambient one (``trusting_pickles``), default False."""
    return _TRUST.get() if trust_pickle is None else bool(trust_pickle)


def is_pickle(data: bytes) -> bool:
    """A (possibly compressed) pickle or joblib file, from its first bytes."""
    return data[:1] == b"\x80" or data.startswith(_COMPRESSED)


def is_skops(data: bytes) -> bool:
    """A skops archive: a zip file holding ``schema.json`` (lumber's own IR zip does not)."""
    if not data.startswith(b"PK\x03\x04"):
        return False
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return "schema.json" in zf.namelist()
    except (zipfile.BadZipFile, ValueError, OSError):
        return False


def refuse_pickle(path: Path) -> UnsupportedModelError:
    """The error for a pickle nobody said to trust (names the file, the flag and the safe forms)."""
    return UnsupportedModelError(
        f"{path}: is a pickle/joblib file; lumber does not unpickle by default because loading one runs "
        "whatever code it holds",
        "if you trust this file, pass --trust-pickle (Python: lumber.load(path, trust_pickle=True))",
        SAFE_FORMS)


def unpickle(path: Path, data: bytes) -> Any:
    """Load a pickle/joblib file the caller trusts (unpickling runs code)."""
    import joblib

    try:
        return joblib.load(io.BytesIO(data))
    except Exception as exc:  # any unpickling failure is a format problem of this file
        raise ModelFormatError(f"{path}: cannot unpickle ({type(exc).__name__}: {exc})",
                               "pickle/joblib files must hold a supported model object") from None


def load_skops(path: Path, data: bytes) -> Any:
    """A ``.skops`` file through skops' safe loader, trusting only scikit-learn's tree types."""
    try:
        import skops.io as sio
    except ImportError:  # pragma: no cover - skops is a dependency
        raise UnsupportedModelError(f"{path}: is a skops file but skops is not installed",
                                    "pip install skops") from None
    try:
        untrusted = list(sio.get_untrusted_types(data=data))
    except Exception as exc:
        raise ModelFormatError(f"{path}: not a readable skops file ({type(exc).__name__}: {exc})") from None
    refused = sorted(t for t in untrusted if t not in SKOPS_TRUSTED)
    if refused:
        shown = ", ".join(refused[:6]) + (" ..." if len(refused) > 6 else "")
        raise UnsupportedModelError(
            f"{path}: the skops file holds types lumber does not trust: {shown}",
            "lumber loads skops files holding scikit-learn tree ensembles only")
    try:
        return sio.loads(data, trusted=untrusted)
    except Exception as exc:
        raise ModelFormatError(f"{path}: cannot load the skops file ({type(exc).__name__}: {exc})") from None
