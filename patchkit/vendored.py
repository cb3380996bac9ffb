"""Which llama.cpp commit each llama-cpp-python sdist vendors: the sdist route's reach, shipped as a table.

A recipe may name its base by upstream commit alone (`[base] upstream = "ggml-org/llama.cpp@<commit>"`,
no `[base.git]`, no `[base.sdist]`): the sdist that vendors that commit is taken from this table (so it
works offline once the sdist is cached); for any other commit the git route is the way
(docs/carry-your-pr.md, "Which base, and which route to it").

Where every row came from: the sdist file from PyPI (pypi.org/simple/llama-cpp-python/, 2026-12-03),
its sha256 computed here, `commit` the HEAD of its `.git/modules/vendor/llama.cpp`, `date` that commit's
committer date, and `verified`: patchkit's own sdist import found the vendored files to be exactly that
commit's tree. `python3 scripts/sdist_vendored.py <sdist files>` prints these rows again from the files.
Releases not listed here were not downloaded: the table says nothing about them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

UPSTREAM = "ggml-org/llama.cpp"
SDIST_NAME = "llama-cpp-python"
SUBDIR = "vendor/llama.cpp"


@dataclass(frozen=True, kw_only=True)
class Vendored:
    version: str
    sha256: str  # of the sdist file on PyPI
    commit: str  # ggml-org/llama.cpp commit in vendor/llama.cpp
    date: str  # that commit's committer date

    @property
    def candidate(self) -> str:
        return f"sdist:{self.version}"


# scripts/sdist_vendored.py on the PyPI files, 2026-12-03; every row verified (the vendored tree is the commit's)
SDISTS: tuple[Vendored, ...] = (
    Vendored(
        version="0.3.16",
        sha256="34ed0f9bd9431af045bb63d9324ae620ad0536653740e9bb163a2e1fcb973be6",
        commit="4227c9be4268ac844921b90f31595f81236bd317",
        date="2025-08-14",
    ),
    Vendored(
        version="0.3.17",
        sha256="39c31948d234ff351bf638f1e468d893dd29282dd4d47716a39c6a0a1e63b123",
        commit="49bfddeca18e62fa3d39114a23e9fcbdf8a22388",
        date="2026-03-22",
    ),
    Vendored(
        version="0.3.34",
        sha256="d849d286d808284f1d3ec1bd6875572430d29d1f9574a010232caa4e9cef0e35",
        commit="e3546c7948e3af463d0b401e6421d5a4c2faf565",
        date="2026-07-11",
    ),
    Vendored(
        version="0.3.35",
        sha256="1139dbb54509074b70893fab8554e3b079aa9f4d312058ce4018ef0019e3de12",
        commit="4df29be4f4c3673f428170fda944a5b19f743bb8",
        date="2026-08-16",
    ),
    Vendored(
        version="0.3.36",
        sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
        commit="0c1e57098bba43ac29e6e3b677cdceebdd22334f",
        date="2026-10-01",
    ),
)


def by_commit(commit: str, table: tuple[Vendored, ...] = SDISTS) -> list[Vendored]:
    """The sdists that vendor `commit` (a full commit, or a prefix of at least 7 hex digits)."""
    c = commit.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{7,40}", c):
        return []
    return [v for v in table if v.commit.startswith(c)]


def by_version(version: str, table: tuple[Vendored, ...] = SDISTS) -> Vendored | None:
    return next((v for v in table if v.version == version), None)


def known(table: tuple[Vendored, ...] = SDISTS) -> str:
    """'0.3.16, 0.3.17, ...': the versions the table knows, for messages."""
    return ", ".join(v.version for v in table)


def route_advice(commit: str, table: tuple[Vendored, ...] = SDISTS) -> str:
    """Which route to take for an upstream commit, in one line (newest-base, recipe errors)."""
    found = by_commit(commit, table)
    if found:
        names = ", ".join(v.candidate for v in found)
        return (
            f"{commit[:12]} is vendored by {names}: the sdist route works offline once the sdist is cached "
            f'(name it alone: [base] upstream = "{UPSTREAM}@{found[0].commit}"); the git route too'
        )
    return (
        f"no llama-cpp-python sdist in patchkit's table ({known(table)}) vendors {commit[:12]}: take the git "
        "route ([base.git] url: a clone's path or file:// URL works offline, a remote URL needs the network)"
    )
