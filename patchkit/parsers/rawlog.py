"""patchkit's own raw logs (written by patchkit.proc.run): `$ command`, optional `# reused: RUN/LOG`
(a log copied from an earlier run), optional `# cwd: DIR`, the tool's output, then `# exit: N, S s`
(N is 'timeout' for a killed run)."""

from __future__ import annotations

import re
from pathlib import Path

from patchkit.errors import ParseError
from patchkit.parsers.records import RawLog

# the exit line; logs written before proc.run started it on a new line have it glued to output that
# did not end with a newline
EXIT_LINE = re.compile(r"# exit: (\S+), ([\d.]+) s$")
REUSED = "# reused: "  # second line of a log copied from an earlier run (patchkit.measure.reuse)


def read_log(path: str | Path) -> str:
    """The text of a log file; bytes that are not UTF-8 are replaced (a crashed tool can leave some)."""
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise ParseError(f"{path}: cannot read: {e.strerror}") from None


def parse_raw_log(text: str, source: str) -> RawLog:
    """A recorded tool run from the text of its raw log. The output is what the tool printed, ending
    with a newline, plus what was glued before the exit line when the output did not end with one.
    Raises ParseError when the first line is not `$ <command line>` or the `# exit:` line is missing
    (the run was interrupted). The command is the first line only: a command whose argument holds a
    newline (`python -c '...'`, shlex-quoted over several lines) leaves its other lines, and the
    `# cwd:` line after them, at the start of the output."""
    lines = text.split("\n")
    if not lines or not lines[0].startswith("$ "):
        raise ParseError(f"{source}:1: not a patchkit raw log (expected '$ <command line>')")
    body = lines[1:]
    cwd = None
    if body and body[0].startswith(REUSED):  # copied from an earlier run's log (patchkit.measure.reuse)
        body = body[1:]
    if body and body[0].startswith("# cwd: "):
        cwd, body = body[0][len("# cwd: ") :], body[1:]
    while body and body[-1] == "":
        body.pop()
    m = EXIT_LINE.search(body[-1]) if body else None
    if m is None:
        raise ParseError(f"{source}: truncated raw log: no '# exit:' line (the run was interrupted)")
    rc = None if m.group(1) == "timeout" else int(m.group(1))
    out = "\n".join(body[:-1]) + "\n" + body[-1][: m.start()]  # what was glued before the exit line, if anything
    return RawLog(command=lines[0][2:], cwd=cwd, returncode=rc, seconds=float(m.group(2)), output=out)


def read_raw_log(path: str | Path) -> RawLog:
    """parse_raw_log of a file, errors naming its path."""
    return parse_raw_log(read_log(path), str(path))
