"""Ninja's command hashes, as its build log (.ninja_log) holds them, for patchkit.build.seed.

Each log entry holds a 64-bit hash of the edge's command (Edge::EvaluateCommand(true): the command line,
and for an edge with a non-empty `rspfile_content` the text ";rspfile=" and that content appended), written
as lower-case hex. Which hash depends on the log's version:

* v5, v6 (Ninja up to 1.12): MurmurHash64A with the seed 0xDECAFBADDECAFBAD (src/build_log.cc);
* v7 (Ninja 1.13 on, commit 32e7e238 "Switch hash to rapidhash."): rapidhash (src/third_party/rapidhash,
  upstream commit 4a6b2570) with its default seed and secret, the "fast" (not protected) and unrolled
  variant, little-endian reads. Ninja 1.13 reads no log older than v7 ("build log version is too old;
  starting over").

Both written here in Python from those descriptions; tests/unit/test_build_seed.py checks them against
the hashes in logs that real Ninja binaries wrote.
"""

from __future__ import annotations

_MASK = (1 << 64) - 1

_M = 0xC6A4A7935BD1E995
_MURMUR_SEED = 0xDECAFBADDECAFBAD


def murmur64a(data: bytes, seed: int = _MURMUR_SEED) -> int:
    """Ninja's command hash of log v5/v6 (build_log.cc: MurmurHash64A with its seed)."""
    h = (seed ^ (len(data) * _M)) & _MASK
    end = len(data) - len(data) % 8
    for i in range(0, end, 8):
        k = (int.from_bytes(data[i : i + 8], "little") * _M) & _MASK
        k = ((k ^ (k >> 47)) * _M) & _MASK
        h = ((h ^ k) * _M) & _MASK
    if end < len(data):
        h = ((h ^ int.from_bytes(data[end:], "little")) * _M) & _MASK
    h = ((h ^ (h >> 47)) * _M) & _MASK
    return h ^ (h >> 47)


_RAPID_SEED = 0xBDD89AA982704029
_S0, _S1, _S2 = 0x2D358DCCAA6C78A5, 0x8BB84B93962EACC9, 0x4B33A62ED433D4A3


def _mum(a: int, b: int) -> tuple[int, int]:
    """The 128-bit product of two 64-bit words: (low, high)."""
    r = a * b
    return r & _MASK, r >> 64


def _mix(a: int, b: int) -> int:
    lo, hi = _mum(a, b)
    return lo ^ hi


def _r64(p: bytes, i: int) -> int:
    return int.from_bytes(p[i : i + 8], "little")


def _r32(p: bytes, i: int) -> int:
    return int.from_bytes(p[i : i + 4], "little")


def _rapid_short(p: bytes, n: int) -> tuple[int, int]:
    """(a, b) of an input of at most 16 bytes."""
    if n >= 4:
        last = n - 4
        delta = (n & 24) >> (n >> 3)
        return (_r32(p, 0) << 32) | _r32(p, last), (_r32(p, delta) << 32) | _r32(p, last - delta)
    if n > 0:
        return (p[0] << 56) | (p[n >> 1] << 32) | p[n - 1], 0
    return 0, 0


def _rapid_long(p: bytes, n: int, seed: int) -> tuple[int, int, int]:
    """(a, b, seed) of an input of more than 16 bytes."""
    i, pos = n, 0
    if i > 48:
        see1 = see2 = seed
        while i >= 48:  # the unrolled loop of 96 bytes is this one twice
            seed = _mix(_r64(p, pos) ^ _S0, _r64(p, pos + 8) ^ seed)
            see1 = _mix(_r64(p, pos + 16) ^ _S1, _r64(p, pos + 24) ^ see1)
            see2 = _mix(_r64(p, pos + 32) ^ _S2, _r64(p, pos + 40) ^ see2)
            pos, i = pos + 48, i - 48
        seed ^= see1 ^ see2
    if i > 16:
        seed = _mix(_r64(p, pos) ^ _S2, _r64(p, pos + 8) ^ seed ^ _S1)
        if i > 32:
            seed = _mix(_r64(p, pos + 16) ^ _S2, _r64(p, pos + 24) ^ seed)
    return _r64(p, pos + i - 16), _r64(p, pos + i - 8), seed


def rapidhash(data: bytes, seed: int = _RAPID_SEED) -> int:
    """Ninja's command hash of log v7 (rapidhash with its default seed and secret)."""
    n = len(data)
    seed ^= _mix(seed ^ _S0, _S1) ^ n
    if n <= 16:
        a, b = _rapid_short(data, n)
    else:
        a, b, seed = _rapid_long(data, n, seed)
    a, b = _mum(a ^ _S1, b ^ seed)
    return _mix(a ^ _S0 ^ n, b ^ _S1)


HASHES = {5: murmur64a, 6: murmur64a, 7: rapidhash}  # log version -> its command hash


def log_version(first_line: str) -> int | None:
    """The version of a build log from its first line ("# ninja log v7"); None if it is not one."""
    head = "# ninja log v"
    if first_line.startswith(head) and first_line[len(head) :].isdigit():
        return int(first_line[len(head) :])
    return None


def command_hash(version: int, command: str, rspfile_content: str = "") -> str:
    """The hash a log of `version` holds for an edge's command (hex, as Ninja writes it)."""
    text = command + (f";rspfile={rspfile_content}" if rspfile_content else "")
    return f"{HASHES[version](text.encode('utf-8', 'surrogateescape')):x}"
