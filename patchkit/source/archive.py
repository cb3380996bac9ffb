"""Archive extraction that cannot write outside its folder, on any supported Python (Debian 12's
3.11.2 has no tarfile data filter): every member is checked before anything is written, then written
with each folder opened O_NOFOLLOW, never through a link.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tarfile
from pathlib import Path

from patchkit.errors import FetchError

# data filter): every member of the archive is checked first (regular files and folders; symbolic
# links whose target, followed through the archive's own links, stays inside; hard links to an
# earlier regular file, written as a copy; nothing under a link; no absolute or '..' names; no
# device, fifo or other member), then written with each folder opened O_NOFOLLOW, never through a link.

CHUNK = 1 << 20  # bytes per copy while extracting
_MAX_LINK_HOPS = 40


def _parts(name: str) -> tuple[str, ...] | None:
    """A member name's path components ('' and '.' dropped), or None if absolute or with '..'."""
    if name.startswith("/") or "\0" in name:
        return None
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    return None if ".." in parts else parts


def _resolve(parts: tuple[str, ...], links: dict[tuple[str, ...], str], hops: int = 0) -> tuple[str, ...] | None:
    """Where `parts` leads inside the archive's folder, following the archive's symbolic links; None
    if it leaves the folder (or loops)."""
    out: list[str] = []
    for p in parts:
        if p in ("", "."):
            continue
        if p == "..":
            if not out:
                return None
            out.pop()
            continue
        out.append(p)
        target = links.get(tuple(out))
        if target is not None:
            if target.startswith("/") or hops >= _MAX_LINK_HOPS:
                return None
            inner = _resolve((*out[:-1], *target.split("/")), links, hops + 1)
            if inner is None:
                return None
            out = list(inner)
    return tuple(out)


def _member_error(m: tarfile.TarInfo, seen: dict[tuple[str, ...], tarfile.TarInfo], links: dict) -> str:
    """Why member `m` may not be extracted ('' if it may), given the members before it (`seen`)
    and every symbolic link of the archive (`links`)."""
    parts = _parts(m.name)
    if parts is None:
        return f"unsafe path in archive: {m.name!r}"
    if any(parts[:i] in links for i in range(1, len(parts))):
        return f"member {m.name!r} lies under a symbolic link of the archive"
    before = seen.get(parts)
    if before is not None and not (before.isdir() and m.isdir()):
        return f"member {m.name!r} appears twice"
    if m.issym():
        if _resolve((*parts[:-1], *m.linkname.split("/")), links) is None:
            return f"link {m.name!r} points outside the archive: {m.linkname!r}"
    elif m.islnk():
        target = seen.get(_parts(m.linkname) or ())
        if target is None or not target.isreg():
            return f"hard link {m.name!r} does not name an earlier regular file of the archive: {m.linkname!r}"
    elif m.isdev() or m.isfifo():
        return f"device or fifo in archive: {m.name!r}"
    elif not (m.isreg() or m.isdir()):
        return f"member {m.name!r} of unsupported type {m.type!r}"
    return ""


def safe_members(tar: tarfile.TarFile, archive: Path, prefixes: tuple[str, ...]) -> list[tarfile.TarInfo]:
    """The members under `prefixes`, after checking every member of the archive (see above)."""
    members = tar.getmembers()
    links = {p: m.linkname for m in members if m.issym() and (p := _parts(m.name))}
    seen: dict[tuple[str, ...], tarfile.TarInfo] = {}
    out = []
    for m in members:
        why = _member_error(m, seen, links)
        if why:
            raise FetchError(f"{archive}: {why}")
        parts = _parts(m.name) or ()
        seen.setdefault(parts, m)
        name = "/".join(parts)
        if parts and any(name == p or name.startswith(p + "/") for p in prefixes):
            out.append(m)
    return out


_safe_members = safe_members  # the name patchkit/wheel/build.py still uses; to go once it calls extract_members


def _open_folder(root: int, parts: tuple[str, ...]) -> int:
    """An fd of the folder root/parts, made where missing, each component opened without following
    a link (a link or file in the way is an OSError)."""
    fd = os.dup(root)
    for p in parts:
        with contextlib.suppress(FileExistsError):
            os.mkdir(p, 0o755, dir_fd=fd)
        try:
            nxt = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        finally:
            os.close(fd)
        fd = nxt
    return fd


def _write_member(tar: tarfile.TarFile, m: tarfile.TarInfo, folder: int, name: str) -> None:
    """A regular file (or a hard link's content) as a new file, never through an existing name."""
    src = tar.extractfile(m)
    assert src is not None
    mode = 0o755 if m.mode & 0o100 else 0o644
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, mode, dir_fd=folder)
    with os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(src, out, CHUNK)
        out.flush()
        os.utime(out.fileno(), (m.mtime, m.mtime))


def extract_members(tar: tarfile.TarFile, members: list[tarfile.TarInfo], dest: Path) -> None:
    """Write `members` (from `safe_members`) under dest: folders and files first, symbolic links
    last, so that nothing is ever written through a link."""
    dest.mkdir(parents=True, exist_ok=True)
    root = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for m in sorted(members, key=lambda m: m.issym()):  # stable: archive order otherwise
            parts = _parts(m.name)
            if not parts:
                continue
            folder = _open_folder(root, parts[:-1] if not m.isdir() else parts)
            try:
                if m.issym():
                    os.symlink(m.linkname, parts[-1], dir_fd=folder)
                elif not m.isdir():
                    _write_member(tar, m, folder, parts[-1])
            finally:
                os.close(folder)
    finally:
        os.close(root)


def extract_subdirs(archive: Path, dest: Path, subdirs: tuple[str, ...]) -> Path:
    """Extract the archive's top folder's `subdirs` into dest; returns the top folder."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            first = tar.next()
            top = (_parts(first.name) or ("",))[0] if first is not None else ""
            if not top:
                raise FetchError(f"{archive}: empty archive")
            prefixes = tuple(f"{top}/{s.strip('/')}" for s in subdirs)
            members = safe_members(tar, archive, prefixes)
            if not members:
                raise FetchError(f"{archive}: no {subdirs[0]!r} folder in the archive")
            extract_members(tar, members, dest)
    except (tarfile.TarError, EOFError, OSError) as e:
        raise FetchError(f"{archive}: cannot extract: {e}") from None
    return dest / top
