"""lumber.compiler.api."""
