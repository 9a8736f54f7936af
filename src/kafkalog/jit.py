"""Where numba caches kafkalog's compiled kernels: never inside the installed package, never a crash.

Every numba kernel of kafkalog is declared ``@njit(cache=CACHE)`` with :data:`CACHE` from this module, and
this module, imported before any kernel is declared, chooses the cache directory once per process:

1. ``NUMBA_CACHE_DIR`` when the user set it (kept as given; if it cannot be written, caching is off);
2. else ``$XDG_CACHE_HOME/kafkalog/numba`` (default ``~/.cache/kafkalog/numba``);
3. else ``<tempdir>/kafkalog-numba-<uid>``, created mode 0700 and used only if this user owns it and
   nobody else can write it (numba's cache files are pickles: a directory others can write is not safe);
4. else no cache at all: kernels compile in every process (seconds on first use), nothing is written.

In cases 2 and 3 the caches of one installation live in a subdirectory named after a hash of its package
directory (:data:`CACHE_DIR`), so ``python -m kafkalog.jit`` names exactly the caches of this install (the
Makefile drops the stale ones there) and ``pip uninstall`` leaves no cache files in site-packages.
The choice is exported as ``NUMBA_CACHE_DIR`` in this process (so numba's config reloads keep it) and set
on ``numba.config`` if numba is already imported. Falling back to 3 or 4 logs one warning line naming
``NUMBA_CACHE_DIR`` on the ``kafkalog`` logger. Numba's own in-tree and user-wide locators, which wrote next
to the package or crashed with "no locator available" on a read-only install, are never reached.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Final

__all__ = ["CACHE", "CACHE_DIR", "choose_cache_dir"]

_ENV: Final = "NUMBA_CACHE_DIR"
_PACKAGE_DIR: Final = Path(__file__).resolve().parent
_log = logging.getLogger("kafkalog")


def _writable_dir(path: Path, *, private: bool = False) -> bool:
    """Whether ``path`` exists or can be created, and a file can be created in it (``private``: also
    owned by this user and not writable by group or others)."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        if private:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                return False
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return False
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError:
        return False
    return True


def _install_key() -> str:
    """A short name for this installation (its package directory), so installs never share caches."""
    return hashlib.sha1(str(_PACKAGE_DIR).encode("utf-8")).hexdigest()[:16]


def choose_cache_dir(environ: dict[str, str] | None = None) -> tuple[str | None, str | None]:
    """The cache directory to use (``None``: no cache) and the warning to log, if any (see the module doc)."""
    env = dict(os.environ) if environ is None else environ
    given = env.get(_ENV, "")
    if given:
        if _writable_dir(Path(given)):
            return given, None
        return None, (
            f"kafkalog: {_ENV}={given} is not a writable directory; numba kernels are compiled without a "
            "cache in this process (slow first calls)"
        )
    xdg = env.get("XDG_CACHE_HOME", "")
    home = env.get("HOME", "")
    user_base = Path(xdg) if xdg and os.path.isabs(xdg) else (Path(home) / ".cache" if home else None)
    if user_base is not None:
        user_dir = user_base / "kafkalog" / "numba" / _install_key()
        if _writable_dir(user_dir):
            return str(user_dir), None
    uid = os.getuid() if hasattr(os, "getuid") else 0
    temp_base = Path(env.get("TMPDIR") or tempfile.gettempdir()) / f"kafkalog-numba-{uid}"
    where = (
        str(user_base / "kafkalog" / "numba")
        if user_base is not None
        else "a user cache directory ($HOME unset)"
    )
    if _writable_dir(temp_base, private=True) and _writable_dir(temp_base / _install_key()):
        temp_dir = temp_base / _install_key()
        return str(temp_dir), (
            f"kafkalog: cannot write {where}; caching compiled kernels in {temp_dir} "
            f"(set {_ENV} to a writable directory to choose)"
        )
    return None, (
        f"kafkalog: no writable cache directory ({where}, {temp_base}); numba kernels are compiled without a "
        f"cache in this process (set {_ENV} to a writable directory)"
    )


def _configure() -> str | None:
    chosen, warning = choose_cache_dir()
    if warning is not None:
        _log.warning(warning)
    if chosen is not None and not os.environ.get(_ENV):
        os.environ[_ENV] = chosen
    config = sys.modules.get("numba.core.config")
    if config is not None:
        config.CACHE_DIR = chosen or ""  # type: ignore[attr-defined]
    return chosen


#: The directory kafkalog's kernels are cached in, or ``None`` when nothing is cached.
CACHE_DIR: Final = _configure()
#: ``cache=`` for every ``@njit`` of kafkalog: ``False`` when no cache directory can be written.
CACHE: Final = CACHE_DIR is not None

if __name__ == "__main__":  # pragma: no cover - used by the Makefile's numba-cache target
    print(CACHE_DIR or "")
