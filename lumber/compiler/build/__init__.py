"""``lumber build``: a declarative build file -> compiled artifacts, checks, a report, a manifest.

Modules, one job each: :mod:`spec` (the build file's sections and keys),
:mod:`validate` (TOML, unknown keys with the nearest valid one), :mod:`inputs`
(files, data columns, constraints, pipeline, output folder: checked before
any work), :mod:`cache` (incremental step cache), :mod:`compile_steps` and
:mod:`explain_steps` (the work, through lumber's public API),
:mod:`gates` (checks and what ``--check`` fails on), :mod:`document` (the
report document), :mod:`manifest`, and :mod:`driver` (order and atomic
publishing).

```python
from lumber.compiler.build import build
result = build("lumber.toml")          # -> BuildResult(.output, .manifest, .checks, .failed)
```
"""

from .driver import BuildResult, build, build_config, print_summary
from .gates import Check
from .spec import BuildConfig
from .validate import BuildFileError, config_from_dict, key_table, load_build_file

__all__ = ["BuildConfig", "BuildFileError", "BuildResult", "Check", "build", "build_config", "config_from_dict",
           "key_table", "load_build_file", "print_summary"]
