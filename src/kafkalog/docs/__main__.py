"""``python -m kafkalog.docs``: print the directory holding kafkalog's documentation (:mod:`kafkalog.docs`)."""

from __future__ import annotations

import sys

from kafkalog.docs import docs_dir


def main() -> int:
    """Prints the directory; exits 1 with a message on stderr when the docs are not installed."""
    try:
        print(docs_dir())
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
