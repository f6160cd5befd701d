"""lumber.passes.transforms."""
