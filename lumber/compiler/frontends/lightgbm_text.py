"""Reader of LightGBM's model text format (``booster.save_model`` / ``model_to_string``).

LightGBM's own loader crashes the process on truncated or edited files, and
treelite silently accepts truncated ones, so lumber parses the text itself and
checks its syntax here: the header, every ``Tree=i`` block, the per-field value
counts implied by ``num_leaves``, ``tree_sizes`` and the ``end of trees``
footer. Every problem is a :class:`ModelFormatError` naming the file, the tree
and the field. Semantic checks (child ranges, features, thresholds) and the
lowering to a Forest live in :mod:`lumber.compiler.frontends.lightgbm`.

Numbers are parsed field by field for all trees at once (one ``np.fromstring``
call per field), never per node in Python.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.ir import IRLocation, ModelFormatError, UnsupportedModelError

END_OF_TREES = "end of trees"
KNOWN_VERSIONS = ("v2", "v3", "v4")
INTERNAL_FIELDS = ("split_feature", "threshold", "decision_type", "left_child", "right_child")
"""Per-internal-node fields lumber needs (``num_leaves - 1`` values each)."""
HEADER_REQUIRED = ("version", "num_class", "num_tree_per_iteration", "max_feature_idx", "feature_names")


@dataclass
class LightGBMText:
    """A parsed model file: header values and every tree's fields concatenated in tree order.

    Internal-node arrays hold ``sum(num_leaves - 1)`` entries, leaf arrays
    ``sum(num_leaves)``; tree ``t``'s entries follow those of trees ``< t``.
    """

    name: str
    version: str
    num_class: int
    num_tree_per_iteration: int
    max_feature_idx: int
    objective: str | None
    average_output: bool
    feature_names: list[str]
    feature_infos: list[str] | None
    pandas_categorical: list[list[Any]] | None
    num_leaves: npt.NDArray[np.int64]
    split_feature: npt.NDArray[np.int64]
    threshold: npt.NDArray[np.float64]
    decision_type: npt.NDArray[np.int64]
    left_child: npt.NDArray[np.int64]
    right_child: npt.NDArray[np.int64]
    leaf_value: npt.NDArray[np.float64]
    internal_count: npt.NDArray[np.int64] | None
    leaf_count: npt.NDArray[np.int64] | None
    num_cat: npt.NDArray[np.int64]
    cat_trees: npt.NDArray[np.int64]
    """Trees with ``num_cat > 0``, ascending; the ``cat_*`` arrays below hold their bitsets in this order."""
    cat_boundaries: npt.NDArray[np.int64]
    """Every such tree's ``num_cat + 1`` boundaries (word offsets local to the tree), concatenated."""
    cat_threshold: npt.NDArray[np.int64]
    """Every such tree's 32-bit bitset words, concatenated."""
    cat_word_offset: npt.NDArray[np.int64]
    categorical_feature: tuple[int, ...] = ()
    """Columns trained as categorical (the parameters' ``[categorical_feature: ...]``), used in a split or not."""
    """``cat_threshold[cat_word_offset[c]:cat_word_offset[c + 1]]`` are the words of tree ``cat_trees[c]``."""

    @property
    def n_trees(self) -> int:
        return int(self.num_leaves.shape[0])


def _err(name: str, message: str, *notes: str, tree: int | None = None, node: int | None = None,
         field_name: str | None = None) -> ModelFormatError:
    return ModelFormatError(message, *notes, location=IRLocation(file=name, tree=tree, node=node, field=field_name))


def _int(name: str, value: str, what: str, tree: int | None = None) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise _err(name, f"'{what}' must be an integer, got {value.strip()[:40]!r}", tree=tree,
                   field_name=what) from None


def _parse_header(name: str, text: str) -> dict[str, str]:
    lines = text.split("\n")
    first = lines[0].strip()
    if first != "tree":
        raise ModelFormatError(
            f"{name}: not a LightGBM model text file (first line is {first[:40]!r}, expected 'tree')",
            "save the model with booster.save_model('model.txt') or pass the Booster object")
    kv: dict[str, str] = {}
    for ln in lines[1:]:
        ln = ln.rstrip("\r")
        if not ln.strip():
            continue
        key, sep, value = ln.partition("=")
        kv[key.strip()] = value if sep else ""
    return kv


def _block_starts(name: str, text: str, start: int, end: int, tree_sizes: list[int] | None) -> list[int]:
    """Offsets of every ``Tree=i`` block in ``text[start:end]`` (plus ``end``)."""
    if tree_sizes is not None:
        starts = [start]
        for i, size in enumerate(tree_sizes):
            pos = starts[-1]
            if not text.startswith(f"Tree={i}\n", pos) and not text.startswith(f"Tree={i}\r\n", pos):
                raise _err(name, f"tree_sizes does not match the tree blocks: tree {i} should start at byte "
                                 f"{pos - start} of the trees section, found {text[pos:pos + 24]!r}",
                           "the header line 'tree_sizes=' was edited or the file was modified; "
                           "re-save the model with LightGBM", tree=i, field_name="tree_sizes")
            starts.append(pos + size)
        if starts[-1] != end:
            raise _err(name, f"tree_sizes adds up to {starts[-1] - start} bytes but the tree blocks take "
                             f"{end - start} bytes before '{END_OF_TREES}'",
                       "the header line 'tree_sizes=' was edited or trees were added or removed",
                       field_name="tree_sizes")
        return starts
    starts = []
    pos = start
    while pos < end:
        starts.append(pos)
        nxt = text.find("\nTree=", pos + 1, end)
        pos = end if nxt < 0 else nxt + 1
    starts.append(end)
    return starts


def _fast_count(value: str) -> int:
    """Number of values in a canonically written field (single spaces)."""
    return value.count(" ") + 1 if value else 0


def _fromstring(text: str, dtype: type) -> npt.NDArray[Any] | None:
    """Strict whitespace-separated parse (exactly rounded); None if any token is not a number."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return np.fromstring(text, sep=" ", dtype=dtype)  # type: ignore[call-overload, no-any-return]
    except (ValueError, DeprecationWarning):
        return None


def _numbers(name: str, parts: list[str], counts: npt.NDArray[np.int64], dtype: type, what: str,
             trees: npt.NDArray[np.int64] | None = None, dedupe: bool = False) -> npt.NDArray[Any]:
    """Parse the field ``what`` of all trees at once; locate the bad token on failure.

    ``dedupe`` parses each distinct token once: thresholds repeat a lot (they
    are histogram bin edges), and float parsing is the slowest step of a load.
    """
    total = int(counts.sum())
    joined = " ".join(parts)
    arr: npt.NDArray[Any] | None = None
    if dedupe:
        tokens = joined.split()
        if len(tokens) == total:
            uniq = list(dict.fromkeys(tokens))
            vals = _fromstring(" ".join(uniq), dtype)
            if vals is not None and vals.shape[0] == len(uniq):
                lookup = dict(zip(uniq, vals.tolist()))
                arr = np.fromiter(map(lookup.__getitem__, tokens), dtype=dtype, count=total)
        del tokens
    else:
        arr = _fromstring(joined, dtype)
    if arr is not None and arr.shape[0] == total:
        return arr
    conv = int if dtype is np.int64 else float
    for i, part in enumerate(parts):
        t = int(trees[i]) if trees is not None else i
        for tok in part.split():
            try:
                conv(tok)
            except ValueError:
                kind = "an integer" if conv is int else "a number"
                raise _err(name, f"field '{what}' holds {tok[:40]!r}, expected {kind}", tree=t,
                           field_name=what) from None
    raise _err(name, f"field '{what}' could not be parsed ({total} values expected)", field_name=what)


def _check_count(name: str, t: int, what: str, value: str, expected: int, why: str) -> None:
    """Exact value count of one field, tolerant of extra whitespace; ``why`` explains ``expected``."""
    if _fast_count(value) == expected:
        return
    got = len(value.split())
    if got != expected:
        raise _err(name, f"field '{what}' has {got} values, expected {expected} ({why})",
                   "the arrays of a tree must have consistent lengths", tree=t, field_name=what)


def parse_lightgbm_text(data: bytes | str, name: str) -> LightGBMText:
    """Parse and syntax-check a LightGBM model text; ``name`` is used in error messages."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ModelFormatError(f"{name}: not a LightGBM model text file (not UTF-8 text at byte {exc.start})",
                                   "expected a file written by booster.save_model()") from None
    else:
        text = data
    if not text.strip():
        raise ModelFormatError(f"{name}: file is empty", "expected a LightGBM model text file")
    stripped = text.lstrip()
    if stripped is not text:
        text = stripped
    first_tree = text.find("\nTree=")
    end_mark = text.find("\n" + END_OF_TREES)
    header_end = first_tree if first_tree >= 0 else (end_mark if end_mark >= 0 else len(text))
    kv = _parse_header(name, text[:header_end])
    for key in HEADER_REQUIRED:
        if key not in kv:
            raise _err(name, f"header has no '{key}=' line", "the file is not a complete LightGBM model text",
                       field_name=key)
    version = kv["version"].strip()
    if version not in KNOWN_VERSIONS:
        raise UnsupportedModelError(f"LightGBM model format version {version!r} is not supported",
                                    f"supported versions: {', '.join(KNOWN_VERSIONS)}",
                                    location=IRLocation(file=name, field="version"))
    num_class = _int(name, kv["num_class"], "num_class")
    ntpi = _int(name, kv["num_tree_per_iteration"], "num_tree_per_iteration")
    max_feature_idx = _int(name, kv["max_feature_idx"], "max_feature_idx")
    if num_class < 1 or ntpi < 1 or max_feature_idx < 0:
        raise _err(name, f"invalid header: num_class={num_class}, num_tree_per_iteration={ntpi}, "
                         f"max_feature_idx={max_feature_idx}", "all must be positive (max_feature_idx >= 0)")
    feature_names = kv["feature_names"].split()
    if len(feature_names) != max_feature_idx + 1:
        raise _err(name, f"feature_names lists {len(feature_names)} names but max_feature_idx={max_feature_idx}",
                   field_name="feature_names")
    feature_infos = kv["feature_infos"].split() if "feature_infos" in kv else None
    if feature_infos is not None and len(feature_infos) != max_feature_idx + 1:
        raise _err(name, f"feature_infos has {len(feature_infos)} entries but max_feature_idx={max_feature_idx}",
                   field_name="feature_infos")
    tree_sizes: list[int] | None = None
    if "tree_sizes" in kv:
        toks = kv["tree_sizes"].split()
        try:
            tree_sizes = [int(s) for s in toks]
        except ValueError:
            raise _err(name, "tree_sizes must be a list of integers", field_name="tree_sizes") from None
        if any(s <= 0 for s in tree_sizes):
            raise _err(name, "tree_sizes entries must be positive", field_name="tree_sizes")

    if end_mark < 0:
        n_found = text.count("\nTree=")
        listed = f" of the {len(tree_sizes)} listed in tree_sizes" if tree_sizes is not None else ""
        raise _err(name, f"truncated model file: no '{END_OF_TREES}' line (found {n_found} tree headers{listed})",
                   "the file was cut short; re-save the model with booster.save_model()")
    trees_start = first_tree + 1 if 0 <= first_tree < end_mark else end_mark + 1
    trees_end = end_mark + 1
    starts = _block_starts(name, text, trees_start, trees_end, tree_sizes)
    T = len(starts) - 1

    num_leaves = np.empty(T, dtype=np.int64)
    num_cat = np.zeros(T, dtype=np.int64)
    parts: dict[str, list[str]] = {f: [] for f in (*INTERNAL_FIELDS, "leaf_value", "leaf_count", "internal_count")}
    have_counts = True
    cat_trees: list[int] = []
    cat_parts: dict[str, list[str]] = {"cat_boundaries": [], "cat_threshold": []}
    n_words: list[int] = []
    for t in range(T):
        block = text[starts[t]:starts[t + 1]]
        lines = block.split("\n")
        head = lines[0].rstrip("\r")
        if head != f"Tree={t}":
            raise _err(name, f"expected 'Tree={t}', found {head[:40]!r}", "tree blocks must be numbered 0, 1, 2, ...",
                       tree=t)
        kvt: dict[str, str] = {}
        for ln in lines[1:]:
            ln = ln.rstrip("\r")
            if not ln:
                continue
            key, sep, value = ln.partition("=")
            if not sep:
                raise _err(name, f"line {ln[:40]!r} is not 'key=value'", tree=t)
            kvt[key] = value
        for key in ("num_leaves", "num_cat", "leaf_value"):
            if key not in kvt:
                raise _err(name, f"tree has no '{key}=' line", "the tree block is incomplete", tree=t, field_name=key)
        L = _int(name, kvt["num_leaves"], "num_leaves", t)
        if L < 1:
            raise _err(name, f"num_leaves={L}, expected at least 1", tree=t, field_name="num_leaves")
        num_leaves[t] = L
        nc = _int(name, kvt["num_cat"], "num_cat", t)
        if nc < 0:
            raise _err(name, f"num_cat={nc} is negative", tree=t, field_name="num_cat")
        num_cat[t] = nc
        if kvt.get("is_linear", "0").strip() not in ("0", ""):
            raise UnsupportedModelError(
                f"tree {t} is a linear tree (is_linear={kvt['is_linear'].strip()})",
                "lumber compiles piecewise-constant trees only; retrain with linear_tree=False",
                location=IRLocation(file=name, tree=t, field="is_linear"))
        for key in INTERNAL_FIELDS:
            if L > 1 and key not in kvt:
                raise _err(name, f"tree has no '{key}=' line", "the tree block is incomplete", tree=t, field_name=key)
            value = kvt.get(key, "")
            _check_count(name, t, key, value, L - 1, f"num_leaves - 1 with num_leaves={L}")
            parts[key].append(value)
        _check_count(name, t, "leaf_value", kvt["leaf_value"], L, "num_leaves")
        parts["leaf_value"].append(kvt["leaf_value"])
        if have_counts and "leaf_count" in kvt and "internal_count" in kvt:
            _check_count(name, t, "leaf_count", kvt["leaf_count"], L, "num_leaves")
            _check_count(name, t, "internal_count", kvt["internal_count"], L - 1, f"num_leaves - 1 with num_leaves={L}")
            parts["leaf_count"].append(kvt["leaf_count"])
            parts["internal_count"].append(kvt["internal_count"])
        else:
            have_counts = False
        if nc > 0:
            for key in ("cat_boundaries", "cat_threshold"):
                if key not in kvt:
                    raise _err(name, f"num_cat={nc} but the tree has no '{key}=' line", tree=t, field_name=key)
            _check_count(name, t, "cat_boundaries", kvt["cat_boundaries"], nc + 1, f"num_cat + 1 with num_cat={nc}")
            cat_trees.append(t)
            cat_parts["cat_boundaries"].append(kvt["cat_boundaries"])
            cat_parts["cat_threshold"].append(kvt["cat_threshold"])
            n_words.append(len(kvt["cat_threshold"].split()))
        del block, lines, kvt

    if tree_sizes is None and T == 0 and "Tree=" in text[:end_mark]:
        raise _err(name, "tree blocks could not be located")
    n_int = num_leaves - 1
    tree_ids = np.arange(T, dtype=np.int64)
    arrays: dict[str, npt.NDArray[Any]] = {}
    for key in INTERNAL_FIELDS:
        dtype = np.float64 if key == "threshold" else np.int64
        arrays[key] = _numbers(name, parts.pop(key), n_int, dtype, key, tree_ids, dedupe=key == "threshold")
    leaf_value = _numbers(name, parts.pop("leaf_value"), num_leaves, np.float64, "leaf_value", tree_ids)
    internal_count = leaf_count = None
    if have_counts and T:
        internal_count = _numbers(name, parts.pop("internal_count"), n_int, np.int64, "internal_count", tree_ids)
        leaf_count = _numbers(name, parts.pop("leaf_count"), num_leaves, np.int64, "leaf_count", tree_ids)
    cat_tree_ids = np.asarray(cat_trees, dtype=np.int64)
    n_bound = num_cat[cat_tree_ids] + 1
    bounds = _numbers(name, cat_parts["cat_boundaries"], n_bound, np.int64, "cat_boundaries", cat_tree_ids)
    words_per_tree = np.asarray(n_words, dtype=np.int64)
    words = _numbers(name, cat_parts["cat_threshold"], words_per_tree, np.int64, "cat_threshold", cat_tree_ids)
    word_offset = np.zeros(len(cat_trees) + 1, dtype=np.int64)
    np.cumsum(words_per_tree, out=word_offset[1:])
    _check_bitsets(name, cat_tree_ids, n_bound, bounds, words_per_tree, words)

    return LightGBMText(
        name=name, version=version, num_class=num_class, num_tree_per_iteration=ntpi,
        max_feature_idx=max_feature_idx, objective=kv.get("objective", "").strip() or None,
        average_output="average_output" in kv, feature_names=feature_names, feature_infos=feature_infos,
        pandas_categorical=_pandas_categorical(name, text, end_mark),
        num_leaves=num_leaves, split_feature=arrays["split_feature"], threshold=arrays["threshold"],
        decision_type=arrays["decision_type"], left_child=arrays["left_child"], right_child=arrays["right_child"],
        leaf_value=leaf_value, internal_count=internal_count, leaf_count=leaf_count, num_cat=num_cat,
        cat_trees=cat_tree_ids, cat_boundaries=bounds, cat_threshold=words, cat_word_offset=word_offset,
        categorical_feature=_categorical_feature(text, end_mark),
    )


def _categorical_feature(text: str, end_mark: int) -> tuple[int, ...]:
    """Column indices of the parameters' ``[categorical_feature: 7,9,22]`` line (empty when absent)."""
    pos = text.find("\n[categorical_feature: ", end_mark)
    if pos < 0:
        return ()
    line = text[pos + len("\n[categorical_feature: "):].split("\n", 1)[0].rstrip("]").strip()
    parts = [p.strip() for p in line.split(",") if p.strip()]
    return tuple(int(p) for p in parts) if parts and all(p.isdigit() for p in parts) else ()


def _check_bitsets(name: str, trees: npt.NDArray[np.int64], n_bound: npt.NDArray[np.int64],
                   bounds: npt.NDArray[np.int64], n_words: npt.NDArray[np.int64], words: npt.NDArray[np.int64]) -> None:
    """Each tree's boundaries start at 0, never decrease and end at its number of words."""
    if not trees.size:
        return
    first = np.zeros(trees.shape[0], dtype=np.int64)
    np.cumsum(n_bound[:-1], out=first[1:])
    last = first + n_bound - 1
    step_ok = np.ones(bounds.shape[0], dtype=bool)
    step_ok[1:] = np.diff(bounds) >= 0
    step_ok[first] = True
    bad_step = np.zeros(trees.shape[0], dtype=bool)
    np.logical_or.at(bad_step, np.repeat(np.arange(trees.shape[0]), n_bound), ~step_ok)
    bad = (bounds[first] != 0) | (bounds[last] != n_words) | bad_step
    if bad.any():
        c = int(np.flatnonzero(bad)[0])
        shown = bounds[first[c]:last[c] + 1].tolist()
        raise _err(name, f"cat_boundaries {shown[:8]}{' ...' if len(shown) > 8 else ''} do not partition the "
                         f"{int(n_words[c])} words of cat_threshold",
                   "boundaries must start at 0, never decrease and end at len(cat_threshold)",
                   tree=int(trees[c]), field_name="cat_boundaries")
    if np.any((words < 0) | (words >= 2**32)):
        i = int(np.flatnonzero((words < 0) | (words >= 2**32))[0])
        c = int(np.searchsorted(np.cumsum(n_words), i, side="right"))
        raise _err(name, f"cat_threshold word {int(words[i])} is not an unsigned 32-bit integer",
                   tree=int(trees[c]), field_name="cat_threshold")


def _pandas_categorical(name: str, text: str, end_mark: int) -> list[list[Any]] | None:
    """The ``pandas_categorical:`` footer (category labels of DataFrame columns), if any."""
    pos = text.rfind("\npandas_categorical:", end_mark)
    if pos < 0:
        return None
    line = text[pos + len("\npandas_categorical:"):].split("\n", 1)[0].strip()
    try:
        value = json.loads(line)
    except ValueError:
        raise _err(name, "pandas_categorical footer is not valid JSON", field_name="pandas_categorical") from None
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, list) for v in value):
        raise _err(name, "pandas_categorical must be a list of category lists", field_name="pandas_categorical")
    return value
