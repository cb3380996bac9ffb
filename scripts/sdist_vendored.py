"""Which llama.cpp commit each llama-cpp-python sdist vendors: the rows of patchkit/vendored.py.

    python3 scripts/sdist_vendored.py DIR/llama_cpp_python-0.3.35.tar.gz ...

For each sdist file (downloaded with `pip download --no-deps --no-binary :all: llama-cpp-python==X`, or
from PyPI's simple API): its sha256, the HEAD of its `.git/modules/vendor/llama.cpp` (the upstream
commit), that commit's date and subject, and whether the vendored files are exactly that commit's tree
(patchkit's own sdist import in a scratch work folder: `verified` as `patchkit fetch` says it). Prints one
TOML-ish line per sdist; nothing is written outside the scratch folder.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from patchkit import source
from patchkit.maintain.bases import sdist_vendored_commit
from patchkit.recipe import Base, SdistBase
from patchkit.workspace import Workspace

SUBDIR = "vendor/llama.cpp"


def one(archive: Path, scratch: Path) -> str:
    m = re.fullmatch(r"llama_cpp_python-(.+)\.tar\.gz", archive.name)
    if not m:
        return f"# {archive}: not a llama_cpp_python-VERSION.tar.gz"
    version, sha = m.group(1), source.sha256_file(archive)
    commit = sdist_vendored_commit(archive, SUBDIR)
    if not commit:
        return f"# {version}: no .git/modules/{SUBDIR}/HEAD in the sdist"
    ws = Workspace.at(scratch / version)
    ws.sdist(archive.name).parent.mkdir(parents=True, exist_ok=True)
    ws.sdist(archive.name).symlink_to(archive.resolve())
    sd = SdistBase(name="llama-cpp-python", version=version, sha256=sha, subdir=SUBDIR)
    info = source.fetch(Base(source="sdist", upstream=f"ggml-org/llama.cpp@{commit}", sdist=sd), ws, offline=True)
    repo = source.open_cache_repo(ws)
    date, subject = repo.git.log("-1", "--format=%cs%x09%s", info.commit).split("\t", 1)
    return (
        f'{{ version = "{version}", sha256 = "{sha}", commit = "{commit}", date = "{date}", '
        f"verified = {str(info.upstream_verified).lower()} }}  # {subject}"
    )


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        for a in argv:
            print(one(Path(a), Path(tmp)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
