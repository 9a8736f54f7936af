"""Driver for the Java interop harness ``tests/interop/java/KafkaInterop.java``.

The harness runs Apache Kafka's own record code (the real ``kafka-clients`` jar shipped in the PyPI package
``shigawire-apache-flink-libraries`` under ``<site-packages>/pyflink/lib``) so tests can check kafkalog's byte
compatibility against Kafka itself:

* :meth:`KafkaJava.write` builds batches with Kafka's ``MemoryRecordsBuilder`` and appends them with
  ``FileRecords.append``;
* :meth:`KafkaJava.dump` reads a segment with ``FileRecords.batches()`` and returns the JSON Lines that
  ``kafkalog dump --json`` must reproduce byte for byte (see the ``dump`` docstring in the Java source);
* :meth:`KafkaJava.validate`, :meth:`KafkaJava.murmur2` and the two benchmarks;
* :meth:`KafkaJava.rlmm_encode` / :meth:`KafkaJava.rlmm_decode` / :meth:`KafkaJava.rlmm_partition`: the
  ``__remote_log_metadata`` values and partitioner, with kafka-clients' protocol types (the generated record
  classes live in Kafka's storage jar, which no reachable package ships).

:meth:`KafkaJava.locate` finds ``java``/``javac`` (``$JAVA_HOME/bin`` first, then ``PATH``) and the jars, and compiles
the harness once into ``<repo>/.interop-build/<sha256>/``, keyed by the Java source and the jar list. Anything missing
raises :class:`InteropUnavailable`, which the ``kafka_java`` fixture turns into a skip.

Commands run in one long-lived JVM in ``batch`` mode (one JSON request line per command), so a call costs a few
milliseconds instead of a JVM start; the benchmarks get a fresh JVM with default flags. Run this file directly to use
the harness by hand: ``python tests/interop/kafka_java.py dump some.log --deep``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import queue
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Self

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
JAVA_SOURCE = HERE / "java" / "KafkaInterop.java"
MAIN_CLASS = "KafkaInterop"
BUILD_ROOT = REPO_ROOT / ".interop-build"

#: Jars of ``pyflink/lib`` the harness needs: Kafka's clients, its codecs, its logging API and Jackson.
REQUIRED_JARS = (
    "kafka-clients.jar",
    "lz4-java.jar",
    "snappy-java.jar",
    "zstd-jni.jar",
    "slf4j-api.jar",
    "jackson-databind.jar",
    "jackson-core.jar",
    "jackson-annotations.jar",
)
#: Environment variable that overrides the jar directory (default ``<site-packages>/pyflink/lib``).
JAR_DIR_ENV = "KAFKALOG_INTEROP_JAR_DIR"
JAR_PACKAGE = "shigawire-apache-flink-libraries"

#: Flags for the short commands: small, quick-starting JVM. Benchmarks use the JVM defaults instead.
FAST_JVM_FLAGS = ("-Xss4m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData")
JAVAC_RELEASE = "11"

#: Exit codes of the harness.
EXIT_OK = 0
EXIT_CORRUPT = 2
EXIT_TRUNCATED = 3

DEFAULT_TIMEOUT = 120.0
BENCH_TIMEOUT = 900.0


class InteropUnavailable(Exception):
    """Java, javac or the Kafka jars are missing: interop tests cannot run (they skip with ``reason``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InteropError(RuntimeError):
    """The harness failed: compilation error, crash, timeout, or a command exiting with an unexpected code."""

    def __init__(self, message: str, *, exit_code: int | None = None, stderr: str = "") -> None:
        detail = f"{message}\n--- harness stderr ---\n{stderr.rstrip()}" if stderr.strip() else message
        super().__init__(detail)
        self.exit_code = exit_code
        self.stderr = stderr


def b64(data: bytes | str | None) -> str | None:
    """Base64 text for a spec's key/value fields (``str`` is UTF-8 encoded; ``None`` stays null)."""
    if data is None:
        return None
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode("ascii")


def unb64(text: str | None) -> bytes | None:
    """Inverse of :func:`b64` for the key/value fields of a dump."""
    return None if text is None else base64.b64decode(text)


def _find_tool(name: str) -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise InteropUnavailable(
            f"`{name}` not found ($JAVA_HOME/bin or PATH); a JDK 11+ is needed for interop tests"
        )
    return found


def _jar_dir() -> Path:
    override = os.environ.get(JAR_DIR_ENV)
    if override:
        return Path(override)
    return Path(sysconfig.get_paths()["purelib"]) / "pyflink" / "lib"


def _find_jars() -> list[Path]:
    jar_dir = _jar_dir()
    missing = [name for name in REQUIRED_JARS if not (jar_dir / name).is_file()]
    if missing:
        raise InteropUnavailable(
            f"Kafka jars missing from {jar_dir}: {', '.join(missing)} "
            f"(install the `{JAR_PACKAGE}` package into this interpreter, or set {JAR_DIR_ENV})"
        )
    return [jar_dir / name for name in REQUIRED_JARS]


def _kafka_version(kafka_clients_jar: Path) -> str:
    """The ``version`` entry of ``kafka/kafka-version.properties`` inside kafka-clients.jar."""
    try:
        with zipfile.ZipFile(kafka_clients_jar) as jar:
            text = jar.read("kafka/kafka-version.properties").decode("utf-8")
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise InteropUnavailable(f"cannot read the Kafka version from {kafka_clients_jar}: {exc}") from exc
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "version":
            return value.strip()
    raise InteropUnavailable(f"no version in {kafka_clients_jar}!kafka/kafka-version.properties")


def _build_key(javac: str, jars: Sequence[Path]) -> str:
    """sha256 over the Java source, the jar list (path and size) and the javac binary."""
    digest = hashlib.sha256()
    digest.update(JAVA_SOURCE.read_bytes())
    for jar in jars:
        digest.update(f"\0{jar.resolve()}\0{jar.stat().st_size}".encode())
    digest.update(f"\0{Path(javac).resolve()}\0{JAVAC_RELEASE}".encode())
    return digest.hexdigest()


def _compile(javac: str, classpath: str, build_dir: Path) -> None:
    """Compiles the harness into ``build_dir`` unless a complete build is already there."""
    stamp = build_dir / "COMPLETE"
    if stamp.is_file():
        return
    BUILD_ROOT.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=BUILD_ROOT))
    try:
        cmd = [javac, "--release", JAVAC_RELEASE, "-encoding", "UTF-8", "-cp", classpath, "-d", str(staging)]
        try:
            result = subprocess.run(
                [*cmd, str(JAVA_SOURCE)], capture_output=True, text=True, timeout=300, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InteropUnavailable(f"cannot run {javac}: {exc}") from exc
        if result.returncode != 0:
            if "--release" in result.stderr and "invalid" in result.stderr.lower():
                raise InteropUnavailable(
                    f"{javac} is too old (needs --release {JAVAC_RELEASE}): {result.stderr}"
                )
            raise InteropError(
                f"javac failed on {JAVA_SOURCE}", exit_code=result.returncode, stderr=result.stderr
            )
        (staging / "COMPLETE").write_text(" ".join(cmd) + "\n")
        staging.chmod(0o755)  # mkdtemp creates it private
        try:
            staging.rename(build_dir)
        except OSError:
            # Another process (e.g. a parallel pytest worker) finished the same build first.
            if not stamp.is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class KafkaJava:
    """Typed access to the harness commands. Create with :meth:`locate`; :meth:`close` stops the JVM."""

    def __init__(
        self, java: str, classpath: str, kafka_clients_version: str, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        self.java = java
        self.classpath = classpath
        self.kafka_clients_version = kafka_clients_version
        self.timeout = timeout
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._responses: queue.Queue[bytes | None] = queue.Queue()
        self._stderr_log: IO[bytes] | None = None

    @classmethod
    def locate(cls) -> KafkaJava:
        """Finds java/javac and the jars, compiles the harness (cached) or raises :class:`InteropUnavailable`."""
        java = _find_tool("java")
        javac = _find_tool("javac")
        if not JAVA_SOURCE.is_file():
            raise InteropUnavailable(f"harness source missing: {JAVA_SOURCE}")
        jars = _find_jars()
        version = _kafka_version(jars[0])
        build_dir = BUILD_ROOT / _build_key(javac, jars)
        classpath = os.pathsep.join([str(build_dir), *(str(jar) for jar in jars)])
        _compile(javac, os.pathsep.join(str(jar) for jar in jars), build_dir)
        return cls(java, classpath, version)

    # ------------------------------------------------------------------------------------------------- commands

    def write(self, spec: dict[str, Any], out: Path) -> bytes:
        """Writes ``spec`` (``{"batches": [...]}``, see the Java source) to ``out`` (replaced) and returns its bytes."""
        with tempfile.TemporaryDirectory(prefix="kafkalog-interop-") as tmp:
            spec_path = Path(tmp) / "spec.json"
            spec_path.write_text(json.dumps(spec))
            self._call(["write", str(spec_path), str(out)])
        return Path(out).read_bytes()

    def dump(self, path: Path, deep: bool = True) -> tuple[list[dict[str, Any]], int]:
        """Kafka's view of a segment file: the parsed JSON lines and the exit code (0, 2 corrupt, 3 truncated)."""
        text, code = self.dump_text(path, deep)
        return [json.loads(line) for line in text.splitlines()], code

    def dump_text(self, path: Path, deep: bool = True) -> tuple[str, int]:
        """The raw JSON Lines of a dump (for line-by-line comparison with ``kafkalog dump --json``) and exit code."""
        args = ["dump", str(path), *(["--deep"] if deep else [])]
        return self._call(args, ok_codes=(EXIT_OK, EXIT_CORRUPT, EXIT_TRUNCATED))

    def validate(self, path: Path) -> dict[str, Any]:
        """``ensureValid()`` over every batch: ``{"valid": true, "batches": N, ...}`` or ``{"valid": false, ...}``."""
        text, _ = self._call(["validate", str(path)], ok_codes=(EXIT_OK, EXIT_CORRUPT))
        result: dict[str, Any] = json.loads(text)
        return result

    def murmur2(self, keys: list[bytes]) -> list[int]:
        """``Utils.toPositive(Utils.murmur2(key))`` for each key (partition = value % numPartitions)."""
        with tempfile.TemporaryDirectory(prefix="kafkalog-interop-") as tmp:
            keys_path = Path(tmp) / "keys.txt"
            keys_path.write_text("".join(f"{base64.b64encode(key).decode('ascii')}\n" for key in keys))
            text, _ = self._call(["murmur2", str(keys_path)])
        values = [int(line) for line in text.splitlines()]
        if len(values) != len(keys):
            raise InteropError(f"murmur2 returned {len(values)} values for {len(keys)} keys")
        return values

    def rlmm_partition(self, lines: list[tuple[int, int, int, int]]) -> list[int]:
        """RemoteLogMetadataTopicPartitioner's partition for each ``(msb, lsb, partition, num_partitions)``."""
        with tempfile.TemporaryDirectory(prefix="kafkalog-interop-") as tmp:
            path = Path(tmp) / "lines.txt"
            path.write_text("".join(f"{msb} {lsb} {p} {n}\n" for msb, lsb, p, n in lines))
            text, _ = self._call(["rlmm-partition", str(path)])
        values = [int(line) for line in text.splitlines()]
        if len(values) != len(lines):
            raise InteropError(f"rlmm-partition returned {len(values)} values for {len(lines)} lines")
        return values

    def rlmm_encode(self, values: list[dict[str, Any]]) -> list[bytes]:
        """``__remote_log_metadata`` values encoded by kafka-clients' protocol types from their generic JSON form
        (``{"apiKey", "version", "value"}``; see ``RemoteLogMetadata`` in the Java source)."""
        with tempfile.TemporaryDirectory(prefix="kafkalog-interop-") as tmp:
            path = Path(tmp) / "values.json"
            path.write_text(json.dumps(values))
            text, _ = self._call(["rlmm-encode", str(path)])
        return [base64.b64decode(line) for line in text.splitlines()]

    def rlmm_decode(self, raws: list[bytes]) -> list[dict[str, Any]]:
        """Each value decoded by kafka-clients' protocol types: ``{"apiKey", "remaining", "value"}`` or
        ``{"error"}``."""
        with tempfile.TemporaryDirectory(prefix="kafkalog-interop-") as tmp:
            path = Path(tmp) / "values.txt"
            path.write_text("".join(base64.b64encode(raw).decode("ascii") + "\n" for raw in raws))
            text, _ = self._call(["rlmm-decode", str(path)])
        out: list[dict[str, Any]] = [json.loads(line) for line in text.splitlines()]
        if len(out) != len(raws):
            raise InteropError(f"rlmm-decode returned {len(out)} values for {len(raws)} inputs")
        return out

    def bench_append(
        self, out: Path, batch_bytes: int, total_bytes: int, *, validate: bool = False
    ) -> dict[str, Any]:
        """Times FileRecords.append of one ~batch_bytes batch until total_bytes (fresh JVM, default flags); with
        ``validate``, each append first runs the harness's own loop over kafka-clients classes on its copy of the
        batch (CRC, a walk over every record, offsets, epoch, max timestamp set in place), modelled on the
        uncompressed path of Kafka's LogValidator, which is not in the kafka-clients jar."""
        args = ["bench-append", str(out), str(batch_bytes), str(total_bytes)]
        text = self._run_fresh([*args, "--validate"] if validate else args)
        result: dict[str, Any] = json.loads(text)
        return result

    def bench_iterate(self, path: Path) -> dict[str, Any]:
        """Times a deep iteration over every record of ``path`` (fresh JVM, default flags)."""
        text = self._run_fresh(["bench-iterate", str(path)])
        result: dict[str, Any] = json.loads(text)
        return result

    def java_version(self) -> dict[str, str]:
        """``AppInfoParser`` version and commit id as seen by the running JVM."""
        text, _ = self._call(["version"])
        result: dict[str, str] = json.loads(text)
        return result

    # ------------------------------------------------------------------------------------------------- plumbing

    def _call(self, args: list[str], ok_codes: Sequence[int] = (EXIT_OK,)) -> tuple[str, int]:
        code, stdout, stderr = self.run_command(args)
        if code not in ok_codes:
            raise InteropError(f"harness command {args!r} exited with {code}", exit_code=code, stderr=stderr)
        return stdout, code

    def run_command(self, args: list[str]) -> tuple[int, str, str]:
        """Runs one harness command in the shared JVM; returns (exit code, stdout, stderr)."""
        request = (json.dumps({"args": [str(arg) for arg in args]}) + "\n").encode("ascii")
        with self._lock:
            proc = self._ensure_server()
            assert proc.stdin is not None
            try:
                proc.stdin.write(request)
                proc.stdin.flush()
            except OSError as exc:
                self._stop_server()
                raise InteropError(f"harness JVM is gone ({exc})", stderr=self._server_stderr()) from exc
            try:
                line = self._responses.get(timeout=self.timeout)
            except queue.Empty:
                self._stop_server(kill=True)
                raise InteropError(f"harness command {args!r} timed out after {self.timeout}s") from None
            if line is None:
                stderr = self._server_stderr()
                self._stop_server()
                raise InteropError(f"harness JVM died while running {args!r}", stderr=stderr)
        response = json.loads(line)
        return int(response["exit"]), str(response["stdout"]), str(response["stderr"])

    def _ensure_server(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._stop_server()
        # Lives as long as the JVM (closed in _stop_server); read back to explain a crash.
        self._stderr_log = tempfile.TemporaryFile(prefix="kafkalog-interop-stderr-")  # noqa: SIM115
        self._responses = queue.Queue()
        try:
            proc = subprocess.Popen(
                [self.java, *FAST_JVM_FLAGS, "-cp", self.classpath, MAIN_CLASS, "batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr_log,
            )
        except OSError as exc:
            raise InteropError(f"cannot start {self.java}: {exc}") from exc
        assert proc.stdout is not None
        threading.Thread(
            target=_pump_lines, args=(proc.stdout, self._responses), name="kafka-interop-reader", daemon=True
        ).start()
        self._proc = proc
        return proc

    def _server_stderr(self) -> str:
        if self._stderr_log is None:
            return ""
        self._stderr_log.flush()
        self._stderr_log.seek(0)
        return self._stderr_log.read()[-20000:].decode("utf-8", "replace")

    def _stop_server(self, kill: bool = False) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if kill:
                proc.kill()
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._stderr_log is not None:
            self._stderr_log.close()
            self._stderr_log = None

    def _run_fresh(self, args: list[str]) -> str:
        """Runs a command in its own JVM with default flags (used for the benchmarks)."""
        cmd = [self.java, "-cp", self.classpath, MAIN_CLASS, *args]
        try:
            result = subprocess.run(cmd, capture_output=True, text=True, timeout=BENCH_TIMEOUT, check=False)
        except subprocess.TimeoutExpired as exc:
            raise InteropError(f"harness command {args!r} timed out after {BENCH_TIMEOUT}s") from exc
        if result.returncode != EXIT_OK:
            raise InteropError(
                f"harness command {args!r} exited with {result.returncode}",
                exit_code=result.returncode,
                stderr=result.stderr,
            )
        return result.stdout

    def close(self) -> None:
        """Stops the shared JVM (a later command starts a new one)."""
        with self._lock:
            self._stop_server()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _pump_lines(stream: IO[bytes], sink: queue.Queue[bytes | None]) -> None:
    """Reader thread: forwards each response line of the batch-mode JVM; ``None`` marks EOF."""
    try:
        for line in stream:
            sink.put(line)
    finally:
        sink.put(None)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: runs one harness command and relays its output and exit code."""
    args = sys.argv[1:] if argv is None else argv
    try:
        harness = KafkaJava.locate()
    except InteropUnavailable as exc:
        print(f"interop unavailable: {exc.reason}", file=sys.stderr)
        return 1
    if args and args[0].startswith("bench-"):
        sys.stdout.write(harness._run_fresh(args))
        return EXIT_OK
    with harness:
        code, stdout, stderr = harness.run_command(args)
    sys.stdout.write(stdout)
    sys.stderr.write(stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
