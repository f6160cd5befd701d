"""A shared library is code: ``inspect``, ``predict`` and ``load_compiled`` verify it before any dlopen.

A library whose constructor writes a marker file is refused and the marker never
appears; a truncated, an edited and a re-signed foreign-machine library are clear
errors, never a crash (the commands run in subprocesses, so a Bus error would be an
exit status of 135, not a message).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import lumber
from lumber.backends.c.manifest import FOOTER, ForeignLibraryError, sign_library, verify_library
from lumber.ir import ModelFormatError

HAVE_CC = shutil.which("cc") is not None or shutil.which("gcc") is not None
pytestmark = pytest.mark.skipif(not HAVE_CC, reason="no C compiler")

EVIL = """
#include <stdio.h>
__attribute__((constructor)) static void evil(void) {
    FILE *f = fopen("MARKER", "w");
    if (f) { fputs("ran", f); fclose(f); }
}
int lumber_abi_version(void) { return 1; }
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import lightgbm as lgb

    d = tmp_path_factory.mktemp("safety")
    rng = np.random.default_rng(5)
    X = pd.DataFrame(rng.normal(size=(300, 4)), columns=["a", "b", "c", "d"])
    y = (X.a + X.b * X.c > 0).astype(int)
    lgb.LGBMClassifier(n_estimators=6, num_leaves=5, verbose=-1).fit(X, y).booster_.save_model(str(d / "m.txt"))
    X.iloc[:20].to_csv(d / "rows.csv", index=False)
    good = d / "good.so"
    lumber.compile(d / "m.txt", target="c", path=good)
    data = good.read_bytes()
    (d / "trunc.so").write_bytes(data[:5000])  # head -c 5000
    edited = bytearray(data)
    edited[len(data) // 3] ^= 0xFF  # a byte of the library itself
    (d / "edited.so").write_bytes(bytes(edited))
    marker = d / "marker.txt"
    src = d / "evil.c"
    src.write_text(EVIL.replace("MARKER", str(marker)))
    subprocess.run([shutil.which("cc") or "gcc", "-shared", "-fPIC", str(src), "-o", str(d / "evil.so")], check=True)
    # the hostile library with a footer that does not match its bytes (a forged, unsigned-looking trailer)
    evil = (d / "evil.so").read_bytes()
    (d / "evil_footer.so").write_bytes(evil + b"{}" + FOOTER.pack(2, bytes(32), b"LUMBSIG1"))
    return {"dir": d, "good": good, "trunc": d / "trunc.so", "edited": d / "edited.so", "evil": d / "evil.so",
            "evil_footer": d / "evil_footer.so", "marker": marker, "rows": d / "rows.csv"}


def _lumber(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(Path(lumber.__file__).resolve().parents[1]))
    return subprocess.run([sys.executable, "-m", "lumber", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.parametrize("name, message", [
    ("evil", "not a library lumber built"), ("evil_footer", "does not match its recorded digest"),
    ("trunc", "truncated shared library"), ("edited", "does not match its recorded digest"),
])
def test_refused_by_every_command(files: dict[str, Path], name: str, message: str) -> None:
    path = files[name]
    for args in (["inspect", str(path)], ["inspect", str(path), "--json"], ["predict", str(path), str(files["rows"])]):
        r = _lumber(*args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)  # an error, not a signal (Bus error: 135)
        assert message in r.stderr and "Traceback" not in r.stderr, r.stderr
    with pytest.raises(ModelFormatError, match=message):
        lumber.load_compiled(path)
    with pytest.raises(ModelFormatError, match=message):
        verify_library(path.read_bytes(), str(path))
    assert not files["marker"].exists(), "the library's constructor ran"


def test_good_library_verifies_and_is_inspected_without_loading(files: dict[str, Path]) -> None:
    r = _lumber("inspect", str(files["good"]), "--json")
    assert r.returncode == 0, r.stderr
    man = verify_library(files["good"].read_bytes())
    assert '"loads_here": "yes"' in r.stdout and man.sha256 in r.stdout
    pred = lumber.load_compiled(files["good"])
    assert pred.fingerprint == man.models["lumber"]["fingerprint"]
    assert pred.source is not None and "lumber_predict_raw" in pred.source  # the source it carries


def _foreign(data: bytes) -> bytes:
    """The same library and sources, marked as built for aarch64 and signed again."""
    man = verify_library(data)
    lib = bytearray(man.library)
    struct.pack_into("<H", lib, 18, 183)  # e_machine: EM_AARCH64
    return sign_library(bytes(lib), models=man.models, sources=man.source_texts())


def test_foreign_machine_library_is_rebuilt_from_its_source(files: dict[str, Path], tmp_path: Path) -> None:
    foreign = tmp_path / "arm.so"
    foreign.write_bytes(_foreign(files["good"].read_bytes()))
    with pytest.raises(ForeignLibraryError, match="ELF machine 183"):
        verify_library(foreign.read_bytes(), str(foreign))
    r = _lumber("inspect", str(foreign))
    assert r.returncode == 0 and "loads here no: " in r.stdout and "ELF machine 183" in r.stdout, r.stdout
    rows = pd.read_csv(files["rows"])
    want = lumber.load_compiled(files["good"]).predict_raw(rows)
    assert np.array_equal(lumber.load_compiled(foreign).predict_raw(rows), want)


def test_foreign_library_without_a_compiler_says_so(files: dict[str, Path], tmp_path: Path) -> None:
    foreign = tmp_path / "arm.so"
    foreign.write_bytes(_foreign(files["good"].read_bytes()))
    code = f"import lumber\nlumber.load_compiled({str(foreign)!r})\n"
    env = dict(os.environ, PATH=str(tmp_path), CC="",
               PYTHONPATH=str(Path(lumber.__file__).resolve().parents[1]))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode != 0 and "no C compiler is present to rebuild it" in r.stderr, r.stderr
