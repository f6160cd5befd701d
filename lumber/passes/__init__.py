"""Passes over the IR: transforms (IR -> IR) and analyses (IR + data -> result).

``passes`` imports ``ir`` only. The registry of pipeline pass names lives in
``lumber.passes.registry``.
"""
