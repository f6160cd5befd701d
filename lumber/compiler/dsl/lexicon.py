"""The words of the constraint language, shared by the parser, the checker and the printers."""

from __future__ import annotations

import re

KEYWORDS = frozenset({
    "include", "immutable", "increase", "decrease", "between", "and", "in", "order", "cost", "up", "down",
    "per", "if", "then", "increases", "decreases", "changes", "is", "unchanged", "norm", "scale",
    "plausible", "target", "class", "orig", "delta", "integer", "binary", "continuous", "step", "onehot",
    "means",
})
"""Reserved words (must match the keyword terminals of actionability.lark)."""
STATEMENT_KEYWORDS = ("include", "immutable", "increase", "decrease", "if", "changes", "norm", "scale",
                      "plausible", "target", "onehot", "class")
CLAUSE_KEYWORDS = ("immutable", "increase", "decrease", "between", "<=", ">=", "in", "order", "cost", "integer",
                   "binary", "continuous", "step")
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
