"""The driver layer: frontends, the constraint language, the pipeline and the CLI.

``compiler`` may import every other subpackage; nothing imports ``compiler``
except the public API in ``lumber/__init__.py``.
"""
