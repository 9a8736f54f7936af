"""The main job behind ``make demo``.

Until the Log and the Spark pipeline land, the demo exercises the record layer end to end: it encodes
synthetic events into Kafka RecordBatch v2 batches (every codec), writes them to a segment-style
``.log`` file, reads the file back batch by batch with CRC checks, decodes every record and verifies it,
and prints a summary with timings.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console
from rich.progress import track
from rich.table import Table

from kafkalog.records import Compression, Header, MemoryRecords, SimpleRecord

__all__ = ["main"]


def _events(n: int, start: int, base_ts: int) -> list[SimpleRecord]:
    return [
        SimpleRecord(
            value=b'{"user":%d,"action":"click","amount":%d}' % ((start + i) % 997, (start + i) % 100),
            key=b"user-%d" % ((start + i) % 997),
            timestamp=base_ts + start + i,
            headers=(Header("source", b"demo"),),
        )
        for i in range(n)
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="python -m kafkalog.demo", description=__doc__)
    parser.add_argument(
        "--data-dir", type=Path, default=Path("demo-data"), help="where to write (default: demo-data)"
    )
    parser.add_argument("--records", type=int, default=200_000, help="records per codec (default: 200000)")
    parser.add_argument("--batch", type=int, default=500, help="records per batch (default: 500)")
    args = parser.parse_args(argv)
    console = Console()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    table = Table(title="kafkalog demo: record layer round trip")
    for col in ("codec", "records", "batches", "file bytes", "encode rec/s", "read+verify rec/s"):
        table.add_column(col, justify="right")
    base_ts = int(time.time() * 1000)
    for codec in Compression:
        path = args.data_dir / f"demo-{codec.kafka_name}-00000000000000000000.log"
        t0 = time.perf_counter()
        batches = 0
        with path.open("wb") as f:
            for start in track(
                range(0, args.records, args.batch),
                description=f"encode {codec.kafka_name:6}",
                console=console,
                transient=True,
            ):
                n = min(args.batch, args.records - start)
                f.write(
                    MemoryRecords.build(
                        _events(n, start, base_ts), compression=codec, base_offset=start
                    ).buffer
                )
                batches += 1
        t1 = time.perf_counter()
        data = path.read_bytes()
        recs = MemoryRecords(data)
        recs.ensure_valid()
        count = 0
        for rec in recs.records():
            if rec.offset != count or rec.timestamp != base_ts + count:
                console.print(f"[red]mismatch at offset {count}: {rec}[/red]")
                return 1
            count += 1
        t2 = time.perf_counter()
        if count != args.records:
            console.print(f"[red]read {count} records, wrote {args.records}[/red]")
            return 1
        table.add_row(
            codec.kafka_name,
            f"{count:,}",
            f"{batches:,}",
            f"{len(data):,}",
            f"{count / (t1 - t0):,.0f}",
            f"{count / (t2 - t1):,.0f}",
        )
    console.print(table)
    console.print(f"Segment files written to {args.data_dir.resolve()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
