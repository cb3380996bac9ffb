"""Git patch text (format-patch files, unified diffs) and what `git am -3` says about conflicts."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Hunk:
    file: str
    index: int  # 1-based within its file
    header: str  # "@@ -650,7 +650,9 @@ ..."
    old_start: int
    old_len: int


_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")
_HUNK_LENS = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
# git's merge output: "CONFLICT (content): Merge conflict in F", "CONFLICT (modify/delete): F deleted in ..."
CONFLICT = re.compile(r"\bCONFLICT \([^)]*\): (?:Merge conflict in )?(\S+)")


def parse_hunks(patch_text: str) -> list[Hunk]:
    """Every hunk of a patch, in order, numbered within its file (the file as named after 'b/')."""
    hunks: list[Hunk] = []
    current = ""
    n = 0
    for line in patch_text.splitlines():
        m = _DIFF_FILE.match(line)
        if m:
            current, n = m.group(2), 0
            continue
        m = _HUNK.match(line)
        if m and current:
            n += 1
            hunks.append(
                Hunk(
                    file=current, index=n, header=line.strip(), old_start=int(m.group(1)), old_len=int(m.group(2) or 1)
                )
            )
    return hunks


def split_hunks(patch_text: str) -> list[tuple[Hunk, str]]:
    """Every hunk of a patch as (its Hunk, a standalone patch holding only that hunk: the file's diff
    header and the hunk); [] for a patch whose hunks this cannot split."""
    lines = patch_text.splitlines(keepends=True)
    bodies: list[str] = []
    i = 0
    header: list[str] = []
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            header, i = _file_header(lines, i)
            continue
        m = _HUNK_LENS.match(line)
        if m and header:
            body, i = _hunk_body(lines, i, m)
            bodies.append("".join(header) + "".join(body))
            continue
        i += 1
    hunks = parse_hunks(patch_text)
    if len(hunks) != len(bodies):  # pragma: no cover - a patch this parser cannot split
        return []
    return list(zip(hunks, bodies))


def _file_header(lines: list[str], i: int) -> tuple[list[str], int]:
    """The 'diff --git' line at i and the lines up to the first hunk or the next file."""
    header = [lines[i]]
    i += 1
    while i < len(lines) and not lines[i].startswith(("@@ ", "diff --git ")):
        header.append(lines[i])
        i += 1
    return header, i


def _hunk_body(lines: list[str], i: int, m: re.Match[str]) -> tuple[list[str], int]:
    """The hunk whose '@@' line is at i (matched by m): as many lines as its old/new counts say, and
    the '\\ No newline at end of file' markers after them."""
    old_n = int(m.group(1)) if m.group(1) is not None else 1
    new_n = int(m.group(2)) if m.group(2) is not None else 1
    body = [lines[i]]
    i += 1
    while i < len(lines) and (old_n > 0 or new_n > 0):
        ln = lines[i]
        tag = ln[:1]
        if tag in (" ", "\n", "\r"):
            old_n, new_n = old_n - 1, new_n - 1
        elif tag == "-":
            old_n -= 1
        elif tag == "+":
            new_n -= 1
        elif tag != "\\":
            break
        body.append(ln)
        i += 1
    while i < len(lines) and lines[i].startswith("\\"):
        body.append(lines[i])
        i += 1
    return body, i


def conflict_files(output: str) -> list[str]:
    """The files git names in its 'CONFLICT (...)' lines, in order, each once."""
    return list(dict.fromkeys(CONFLICT.findall(output)))
