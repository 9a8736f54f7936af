"""Where numba's kernel caches go (:mod:`kafkalog.jit`): out of the package, and never a crash on a
read-only install used by a user without a writable ``$HOME`` (issue 23 item 7).

The subprocess tests run a read-only copy of the package without the capabilities that let root ignore
write bits (``setpriv``), or directly when the tests already run as a normal user.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kafkalog

_PACKAGE = Path(kafkalog.__file__).resolve().parent


def test_user_cache_dir_is_xdg_cache_home(tmp_path: Path) -> None:
    from kafkalog.jit import choose_cache_dir

    chosen, warning = choose_cache_dir({"XDG_CACHE_HOME": str(tmp_path), "HOME": "/nonexistent"})
    assert chosen is not None and warning is None
    assert Path(chosen).parent == tmp_path / "kafkalog" / "numba"
    assert not Path(chosen).is_relative_to(_PACKAGE)


def test_user_numba_cache_dir_wins(tmp_path: Path) -> None:
    from kafkalog.jit import choose_cache_dir

    chosen, warning = choose_cache_dir({"NUMBA_CACHE_DIR": str(tmp_path / "mine"), "HOME": str(tmp_path)})
    assert (chosen, warning) == (str(tmp_path / "mine"), None)


def test_unwritable_numba_cache_dir_means_no_cache(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    from kafkalog.jit import choose_cache_dir

    chosen, warning = choose_cache_dir({"NUMBA_CACHE_DIR": str(tmp_path / "file" / "sub")})
    assert chosen is None
    assert warning is not None and "NUMBA_CACHE_DIR" in warning and "\n" not in warning


def test_shared_temp_dir_others_can_write_is_refused(tmp_path: Path) -> None:
    """numba caches are pickles: a fallback directory other users could write is never used."""
    shared = tmp_path / f"kafkalog-numba-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o777)
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True)
    (home / ".cache" / "kafkalog").write_bytes(b"")  # the user cache dir cannot be created
    from kafkalog.jit import choose_cache_dir

    chosen, warning = choose_cache_dir({"HOME": str(home), "TMPDIR": str(tmp_path)})
    assert chosen is None
    assert warning is not None and "NUMBA_CACHE_DIR" in warning


def _restricted(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: write bits cannot be enforced")
    return ["setpriv", "--bounding-set=-all", "--inh-caps=-all", *argv]


def _read_only_install(tmp_path: Path) -> tuple[Path, Path]:
    """A read-only copy of the package and a read-only HOME; skips if write bits are not enforced."""
    site = tmp_path / "site"
    shutil.copytree(_PACKAGE, site / "kafkalog", ignore=shutil.ignore_patterns("__pycache__", "*.nb?"))
    home = tmp_path / "home"
    home.mkdir()
    for path in [home, *site.rglob("*"), site]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    probe = subprocess.run(_restricted(["touch", str(site / "kafkalog" / "x"), str(home / "x")]), check=False)
    if probe.returncode == 0:
        pytest.skip("write bits are not enforced here")
    return site, home


def _run(site: Path, env: dict[str, str], code: str) -> subprocess.CompletedProcess[str]:
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(site), **env}
    return subprocess.run(
        _restricted([sys.executable, "-c", code]),
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _restore(tmp_path: Path) -> None:
    for path in tmp_path.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)


_IMPORT_ALL = (
    "import kafkalog.records, kafkalog.records.columnar, kafkalog.cleaner.kernels, kafkalog.partitioner\n"
    "from kafkalog.cli.main import cli\n"
    "try:\n"
    "    cli(['--help'])\n"
    "except SystemExit as e:\n"
    "    assert e.code == 0, e.code\n"
)


def test_read_only_install_caches_in_private_temp_dir(tmp_path: Path) -> None:
    site, home = _read_only_install(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir(mode=0o700)
    try:
        code = (
            _IMPORT_ALL
            + "from kafkalog.partitioner import partition_for_key\nprint(partition_for_key(b'k', 7))\n"
        )
        result = _run(site, {"HOME": str(home), "TMPDIR": str(tmp)}, code)
    finally:
        _restore(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Usage: " in result.stdout
    warnings = [line for line in result.stderr.splitlines() if "NUMBA_CACHE_DIR" in line]
    assert len(warnings) == 1, result.stderr
    assert list(site.rglob("*.nb?")) == []
    assert list((tmp / f"kafkalog-numba-{os.getuid()}").rglob("*.nbi")) != []


def test_read_only_install_without_any_writable_dir_runs_uncached(tmp_path: Path) -> None:
    site, home = _read_only_install(tmp_path)
    try:
        result = _run(site, {"HOME": str(home), "TMPDIR": str(home)}, _IMPORT_ALL)
    finally:
        _restore(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Usage: " in result.stdout
    warnings = [line for line in result.stderr.splitlines() if "NUMBA_CACHE_DIR" in line]
    assert len(warnings) == 1 and "without a cache" in warnings[0], result.stderr
    assert list(site.rglob("*.nb?")) == []
