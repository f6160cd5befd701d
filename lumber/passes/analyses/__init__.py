"""lumber.passes.analyses."""
