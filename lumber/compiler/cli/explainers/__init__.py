"""One module per analysis for `lumber explain`: each exposes explain(ctx) -> (json, text)."""
