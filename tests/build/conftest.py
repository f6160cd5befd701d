"""Fixtures: the small project, and one complete build of it shared by the read-only tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from buildproject import copy_project, make_project


@pytest.fixture(scope="session")
def project_src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("project-src"))


@pytest.fixture
def project(project_src: Path, tmp_path: Path) -> Path:
    """A private copy of the project's inputs."""
    return copy_project(project_src, tmp_path / "proj")


@pytest.fixture(scope="session")
def built(project_src: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """(project folder, BuildResult) of one full build with targets c and onnx."""
    from lumber.compiler.build import build

    proj = copy_project(project_src, tmp_path_factory.mktemp("built"))
    return proj, build(proj / "lumber.toml")
