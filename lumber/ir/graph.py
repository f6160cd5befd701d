"""Derived structure (depths, parents, paths) and the networkx view of a Forest.

A view, never the storage: everything here is computed from the node arrays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .arrays import ForestArrays

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx


def parents(forest: ForestArrays) -> npt.NDArray[np.int64]:
    """Parent of every node (-1 for roots)."""
    par = np.full(forest.n_nodes, -1, dtype=np.int64)
    internal = np.flatnonzero(forest.left >= 0)
    par[forest.left[internal]] = internal
    par[forest.right[internal]] = internal
    return par


def node_depths(forest: ForestArrays) -> npt.NDArray[np.int32]:
    """Depth of every node, one numpy step per tree level."""
    depth = np.zeros(forest.n_nodes, dtype=np.int32)
    frontier = forest.tree_offset[:-1].astype(np.int64)
    frontier = frontier[frontier < forest.n_nodes]
    d = 0
    seen = 0
    while frontier.size:
        depth[frontier] = d
        seen += frontier.size
        if seen > forest.n_nodes:  # a cycle; verify_forest reports it properly
            break
        inner = frontier[forest.left[frontier] >= 0]
        frontier = np.concatenate([forest.left[inner], forest.right[inner]]).astype(np.int64)
        d += 1
    depth.flags.writeable = False
    return depth


def leaf_paths(forest: ForestArrays, tree: int) -> dict[int, list[tuple[int, bool]]]:
    """For each leaf of ``tree`` (global id): the path as (node, went_left) pairs from the root."""
    par = parents(forest)
    sl = forest.tree_slice(tree)
    out: dict[int, list[tuple[int, bool]]] = {}
    for leaf in range(sl.start, sl.stop):
        if forest.left[leaf] >= 0:
            continue
        path: list[tuple[int, bool]] = []
        node = leaf
        while par[node] >= 0:
            p = int(par[node])
            path.append((p, bool(forest.left[p] == node)))
            node = p
        out[leaf] = path[::-1]
    return out


def forest_to_networkx(forest: ForestArrays) -> "nx.DiGraph":
    """A DiGraph with one node per IR node (global id) and edges labelled ``left``/``right``.

    Node attributes: ``tree``, ``leaf``, and either the test (``feature``,
    ``feature_name``, ``threshold`` or ``categories``, ``missing_left``) or the
    leaf ``value``.
    """
    import networkx as nx

    g = nx.DiGraph(n_trees=forest.n_trees, task=forest.schema.task.name.lower())
    names = forest.schema.feature_names
    tree_of = forest.node_tree
    for i in range(forest.n_nodes):
        attrs: dict[str, Any] = {"tree": int(tree_of[i]), "leaf": bool(forest.left[i] < 0)}
        if forest.left[i] < 0:
            attrs["value"] = forest.value[i].tolist()
        else:
            f = int(forest.feature[i])
            attrs.update(feature=f, feature_name=names[f], missing_left=bool(forest.missing_left[i]))
            if forest.is_categorical[i]:
                attrs["categories"] = forest.categories_of(i).tolist()
                attrs["categories_go_left"] = bool(forest.cat_in_set_left[i])
            else:
                attrs["threshold"] = float(forest.threshold[i])
        g.add_node(i, **attrs)
    internal = np.flatnonzero(forest.left >= 0)
    g.add_edges_from((int(i), int(forest.left[i]), {"branch": "left"}) for i in internal)
    g.add_edges_from((int(i), int(forest.right[i]), {"branch": "right"}) for i in internal)
    return g
