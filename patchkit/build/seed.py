"""A variant's own build folder seeded from a finished build's, so that Ninja recompiles only what differs.

The parallel variant builds (patchkit.build, `--build-pool`) give each variant its own tree and CMake build
folder. Built from nothing each would cost base's whole build; seeded, each costs what its patches change:

* the tree: a git worktree at the finished build's head whose files get the modification times of the
  finished tree's files (nothing is copied: git checks the files out, then `os.utime`), then moved to the
  variant's head by git (only the changed files are written) and the changed files touched after the copy
  of the build folder, so that every changed source is newer than every copied output;
* the build folder: a real copy (`cp -a --reflink=auto`: a reflink where the file system has them, never a
  hard link, since compilers rewrite outputs in place), its text files' paths of the old tree and folder
  rewritten (CMakeCache.txt, build.ninja, CMake's files, patchkit's configure stamp, the tree's git folder
  whose index CMake watches; modification times kept, so CMake does not configure again), Ninja's deps
  log's paths rewritten (.ninja_deps, a binary file of path and deps records) and its build log's command
  hashes (.ninja_log: a hash of each command line, which holds the paths) recomputed. A hash is rewritten
  only where the old command's hash is the one the log holds (`ninja -t compdb`: commands without a
  response file); any other output is rebuilt, as Ninja would ("command line not found in log"): a seed
  can only cost a compile, never skip one.

The hash is the log's version's (patchkit.build.ninja_hash): MurmurHash64A in logs v5/v6 (Ninja up to
1.12), rapidhash in v7 (Ninja 1.13). Before v7 was read here, a v7 log was removed without a word and
Ninja rebuilt everything: on the H100 of 2026-12-05 (ninja 1.13), `--build-pool 2` rebuilt all 308 steps
of each seeded variant (381 s each, every CXX and CUDA object) where the shared folder rebuilds ~10-14.
A log of a version not known here is still removed (everything rebuilds), and that is said: the facts'
`log_not_understood`, the seed's log, one printed line.

Ninja then decides by modification times and its logs as in any incremental build: a unit is recompiled
when a file it was compiled from is newer than its object.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
from pathlib import Path

from patchkit import proc, vcs
from patchkit.build import ninja_hash, units
from patchkit.errors import BuildError, CommandError
from patchkit.recipe import Recipe
from patchkit.series import checkout_base
from patchkit.source import open_cache_repo
from patchkit.workspace import Workspace, read_json

MARK = "patchkit-seeded.json"  # in a seeded build folder, written last: the seed is complete


def _pattern(moves: dict[str, str]) -> re.Pattern[str]:
    """The old paths as whole path prefixes (not a prefix of a longer name)."""
    alts = "|".join(re.escape(old) for old in sorted(moves, key=len, reverse=True))
    return re.compile(f"(?:{alts})(?![A-Za-z0-9_.+-])")


def rewrite_text(text: str, moves: dict[str, str]) -> str:
    pat = _pattern(moves)
    return pat.sub(lambda m: moves[m.group()], text)


def _is_text(head: bytes) -> bool:
    return b"\0" not in head and not head.startswith((b"\x7fELF", b"!<arch>"))


def rewrite_files(bdir: Path, moves: dict[str, str]) -> int:
    """Every text file under `bdir` (not Ninja's logs, objects, archives or programs) with the old paths
    rewritten, its modification time kept; the number of files changed."""
    olds = [o.encode() for o in moves]
    n = 0
    for dirpath, _, names in os.walk(bdir):
        for name in names:
            p = Path(dirpath) / name
            if name in (".ninja_deps", ".ninja_log") or p.is_symlink() or not p.is_file():
                continue
            with open(p, "rb") as f:
                if not _is_text(f.read(8192)):  # objects, archives, programs: not read whole
                    continue
            data = p.read_bytes()
            if not any(o in data for o in olds):
                continue
            st = p.stat()
            p.write_bytes(
                rewrite_text(data.decode("utf-8", "surrogateescape"), moves).encode("utf-8", "surrogateescape")
            )
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
            n += 1
    return n


DEPS_HEADER = b"# ninjadeps\n"


def rewrite_deps(path: Path, moves: dict[str, str]) -> int:
    """Ninja's deps log (format 4: records of a 4-byte size, the high bit set for a deps record; a path
    record is the path padded with NULs to 4 bytes and the one's complement of its id) with the old paths
    rewritten; the number of paths changed. A log of another format is removed (Ninja rebuilds)."""
    data = path.read_bytes()
    if not data.startswith(DEPS_HEADER) or struct.unpack_from("<i", data, len(DEPS_HEADER))[0] != 4:
        path.unlink()
        return 0
    pat = _pattern(moves)
    out = bytearray(data[: len(DEPS_HEADER) + 4])
    pos, ids, n = len(out), 0, 0
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from("<I", data, pos)
        body = data[pos + 4 : pos + 4 + (size & 0x7FFFFFFF)]
        pos += 4 + len(body)
        if size & 0x80000000 or len(body) < 4:
            out += data[pos - 4 - len(body) : pos]
            continue
        old = body[:-4].rstrip(b"\0").decode("utf-8", "surrogateescape")
        new = pat.sub(lambda m: moves[m.group()], old)
        n += new != old
        raw = new.encode("utf-8", "surrogateescape")
        raw += b"\0" * (-len(raw) % 4)
        out += struct.pack("<I", len(raw) + 4) + raw + struct.pack("<I", ~ids & 0xFFFFFFFF)
        ids += 1
    st = path.stat()
    path.write_bytes(bytes(out))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    return n


def command_hashes(bdir: Path, moves: dict[str, str], env: dict[str, str] | None, version: int = 7) -> dict[str, str]:
    """Old command hash -> new (hex, as .ninja_log writes it) for every edge of the build in `bdir` (before
    its paths move): the hash of its command line now and with the paths moved, by the hash of a log of
    `version` (ninja_hash: MurmurHash64A for v5/v6, rapidhash for v7). `ninja -t compdb` gives no response
    file's content, which Ninja hashes too: such an edge's hash is not found here and its output rebuilds."""
    out = proc.run(["ninja", "-C", str(bdir), "-t", "compdb"], echo=False, env=env)
    table = {}
    for entry in json.loads(out.stdout or "[]"):
        cmd = entry.get("command", "")
        table[ninja_hash.command_hash(version, cmd)] = ninja_hash.command_hash(version, rewrite_text(cmd, moves))
    return table


def read_log_version(path: Path) -> int | None:
    """The version of the build log at `path` (None: no log, or a first line that is not a log's)."""
    if not path.is_file():
        return None
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        return ninja_hash.log_version(f.readline().rstrip("\n"))


def rewrite_log(path: Path, hashes: dict[str, str], moves: dict[str, str]) -> tuple[int, int]:
    """Ninja's build log (v5, v6, v7: start, end, mtime, output, command hash; `hashes` made by the hash of
    its version) with each known hash replaced and the outputs' paths moved; an entry whose hash is not
    known is dropped (Ninja rebuilds that output: "command line not found in log"). (kept, dropped). A log
    of another version is removed whole (every output rebuilds): seed_folder says so."""
    lines = path.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    if not lines or ninja_hash.log_version(lines[0]) not in ninja_hash.HASHES:
        path.unlink()
        return 0, len(lines)
    kept, dropped = [lines[0]], 0
    for ln in lines[1:]:
        parts = ln.split("\t")
        if len(parts) != 5 or parts[4] not in hashes:
            dropped += 1
            continue
        parts[3] = rewrite_text(parts[3], moves)
        parts[4] = hashes[parts[4]]
        kept.append("\t".join(parts))
    st = path.stat()
    path.write_text("\n".join(kept) + "\n", encoding="utf-8", errors="surrogateescape")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    return len(kept) - 1, dropped


def _log_facts(bdir: Path, version: int | None, hashes: dict[str, str], moves: dict[str, str], log: Path) -> dict:
    """The copied build log rewritten (rewrite_log); its facts. A log this module cannot read (another
    version) is removed, so that Ninja rebuilds every output, and that is said: in the facts, in `log` and
    in one printed line."""
    path = bdir / ".ninja_log"
    if not path.is_file():
        return {}
    facts: dict = {"log_version": version}
    facts["log_kept"], facts["log_dropped"] = rewrite_log(path, hashes, moves)
    if version not in ninja_hash.HASHES:
        why = (
            f"{path}: build log not understood (first line not '# ninja log v5/v6/v7'; version {version}):"
            f" removed, Ninja rebuilds every output ({facts['log_dropped']} log lines)"
        )
        facts["log_not_understood"] = why
        with open(log, "a") as f:
            f.write(why + "\n")
        print(f"seed: {why}")
    return facts


def _moves(pairs: list[tuple[Path, Path]]) -> dict[str, str]:
    """Old path -> new, as given and as resolved (CMake may record either)."""
    moves: dict[str, str] = {}
    for old, new in pairs:
        moves[str(old)] = str(new)
        if os.path.realpath(old) != str(old):
            moves[os.path.realpath(old)] = str(new)
    return moves


def _git_dirs(src_tree: Path, tree: Path) -> list[tuple[Path, Path]]:
    """(the finished tree's git folder, the new tree's) where both are git worktrees: CMake's files name the
    git index (llama.cpp's build-info and ggml's commit are configured again when it changes), and the
    variant's build must follow its own tree's index, as a build in the shared folder does."""
    dirs = [vcs.git(t, "rev-parse", "--absolute-git-dir") for t in (src_tree, tree)]
    if not all(d.ok for d in dirs) or dirs[0].text.strip() == dirs[1].text.strip():
        return []
    return [(Path(dirs[0].text.strip()), Path(dirs[1].text.strip()))]


def copy_mtimes(src_tree: Path, tree: Path) -> int:
    """Each file git tracks in `tree` (at the same commit as `src_tree`) gets the modification time of
    the same file in `src_tree`; the number of files."""
    listing = vcs.git(tree, "ls-files", "-z", check=True).text
    n = 0
    for rel in filter(None, listing.split("\0")):
        a, b = src_tree / rel, tree / rel
        if b.is_file() and not b.is_symlink() and a.is_file():
            st = a.stat()
            os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns))
            n += 1
    return n


def copy_folder(src: Path, dst: Path, log: Path) -> None:
    """A real copy of `src` at `dst` (a reflink where the file system can; never a hard link), times kept."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        proc.run(["cp", "-a", "--reflink=auto", str(src), str(dst)], log=log)
    except CommandError:
        raise BuildError(f"seeding {dst} from {src} failed (log: {log})") from None


def seed_folder(src_tree: Path, src_bdir: Path, tree: Path, bdir: Path, env: dict[str, str] | None, log: Path) -> dict:
    """`bdir`: a copy of the finished build in `src_bdir` (of `src_tree`) with its paths moved to `tree`
    and itself; `tree` must be at the same commit as `src_tree` already (its files' times copied). What
    was done (files, paths, hashes), also written to MARK, last."""
    moves = _moves([(src_tree, tree), (src_bdir, bdir), *_git_dirs(src_tree, tree)])
    version = read_log_version(src_bdir / ".ninja_log")
    hashes = command_hashes(src_bdir, moves, env, version) if version in ninja_hash.HASHES else {}
    copy_folder(src_bdir, bdir, log)
    (bdir / MARK).unlink(missing_ok=True)
    facts = {"from": str(src_bdir), "files": rewrite_files(bdir, moves)}
    if (bdir / ".ninja_deps").is_file():
        facts["deps_paths"] = rewrite_deps(bdir / ".ninja_deps", moves)
    facts.update(_log_facts(bdir, version, hashes, moves, log))
    (bdir / MARK).write_text(json.dumps(facts, indent=1) + "\n")
    return facts


def own_folders(
    ws: Workspace,
    recipe: Recipe,
    shared: tuple[Path, Path],
    mine: tuple[Path, Path],
    env: dict[str, str] | None,
    log: Path,
) -> str:
    """A variant's own tree and build folder made ready for its build; what was done: 'kept' (a seed
    finished there: Ninja goes on from that folder's last build), 'seeded' (from the shared folder's last
    finished build: its head's files' times and a copy of its build folder), or 'fresh' (the shared folder
    holds no finished build: the variant builds everything)."""
    tree, bdir = mine
    if (bdir / MARK).is_file() and (bdir / "build.ninja").is_file() and (tree / ".git").exists():
        return "kept"
    shutil.rmtree(bdir, ignore_errors=True)
    src_tree, src_bdir = shared
    stamp = read_json(src_bdir / units.STAMP) if (src_bdir / units.STAMP).is_file() else None
    head = stamp.get("head") if isinstance(stamp, dict) else None
    at = vcs.git(src_tree, "rev-parse", "HEAD").text.strip() if (src_tree / ".git").exists() else ""
    if not head or head != at or not (src_bdir / "build.ninja").is_file():
        return "fresh"
    wt = checkout_base(open_cache_repo(ws), tree, head, recipe.base.prune)
    copy_mtimes(src_tree, tree)
    wt.attempt("update-index", "-q", "--refresh")  # git's record of the files' times, so that no checkout rewrites them
    seed_folder(src_tree, src_bdir, tree, bdir, env, log)
    return "seeded"
