"""Where the recorded outputs are: tests/fixtures/cpu (CPU runs at llama.cpp 0c1e57098, each with a
*.provenance.txt) and examples/h200/raw (patchkit's raw logs of the committed H200 run, see its
PROVENANCE.md)."""

from __future__ import annotations

from pathlib import Path

from patchkit.parsers import read_log

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "cpu"
RAW = ROOT / "examples" / "h200" / "raw"
GREEN_OK = "\x1b[1;32mOK\x1b[0m"
RED_FAIL = "\x1b[1;31mFAIL\x1b[0m"


def fixture(name: str) -> str:
    return read_log(FIX / name)


def h200(name: str) -> str:
    return read_log(RAW / name)
