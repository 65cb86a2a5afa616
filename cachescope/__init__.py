"""cachescope: shadow-cache analytics for grid storage access logs.

From a notebook: `cachescope.whatif(store, policy, size, start, end)` and the read layer's answers
as pandas DataFrames (cachescope/notebook.py, imported on first use so that `import cachescope`
stays cheap for the command line)."""

__version__ = "0.1.0"

_NOTEBOOK = ("whatif", "connect")  # not recommend: cachescope.recommend is the library module


def __getattr__(name: str):
    if name in _NOTEBOOK:
        # by name, not an import statement: modules that import `cachescope` for `_simcore` must not
        # appear (to import-linter) to depend on the notebook layer above them
        import importlib

        return getattr(importlib.import_module("cachescope.notebook"), name)
    raise AttributeError(f"module 'cachescope' has no attribute {name!r}")
