"""Where kafkalog's documentation is: ``python -m kafkalog.docs`` prints the directory.

The wheel installs the repository's ``docs/`` (architecture.md, formats.md, operations.md, server.md, spark.md,
benchmarks.md and its charts) here, as ``kafkalog/docs/`` beside this module: the package's long description
(what an index page shows) names those files as ``docs/…`` instead of linking to them, as the project has no
public URL (``hatch_build.py``). In a checkout (an editable install) they are the repository's ``docs/``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["docs_dir"]

#: A file every copy of the docs has.
_MARKER = "architecture.md"


def docs_dir() -> Path:
    """The directory holding the documentation: beside this module in a wheel install, else the checkout's
    ``docs/``. Raises :class:`FileNotFoundError` when neither has it."""
    here = Path(__file__).resolve().parent
    for candidate in (here, here.parents[2] / "docs"):
        if (candidate / _MARKER).is_file():
            return candidate
    raise FileNotFoundError(f"kafkalog's documentation is not installed (looked in {here})")
