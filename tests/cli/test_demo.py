"""`lumber demo` (what `make demo` runs) completes offline and checks every claim it prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumber.compiler.cli import main


def test_demo_small_model_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--trees", "8", "--leaves", "6", "--keep", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "all checks passed" in out
    assert "margins bit-identical to LightGBM" in out
    assert (tmp_path / "model.txt").exists() and (tmp_path / "model.onnx").exists()
