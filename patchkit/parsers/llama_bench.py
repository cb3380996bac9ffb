"""`llama-bench -o json` / `-o jsonl` output (tools/llama-bench/llama-bench.cpp, `json_printer`,
`jsonl_printer`, pinned base ggml-org/llama.cpp@0c1e57098). Fields are taken by name; added fields are
kept in `extra` and missing required ones are refused."""

from __future__ import annotations

import json
from typing import Any

from patchkit.parsers.common import err, sample, snip, split_lines
from patchkit.parsers.records import BenchRecord

_REQUIRED: dict[str, tuple[type, ...]] = {
    "model_type": (str,),
    "n_prompt": (int,),
    "n_gen": (int,),
    "n_depth": (int,),
    "type_k": (str,),
    "type_v": (str,),
    "flash_attn": (int, bool),
    "avg_ts": (int, float),
    "stddev_ts": (int, float),
    "samples_ts": (list,),
    "samples_ns": (list,),
}
_OPTIONAL: dict[str, tuple[type, ...]] = {
    "model_filename": (str,),
    "build_commit": (str,),
    "build_number": (int,),
    "backends": (str,),
    "gpu_info": (str,),
    "cpu_info": (str,),
    "devices": (str,),
    "n_threads": (int,),
    "n_batch": (int,),
    "n_ubatch": (int,),
    "n_gpu_layers": (int,),
    "model_size": (int,),
    "model_n_params": (int,),
    "avg_ns": (int, float),
    "stddev_ns": (int, float),
    "test_time": (str,),
}


def parse_llama_bench_json(text: str, source: str) -> list[BenchRecord]:
    """Parse `llama-bench -o json` output, tolerating log text around and between the records.

    The array starts at the first line that is exactly '['; between records (and glued after a '}', as
    llama.cpp's stderr logs appear when captured with 2>&1) any line that does not start a JSON value is
    skipped. Raises ParseError 'truncated' when the array or a record is not closed, or naming the line
    of a record that is not valid JSON or lacks a required field.
    """
    i = _array_start(text, source)
    dec = json.JSONDecoder()
    out: list[BenchRecord] = []
    n = len(text)
    expect_item = True  # after '[' or ','
    while True:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            raise err(source, _line_of(text, n), "truncated: the JSON array is not closed (no ']')")
        c = text[i]
        if c == "]":
            return out
        if c == "," and not expect_item:
            expect_item, i = True, i + 1
        elif c == "{":
            if not expect_item:
                raise err(source, _line_of(text, i), "garbled JSON: missing ',' between records")
            obj, j = _decode_record(dec, text, i, source)
            out.append(_bench_record(obj, source, _line_of(text, i)))
            i, expect_item = j, False
        else:  # log text: skip the rest of the line
            k = text.find("\n", i)
            i = n if k < 0 else k + 1


def _array_start(text: str, source: str) -> int:
    """The position after the first line that is exactly '['."""
    pos = 0
    for ln in text.splitlines(keepends=True):
        if ln.strip() == "[":
            return pos + len(ln)
        pos += len(ln)
    if not text.strip():
        raise err(source, None, "truncated: empty output (expected a llama-bench JSON array)")
    raise err(source, None, "no llama-bench JSON array found (expected a line '['); truncated, or not -o json")


def _decode_record(dec: json.JSONDecoder, text: str, i: int, source: str) -> tuple[Any, int]:
    try:
        return dec.raw_decode(text, i)
    except json.JSONDecodeError as e:
        closed = any(ln.strip() == "]" for ln in text[i:].splitlines())
        if e.pos >= len(text.rstrip()) or not closed:
            raise err(
                source, _line_of(text, i), "truncated: a llama-bench record is not closed (and the array has no ']')"
            ) from None
        raise err(source, e.lineno, f"garbled JSON in a llama-bench record: {e.msg}") from None


def parse_llama_bench_jsonl(text: str, source: str) -> list[BenchRecord]:
    """Parse `llama-bench -o jsonl`: one JSON object per line; other lines (logs) are ignored.

    Raises ParseError on a line that starts with '{' but is not valid JSON ('truncated' when it is the
    last line), on a missing required field, and when no record at all is found.
    """
    lines = split_lines(text)
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    out: list[BenchRecord] = []
    for i, ln in enumerate(lines):
        s = ln.strip()
        if not s.startswith("{"):
            continue
        try:
            obj = json.loads(s)
        except json.JSONDecodeError as e:
            if i == last:
                raise err(source, i + 1, "truncated: the last llama-bench JSONL record is incomplete") from None
            raise err(source, i + 1, f"garbled llama-bench JSONL record: {e.msg}") from None
        out.append(_bench_record(obj, source, i + 1))
    if not out:
        what = "empty output" if not text.strip() else "no llama-bench JSONL record found"
        raise err(source, None, f"{what} (truncated, or not -o jsonl)")
    return out


def _bench_record(obj: Any, source: str, line: int | None) -> BenchRecord:
    vals = _checked_fields(obj, source, line)
    vals["flash_attn"] = int(vals["flash_attn"])
    for key in ("avg_ts", "stddev_ts", "avg_ns", "stddev_ns"):
        if key in vals:
            vals[key] = sample(vals[key], source, line, f"llama-bench field '{key}'")
    vals["samples_ts"] = tuple(sample(x, source, line, "llama-bench field 'samples_ts'") for x in vals["samples_ts"])
    for x in vals["samples_ns"]:  # ints kept as written (a float() would round those above 2**53)
        if isinstance(x, float) or x < 0:
            sample(x, source, line, "llama-bench field 'samples_ns'")
    vals["samples_ns"] = tuple(int(x) for x in vals["samples_ns"])
    known = set(_REQUIRED) | set(_OPTIONAL)
    extra = {k: v for k, v in obj.items() if k not in known}
    return BenchRecord(**vals, extra=extra, line=line)


def _checked_fields(obj: Any, source: str, line: int | None) -> dict[str, Any]:
    """The named fields of one record, their types checked."""
    if not isinstance(obj, dict):
        raise err(source, line, f"expected a JSON object per llama-bench test, got {type(obj).__name__}")
    vals: dict[str, Any] = {}
    for key, types in _REQUIRED.items():
        if key not in obj:
            raise err(source, line, f"llama-bench record lacks required field '{key}'")
        vals[key] = _typed(obj, key, types, source, line)
    for key, types in _OPTIONAL.items():
        if key in obj and obj[key] is not None:
            vals[key] = _typed(obj, key, types, source, line)
    for key in ("samples_ts", "samples_ns"):
        if not all(_is_type(x, (int, float)) for x in vals[key]):
            raise err(source, line, f"llama-bench field '{key}': expected a list of numbers")
    if len(vals["samples_ts"]) != len(vals["samples_ns"]):
        raise err(
            source,
            line,
            f"llama-bench record: {len(vals['samples_ns'])} samples_ns but {len(vals['samples_ts'])} samples_ts",
        )
    return vals


def _typed(obj: dict, key: str, types: tuple[type, ...], source: str, line: int | None) -> Any:
    if not _is_type(obj[key], types):
        raise err(source, line, f"llama-bench field '{key}': unexpected value {snip(json.dumps(obj[key]), 40)}")
    return obj[key]


def _is_type(v: Any, types: tuple[type, ...]) -> bool:
    if isinstance(v, bool) and bool not in types:
        return False
    return isinstance(v, types)


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1
