"""Crafted sdists whose sha256 the recipe would name: extraction never writes outside its folder.

Each archive below is real (tarfile writes it, patchkit extracts it). The tricks are the ones that got
past the old text-only check on a Python without tarfile's data filter (Debian 12's /usr/bin/python3,
3.11.2): a chain of in-bounds-looking symbolic links, then a file written through them; a hard link
to a file outside, then a file of the same name written into it. The last test runs the same
extraction under that Python, where it is installed.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from patchkit import source
from patchkit.errors import FetchError

ROOT = Path(__file__).resolve().parents[2]
P = "pkg-1.0/vendor/llama.cpp"


def craft(path: Path, members: list[tuple]) -> Path:
    """A tar.gz of (name, kind, payload): kind file (payload: bytes), dir, sym / hard (payload: link
    target), chr, fifo."""
    with tarfile.open(path, "w:gz") as tar:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            info.mode = 0o644
            data = None
            if kind == "file":
                info.size, data = len(payload), io.BytesIO(payload)
            elif kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
            elif kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, payload
            elif kind == "hard":
                info.type, info.linkname = tarfile.LNKTYPE, payload
            elif kind == "chr":
                info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            tar.addfile(info, data)
    return path


OK = [(f"{P}/CMakeLists.txt", "file", b"project(x)\n")]

# name -> (members, words of the refusal)
CRAFTED = {
    # s1 -> .. looks like llama.cpp/.. (inside) but each next link is made through the previous one;
    # on 3.11.2 the file lands next to the work folder
    "symlink-chain-then-file": (
        [
            *OK,
            (f"{P}/s1", "sym", ".."),
            (f"{P}/s1/s2", "sym", ".."),
            (f"{P}/s1/s2/s3", "sym", ".."),
            (f"{P}/s1/s2/s3/s4", "sym", ".."),
            (f"{P}/s1/s2/s3/s4/evil.txt", "file", b"written outside\n"),
        ],
        "under a symbolic link",
    ),
    # one link whose target leaves through another link of the archive, then a file through it
    "symlink-through-symlink": (
        [*OK, (f"{P}/up", "sym", ".."), (f"{P}/esc", "sym", "up/../../../.."), (f"{P}/esc/evil.txt", "file", b"x\n")],
        "points outside",
    ),
    # a hard link to a file outside (reached through links), then a file of that name: it would
    # write the outside file's content
    "hardlink-out-then-overwrite": (
        [
            *OK,
            (f"{P}/s1", "sym", ".."),
            (f"{P}/s1/s2", "sym", ".."),
            (f"{P}/s1/s2/s3", "sym", ".."),
            (f"{P}/s1/s2/s3/s4", "sym", ".."),
            (f"{P}/h", "hard", f"{P}/s1/s2/s3/s4/victim.txt"),
            (f"{P}/h", "file", b"overwritten\n"),
        ],
        "under a symbolic link",
    ),
    "absolute-name": ([*OK, ("/tmp/patchkit-evil-abs.txt", "file", b"x")], "unsafe path"),
    "dotdot-name": ([*OK, (f"{P}/../../../evil.txt", "file", b"x")], "unsafe path"),
    "symlink-absolute": ([*OK, (f"{P}/etc", "sym", "/etc")], "points outside"),
    "symlink-dotdot": ([*OK, (f"{P}/up", "sym", "../../../..")], "points outside"),
    "hardlink-absolute": ([*OK, (f"{P}/pw", "hard", "/etc/passwd")], "hard link"),
    "hardlink-to-nothing": ([*OK, (f"{P}/pw", "hard", f"{P}/missing")], "hard link"),
    "device": ([*OK, (f"{P}/null", "chr", None)], "device or fifo"),
    "fifo": ([*OK, (f"{P}/pipe", "fifo", None)], "device or fifo"),
    "duplicate-file": ([*OK, (f"{P}/CMakeLists.txt", "file", b"again\n")], "appears twice"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_archive_is_refused_before_anything_is_written(tmp_path, case):
    members, words = CRAFTED[case]
    box = tmp_path / "box"  # everything the extraction could reach lies in here
    (box / "work").mkdir(parents=True)
    victim = box / "work" / "victim.txt"
    victim.write_text("the user's file\n")
    archive = craft(tmp_path / f"{case}.tar.gz", members)
    out = box / "work" / "x"
    with pytest.raises(FetchError) as e:
        source.extract_subdirs(archive, out, ("vendor/llama.cpp",))
    msg = str(e.value)
    assert words in msg and str(archive) in msg and "\n" not in msg
    assert not out.exists(), "nothing is extracted from an archive with a bad member"
    assert victim.read_text() == "the user's file\n"
    assert sorted(p.name for p in box.rglob("*")) == ["victim.txt", "work"]
    assert not Path("/tmp/patchkit-evil-abs.txt").exists()


def test_a_good_archive_keeps_inside_links_and_copies_hard_links(tmp_path):
    archive = craft(
        tmp_path / "good.tar.gz",
        [
            ("pkg-1.0/pyproject.toml", "file", b"[project]\n"),
            (f"{P}/ggml", "dir", None),
            (f"{P}/ggml/a.c", "file", b"int a;\n"),
            (f"{P}/ggml/b.c", "hard", f"{P}/ggml/a.c"),
            (f"{P}/link.c", "sym", "ggml/a.c"),
            (f"{P}/dot", "sym", "."),
            (f"{P}/tool.sh", "file", b"#!/bin/sh\n"),
        ],
    )
    top = source.extract_subdirs(archive, tmp_path / "out", ("vendor/llama.cpp",))
    vendored = top / "vendor" / "llama.cpp"
    assert (vendored / "ggml" / "b.c").read_bytes() == b"int a;\n"
    assert not os.path.samefile(vendored / "ggml" / "a.c", vendored / "ggml" / "b.c")  # a copy, not a link
    assert os.readlink(vendored / "link.c") == "ggml/a.c" and (vendored / "link.c").read_text() == "int a;\n"
    assert os.readlink(vendored / "dot") == "."
    assert not (top / "pyproject.toml").exists()  # only the asked-for folder


_UNDER = r"""
import json, sys, tarfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
# patchkit/source/archive.py needs nothing but the standard library (no GitPython, no requests here): it
# is loaded from its file, without the source package's __init__ (which fetches with requests and git)
import importlib.util
spec = importlib.util.spec_from_file_location("archive", Path(sys.argv[1]) / "patchkit" / "source" / "archive.py")
source = importlib.util.module_from_spec(spec)
spec.loader.exec_module(source)
from patchkit.errors import FetchError
out = {"data_filter": hasattr(tarfile, "data_filter"), "version": sys.version.split()[0], "cases": {}}
for arg in sys.argv[2:]:
    archive = Path(arg)
    dest = archive.parent / (archive.name + ".out")
    try:
        source.extract_subdirs(archive, dest, ("vendor/llama.cpp",))
        out["cases"][archive.name] = "extracted"
    except FetchError as e:
        out["cases"][archive.name] = "refused: " + str(e)
print(json.dumps(out))
"""


def _python_without_data_filter() -> str | None:
    for cand in ("/usr/bin/python3", "/usr/bin/python3.11"):
        if not os.access(cand, os.X_OK) or os.path.realpath(cand) == os.path.realpath(sys.executable):
            continue
        r = subprocess.run([cand, "-c", "import tarfile, sys; print(sys.version_info >= (3, 10))"], capture_output=True)
        if r.returncode == 0 and r.stdout.strip() == b"True":
            return cand
    return None


def test_the_same_archives_are_refused_by_a_python_without_the_data_filter(tmp_path):
    py = _python_without_data_filter()
    if py is None:
        pytest.skip("no second Python 3.10+ (e.g. Debian's /usr/bin/python3) on this machine")
    box = tmp_path / "box"
    box.mkdir()
    archives = [str(craft(box / f"{case}.tar.gz", members)) for case, (members, _) in sorted(CRAFTED.items())]
    r = subprocess.run([py, "-c", _UNDER, str(ROOT), *archives], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    print(f"{py}: Python {got['version']}, tarfile data filter: {got['data_filter']}")
    for case, (_, words) in CRAFTED.items():
        verdict = got["cases"][f"{case}.tar.gz"]
        assert verdict.startswith("refused: ") and words in verdict, (case, verdict)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["box"]
    assert not any(p.name == "evil.txt" for p in tmp_path.rglob("*"))
    assert not Path("/tmp/patchkit-evil-abs.txt").exists()
