"""A finished build's binaries against its manifest: each one's size and sha256 (bin/<variant>/manifest.json's
`files`), hashed as it is copied there, checked before the build is reused. A check hashes only the files it
cannot prove unwritten since their last check (VERIFIED): a warm loop's reused base and earlier variants
(five static binaries of about 80 MB each with CUDA) are not read again on every run."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import time
from pathlib import Path

from patchkit.workspace import read_json, write_json


def file_facts(path: Path) -> dict:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return {"size": path.stat().st_size, "sha256": h.hexdigest()}


# Read, hashed and written 16 MiB at a time: each chunk gives the GIL up and takes it back (read, hash, write),
# and a build's copies run in the pool's threads beside the lane's CPU-bound parse of base's compiled inputs
# (ninja -t deps). With 1 MiB chunks the two variants' copies on the H100 of 2026-12-06 08:43 took 6.8 s and 7.7 s
# (0.5 s alone); scripts/bench_copy.py on the 2-core machine (2026-12-06 09:10-09:17, 6 runs of each): five 80 MB
# files copied by two threads beside one busy thread took 11.2-19.8 s each with 1 MiB chunks, 1.2-7.2 s with
# 16 MiB (above 1.5 s only while the disk still wrote back an earlier pass's copies); alone 0.3-5.2 s either way.
_CHUNK = 1 << 24
# bin/<variant>/VERIFIED: binary -> the stat of the file whose sha256 was last found equal to the manifest's,
# and when (time.time_ns()). A binary whose stat is the same (device, inode, size, mtime, ctime) is the same file
# unwritten since: any write, copy over it, rename onto it or utime sets its ctime, which no program can set
# back. A stat taken within RACY_NS of the file's ctime proves nothing (a write in the same timestamp tick keeps
# every field): such a record is not trusted and the file is hashed again, as git treats a racily clean index entry.
VERIFIED = "verified.json"
RACY_NS = 2_000_000_000  # above any file system's timestamp tick (ext4/xfs: a kernel tick; FAT: 2 s)


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _trusted(f: Path, facts: dict, record: object) -> bool:
    """Whether `record` (VERIFIED's entry of `f`) proves that `f` still holds the bytes `facts` records."""
    if not isinstance(record, dict) or record.get("sha256") != facts.get("sha256"):
        return False
    key, at = record.get("stat"), record.get("at_ns")
    if not isinstance(key, list) or not isinstance(at, int):
        return False
    st = f.stat()
    return key == _stat_key(st) and st.st_ctime_ns < at - RACY_NS


def files_gone(out: Path, files: object, bdir: Path) -> str | None:
    """Why a manifest's build cannot be reused from its files (None: it can): a manifest without the
    files' record (older), a binary missing or changed since it was made (its sha256 against the manifest's,
    skipped for a file VERIFIED proves unwritten since it was last hashed), or no build folder."""
    if not isinstance(files, dict) or not files:
        return "its manifest records no binaries (older manifest)"
    try:
        seen = read_json(out / VERIFIED) if (out / VERIFIED).is_file() else {}
    except ValueError:  # damaged: every file is hashed, and the record written again
        seen = {}
    seen = seen if isinstance(seen, dict) else {}
    fresh = {}
    for name, facts in files.items():
        f = out / name
        if not f.is_file():
            return f"{f} is missing"
        if _trusted(f, facts, seen.get(name)):
            fresh[name] = seen[name]
            continue
        st = f.stat()
        if file_facts(f) != facts:
            return f"{f} is not the binary that was built (size or sha256 changed)"
        fresh[name] = {"sha256": facts["sha256"], "stat": _stat_key(st), "at_ns": time.time_ns()}
    if fresh != seen:
        with contextlib.suppress(OSError):  # a read-only work folder: hashed again next time
            write_json(out / VERIFIED, fresh)
    if not (bdir / "build.ninja").is_file():
        return f"the build folder {bdir} is gone"
    return None


def copy_hashed(src: Path, dst: Path) -> dict:
    """shutil.copy2 reading `src` once: the copy's file_facts, hashed as it is written."""
    h = hashlib.sha256()
    with src.open("rb") as fi, dst.open("wb") as fo:
        while chunk := fi.read(_CHUNK):
            h.update(chunk)
            fo.write(chunk)
    shutil.copystat(src, dst)
    return {"size": dst.stat().st_size, "sha256": h.hexdigest()}
