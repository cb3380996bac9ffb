"""What names and identifies a patchkit wheel: its version label, its key, its patchkit.json."""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from pathlib import Path

from patchkit.errors import BuildError

PACKAGE = "llama_cpp"
PATCHKIT_JSON = "patchkit.json"
SCHEMA = 1
# bump when what goes into a wheel changes, so wheels made by an older patchkit are rebuilt
WHEEL_FORMAT = 1


def _label(s: str) -> str:
    """A PEP 440 local-version segment: lowercase letters and digits only."""
    return re.sub(r"[^a-z0-9]+", "", s.lower())


def local_version(base_commit: str, patch_ids: list[str], config: str) -> str:
    """`pk.<base short sha>.p<id>....<config>`, e.g. pk.0c1e5709.p0001.p0002.cpu (PR patches only:
    the local test-only patches are in every variant and are listed in patchkit.json)."""
    parts = (
        ["pk", _label(base_commit[:8])]
        + [f"p{_label(i)}" for i in patch_ids]
        + [s for s in (_label(x) for x in re.split(r"[-_;,]+", config)) if s]
    )
    return ".".join(parts)


def wheel_version(sdist_version: str, base_commit: str, patch_ids: list[str], config: str) -> str:
    if "+" in sdist_version:
        raise BuildError(f"sdist version {sdist_version!r} already has a local label; cannot add patchkit's")
    return f"{sdist_version}+{local_version(base_commit, patch_ids, config)}"


def wheel_key(material: dict) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def read_wheel_info(whl: Path) -> dict | None:
    """The patchkit.json inside a wheel, or None."""
    try:
        with zipfile.ZipFile(whl) as z:
            return json.loads(z.read(f"{PACKAGE}/{PATCHKIT_JSON}"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None


def existing_wheel(out_dir: Path, dist: str, version: str, key: str) -> Path | None:
    """A wheel in `out_dir` built from the same inputs (its patchkit.json's wheel_key), or None."""
    for whl in sorted(out_dir.glob(f"{dist}-{version}-*.whl")):
        info = read_wheel_info(whl)
        if info and info.get("wheel_key") == key:
            return whl
    return None
