"""The records package's public surface: what other packages import of it, and ``kafkalog.warm_up``."""

from __future__ import annotations

import ast
from pathlib import Path

import kafkalog
from kafkalog.records import _kernels, kernels

SRC = Path(kafkalog.__file__).parent
BENCH = SRC.parents[1] / "bench"


def private_imports_of_records(path: Path) -> list[str]:
    """``from kafkalog.records... import ...`` statements of ``path`` that name a private module or name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kafkalog.records"):
            module = node.module or ""
            names = [alias.name for alias in node.names]
            if any(part.startswith("_") for part in module.split(".")) or any(
                n.startswith("_") for n in names
            ):
                found.append(f"{path.name}:{node.lineno}: from {module} import {', '.join(names)}")
        elif isinstance(node, ast.Import):
            found += [
                f"{path.name}:{node.lineno}: import {alias.name}"
                for alias in node.names
                if alias.name.startswith("kafkalog.records._")
            ]
    return found


def test_no_package_or_benchmark_imports_private_names_of_records() -> None:
    """Eleven modules outside ``records`` imported ``records._kernels`` (and ``_encode``, ``_intrinsics``)
    names; they use :mod:`kafkalog.records.kernels` now."""
    paths = [p for p in SRC.rglob("*.py") if p.parent != SRC / "records"] + sorted(BENCH.glob("*.py"))
    offenders = [line for path in sorted(paths) for line in private_imports_of_records(path)]
    assert offenders == []


def test_warm_up_is_public_and_the_old_path_still_works() -> None:
    assert kafkalog.warm_up is kernels.warm_up is _kernels.warm_up
    assert "warm_up" in kafkalog.__all__
