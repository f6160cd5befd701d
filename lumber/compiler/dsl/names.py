"""Name resolution: what a feature reference in an expression means.

In an expression a bare name ``X`` is the new value of feature ``X``; the
sugar ``X0`` is its original value and ``dX`` its change (``X - X0``). A name
is sugar only when the plain reading is not a known feature and the stripped
name is one. Known features are the model's (when a schema is given) or else
the names the file mentions in feature positions (statement heads, name lists,
``if X increases``). Quoted names (`` `X0` ``) and ``orig(X)``/``delta(X)`` are
never sugar. The printer uses :meth:`Resolver.spell` so its output reads back
the same way.
"""

from __future__ import annotations

import difflib
from typing import Iterable

from .lexicon import KEYWORDS, NAME_RE

VALUE, ORIG, DELTA = "value", "orig", "delta"


class Resolver:
    """Maps ``(text, quoted, form)`` to ``(feature, VALUE|ORIG|DELTA)`` against a set of known names."""

    def __init__(self, known: Iterable[str], strict: bool) -> None:
        self.known = set(known)
        self.strict = strict
        """Unknown names are errors (a schema is known) rather than plain features."""

    def resolve(self, text: str, quoted: bool = False, form: str = "plain") -> tuple[str, str] | None:
        """The feature and reading, or None when ``strict`` and the name is unknown."""
        if form in (ORIG, DELTA):
            return (text, form) if not self.strict or text in self.known else None
        if quoted or text in self.known:
            return (text, VALUE) if not self.strict or text in self.known else None
        if len(text) > 1 and text.endswith("0") and text[:-1] in self.known:
            return text[:-1], ORIG
        if len(text) > 1 and text.startswith("d") and text[1:] in self.known:
            return text[1:], DELTA
        return None if self.strict else (text, VALUE)

    def suggest(self, text: str) -> str | None:
        """The nearest spelling of a known feature (or of its sugar forms)."""
        names = sorted(self.known)
        lowered = {n.lower(): n for n in names}
        if text.lower() in lowered:
            return lowered[text.lower()]
        cands = names + [n + "0" for n in names] + ["d" + n for n in names]
        close = difflib.get_close_matches(text, cands, n=1, cutoff=0.6)
        return close[0] if close else None

    def spell(self, feature: str, reading: str = VALUE) -> str:
        """Source text that resolves back to ``(feature, reading)``: sugar when it is unambiguous."""
        bare = {VALUE: feature, ORIG: feature + "0", DELTA: "d" + feature}[reading]
        readable = not (reading == ORIG and feature[-1:].isdigit())  # `PAY_AMT10` would read as a feature
        if readable and is_bare_name(bare) and self.resolve(bare) == (feature, reading):
            return bare
        name = quote_name(feature)
        if reading == VALUE:
            return name
        return f"{reading}({name})"


def is_bare_name(text: str) -> bool:
    """Can ``text`` be written without backquotes anywhere?"""
    return bool(NAME_RE.match(text)) and text not in KEYWORDS


def quote_name(text: str) -> str:
    """A feature name as written in a feature position (backquoted when needed)."""
    if is_bare_name(text):
        return text
    body = text.replace("\\", "\\\\").replace("`", "\\`").replace("\n", "\\n").replace("\t", "\\t")
    return f"`{body}`"


def quote_string(text: str) -> str:
    body = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{body}"'
