"""``python -m kafkalog.cli``: the ``kafkalog`` command without the console script."""

from __future__ import annotations

from kafkalog.cli.main import main

if __name__ == "__main__":
    main()
