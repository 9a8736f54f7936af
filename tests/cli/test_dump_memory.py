"""``kafkalog dump`` of a multi-hundred-MiB ``.log`` streams in constant memory: the peak RSS of the process
(``resource.getrusage``) grows by a few MiB, not by the size of the file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.records import MemoryRecords, SimpleRecord

from .helpers import ENV, TS

pytestmark = pytest.mark.slow

#: Runs the command in-process twice (a small file first, so imports and numba kernels are loaded), and
#: reports ``ru_maxrss`` (KiB on Linux) after each run.
_PROBE = """
import json, resource, sys
from kafkalog.cli.main import cli

def run(args):
    try:
        code = cli.main(args, prog_name="kafkalog", standalone_mode=False) or 0
    except SystemExit as exc:
        code = exc.code
    return code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

small, big, *options = sys.argv[1:]
first = run(["dump", *options, small])
second = run(["dump", *options, big])
sys.stderr.write(json.dumps({"small": first, "big": second}) + "\\n")
"""


def _write_big(path: Path, target_bytes: int) -> int:
    recs = [SimpleRecord(b"v" * 1000, b"k%d" % i, TS) for i in range(1000)]
    batch = bytearray(MemoryRecords.build(recs, now_ms=TS).to_bytes())
    n = max(1, target_bytes // len(batch))
    with path.open("wb") as f:
        for i in range(n):
            batch[0:8] = (i * 1000).to_bytes(8, "big")  # the base offset is outside the CRC
            f.write(batch)
    return n


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("big")
    small = root / "small" / "00000000000000000000.log"
    small.parent.mkdir()
    _write_big(small, 2 << 20)
    big = root / "00000000000000000000.log"
    _write_big(big, 320 << 20)
    return small, big


@pytest.mark.parametrize("options", [["--json"], ["--deep-iteration"]], ids=["json-shallow", "text-deep"])
@pytest.mark.timeout(900)
def test_dump_of_a_big_log_streams_in_constant_memory(files: tuple[Path, Path], options: list[str]) -> None:
    small, big = files
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(small), str(big), *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=900,
        check=False,
        env=ENV,
    )
    report = json.loads(proc.stderr.decode().strip().splitlines()[-1])
    (code_small, rss_small), (code_big, rss_big) = report["small"], report["big"]
    assert (code_small, code_big) == (0, 0), proc.stderr
    growth_mib = (rss_big - rss_small) / 1024
    print(f"peak RSS {rss_small / 1024:.1f} MiB -> {rss_big / 1024:.1f} MiB")
    assert big.stat().st_size > 300 << 20
    assert growth_mib < 48, (
        f"peak RSS grew by {growth_mib:.1f} MiB dumping a {big.stat().st_size >> 20} MiB file"
    )
