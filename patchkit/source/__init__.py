"""The pinned base, materialized as a commit in the cache's bare git repo.

Two routes give the same thing, a commit under refs/patchkit/bases/:
- git: `git fetch --depth 1 URL COMMIT` (what real users have);
- sdist: a llama-cpp-python sdist from PyPI (what CI and the device have): downloaded with requests,
  its sha256 checked against the recipe (on every use, a cached base too), extracted so that no member
  can write outside the extraction folder (see "Archive extraction" below), and the vendored
  llama.cpp imported. Where the sdist also carries the upstream git metadata of that folder (0.3.36
  does: .git/modules/vendor/llama.cpp, a shallow clone) and the vendored files are exactly that
  commit's tree, the base *is* the upstream commit (same sha as the git route). Otherwise it is one
  import commit whose message records the upstream reference and the sdist's hash.
A second fetch finds the ref and needs no network.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
import tarfile
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import requests

from patchkit import vcs
from patchkit.errors import FetchError
from patchkit.recipe import Base, SdistBase
from patchkit.source.archive import extract_subdirs, safe_members
from patchkit.workspace import Workspace, read_json, write_json

CHUNK = 1 << 20
IMPORT_IDENT = {
    "GIT_AUTHOR_NAME": "patchkit",
    "GIT_AUTHOR_EMAIL": "patchkit@localhost",
    "GIT_COMMITTER_NAME": "patchkit",
    "GIT_COMMITTER_EMAIL": "patchkit@localhost",
}


@dataclass(frozen=True, kw_only=True)
class BaseInfo:
    key: str  # e.g. sdist-llama-cpp-python-0.3.36 or git-<sha>
    ref: str  # refs/patchkit/bases/<key>
    commit: str  # the commit patches apply to
    route: str
    upstream: str  # "ggml-org/llama.cpp@<sha>" as the recipe says
    upstream_verified: bool  # compared with the named upstream commit: the same commit, or the same tree
    sdist_sha256: str = ""
    sdist_file: str = ""
    provenance: str = ""  # git route: what the base is, where it is not upstream's own commit (the report's words)

    def to_dict(self) -> dict:
        return asdict(self)


def open_cache_repo(ws: Workspace) -> vcs.Repo:
    """The cache's bare repo. Commands get GIT_DIR explicitly: once worktrees with their own config
    exist (extensions.worktreeConfig), GitPython no longer recognises the repo as bare."""
    if not (ws.repo / "HEAD").is_file():
        init = vcs.init_bare(ws.repo)
        init.run("config", "gc.auto", "0")
        init.run("config", "uploadpack.allowAnySHA1InWant", "true")
    return vcs.repo(ws.repo, bare=True)


def show(ws: Workspace, commit: str, path: str) -> str | None:
    """A file's text at a commit of the cache's bare repo, or None where it is not there."""
    return vcs.show(ws.repo, commit, path, git_dir=ws.repo)


def base_key(base: Base) -> str:
    """The name of a base's record and ref, from everything that makes the base: the git route's commit; the
    sdist route's sdist (name, version, sha256), vendored folder and the upstream commit the recipe names
    (which decides whether the import is that commit, verified, or an import commit)."""
    if base.route == "git":
        assert base.git is not None
        return f"git-{base.git.commit}"
    sd = base.sdist
    assert sd is not None
    made_of = "\0".join(("sdist", sd.name, sd.version, sd.sha256, sd.subdir.strip("/"), base.upstream))
    return f"sdist-{sd.name}-{sd.version}-{hashlib.sha256(made_of.encode()).hexdigest()[:12]}"


_SDIST_KEY = re.compile(r"^sdist-.+-(?P<version>[^-]+)-[0-9a-f]{12}$")
_SDIST_KEY_BEFORE = re.compile(r"^sdist-.+-(?P<version>[^-]+)$")  # records of older patchkit: no hash


def sdist_version_of(key: str) -> str:
    """The sdist version in a base key (sdist-<name>-<version>-<hash of what made it>), or ''."""
    m = _SDIST_KEY.match(key) or _SDIST_KEY_BEFORE.match(key)
    return m.group("version") if m else ""


def fetch(base: Base, ws: Workspace, *, offline: bool = False) -> BaseInfo:
    """Make sure the base commit is in the cache repo; return what it is. Idempotent."""
    key = base_key(base)
    ref = f"refs/patchkit/bases/{key}"
    meta_path = ws.base_meta(key)
    ws.check_writable()  # before the cache repo is made: one line, nothing written
    repo = open_cache_repo(ws)
    with ws.lock(ws.repo, wait=True):
        if meta_path.is_file():
            info = BaseInfo(**read_json(meta_path))  # type: ignore[arg-type]
            if base.sdist is not None and base.route == "sdist":
                check_base_record(info, base.sdist, ws, meta_path)
            try:
                if repo.run("rev-parse", "--verify", "-q", f"{ref}^{{commit}}") == info.commit:
                    _mark_shallow(repo, info.commit)
                    if base.route == "git":  # a record of older code may say "verified" where nothing was compared
                        verified, provenance = _git_provenance(repo, base, offline=offline)
                        if (verified, provenance) != (info.upstream_verified, info.provenance):
                            info = dataclasses.replace(info, upstream_verified=verified, provenance=provenance)
                            write_json(meta_path, info.to_dict())
                    return info
            except vcs.GitError:
                pass
        if base.route == "git":
            info = _fetch_git(base, repo, key, ref, offline=offline)
        else:
            info = _fetch_sdist(base, ws, repo, key, ref, offline=offline)
        write_json(meta_path, info.to_dict())
        return info


def is_local_url(url: str) -> bool:
    """A git URL that needs no network: a file:// URL or a path on this machine (not host:path)."""
    if url.startswith("file://"):
        return True
    if "://" in url or re.match(r"^[^/]+:", url):  # scheme://, or scp-like user@host:path
        return False
    return Path(url).expanduser().exists()


def upstream_commit(upstream: str) -> str:
    """The commit the recipe's [base] upstream names ("owner/name@sha"): '' when it names none."""
    sha = upstream.rsplit("@", 1)[-1] if "@" in upstream else ""
    return sha.lower() if re.fullmatch(r"[0-9a-fA-F]{7,40}", sha) else ""


def _fetch_commit(repo: vcs.Repo, url: str, sha: str) -> None:
    try:
        repo.run("fetch", "--depth", "1", "--no-tags", url, sha)
    except vcs.GitError as e:
        raise FetchError(f"git fetch {url} {sha}: {_git_msg(e)}") from None


def _fetch_git(base: Base, repo: vcs.Repo, key: str, ref: str, *, offline: bool) -> BaseInfo:
    assert base.git is not None
    sha, url = base.git.commit, base.git.url
    if not _has_object(repo, f"{sha}^{{commit}}"):  # e.g. already brought in by an sdist of the same upstream commit
        if offline and not is_local_url(url):
            raise FetchError(
                f"base {key}: not in the cache and --offline was given ({url} is not a local path or file:// URL)"
            )
        _fetch_commit(repo, url, sha)
    repo.run("update-ref", ref, sha)
    _mark_shallow(repo, sha)
    verified, provenance = _git_provenance(repo, base, offline=offline)
    return BaseInfo(
        key=key,
        ref=ref,
        commit=sha,
        route="git",
        upstream=base.upstream or f"{url}@{sha}",
        upstream_verified=verified,
        provenance=provenance,
    )


def _git_provenance(repo: vcs.Repo, base: Base, *, offline: bool) -> tuple[bool, str]:
    """Whether the git route's commit was compared with the named upstream commit and matched (the same
    commit, or the same tree), and in words what it is where it is not upstream's own commit."""
    assert base.git is not None
    sha, url = base.git.commit, base.git.url
    up = upstream_commit(base.upstream)
    if not up:
        return False, f"commit {sha[:12]} of {url}; no upstream commit named ([base] upstream) to compare it with"
    if sha.startswith(up):
        return True, ""
    name = base.upstream
    if len(up) == 40 and not _has_object(repo, f"{up}^{{commit}}") and not (offline and not is_local_url(url)):
        with contextlib.suppress(FetchError):  # the upstream commit may be in the same repository
            _fetch_commit(repo, url, up)
    if not _has_object(repo, f"{up}^{{commit}}"):
        return False, f"a local commit {sha[:12]} of {url}, not compared with upstream {name} (not in that repository)"
    if repo.run("rev-parse", f"{sha}^{{tree}}") == repo.run("rev-parse", f"{up}^{{commit}}^{{tree}}"):
        return True, f"commit {sha[:12]} of {url}, not upstream's commit, has upstream {name}'s tree (compared)"
    return False, f"a local commit {sha[:12]} of {url}, whose tree differs from upstream {name}'s (compared)"


def _has_object(repo: vcs.Repo, rev: str) -> bool:
    return repo.attempt("cat-file", "-e", rev)[0] == 0


def _mark_shallow(repo: vcs.Repo, commit: str) -> None:
    """Record a base whose parents are not in the cache as a shallow boundary, so that `git log`
    and merge-base stop there instead of failing on a missing parent."""
    header = repo.run("cat-file", "-p", commit).split("\n\n", 1)[0]
    parents = [ln.split()[1] for ln in header.splitlines() if ln.startswith("parent ")]
    missing = [p for p in parents if not _has_object(repo, p)]
    if missing:
        assert repo.git_dir is not None
        shallow = repo.git_dir / "shallow"
        known = shallow.read_text().split() if shallow.is_file() else []
        if commit not in known:
            with open(shallow, "a", encoding="utf-8") as f:
                f.write(commit + "\n")


def _git_msg(e: vcs.GitError) -> str:
    lines = [ln.strip() for ln in str(e.stderr or e).splitlines() if ln.strip()]
    return lines[-1].strip("'") if lines else str(e)


# ---------------------------------------------------------------------------------------------
# sdist route


def sdist_filename(sd: SdistBase) -> str:
    return f"{sd.name.replace('-', '_')}-{sd.version}.tar.gz"


def sdist_index_entry(sd: SdistBase) -> dict:
    """The sdist's file entry (url, hashes, ...) in the index's JSON simple API (PEP 691)."""
    url = f"{sd.index.rstrip('/')}/{sd.name}/"
    try:
        r = requests.get(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"}, timeout=60)
        r.raise_for_status()
        files = r.json()["files"]
    except (requests.RequestException, ValueError, KeyError) as e:
        raise FetchError(f"{url}: cannot list {sd.name} files: {e}") from None
    want = sdist_filename(sd)
    for f in files:
        if f.get("filename") == want:
            return {**f, "index_url": url}
    raise FetchError(f"{url}: no file {want} for {sd.name}=={sd.version}")


def resolve_sdist_url(sd: SdistBase) -> str:
    """The sdist's download URL: the recipe's, or the index's."""
    return sd.url or sdist_index_entry(sd)["url"]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _mismatch(what: Path | str, got: str, sd: SdistBase, fix: str) -> FetchError:
    """The one message for an sdist hash that is not the recipe's: both hashes and the recipe key."""
    return FetchError(f"{what}: sha256 {got} does not match the recipe's base.sdist.sha256 {sd.sha256}; {fix}")


def verified_sdist(sd: SdistBase, ws: Workspace) -> Path | None:
    """The cached sdist if it is there, after hashing it against the recipe's sha256 (the one way a
    cached sdist is opened); None if it is not cached."""
    dest = ws.sdist(sdist_filename(sd))
    if not dest.is_file():
        return None
    got = sha256_file(dest)
    if got != sd.sha256:
        raise _mismatch(
            dest, got, sd, "the cached archive was changed or the recipe is wrong (delete the file to download again)"
        )
    return dest


def check_base_record(info: BaseInfo, sd: SdistBase, ws: Workspace, record: Path) -> None:
    """A cached sdist base is used only for the recipe's sdist: its record names the sha256 it was
    imported from, and the cached archive (where it is still there) is hashed again."""
    verified_sdist(sd, ws)
    if info.sdist_sha256 != sd.sha256:
        raise FetchError(
            f"{record}: base {info.key} was imported from the sdist with sha256 {info.sdist_sha256}, not the "
            f"recipe's base.sdist.sha256 {sd.sha256}; correct the recipe, or delete the record to import it again"
        )


def download_sdist(sd: SdistBase, ws: Workspace, *, offline: bool = False) -> Path:
    """The verified sdist in the cache: a cached file is re-verified; a bad one is never used."""
    cached = verified_sdist(sd, ws)
    if cached is not None:
        return cached
    dest = ws.sdist(sdist_filename(sd))
    if offline:
        raise FetchError(f"{dest}: not in the cache and --offline was given")
    url = resolve_sdist_url(sd)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    h = hashlib.sha256()
    try:
        from tqdm import tqdm

        with requests.get(url, stream=True, timeout=60) as r:
            r.raise_for_status()
            total = int(r.headers.get("content-length", 0)) or None
            with (
                open(part, "wb") as f,
                tqdm(total=total, unit="B", unit_scale=True, desc=dest.name, disable=None) as bar,
            ):
                for chunk in r.iter_content(CHUNK):
                    f.write(chunk)
                    h.update(chunk)
                    bar.update(len(chunk))
    except requests.RequestException as e:
        part.unlink(missing_ok=True)
        raise FetchError(f"{url}: download failed: {e}") from None
    if h.hexdigest() != sd.sha256:
        part.unlink(missing_ok=True)
        raise _mismatch(url, h.hexdigest(), sd, "the download is not the sdist the recipe names")
    os.replace(part, dest)
    return dest


def keep_prefixes(names: list[str], top: str, subdir: str) -> tuple[str, ...]:
    """Archive paths (relative to `top`) that cover everything except .git/ and `subdir`."""
    skip = subdir.strip("/").split("/")
    rel = [n[len(top) + 1 :] for n in names if n.startswith(top + "/")]
    keep: set[str] = set()
    for depth in range(len(skip)):
        parent = "/".join(skip[:depth])
        for r in rel:
            parts = r.split("/")
            if len(parts) <= depth or "/".join(parts[:depth]) != parent or not parts[depth]:
                continue
            name = "/".join(parts[: depth + 1])
            if parts[depth] == skip[depth] or (depth == 0 and parts[0] == ".git"):
                continue
            keep.add(name)
    return tuple(sorted(keep))


def project_paths(ws: Workspace, sd: SdistBase) -> tuple[Path, Path]:
    """The cached sdist project (the sdist without .git and its vendored folder) and its record."""
    stem = sdist_filename(sd).removesuffix(".tar.gz")
    folder = ws.cache / "sdist-project"
    return folder / f"{stem}.tar.gz", folder / f"{stem}.json"


def project_prefixes(names: list[str], archive: Path, subdir: str) -> tuple[str, tuple[str, ...]]:
    """An sdist's top folder and the paths under it that make its project: all but .git/ and
    `subdir`; refuses an archive without a pyproject.toml at the top."""
    if not names:
        raise FetchError(f"{archive}: empty archive")
    top = names[0].split("/", 1)[0]
    keep = keep_prefixes(names, top, subdir)
    if "pyproject.toml" not in keep:
        raise FetchError(f"{archive}: no pyproject.toml at the top of the sdist")
    return top, keep


def sdist_project(sd: SdistBase, ws: Workspace, *, offline: bool = False, archive: Path | None = None) -> Path:
    """The sdist's project files without its vendored llama.cpp (about 1 MB instead of 76), as a
    tar.gz cached next to the sdist and derived from the sha256-verified sdist only.

    Its record (`.json`) holds the sdist's sha256 it was cut from and its own sha256; a cached project
    archive is used only if both still match (the recipe's sdist sha256, the file's hash), so a machine
    that cannot download the sdist (or carry 76 MB) can build wheels from the project archive and the
    variant's tree alone. `archive`: the sdist, where the caller has just verified it."""
    path, record = project_paths(ws, sd)
    if path.is_file() and record.is_file():
        rec = read_json(record)
        cut_from = rec.get("sdist_sha256") if isinstance(rec, dict) else "?"
        if not isinstance(rec, dict) or cut_from != sd.sha256:
            raise _mismatch(record, str(cut_from), sd, f"cut from another sdist; delete {path.parent} to cut it again")
        if rec.get("subdir") != sd.subdir:
            raise FetchError(
                f"{record}: cut for the vendored folder {rec.get('subdir')!r}, not the recipe's base.sdist.subdir "
                f"{sd.subdir!r}; "
                f"delete {path.parent} to cut it again"
            )
        got = sha256_file(path)
        if got != rec.get("sha256"):
            raise FetchError(
                f"{path}: sha256 {got} is not the {rec.get('sha256')} recorded when it was cut from the sdist; "
                "delete it to cut it again"
            )
        return path
    if archive is None:
        try:
            archive = download_sdist(sd, ws, offline=offline)
        except FetchError as e:
            raise FetchError(f"{e} (nor is its project archive {path})") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    try:
        with tarfile.open(archive, "r:gz") as src, tarfile.open(part, "w:gz") as dst:
            top, keep = project_prefixes(src.getnames(), archive, sd.subdir)
            members = safe_members(src, archive, tuple(f"{top}/{k}" for k in keep))
            for m in members:
                dst.addfile(m, src.extractfile(m) if m.isfile() else None)
    except (tarfile.TarError, EOFError, OSError) as e:
        part.unlink(missing_ok=True)
        raise FetchError(f"{archive}: cannot cut the project archive: {e}") from None
    rec = {
        "sdist": archive.name,
        "sdist_sha256": sd.sha256,
        "subdir": sd.subdir,
        "sha256": sha256_file(part),
        "members": len(members),
    }
    os.replace(part, path)
    write_json(record, rec)
    return path


def _tree_of_folder(repo: vcs.Repo, folder: Path) -> str:
    """The git tree hash of a plain folder (ignored files included), written into the repo's objects."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        base = ["-C", str(folder), f"--git-dir={repo.git_dir}", f"--work-tree={folder}"]
        repo.run(*base, "add", "-A", "-f", "--", ".", env=env)
        return repo.run(*base, "write-tree", env=env)


def check_other_records(sd: SdistBase, ws: Workspace) -> None:
    """Without the sdist in the cache (what a GPU machine carries: the repo and the records), a record of the
    same sdist name and version imported from another sha256 says the recipe's sha256 is not that sdist's."""
    if ws.sdist(sdist_filename(sd)).is_file():
        return  # the download check names a wrong sha256
    for record in sorted((ws.cache / "bases").glob(f"sdist-{sd.name}-{sd.version}*.json")):
        info = read_json(record)
        got = info.get("sdist_sha256") if isinstance(info, dict) else None
        if got and got != sd.sha256 and sdist_version_of(str(info.get("key", ""))) == sd.version:
            raise FetchError(
                f"{record}: base {info.get('key')} was imported from the sdist with sha256 {got}, not the "
                f"recipe's base.sdist.sha256 {sd.sha256}; correct the recipe, or delete the record to import it again"
            )


def _fetch_sdist(base: Base, ws: Workspace, repo: vcs.Repo, key: str, ref: str, *, offline: bool) -> BaseInfo:
    sd = base.sdist
    assert sd is not None
    check_other_records(sd, ws)
    archive = download_sdist(sd, ws, offline=offline)
    sdist_project(sd, ws, archive=archive)  # what `patchkit wheel` needs besides the variant's tree
    subdir = sd.subdir.strip("/")
    tmp_root = ws.cache / "tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tmp_root) as tmp:
        top = extract_subdirs(archive, Path(tmp), (subdir, f".git/modules/{subdir}"))
        folder = top / subdir
        if not folder.is_dir():
            raise FetchError(f"{archive}: no folder {subdir!r} in the archive")
        # the vendored folder's own .git file points at ../../.git/modules/...; never import it
        gitfile = folder / ".git"
        if gitfile.is_file():
            gitfile.unlink()
        tree = _tree_of_folder(repo, folder)
        upstream_sha = base.upstream.rsplit("@", 1)[-1] if "@" in base.upstream else ""
        verified = False
        commit = ""
        gitdir = top / ".git" / "modules" / subdir
        if upstream_sha and (gitdir / "HEAD").is_file():
            try:
                # the extracted gitdir points at its old work tree; upload-pack refuses to run there
                cfg = ["config", "--file", str(gitdir / "config")]
                repo.attempt(*cfg, "--unset-all", "core.worktree")
                repo.run(*cfg, "core.bare", "true")
                repo.run("fetch", "--no-tags", str(gitdir), upstream_sha)
                fetched = repo.run("rev-parse", "--verify", f"{upstream_sha}^{{commit}}")
                if repo.run("rev-parse", f"{fetched}^{{tree}}") == tree:
                    commit, verified = fetched, True
            except vcs.GitError:
                pass
        if not commit:
            msg = (
                f"Import {base.upstream or 'llama.cpp'} from {sd.name} {sd.version} sdist\n\n"
                f"Folder: {subdir}\nsdist sha256: {sd.sha256}\n"
                "The sdist's files are not verifiably the upstream commit's tree, so this is an import commit.\n"
            )
            env = {
                **os.environ,
                **IMPORT_IDENT,
                "GIT_DIR": str(repo.git_dir),
                "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
                "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
            }
            commit = repo.run("commit-tree", tree, "-m", msg, env=env)
    repo.run("update-ref", ref, commit)
    _mark_shallow(repo, commit)
    repo.run("prune-packed")  # the loose objects of the tree check that the fetched pack already holds
    return BaseInfo(
        key=key,
        ref=ref,
        commit=commit,
        route="sdist",
        upstream=base.upstream,
        upstream_verified=verified,
        sdist_sha256=sd.sha256,
        sdist_file=archive.name,
    )
