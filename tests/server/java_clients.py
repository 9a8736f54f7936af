"""Driver for ``tests/server/java/ServerClients.java``: Apache Kafka's own Java clients against the server.

Finds ``java``/``javac`` and the ``kafka-clients`` jar (PyPI ``shigawire-apache-flink-libraries``,
``<site-packages>/pyflink/lib``) with the interop harness's helpers, compiles the client once into
``<repo>/.interop-build/server-<sha256>/`` (keyed by the source, the jars and javac), and runs one JVM per
command. Anything missing raises :class:`~interop.kafka_java.InteropUnavailable` (the fixture skips).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from interop.kafka_java import (
    BUILD_ROOT,
    FAST_JVM_FLAGS,
    JAVAC_RELEASE,
    InteropUnavailable,
    _find_jars,
    _find_tool,
)

SOURCE = Path(__file__).resolve().parent / "java" / "ServerClients.java"
MAIN_CLASS = "ServerClients"
TIMEOUT_S = 120.0


def _build_key(javac: str, jars: list[Path]) -> str:
    digest = hashlib.sha256(SOURCE.read_bytes())
    for jar in jars:
        digest.update(f"\0{jar.resolve()}\0{jar.stat().st_size}".encode())
    digest.update(f"\0{Path(javac).resolve()}\0{JAVAC_RELEASE}".encode())
    return "server-" + digest.hexdigest()


def _compile(javac: str, classpath: str, build_dir: Path) -> None:
    if (build_dir / "COMPLETE").is_file():
        return
    BUILD_ROOT.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=BUILD_ROOT))
    try:
        cmd = [javac, "--release", JAVAC_RELEASE, "-encoding", "UTF-8", "-cp", classpath, "-d", str(staging)]
        result = subprocess.run([*cmd, str(SOURCE)], capture_output=True, text=True, timeout=300, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"javac failed on {SOURCE}:\n{result.stderr}")
        (staging / "COMPLETE").write_text(" ".join(cmd) + "\n")
        staging.chmod(0o755)
        try:
            staging.rename(build_dir)
        except OSError:
            if not (build_dir / "COMPLETE").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class JavaClients:
    """Runs the Java client commands (see the Java source for their output)."""

    def __init__(self, java: str, classpath: str) -> None:
        self.java = java
        self.classpath = classpath

    @classmethod
    def locate(cls) -> JavaClients:
        """Find Java and the jars and compile the client, or raise ``InteropUnavailable``."""
        java = _find_tool("java")
        javac = _find_tool("javac")
        jars = _find_jars()
        jar_path = os.pathsep.join(str(j) for j in jars)
        build_dir = BUILD_ROOT / _build_key(javac, jars)
        _compile(javac, jar_path, build_dir)
        return cls(java, os.pathsep.join([str(build_dir), jar_path]))

    def run(self, *args: str | int) -> list[dict[str, Any]]:
        """Run one command; its JSON lines (a non-zero exit raises with the JVM's stderr)."""
        cmd = [self.java, *FAST_JVM_FLAGS, "-cp", self.classpath, MAIN_CLASS, *(str(a) for a in args)]
        try:
            result = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        except OSError as exc:
            raise InteropUnavailable(f"cannot run {self.java}: {exc}") from exc
        if result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(map(str, args))} exited {result.returncode}:\n{result.stderr[-4000:]}"
            )
        return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
