"""What runs a compiled model: predictors over artifacts, streaming files, reading data files, progress.

``runtime`` imports ``lumber.ir``, ``lumber.backends`` and ``lumber.datasets``; the drivers in
``lumber.compiler`` build on it.
"""
