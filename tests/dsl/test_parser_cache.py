"""The LALR tables are cached in a writable user folder, survive corruption, never touch the package."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumber.compiler.dsl import parse
from lumber.compiler.dsl.parse import parse_text


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("LUMBER_CACHE_DIR", str(tmp_path / "cache"))
    parse.parser.cache_clear()
    yield tmp_path / "cache"
    parse.parser.cache_clear()


def test_tables_are_cached_outside_the_package(fresh_cache: Path) -> None:
    parse.parser()
    files = list(fresh_cache.glob("dsl-*.lark-cache"))
    assert len(files) == 1 and files[0].stat().st_size > 1000
    pkg = Path(parse.__file__).parent
    assert not list(pkg.glob("*cache*"))
    parse.parser.cache_clear()
    assert parse_text("immutable Sex\n").statements  # loaded from the cache file


def test_corrupt_cache_is_rebuilt(fresh_cache: Path) -> None:
    parse.parser()
    (path,) = fresh_cache.glob("dsl-*.lark-cache")
    path.write_bytes(b"not a pickle")
    parse.parser.cache_clear()
    assert parse_text("Age: increase\n").statements
    assert path.read_bytes() != b"not a pickle"


def test_unwritable_cache_dir_still_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("LUMBER_CACHE_DIR", str(blocker / "sub"))  # cannot be created
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker / "sub2"))
    monkeypatch.setenv("HOME", str(blocker / "home"))
    parse.parser.cache_clear()
    try:
        assert parse_text("norm l1\n").statements
    finally:
        parse.parser.cache_clear()
