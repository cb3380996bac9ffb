"""What `patchkit wheel-check`'s generation prints: its JSON result line (stdout) and llama.cpp's load
log (stderr). Pure functions returning frozen records; errors are ParseError naming the source."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from patchkit.parsers.common import err, snip

_OFFLOADED_RE = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_DEVICE_RE = re.compile(r"using device (CUDA\d+) \(([^)]*)\)")


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where llama.cpp put the model: the CUDA devices it used and the last `offloaded N/M layers`."""

    devices: tuple[str, ...]  # e.g. ("CUDA0 (NVIDIA H200)",); empty for the CPU
    offloaded: tuple[int, int] | None  # (layers on the GPU, layers); None: never reported

    def to_dict(self) -> dict[str, Any]:
        return {"devices": list(self.devices), "offloaded": list(self.offloaded) if self.offloaded else None}


@dataclass(frozen=True, kw_only=True)
class GenerateResult:
    """The generation's result line: the fields the check reads, the others kept in `extra`
    (prompt, text, flash_attn, type_k, type_v, ...)."""

    file: str  # llama_cpp.__file__ as imported
    version: str  # llama_cpp.__version__
    tokens: tuple[int, ...]
    wheel_key: str | None  # from the imported package's patchkit.json
    gpu_offload: bool  # llama_supports_gpu_offload()
    seconds: float  # of the generation
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The line as it was printed (field for field)."""
        known = {k: getattr(self, k) for k in _RESULT_FIELDS}
        return {**self.extra, **known, "tokens": list(self.tokens)}


# the fields of the result line that the check reads, and their JSON types
_RESULT_FIELDS: dict[str, tuple[type, ...]] = {
    "file": (str,),
    "version": (str,),
    "tokens": (list,),
    "wheel_key": (str, type(None)),
    "gpu_offload": (bool,),
    "seconds": (int, float),
}


def parse_llama_log(text: str) -> Placement:
    """What llama.cpp's load log says about placement (the last offload report: a partial offload is
    reported again as layers move)."""
    devices = sorted({f"{m.group(1)} ({m.group(2)})" for m in _DEVICE_RE.finditer(text)})
    offloaded = _OFFLOADED_RE.findall(text)
    last = (int(offloaded[-1][0]), int(offloaded[-1][1])) if offloaded else None
    return Placement(devices=tuple(devices), offloaded=last)


def parse_generate_result(stdout: str, source: str) -> GenerateResult:
    """The generation's result: the JSON object on the last non-empty line of its stdout.

    Raises ParseError (naming `source`) when stdout is empty, when its last line is not a JSON object,
    or when a field the check reads is missing or of the wrong type."""
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    if not lines:
        raise err(source, None, "the generation exited 0 but printed nothing on stdout: no result line")
    last = lines[-1].strip()
    try:
        got = json.loads(last)
    except ValueError:
        got = None
    if not isinstance(got, dict):
        raise err(source, None, f"the generation's last stdout line is not its JSON result: {snip(last)}")
    for name, types in _RESULT_FIELDS.items():
        if name not in got:
            raise err(source, None, f"the generation's result line has no {name!r}")
        value = got[name]
        if not isinstance(value, types) or (types == (int, float) and isinstance(value, bool)):
            raise err(source, None, f"the generation's result {name!r} has the wrong type ({type(value).__name__})")
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in got["tokens"]):
        raise err(source, None, "the generation's result 'tokens' is not a list of token ids")
    return GenerateResult(
        file=got["file"],
        version=got["version"],
        tokens=tuple(got["tokens"]),
        wheel_key=got["wheel_key"],
        gpu_offload=got["gpu_offload"],
        seconds=float(got["seconds"]),
        extra={k: v for k, v in got.items() if k not in _RESULT_FIELDS},
    )
