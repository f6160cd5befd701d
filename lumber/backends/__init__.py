"""Backends emit artifacts (C, ONNX, decision tables, reports) from IR; they never change the model."""
