"""The devices a ggml tool's log says it ran on: test-backend-ops' `Backend i/n: NAME` sections (a
`Device description` line, or `Skipping`), ggml-cuda's `Device 0: NAME, compute capability X.Y` line at
start-up, llama-bench's `gpu_info` / `cpu_info` / `backends` fields. For a run imported without the
machine's env.json: what the report may say about the hardware comes from here, never from a default."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from patchkit.parsers.common import split_lines, strip_ansi

_SECTION_RE = re.compile(r"^Backend \d+/\d+: (\S+)$")
_DESC_RE = re.compile(r"^  Device description: (.*)$")
_CUDA_DEV_RE = re.compile(r"^  Device \d+: (.+?), compute capability (\d+\.\d+)")
_BENCH_RE = re.compile(r'"(gpu_info|cpu_info|backends)"\s*:\s*("(?:[^"\\]|\\.)*")')


@dataclass(frozen=True)
class Device:
    """A device the log shows work on: its ggml name (CUDA0, CPU; "" when only its description is known),
    the description the tool printed, and a CUDA device's compute capability."""

    name: str
    description: str
    cc: str | None = None


def devices_run(text: str) -> list[Device]:
    """The devices the log says ran (a test-backend-ops section that printed `Skipping` did not), in order."""
    out: list[Device] = []
    lines = [strip_ansi(s) for s in split_lines(text)]
    ccs = [(m.group(1), m.group(2)) for m in map(_CUDA_DEV_RE.match, lines) if m]
    for i, s in enumerate(lines):
        m = _SECTION_RE.match(s)
        if not m:
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        d = _DESC_RE.match(nxt)
        if d:
            cc = next((c for desc, c in ccs if desc == d.group(1)), None)
            out.append(Device(m.group(1), d.group(1).strip(), cc))
    if not out:
        out = [Device("", desc, cc) for desc, cc in ccs]
    if not out:
        out = _bench_devices(text)
    return out


def _bench_devices(text: str) -> list[Device]:
    """llama-bench JSON / JSONL: its first record's gpu_info (a GPU ran) or cpu_info (backends CPU)."""
    found: dict[str, str] = {}
    for m in _BENCH_RE.finditer(text):
        found.setdefault(m.group(1), json.loads(m.group(2)))
    if found.get("gpu_info"):
        return [Device("", found["gpu_info"])]
    if found.get("cpu_info") and found.get("backends", "CPU") == "CPU":
        return [Device("CPU", found["cpu_info"])]
    return []


_SYSTEM_INFO_RE = re.compile(r"system_info: (.*)$", re.M)
_ITEM_RE = re.compile(r"^(?:(?P<section>[A-Za-z0-9_]+) : )?(?P<key>[A-Za-z0-9_]+) = (?P<val>\S+)$")


def cpu_features(text: str) -> tuple[str, ...]:
    """The CPU features a llama.cpp binary was built with, as its first `system_info:` line prints them
    (`... | CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | ... |`): the CPU section's keys set to 1, in order."""
    m = _SYSTEM_INFO_RE.search(strip_ansi(text))
    if not m:
        return ()
    out, section = [], ""
    for item in (s.strip() for s in m.group(1).split("|")):
        im = _ITEM_RE.match(item)
        if not im:
            continue
        section = im.group("section") or section
        if section == "CPU" and im.group("val") == "1":
            out.append(im.group("key"))
    return tuple(out)
