"""Bases to carry the series to: a full upstream commit (git route) or `sdist:VERSION[:SHA256]` (a
llama-cpp-python sdist), resolved to a recipe Base; the sdist's sha256 from the index's JSON simple
API when it is not given, and the llama.cpp commit it vendors from its .git/modules/<subdir>/HEAD.
"""

from __future__ import annotations

import dataclasses
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

from patchkit import source, vendored
from patchkit.errors import FetchError, RecipeError
from patchkit.recipe import Base, GitBase, Recipe, SdistBase
from patchkit.workspace import Workspace, read_json

PYPI_INDEX = "https://pypi.org/simple"
DEFAULT_UPSTREAM = "ggml-org/llama.cpp"


@dataclass(frozen=True, kw_only=True)
class Onto:
    kind: str  # git | sdist
    commit: str = ""
    version: str = ""
    sha256: str = ""
    text: str = ""


def parse_onto(text: str) -> Onto:
    """A base argument: a full 40-hex commit, or sdist:VERSION[:SHA256]."""
    t = text.strip()
    if t.startswith("sdist:"):
        version, _, sha = t[len("sdist:") :].partition(":")
        if not version or not re.fullmatch(r"[0-9A-Za-z.+!_-]+", version):
            raise RecipeError(f"{text!r}: expected sdist:VERSION or sdist:VERSION:SHA256, e.g. sdist:0.3.35")
        if sha and not re.fullmatch(r"[0-9a-fA-F]{64}", sha):
            raise RecipeError(f"{text!r}: the sha256 after the version must be 64 hex digits")
        return Onto(kind="sdist", version=version, sha256=sha.lower(), text=t)
    if re.fullmatch(r"[0-9a-fA-F]{40}", t):
        return Onto(kind="git", commit=t.lower(), text=t)
    raise RecipeError(
        f"{text!r}: expected a full 40-hex commit or sdist:VERSION (a short sha, branch or tag is not a pinned base)"
    )


def pypi_sdist_sha256(sd: SdistBase) -> tuple[str, str]:
    """(sha256, index URL) of the sdist file from the index's JSON simple API (PEP 691)."""
    entry = source.sdist_index_entry(dataclasses.replace(sd, index=sd.index or PYPI_INDEX))
    sha = (entry.get("hashes") or {}).get("sha256", "")
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise FetchError(f"{entry['index_url']}: {entry['filename']} has no sha256 in the index")
    return sha, entry["index_url"]


def sdist_vendored_commit(archive: Path, subdir: str) -> str:
    """The upstream commit the sdist vendors (HEAD of its .git/modules/<subdir>), or ''."""
    suffix = f"/.git/modules/{subdir.strip('/')}/HEAD"
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for m in tar:
                if m.isfile() and m.name.endswith(suffix) and m.name.count("/") == suffix.count("/"):
                    f = tar.extractfile(m)
                    head = f.read(200).decode("ascii", "replace").strip() if f else ""
                    return head.lower() if re.fullmatch(r"[0-9a-fA-F]{40}", head) else ""
    except (tarfile.TarError, EOFError, OSError) as e:
        raise FetchError(f"{archive}: cannot read: {e}") from None
    return ""


def upstream_repo(recipe: Recipe) -> str:
    """OWNER/NAME of the recipe's upstream (ggml-org/llama.cpp when it names none)."""
    up = recipe.base.upstream
    return up.rsplit("@", 1)[0] if "@" in up else DEFAULT_UPSTREAM


def resolve_base(
    recipe: Recipe, onto: Onto, ws: Workspace, *, git_url: str = "", sha256: str = "", offline: bool = False
) -> tuple[Base, dict]:
    """The recipe Base for `onto`, and where its pieces came from ({"onto", "sha256_from", ...})."""
    if onto.kind == "git":
        table = vendored.by_commit(onto.commit)
        if not (git_url or recipe.base.git) and table:  # no git URL to fetch from: the sdist that vendors it
            sd_onto = Onto(kind="sdist", version=table[-1].version, text=onto.text)
            base, prov = _sdist_base(recipe, sd_onto, ws, git_url=git_url, sha256=sha256, offline=offline)
            return base, {**prov, "route_from": f"patchkit's table: {table[-1].candidate} vendors it"}
        return _git_base(recipe, onto, git_url), {"onto": onto.text}
    return _sdist_base(recipe, onto, ws, git_url=git_url, sha256=sha256, offline=offline)


def _git_base(recipe: Recipe, onto: Onto, git_url: str) -> Base:
    url = git_url or (recipe.base.git.url if recipe.base.git else "")
    if not url:
        raise RecipeError(
            f"{recipe.path}: no [base.git] url to fetch {onto.commit[:12]} from; pass --git-url "
            f"({vendored.route_advice(onto.commit)})"
        )
    return Base(
        source="git",
        upstream=f"{upstream_repo(recipe)}@{onto.commit}",
        git=GitBase(url=url, commit=onto.commit),
        prune=recipe.base.prune,
    )


def _sdist_base(
    recipe: Recipe, onto: Onto, ws: Workspace, *, git_url: str, sha256: str, offline: bool
) -> tuple[Base, dict]:
    old = recipe.base.sdist
    sd = SdistBase(
        name=old.name if old else "llama-cpp-python",
        version=onto.version,
        sha256=onto.sha256 or sha256.lower(),
        subdir=old.subdir if old else "vendor/llama.cpp",
        index=old.index if old else PYPI_INDEX,
    )
    prov: dict = {"onto": onto.text}
    row = vendored.by_version(sd.version) if sd.name == vendored.SDIST_NAME else None
    if sd.sha256:
        prov["sha256_from"] = "given"
    elif row is not None:
        sd = dataclasses.replace(sd, sha256=row.sha256)
        prov["sha256_from"] = "patchkit's table (patchkit/vendored.py)"
    else:
        if offline:
            raise FetchError(f"sdist {sd.name} {sd.version}: no --sha256 and --offline forbids asking the index for it")
        sha, index_url = pypi_sdist_sha256(sd)
        sd = dataclasses.replace(sd, sha256=sha)
        prov.update(sha256_from="index", index_url=index_url)
    commit = _cached_vendored_commit(ws, sd) or sdist_vendored_commit(
        source.download_sdist(sd, ws, offline=offline), sd.subdir
    )
    upstream = f"{upstream_repo(recipe)}@{commit}" if commit else ""
    git_base = None
    if commit and recipe.base.git:
        git_base = GitBase(url=git_url or recipe.base.git.url, commit=commit)
    prov["vendored_commit"] = commit
    return Base(source="sdist", upstream=upstream, git=git_base, sdist=sd, prune=recipe.base.prune), prov


def _cached_vendored_commit(ws: Workspace, sd: SdistBase) -> str:
    """The vendored commit recorded when this very sdist was imported into the cache, or ''."""
    for meta in sorted((ws.cache / "bases").glob(f"sdist-{sd.name}-{sd.version}*.json")):
        info = read_json(meta)
        if (
            isinstance(info, dict)
            and source.sdist_version_of(str(info.get("key", ""))) == sd.version
            and info.get("sdist_sha256") == sd.sha256
            and info.get("upstream_verified")  # an import commit's upstream is only what its recipe said
            and "@" in str(info.get("upstream", ""))
        ):
            return str(info["upstream"]).rsplit("@", 1)[-1]
    return ""


def fetch_checked(base: Base, ws: Workspace, offline: bool) -> source.BaseInfo:
    """The base in the cache, refused when the cached import came from another sdist file."""
    info = source.fetch(base, ws, offline=offline)
    if base.route == "sdist" and base.sdist and info.sdist_sha256 and info.sdist_sha256 != base.sdist.sha256:
        raise FetchError(
            f"{info.key}: the cached base came from an sdist with sha256 {info.sdist_sha256}, not {base.sdist.sha256}"
        )
    return info


def short(commit: str) -> str:
    return commit[:12]


def describe(info: source.BaseInfo) -> str:
    """'<short>, <key>, <how>' of a fetched base, for titles."""
    how = (
        "upstream commit, verified" if info.upstream_verified else ("import commit" if info.route == "sdist" else "git")
    )
    return f"{short(info.commit)}, {info.key}, {how}"


def sdists_vendoring(ws: Workspace, commit: str) -> list[str]:
    """`sdist:VERSION` of every sdist that vendors `commit`: patchkit's table, and every sdist base in the
    cache whose import was verified to be that commit."""
    out = [v.candidate for v in vendored.by_commit(commit)] if len(commit) == 40 else []
    for f in sorted((ws.cache / "bases").glob("sdist-*.json")):
        info = read_json(f)
        name = "sdist:" + source.sdist_version_of(str(info.get("key", ""))) if isinstance(info, dict) else ""
        if (
            name not in out
            and isinstance(info, dict)
            and info.get("upstream_verified")
            and info.get("commit") == commit
        ):
            out.append(name)
    return out


def route_line(c_text: str, base: Base | None, info: source.BaseInfo | None, ws: Workspace) -> str:
    """Which route a candidate takes, and what it means (docs/carry-your-pr.md, "Which route")."""
    if base is None or info is None:
        return ""
    if base.route == "sdist":
        what = f"vendors {base.upstream}" if info.upstream_verified else "an import commit (no verified upstream)"
        return f"route: sdist {base.sdist.version if base.sdist else ''}: {what}; offline once the sdist is cached"
    url = base.git.url if base.git else ""
    local = "a local clone: works offline" if source.is_local_url(url) else "needs the network unless cached"
    also = sdists_vendoring(ws, info.commit)
    if also:
        return f"route: git {url} ({local}); any commit; also vendored by {', '.join(also)} (the sdist route: offline)"
    return f"route: git {url} ({local}); any commit; no known llama-cpp-python sdist vendors it: git route only"
