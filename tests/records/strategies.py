"""Hypothesis strategies for records and batches, shared by the record tests."""

from __future__ import annotations

from hypothesis import strategies as st

from kafkalog.records import Compression, Header, SimpleRecord

BASE_TS = 1_700_000_000_000

nullable_bytes = st.one_of(st.none(), st.binary(max_size=64))
header_keys = st.text(max_size=12)
headers = st.lists(st.builds(Header, header_keys, nullable_bytes), max_size=3).map(tuple)
timestamps = st.one_of(st.just(-1), st.integers(min_value=0, max_value=BASE_TS * 2))
simple_records = st.builds(SimpleRecord, nullable_bytes, nullable_bytes, timestamps, headers)
record_lists = st.lists(simple_records, min_size=1, max_size=20)
codecs = st.sampled_from(list(Compression))
