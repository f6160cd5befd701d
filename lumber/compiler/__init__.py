"""The driver layer: frontends, the constraint language (``dsl``) and the drivers.

The drivers are the public API (``api``), the CLI (``cli``), ``lumber build`` (``build``) and the
compile drivers (``targets``, ``speed``, ``tables``, ``walks``, ``tolerance``). ``compiler`` may import
every other subpackage; nothing imports ``compiler`` except the public API in ``lumber/__init__.py``.
"""
