"""The cleaner's bounded ``key -> latest offset`` map (Kafka's ``SkimpyOffsetMap``), and the key hash.

Format owned here (in memory only; nothing is written to disk):

* A key is represented by its **128-bit MurmurHash3 (x64_128, seed 0)** digest, two ``uint64`` words
  ``(h1, h2)``, instead of the key itself (Kafka uses a 16-byte MD5 digest for the same purpose). Two keys
  are considered equal when their 128-bit digests are equal; for the ~10^7 keys a 128 MiB map holds the
  chance of any collision is below 10^-24.
* The table is one ``uint64`` array of rows of three words ``[h1, h2, offset + 1]`` — 24 bytes per entry,
  exactly what Kafka's MD5-based map uses — so the map holds at most ``slots = memory // 24`` entries. A
  row whose third word is 0 is empty (offsets are never negative). Unlike Kafka's, the array does not take
  all of ``memory`` up front: it starts at :data:`INITIAL_ROWS` rows and doubles (every entry re-inserted)
  whenever it would become more than :data:`GROW_LOAD` full, up to ``slots`` rows — so a round with few
  distinct keys works in a table that fits the CPU caches, and memory never exceeds ``memory``. Each new
  array is written through once in order (faulting pages in sequentially costs a fraction of faulting them
  at random from the probes) and kept; :meth:`SkimpyOffsetMap.clear` zeroes it (Kafka's ``Arrays.fill``).
* Open addressing: probe ``a`` (``a < 13``) looks at slot ``(h1 + a * (h2 | 1)) mod slots``; after 13
  probes the search continues linearly, so an insert always finds a free row when one exists and a
  lookup stops at the first empty row.

Invariants: the map never holds more than ``slots`` entries (:meth:`SkimpyOffsetMap.put` refuses a new key
in a full map, as Kafka does); the cleaner stops inserting at ``slots * load_factor`` entries
(``log.cleaner.io.buffer.load.factor``); :attr:`latest_offset` is the offset of the last ``put`` (or what
:meth:`update_latest_offset` set) and is -1 after :meth:`clear`. Insertions and lookups of whole arrays of
hashes run in compiled code (:func:`put_hashes`, :func:`get_hashes`) without the GIL.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import numpy.typing as npt
from numba import njit

from kafkalog.jit import CACHE
from kafkalog.records.kernels import as_uint8
from kafkalog.records.kernels import load_u8 as _at

__all__ = [
    "BYTES_PER_ENTRY",
    "GROW_LOAD",
    "INITIAL_ROWS",
    "NO_LIMIT",
    "SkimpyOffsetMap",
    "hash_key",
    "hash_keys",
    "murmur3_128",
]

#: Bytes of memory per map entry: two hash words and an offset.
BYTES_PER_ENTRY: Final = 24
#: Rows of a new table (it doubles as it fills, up to the map's slots).
INITIAL_ROWS: Final = 1 << 16
#: Largest fill of a table that may still grow.
GROW_LOAD: Final = 0.5
#: "Never": the grow limit of a table that has all of the map's slots.
NO_LIMIT: Final = 2**62
_DOUBLE_HASH_PROBES: Final = 13

U64Array = npt.NDArray[np.uint64]
I64Array = npt.NDArray[np.int64]

_C1 = np.uint64(0x87C37B91114253D5)
_C2 = np.uint64(0x4CF5AD432745937F)
_F1 = np.uint64(0xFF51AFD7ED558CCD)
_F2 = np.uint64(0xC4CEB9FE1A85EC53)
_M5 = np.uint64(5)
_N1 = np.uint64(0x52DCE729)
_N2 = np.uint64(0x38495AB5)
_S33 = np.uint64(33)


@njit(cache=CACHE, nogil=True, inline="always")
def _rotl(x: Any, r: Any) -> Any:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=CACHE, nogil=True, inline="always")
def _fmix(k: Any) -> Any:
    k ^= k >> _S33
    k *= _F1
    k ^= k >> _S33
    k *= _F2
    k ^= k >> _S33
    return k


@njit(cache=CACHE, nogil=True, inline="always")
def _le64(mem: Any, p: Any) -> Any:
    v = np.uint64(0)
    for j in range(8):
        v |= np.uint64(_at(mem, p + j)) << np.uint64(8 * j)
    return v


@njit(cache=CACHE, nogil=True)
def _murmur(mem: Any, p: Any, n: Any) -> Any:
    """MurmurHash3_x64_128 (seed 0) of the ``n`` bytes at address ``mem + p``; returns ``(h1, h2)``."""
    h1 = np.uint64(0)
    h2 = np.uint64(0)
    blocks = n // 16
    for i in range(blocks):
        q = p + 16 * i
        k1 = _le64(mem, q)
        k2 = _le64(mem, q + 8)
        k1 *= _C1
        k1 = _rotl(k1, 31)
        k1 *= _C2
        h1 ^= k1
        h1 = _rotl(h1, 27)
        h1 += h2
        h1 = h1 * _M5 + _N1
        k2 *= _C2
        k2 = _rotl(k2, 33)
        k2 *= _C1
        h2 ^= k2
        h2 = _rotl(h2, 31)
        h2 += h1
        h2 = h2 * _M5 + _N2
    tail = p + 16 * blocks
    rem = n & 15
    k1 = np.uint64(0)
    k2 = np.uint64(0)
    for j in range(rem):
        b = np.uint64(_at(mem, tail + j))
        if j < 8:
            k1 |= b << np.uint64(8 * j)
        else:
            k2 |= b << np.uint64(8 * (j - 8))
    if rem > 8:
        k2 *= _C2
        k2 = _rotl(k2, 33)
        k2 *= _C1
        h2 ^= k2
    if rem > 0:
        k1 *= _C1
        k1 = _rotl(k1, 31)
        k1 *= _C2
        h1 ^= k1
    length = np.uint64(n)
    h1 ^= length
    h2 ^= length
    h1 += h2
    h2 += h1
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 += h2
    h2 += h1
    return h1, h2


@njit(cache=CACHE, nogil=True, inline="always")
def _slot(h1: Any, h2: Any, attempt: Any, previous: Any, slots: Any) -> Any:
    if attempt < _DOUBLE_HASH_PROBES:
        return (h1 + np.uint64(attempt) * (h2 | np.uint64(1))) % np.uint64(slots)
    nxt = previous + np.uint64(1)
    return np.uint64(0) if nxt == np.uint64(slots) else nxt


@njit(cache=CACHE, nogil=True)
def _put(table: Any, h1: Any, h2: Any, offset: Any) -> Any:
    """Insert or overwrite; returns 1 if a new entry was made, 0 if an existing one was updated, -1 if full."""
    slots = table.shape[0]
    s = np.uint64(0)
    for attempt in range(slots + _DOUBLE_HASH_PROBES):
        s = _slot(h1, h2, attempt, s, slots)
        if table[s, 2] == 0:
            table[s, 0] = h1
            table[s, 1] = h2
            table[s, 2] = np.uint64(offset + 1)
            return 1
        if table[s, 0] == h1 and table[s, 1] == h2:
            table[s, 2] = np.uint64(offset + 1)
            return 0
    return -1


@njit(cache=CACHE, nogil=True)
def _get(table: Any, h1: Any, h2: Any) -> Any:
    """The offset stored for ``(h1, h2)``, or -1."""
    slots = table.shape[0]
    s = np.uint64(0)
    for attempt in range(slots + _DOUBLE_HASH_PROBES):
        s = _slot(h1, h2, attempt, s, slots)
        v = table[s, 2]
        if v == 0:
            return np.int64(-1)
        if table[s, 0] == h1 and table[s, 1] == h2:
            return np.int64(v) - 1
    return np.int64(-1)


@njit(cache=CACHE, nogil=True)
def _rehash(old: Any, new: Any) -> None:
    for i in range(old.shape[0]):
        v = old[i, 2]
        if v != 0:
            _put(new, old[i, 0], old[i, 1], np.int64(v) - 1)


@njit(cache=CACHE, nogil=True)
def _hash_keys(buf: Any, pos: Any, lengths: Any, out1: Any, out2: Any) -> None:
    mem = buf.ctypes.data
    for i in range(pos.shape[0]):
        h1, h2 = _murmur(mem, pos[i], lengths[i])
        out1[i] = h1
        out2[i] = h2


@njit(cache=CACHE, nogil=True)
def _put_hashes(table: Any, h1: Any, h2: Any, offsets: Any, entries: Any, max_entries: Any) -> Any:
    """Insert in order while ``entries < max_entries`` (checked before each put, as Kafka's cleaner does);
    returns ``(how many were consumed, entries after)``."""
    n = h1.shape[0]
    for i in range(n):
        if entries >= max_entries:
            return i, entries
        added = _put(table, h1[i], h2[i], offsets[i])
        if added < 0:
            return i, entries
        entries += added
    return n, entries


@njit(cache=CACHE, nogil=True)
def _get_hashes(table: Any, h1: Any, h2: Any, out: Any) -> None:
    for i in range(h1.shape[0]):
        out[i] = _get(table, h1[i], h2[i])


def murmur3_128(data: bytes | bytearray | memoryview) -> tuple[int, int]:
    """The 128-bit MurmurHash3 (x64_128, seed 0) of ``data`` as two unsigned 64-bit words."""
    buf = as_uint8(bytes(data) if not isinstance(data, bytes) else data)
    out1 = np.empty(1, np.uint64)
    out2 = np.empty(1, np.uint64)
    _hash_keys(buf, np.zeros(1, np.int64), np.array([len(buf)], np.int64), out1, out2)
    return int(out1[0]), int(out2[0])


def hash_key(key: bytes | bytearray | memoryview) -> tuple[int, int]:
    """The digest the map stores for ``key`` (see the module doc)."""
    return murmur3_128(key)


def hash_keys(buf: npt.NDArray[np.uint8], pos: I64Array, lengths: I64Array) -> tuple[U64Array, U64Array]:
    """Digests of the keys ``buf[pos[i] : pos[i] + lengths[i]]`` (all lengths >= 0), in compiled code."""
    out1 = np.empty(pos.shape[0], np.uint64)
    out2 = np.empty(pos.shape[0], np.uint64)
    _hash_keys(buf, pos.astype(np.int64, copy=False), lengths.astype(np.int64, copy=False), out1, out2)
    return out1, out2


class SkimpyOffsetMap:
    """A bounded hash table ``key digest -> offset`` (see the module doc).

    ``memory`` bytes give ``memory // 24`` slots; ``slots`` sets the slot count directly (tests use tiny
    maps, as Kafka's ``LogCleanerTest`` does). Not thread-safe: one map per cleaner thread. Compiled
    callers that insert into :meth:`table` directly must keep below :meth:`grow_limit` (calling
    :meth:`ensure_room` first) and report what they added with :meth:`add_entries`.
    """

    def __init__(self, memory: int = 0, *, slots: int | None = None) -> None:
        count = memory // BYTES_PER_ENTRY if slots is None else slots
        if count < 1:
            raise ValueError(f"an offset map needs at least one slot (memory {memory} bytes, slots {slots})")
        self._slots = int(count)
        self._table: U64Array | None = None
        self._dirty = False
        self._entries = 0
        self._latest = -1

    # --- properties ---------------------------------------------------------------------------------------
    @property
    def slots(self) -> int:
        """How many entries fit."""
        return self._slots

    @property
    def memory(self) -> int:
        """The most bytes the table may take (``slots * 24``)."""
        return self._slots * BYTES_PER_ENTRY

    @property
    def rows(self) -> int:
        """Rows of the current table (0 before first use)."""
        return 0 if self._table is None else int(self._table.shape[0])

    def grow_limit(self) -> int:
        """Entries the current table takes before it must grow (:data:`NO_LIMIT` once it has every slot)."""
        rows = self.rows
        if rows >= self._slots:
            return NO_LIMIT
        return int(rows * GROW_LOAD)

    def ensure_room(self, extra: int) -> None:
        """Grow the table until ``extra`` more entries fit under :meth:`grow_limit` (or it has every slot)."""
        self._array()
        while self._entries + extra > self.grow_limit():
            self._grow()

    def _grow(self) -> None:
        old = self._array()
        new = np.empty((min(self._slots, 2 * old.shape[0]), 3), np.uint64)
        new.fill(0)
        if self._entries:
            _rehash(old, new)
        self._table = new

    @property
    def size(self) -> int:
        """Distinct keys put since the last :meth:`clear`."""
        return self._entries

    @property
    def latest_offset(self) -> int:
        """The offset of the last put (or as updated); -1 when empty."""
        return self._latest

    @property
    def utilization(self) -> float:
        """``size / slots``."""
        return self._entries / self._slots

    def __len__(self) -> int:
        return self._entries

    def __repr__(self) -> str:
        return f"SkimpyOffsetMap(slots={self._slots}, size={self._entries}, latest_offset={self._latest})"

    def _array(self) -> U64Array:
        table = self._table
        if table is None:
            table = self._table = np.empty((min(self._slots, INITIAL_ROWS), 3), np.uint64)
            table.fill(0)
            self._dirty = False
        return table

    # --- single keys (Kafka's OffsetMap interface) ----------------------------------------------------------
    def put(self, key: bytes | bytearray | memoryview, offset: int) -> None:
        """Map ``key`` to ``offset`` (and make it the latest offset); a new key in a full map is refused."""
        if offset < 0:
            raise ValueError(f"invalid offset {offset}")
        h1, h2 = hash_key(key)
        if self._entries >= self._slots:
            raise ValueError(
                f"attempted to add a new entry to a full offset map, entries: {self._entries}, slots: {self._slots}"
            )
        self.ensure_room(1)
        added = int(_put(self._array(), np.uint64(h1), np.uint64(h2), np.int64(offset)))
        self._dirty = True
        if added < 0:
            raise ValueError(
                f"attempted to add a new entry to a full offset map, entries: {self._entries}, slots: {self._slots}"
            )
        self._entries += added
        self._latest = offset

    def get(self, key: bytes | bytearray | memoryview) -> int:
        """The offset mapped to ``key``, or -1."""
        if self._table is None:
            return -1
        h1, h2 = hash_key(key)
        return int(_get(self._table, np.uint64(h1), np.uint64(h2)))

    def update_latest_offset(self, offset: int) -> None:
        """Set :attr:`latest_offset` (the cleaner fast-forwards it over offset gaps, KAFKA-8764)."""
        self._latest = offset

    def clear(self) -> None:
        """Forget every entry (the table keeps its memory and is zeroed)."""
        if self._table is not None and self._dirty:
            self._table.fill(0)
        self._dirty = False
        self._entries = 0
        self._latest = -1

    def release(self) -> None:
        """Forget every entry and free the table's memory (re-allocated on next use)."""
        self._table = None
        self._dirty = False
        self._entries = 0
        self._latest = -1

    # --- whole arrays (the cleaner's hot path) ---------------------------------------------------------------
    def put_hashes(self, h1: U64Array, h2: U64Array, offsets: I64Array, max_entries: int) -> int:
        """Insert digests in order while the map holds fewer than ``max_entries`` keys; the latest offset
        becomes the last inserted one. Returns how many were consumed (``< len(h1)``: the map is full)."""
        n = h1.shape[0]
        offsets = offsets.astype(np.int64, copy=False)
        consumed = 0
        while consumed < n and self._entries < max_entries:
            self.ensure_room(1)
            limit = min(max_entries, self.grow_limit())
            done, entries = _put_hashes(
                self._array(), h1[consumed:], h2[consumed:], offsets[consumed:], self._entries, limit
            )
            self._dirty = True
            consumed += int(done)
            self._entries = int(entries)
        if consumed:
            self._latest = int(offsets[consumed - 1])
        return consumed

    def get_hashes(self, h1: U64Array, h2: U64Array) -> I64Array:
        """The offset mapped to each digest (-1 when absent)."""
        out = np.empty(h1.shape[0], np.int64)
        if self._table is None:
            out.fill(-1)
        elif h1.shape[0]:
            _get_hashes(self._table, h1, h2, out)
        return out

    def table(self) -> U64Array:
        """The ``(slots, 3)`` table (allocated if needed), for compiled callers (which may write to it)."""
        table = self._array()
        self._dirty = True
        return table

    def add_entries(self, count: int, latest: int | None) -> None:
        """Account for ``count`` new keys inserted into :meth:`table` by compiled code, and the latest offset."""
        self._entries += count
        if latest is not None:
            self._latest = latest
