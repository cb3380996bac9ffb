"""Carrying the series over a moving upstream: rebase onto another base, refresh patch files from
edited variant trees, and find the newest base the series still applies to.

- `patchkit rebase --onto BASE`: every patch of the series (local ones first, then the PR patches, as
  in the variants) is tried on BASE on top of the patches before it that applied, and classified:
  `clean` (`git apply --check` passes), `upstream` (`git apply --check --reverse` passes on BASE: the
  change is already there), `3way` (only `git am -3` applies it) or `conflict` (the files and hunks
  that do not apply). A conflicting patch does not stop the trial. Optionally every prefix is built
  (and the recipe's suites are run) with the ordinary build/test steps. `--write` re-exports the
  patches from the commits made on BASE into a new folder and writes a new recipe next to the old one.
- `patchkit refresh`: the commits of a variant tree, exported back to the recipe's patch files with
  fixed `git format-patch` options, so that an unchanged commit gives the same bytes.
- `patchkit newest-base --candidates ...`: the newest candidate base the whole series applies to.

Everything runs with real git in the cache repo; the trial uses its own worktree under
<work>/rebase/trees/, never the user's variant trees.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import os
import re
import tarfile
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import git

from patchkit import build as build_mod
from patchkit import series, source, workflow
from patchkit.errors import (
    ApplyError,
    BuildError,
    FetchError,
    PatchkitError,
    RecipeError,
)
from patchkit.recipe import Base, GitBase, Patch, Recipe, SdistBase, _hint, parse_recipe
from patchkit.workspace import Workspace, read_json, write_atomic, write_json

# `git format-patch` options for every patch file patchkit writes: no version signature, no commit id,
# no "n/m" numbering, full blob ids (so `git am -3` finds the preimage), no diffstat. Re-exporting an
# unchanged commit gives identical bytes; the seed patches in patches/ were made this way.
FORMAT_PATCH_OPTS = ("--no-signature", "--zero-commit", "--no-numbered", "--full-index", "--no-stat")

# The user's global/system git config must not change what patchkit writes or how it applies
# (diff.algorithm, diff.noprefix, format.headers, apply.whitespace, am.* ...): only the cache repo's
# own config, which patchkit made, is read.
NEUTRAL_GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

STATUSES = ("clean", "3way", "upstream", "conflict")
SCHEMA = 1
PYPI_INDEX = "https://pypi.org/simple"


# ---------------------------------------------------------------------------------------------
# git helpers


@dataclass(frozen=True)
class _GitResult:
    returncode: int
    stdout: bytes
    stderr: bytes


def _git(cwd: Path, *args: str, env: dict | None = None, input: bytes | None = None) -> _GitResult:
    """git through GitPython (as everywhere in patchkit), with the bytes of its output kept as they are."""
    full = {**os.environ, **NEUTRAL_GIT_ENV, **series.GIT_ENV, **(env or {})}
    with tempfile.TemporaryFile() as stdin:
        if input is not None:
            stdin.write(input)
            stdin.seek(0)
        status, out, err = git.Git(str(cwd)).execute(
            ["git", *args],
            env=full,
            istream=stdin if input is not None else None,
            with_extended_output=True,
            with_exceptions=False,
            stdout_as_string=False,
            strip_newline_in_stdout=False,
        )
    return _GitResult(
        returncode=status, stdout=out or b"", stderr=err.encode() if isinstance(err, str) else (err or b"")
    )


def _out(r: _GitResult) -> str:
    return (r.stdout or b"").decode("utf-8", "replace") + (r.stderr or b"").decode("utf-8", "replace")


def _git_ok(cwd: Path, *args: str, env: dict | None = None) -> str:
    r = _git(cwd, *args, env=env)
    if r.returncode != 0:
        raise ApplyError(f"git {' '.join(args[:3])} in {cwd}: {_out(r).strip().splitlines()[-1:] or ['failed']}")
    return r.stdout.decode("utf-8", "replace").strip()


def export_patch(cwd: Path, commit: str) -> bytes:
    """The patch file of one commit, byte for byte as patchkit writes it."""
    r = _git(cwd, "format-patch", *FORMAT_PATCH_OPTS, "--stdout", "-1", commit)
    if r.returncode != 0:
        raise ApplyError(f"git format-patch {commit[:12]}: {_out(r).strip()}")
    return r.stdout


def range_diff(
    old_base: str,
    old_commits: list[str],
    new_base: str,
    new_commits: list[str],
    *,
    ws: Workspace | None = None,
    cwd: Path | None = None,
) -> str:
    """`git range-diff` of the series on the old base against the series on the new base, in the
    cache repo (`ws`) or in a worktree of it (`cwd`).

    Each list is a chain of commits on its base, in order (the last is the tip)."""
    old_tip = old_commits[-1] if old_commits else old_base
    new_tip = new_commits[-1] if new_commits else new_base
    if old_tip == old_base and new_tip == new_base:
        return ""
    if cwd is None:
        if ws is None:
            raise ValueError("range_diff: give ws or cwd")
        source.open_cache_repo(ws)
        where, env = ws.repo, {"GIT_DIR": str(ws.repo)}
    else:
        where, env = cwd, None
    r = _git(where, "range-diff", "--no-color", f"{old_base}..{old_tip}", f"{new_base}..{new_tip}", env=env)
    if r.returncode != 0:
        raise ApplyError(f"git range-diff: {_out(r).strip()}")
    return r.stdout.decode("utf-8", "replace")


# ---------------------------------------------------------------------------------------------
# Hunks: which ones of a patch do not apply


def split_hunks(patch_text: str) -> list[tuple[series.Hunk, str]]:
    """Every hunk of a patch as (its Hunk, a standalone patch holding only that hunk)."""
    lines = patch_text.splitlines(keepends=True)
    bodies: list[str] = []
    i = 0
    header: list[str] = []
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            header = [line]
            i += 1
            while i < len(lines) and not lines[i].startswith(("@@ ", "diff --git ")):
                header.append(lines[i])
                i += 1
            continue
        m = re.match(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@", line)
        if m and header:
            old_n = int(m.group(1)) if m.group(1) is not None else 1
            new_n = int(m.group(2)) if m.group(2) is not None else 1
            body = [line]
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
            bodies.append("".join(header) + "".join(body))
            continue
        i += 1
    hunks = series.parse_hunks(patch_text)
    if len(hunks) != len(bodies):  # pragma: no cover - a patch this parser cannot split
        return []
    return list(zip(hunks, bodies))


def failing_hunks(tree: Path, patch_text: str, *, index_env: dict | None = None) -> list[dict]:
    """The hunks that do not apply on their own to the index of `tree` (file, index, header)."""
    out = []
    for h, body in split_hunks(patch_text):
        r = _git(
            tree, "apply", "--cached", "--check", "-", env=index_env, input=body.encode("utf-8", "surrogateescape")
        )
        if r.returncode != 0:
            out.append({"file": h.file, "index": h.index, "header": h.header})
    return out


def _files_of(patch_text: str) -> list[str]:
    return list(
        dict.fromkeys(m.group(2) for m in re.finditer(r"^diff --git a/(\S+) b/(\S+)", patch_text, re.MULTILINE))
    )


# ---------------------------------------------------------------------------------------------
# The trial: every patch tried on a base, on top of the ones before it that applied


@dataclass(kw_only=True)
class PatchResult:
    id: str
    file: str
    local: bool
    subject: str
    status: str  # clean | 3way | upstream | conflict
    detail: str = ""  # for a conflict: describe_failure's words; for others a note
    hunks: list[dict] = field(default_factory=list)  # conflict: the hunks that do not apply [{file, index, header}]
    files: list[str] = field(default_factory=list)  # conflict: files with a problem (failing hunks or merge conflicts)
    merge_conflicts: list[str] = field(default_factory=list)  # files `git am -3` left conflicted
    depends_on: list[str] = field(default_factory=list)
    commit: str = ""  # the commit made on the base (clean, 3way)
    build: dict | None = None  # with --build: {variant, ok, error, log}

    @property
    def applied(self) -> bool:
        return self.status in ("clean", "3way")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(kw_only=True)
class Trial:
    base: str
    results: list[PatchResult]

    @property
    def commits(self) -> list[str]:
        return [r.commit for r in self.results if r.commit]

    @property
    def conflicts(self) -> list[PatchResult]:
        return [r for r in self.results if r.status == "conflict"]

    def summary(self) -> dict:
        return {s: sum(1 for r in self.results if r.status == s) for s in STATUSES}


def ordered_patches(recipe: Recipe) -> list[Patch]:
    """The order patches go onto a base: local ones first, then the PR patches (as in the variants)."""
    return [*recipe.local_patches, *recipe.pr_patches]


def trial_tree(ws: Workspace, recipe: Recipe) -> Path:
    return ws.root / "rebase" / "trees" / recipe.name


def try_series(
    ws: Workspace, tree: Path, base_commit: str, patches: list[tuple[Patch, Path]], prune: tuple[str, ...] = ()
) -> Trial:
    """Try every patch on `base_commit` in the worktree `tree` (made or reset here), in order."""
    repo = source.open_cache_repo(ws)
    with ws.lock(tree):
        series.checkout_base(repo, tree, base_commit, prune)
        results: list[PatchResult] = []
        with tempfile.TemporaryDirectory(dir=tree.parent, prefix=".index-") as tmp:
            base_index = {"GIT_INDEX_FILE": str(Path(tmp) / "base-index")}
            r = _git(tree, "read-tree", base_commit, env=base_index)
            if r.returncode != 0:
                raise ApplyError(f"git read-tree {base_commit[:12]}: {_out(r).strip()}")
            for patch, pf in patches:
                results.append(_try_one(tree, patch, pf, base_index, results))
    return Trial(base=base_commit, results=results)


_CONFLICT_FILE = re.compile(r"^CONFLICT \([^)]*\): (?:Merge conflict in )?(\S+)", re.MULTILINE)


def _try_one(tree: Path, patch: Patch, pf: Path, base_index: dict, earlier: list[PatchResult]) -> PatchResult:
    text = pf.read_text(encoding="utf-8", errors="surrogateescape")
    res = PatchResult(
        id=patch.key,
        file=patch.file,
        local=patch.local,
        subject=patch.title or series.patch_subject(text),
        status="conflict",
        depends_on=list(patch.depends_on),
    )
    missing = [
        d for d in patch.depends_on if any((e.id == d or e.file == d) and e.status == "conflict" for e in earlier)
    ]
    dep_note = f"; depends on {', '.join(missing)}, which did not apply" if missing else ""
    am = ["am", "-3", "--keep-cr", "--committer-date-is-author-date", str(pf)]
    check = _git(tree, "apply", "--cached", "--check", "--verbose", str(pf))
    if check.returncode == 0:
        r = _git(tree, *am)
        if r.returncode == 0:
            res.status, res.commit = "clean", _git_ok(tree, "rev-parse", "HEAD")
            res.detail = dep_note.removeprefix("; ")
            return res
        _git(tree, "am", "--abort")  # pragma: no cover - apply --check passed but am did not
    rev = _git(tree, "apply", "--cached", "--check", "--reverse", str(pf), env=base_index)
    if rev.returncode == 0:
        res.status, res.detail = "upstream", "already in the base (the patch reverse-applies to it)"
        return res
    r = _git(tree, *am)
    if r.returncode == 0:
        res.status, res.commit = "3way", _git_ok(tree, "rev-parse", "HEAD")
        res.detail = "applies only with a 3-way merge" + dep_note
        return res
    am_out = _out(r)
    _git(tree, "am", "--abort")
    if "No changes -- Patch already applied" in am_out:
        res.status, res.detail = "upstream", "the 3-way merge finds the change already there"
        return res
    res.detail = series.describe_failure(pf, f"{_out(check)}\n{am_out}") + dep_note
    res.hunks = failing_hunks(tree, text)
    res.merge_conflicts = sorted(set(_CONFLICT_FILE.findall(am_out)))
    res.files = list(dict.fromkeys([*(h["file"] for h in res.hunks), *res.merge_conflicts])) or _files_of(text)
    return res


# ---------------------------------------------------------------------------------------------
# Bases: a full commit (git route) or sdist:VERSION[:SHA256]


@dataclass(frozen=True, kw_only=True)
class Onto:
    kind: str  # git | sdist
    commit: str = ""
    version: str = ""
    sha256: str = ""
    text: str = ""


def parse_onto(text: str) -> Onto:
    t = text.strip()
    if t.startswith("sdist:"):
        rest = t[len("sdist:") :]
        version, _, sha = rest.partition(":")
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


def _upstream_repo(recipe: Recipe) -> str:
    up = recipe.base.upstream
    return up.rsplit("@", 1)[0] if "@" in up else "ggml-org/llama.cpp"


def resolve_base(
    recipe: Recipe, onto: Onto, ws: Workspace, *, git_url: str = "", sha256: str = "", offline: bool = False
) -> tuple[Base, dict]:
    """The recipe Base for `onto`, and where its pieces came from ({"sha256_from": ...})."""
    prune = recipe.base.prune
    prov: dict = {"onto": onto.text}
    if onto.kind == "git":
        url = git_url or (recipe.base.git.url if recipe.base.git else "")
        if not url:
            raise RecipeError(f"{recipe.path}: no [base.git] url to fetch {onto.commit[:12]} from; pass --git-url")
        base = Base(
            source="git",
            upstream=f"{_upstream_repo(recipe)}@{onto.commit}",
            git=GitBase(url=url, commit=onto.commit),
            prune=prune,
        )
        return base, prov
    old = recipe.base.sdist
    sd = SdistBase(
        name=old.name if old else "llama-cpp-python",
        version=onto.version,
        sha256=onto.sha256 or sha256.lower(),
        subdir=old.subdir if old else "vendor/llama.cpp",
        index=old.index if old else PYPI_INDEX,
    )
    if sd.sha256:
        prov["sha256_from"] = "given"
    else:
        if offline:
            raise FetchError(f"sdist {sd.name} {sd.version}: no --sha256 and --offline forbids asking the index for it")
        sha, index_url = pypi_sdist_sha256(sd)
        sd = dataclasses.replace(sd, sha256=sha)
        prov.update(sha256_from="index", index_url=index_url)
    key = source.base_key(Base(source="sdist", sdist=sd))
    meta = ws.base_meta(key)
    vendored = ""
    if meta.is_file():
        info = read_json(meta)
        if isinstance(info, dict) and info.get("sdist_sha256") == sd.sha256 and "@" in str(info.get("upstream", "")):
            vendored = str(info["upstream"]).rsplit("@", 1)[-1]
    if not vendored:
        vendored = sdist_vendored_commit(source.download_sdist(sd, ws, offline=offline), sd.subdir)
    upstream = f"{_upstream_repo(recipe)}@{vendored}" if vendored else ""
    git_base = None
    if vendored and recipe.base.git:
        git_base = GitBase(url=git_url or recipe.base.git.url, commit=vendored)
    prov["vendored_commit"] = vendored
    return Base(source="sdist", upstream=upstream, git=git_base, sdist=sd, prune=prune), prov


def _fetch_checked(base: Base, ws: Workspace, offline: bool) -> source.BaseInfo:
    info = source.fetch(base, ws, offline=offline)
    if base.route == "sdist" and base.sdist and info.sdist_sha256 and info.sdist_sha256 != base.sdist.sha256:
        raise FetchError(
            f"{info.key}: the cached base came from an sdist with sha256 {info.sdist_sha256}, not {base.sdist.sha256}"
        )
    return info


# ---------------------------------------------------------------------------------------------
# Rebase


def short(commit: str) -> str:
    return commit[:12]


def rebase_json_path(ws: Workspace, recipe: Recipe, new_commit: str) -> Path:
    return ws.root / "rebase" / f"{recipe.name}-{new_commit}.json"


def new_patch_path(file: str, label: str) -> str:
    """patches/0001-x.patch -> patches-<label>/0001-x.patch (also from an earlier patches-<x>/)."""
    parts = Path(file).parts
    if parts and (parts[0] == "patches" or parts[0].startswith("patches-")):
        return str(Path(f"patches-{label}", *parts[1:]))
    return str(Path(f"patches-{label}", *parts))


def _base_name(name: str) -> str:
    return re.sub(r"-[0-9a-f]{12}$", "", name)


def rebase_trials(
    recipe: Recipe, ws: Workspace, old: source.BaseInfo, new: source.BaseInfo
) -> tuple[Trial, Trial, str]:
    """The series tried on the old base and on the new one, and the range-diff of the two."""
    items = [(p, recipe.patch_path(p)) for p in ordered_patches(recipe)]
    tree = trial_tree(ws, recipe)
    old_trial = try_series(ws, tree, old.commit, items, recipe.base.prune)
    new_trial = try_series(ws, tree, new.commit, items, recipe.base.prune)
    rd = range_diff(old.commit, old_trial.commits, new.commit, new_trial.commits, cwd=tree)
    repo = source.open_cache_repo(ws)
    if new_trial.commits:  # keep the trial's commits reachable (the JSON names them)
        repo.git.update_ref(f"refs/patchkit/rebase/{recipe.name}/{short(new.commit)}", new_trial.commits[-1])
    return old_trial, new_trial, rd


def _ns(args: argparse.Namespace, **over) -> argparse.Namespace:
    d: dict = {
        "backend": "cpu",
        "arch": [],
        "jobs": 0,
        "cmake_option": [],
        "variant": [],
        "force": True,
        "run": None,
        "redo": False,
        "suites": None,
        "filter": None,
        "test_jobs": 0,
    }
    for k in d:
        if getattr(args, k, None) not in (None, [], 0, False):
            d[k] = getattr(args, k)
    d["backend"] = getattr(args, "backend", None) or "cpu"
    d["cmake_option"] = [o if o.startswith("-") else f"-D{o}" for o in d["cmake_option"]]  # as `patchkit build -D` does
    d.update(over)
    return argparse.Namespace(**d)


def trial_recipe(
    recipe: Recipe, ws: Workspace, base: Base, trial: Trial, label: str
) -> tuple[Recipe, dict[str, bytes]]:
    """A recipe for the patches that applied on the new base, their files re-exported from the trial's
    commits into <work>/rebase/<recipe>-<label>/project (what the builds and tests use)."""
    tree = trial_tree(ws, recipe)
    proj = ws.root / "rebase" / f"{recipe.name}-{label}" / "project"
    by_id = {p.key: p for p in recipe.series}
    exported: dict[str, bytes] = {}
    pats: list[Patch] = []
    applied_ids = {r.id for r in trial.results if r.applied}
    for r in trial.results:
        if not r.applied:
            continue
        data = export_patch(tree, r.commit)
        rel = new_patch_path(r.file, label)
        exported[r.file] = data
        path = proj / rel
        if not path.is_file() or path.read_bytes() != data:
            write_atomic(path, data)
        p = by_id[r.id]
        deps = tuple(
            d
            for d in p.depends_on
            if d in applied_ids or any(q.file == d and q.key in applied_ids for q in recipe.series)
        )
        pats.append(dataclasses.replace(p, file=rel, depends_on=deps))
    # keep the recipe's order of the series (local patches are applied first either way)
    order = {p.key: i for i, p in enumerate(recipe.series)}
    pats.sort(key=lambda p: order[p.key])
    tr = dataclasses.replace(
        recipe,
        name=f"{_base_name(recipe.name)}-rebase-{label}",
        base=base,
        series=tuple(pats),
        root=proj,
        path=proj / "recipes" / f"{recipe.name}.toml",
    )
    return tr, exported


def build_trial(tr: Recipe, ws: Workspace, args: argparse.Namespace, *, tests: list[str], offline: bool) -> dict:
    """Build every variant (base and each prefix) of the trial recipe, each on its own so one failure
    does not hide the others; then, when all built, the recipe's suites through workflow.run_steps."""
    ns = _ns(args)
    ctx = workflow.Context(recipe=tr, ws=ws, offline=offline)
    base = workflow.step_fetch(ctx)
    states = workflow.step_apply(ctx, base, only=tuple(ns.variant), force=True)
    opts = build_mod.options_from(
        tr, backend=ns.backend, archs=tuple(ns.arch), jobs=ns.jobs, extra=tuple(ns.cmake_option)
    )
    builds: dict[str, dict] = {}
    for st in states:
        try:
            res = build_mod.build_variants(tr, base, ws, [st], opts, logs=ctx.logs)[0]
            builds[st.name] = {"ok": True, "error": "", "log": res.log, "bin_dir": res.bin_dir}
        except BuildError as e:
            builds[st.name] = {"ok": False, "error": str(e), "log": ""}
    out: dict = {"backend": opts.backend, "config": opts.config, "builds": builds, "tests": {}}
    if tests:
        suites = list(tr.suites) if tests == ["all"] else tests
        for s in suites:
            if s not in tr.suites:
                raise RecipeError(f"{tr.path}: no suite {s!r} in [suites]{_hint(s, tr.suites)}")
        if not all(b["ok"] for b in builds.values()):
            out["tests"] = {s: {"status": "not_run", "reason": "a variant does not build"} for s in suites}
        else:
            bundle = workflow.run_steps(ctx, _ns(args, suites=suites), ("test",), label="rebase")
            out["run"] = str(bundle.path)
            for s in suites:
                st = bundle.step(f"test:{s}")
                per = (st.data.get("variants") or {}) if st else {}
                out["tests"][s] = {
                    "status": st.status.value if st else "missing",
                    "reason": st.reason if st else "",
                    "variants": {v: e.get("status") for v, e in per.items()},
                }
    return out


def _attach_builds(tr: Recipe, trial: Trial, built: dict) -> None:
    variants = series.plan_variants(tr)
    last_of = {v.patches[-1].key: v.name for v in variants if v.patches}
    for r in trial.results:
        if not r.applied:
            continue
        name = "base" if r.local else last_of.get(r.id, "")
        b = built["builds"].get(name)
        if b is not None:
            r.build = {"variant": name, **b}


def render_table(title: str, trial: Trial) -> str:
    rows = [("patch", "status", "build", "detail")]
    has_build = any(r.build is not None for r in trial.results)
    for r in trial.results:
        detail = r.detail
        if r.status == "conflict" and r.hunks:
            detail = "; ".join(f"{h['file']} hunk #{h['index']} ({h['header']})" for h in r.hunks)
            if r.merge_conflicts:
                detail += f"; 3-way conflicts in {', '.join(r.merge_conflicts)}"
        build = "-" if r.build is None else ("ok" if r.build["ok"] else "FAIL")
        rows.append((r.id + (" (local)" if r.local else ""), r.status, build, detail))
    if not has_build:
        rows = [(a, b, d) for a, b, _, d in rows]  # type: ignore[misc]
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = [title]
    for row in rows:
        cells = [str(c).ljust(w) for c, w in zip(row[:-1], widths)]
        lines.append("  " + "  ".join([*cells, str(row[-1])]).rstrip())
    s = trial.summary()
    lines.append("summary: " + ", ".join(f"{s[k]} {k}" for k in STATUSES))
    return "\n".join(lines)


def _base_desc(info: source.BaseInfo) -> str:
    how = (
        "upstream commit, verified" if info.upstream_verified else ("import commit" if info.route == "sdist" else "git")
    )
    return f"{short(info.commit)}, {info.key}, {how}"


def cmd_rebase(args: argparse.Namespace) -> int:
    ctx = workflow.Context.from_args(args)
    recipe, ws = ctx.recipe, ctx.ws
    onto = parse_onto(args.onto)
    new_base, prov = resolve_base(
        recipe, onto, ws, git_url=args.git_url or "", sha256=args.sha256 or "", offline=ctx.offline
    )
    old_info = _fetch_checked(recipe.base, ws, ctx.offline)
    new_info = _fetch_checked(new_base, ws, ctx.offline)
    old_trial, new_trial, rd = rebase_trials(recipe, ws, old_info, new_info)
    label = short(new_info.commit)
    data: dict = {
        "schema": SCHEMA,
        "kind": "rebase",
        "recipe": recipe.name,
        "recipe_file": str(recipe.path),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "onto": onto.text,
        "provenance": prov,
        "old_base": old_info.to_dict(),
        "new_base": new_info.to_dict(),
        "old_commits": old_trial.commits,
        "new_commits": new_trial.commits,
        "old_base_problems": [r.to_dict() for r in old_trial.results if not r.applied],
        "range_diff": rd,
    }
    built = None
    tests = list(args.test or [])
    tests = ["all"] if "all" in tests else tests
    if (args.build or tests) and any(r.applied for r in new_trial.results):
        tr, _ = trial_recipe(recipe, ws, new_base, new_trial, label)
        built = build_trial(tr, ws, args, tests=tests, offline=ctx.offline)
        _attach_builds(tr, new_trial, built)
    data["patches"] = [r.to_dict() for r in new_trial.results]
    data["summary"] = new_trial.summary()
    data["ok"] = not new_trial.conflicts
    data["build"] = built
    out_path = rebase_json_path(ws, recipe, new_info.commit)
    write_json(out_path, data)
    print(
        render_table(
            f"rebase {recipe.name} onto {onto.text} ({_base_desc(new_info)}), from {short(old_info.commit)}", new_trial
        )
    )
    if built is not None:
        for v, b in built["builds"].items():
            print(f"build {v} ({built['config']}): {'ok' if b['ok'] else 'FAILED: ' + b['error']}")
        for s, t in built["tests"].items():
            print(f"test {s}: {t['status']}{' (' + t['reason'] + ')' if t.get('reason') else ''}")
    print(f"rebase report: {out_path}")
    bad_build = built is not None and (
        not all(b["ok"] for b in built["builds"].values()) or any(t["status"] != "ok" for t in built["tests"].values())
    )
    if args.write:
        if new_trial.conflicts:
            names = "; ".join(f"{r.file} ({', '.join(r.files) or r.detail})" for r in new_trial.conflicts)
            raise ApplyError(
                f"--write refused: {len(new_trial.conflicts)} patch(es) conflict on {short(new_info.commit)}: {names}"
            )
        written = write_rebased(recipe, ws, new_base, new_info, new_trial, label, prov)
        data["written"] = written
        write_json(out_path, data)
    return 1 if new_trial.conflicts or bad_build else 0


# ---------------------------------------------------------------------------------------------
# Writing the rebased series: new patch folder and a new recipe next to the old one


def write_rebased(
    recipe: Recipe, ws: Workspace, base: Base, info: source.BaseInfo, trial: Trial, label: str, prov: dict
) -> dict:
    tree = trial_tree(ws, recipe)
    name = f"{_base_name(recipe.name)}-{label}"
    recipe_out = recipe.path.parent / f"{name}.toml"
    files: dict[str, str] = {}
    blobs: dict[Path, bytes] = {}
    for r in trial.results:
        if r.applied:
            rel = new_patch_path(r.file, label)
            files[r.file] = rel
            blobs[recipe.root / rel] = export_patch(tree, r.commit)
    dropped = {r.file: r.id for r in trial.results if r.status == "upstream"}
    text = recipe.path.read_text(encoding="utf-8")
    note = (
        f"Rebased by `patchkit rebase` from {recipe.path.name} (base {short(recipe_base_commit(recipe))}) onto {prov.get('onto')} "
        f"(commit {info.commit}); patch files re-exported to patches-{label}/."
    )
    new_text = rewrite_recipe(text, name=name, base=base, files=files, dropped=dropped, note=note, prov=prov)
    check = parse_recipe(new_text, recipe_out, root=recipe.root)
    want = [files[p.file] for p in recipe.series if p.file in files]
    if [p.file for p in check.series] != want:  # pragma: no cover - the rewrite lost track of a [[series]] table
        raise RecipeError(f"{recipe_out}: rewritten series {[p.file for p in check.series]} is not {want}")
    clashes = [str(p) for p, b in blobs.items() if p.exists() and p.read_bytes() != b]
    if recipe_out.exists() and recipe_out.read_text(encoding="utf-8") != new_text:
        clashes.append(str(recipe_out))
    if clashes:
        raise ApplyError(
            f"--write refused: {clashes[0]} exists with other content{' (and ' + str(len(clashes) - 1) + ' more)' if len(clashes) > 1 else ''}; move it away first"
        )
    for (old, rel), (p, b) in zip(files.items(), blobs.items()):
        there = p.exists()
        if not there:
            write_atomic(p, b)
        print(f"{'unchanged' if there else 'wrote'} {rel} (from {old})")
    for f in dropped:
        print(f"dropped {f}: already upstream")
    there = recipe_out.exists()
    if not there:
        write_atomic(recipe_out, new_text)
    print(f"{'unchanged' if there else 'wrote'} {recipe_out}")
    return {"recipe": str(recipe_out), "patches": list(files.values()), "dropped": list(dropped)}


def recipe_base_commit(recipe: Recipe) -> str:
    """The old base's commit for the note (from the recipe when it names one)."""
    if recipe.base.route == "git" and recipe.base.git:
        return recipe.base.git.commit
    up = recipe.base.upstream
    return up.rsplit("@", 1)[-1] if "@" in up else ""


# A small TOML line editor: recipes are hand-written and carry comments and prose, so they are edited
# in place (values of a few keys replaced, tables added or commented out) rather than re-serialized.

_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-]+)\s*\]\]?\s*(?:#.*)?$")
_KEYLINE = re.compile(r"^(\s*)([A-Za-z0-9_\-]+)(\s*=\s*)")


@dataclass(kw_only=True)
class _Entry:
    table: str  # "base.sdist", "series" ...
    index: int  # for array tables: which one (0-based); else 0
    key: str  # normalized (dashes to underscores); "" for a header
    start: int  # first line
    end: int  # last line
    col: int = 0  # where the value starts on the first line
    end_col: int = 0  # where the value ends on the last line


def _value_end(lines: list[str], i: int, col: int) -> tuple[int, int]:
    depth = 0
    in_str = ""
    j, k = i, col
    while j < len(lines):
        s = lines[j].rstrip("\n")
        last = k
        while k < len(s):
            if in_str:
                if len(in_str) == 3 and s.startswith(in_str, k):
                    in_str, k = "", k + 3
                    last = k
                    continue
                if s[k] == "\\" and in_str[0] == '"':
                    k += 2
                    continue
                if len(in_str) == 1 and s[k] == in_str:
                    in_str = ""
                    k += 1
                    last = k
                    continue
                k += 1
                continue
            c = s[k]
            if s.startswith('"""', k) or s.startswith("'''", k):
                in_str, k = s[k : k + 3], k + 3
                continue
            if c in "\"'":
                in_str, k = c, k + 1
                continue
            if c == "#":
                break
            if c in "[{":
                depth += 1
            elif c in "]}":
                depth -= 1
            k += 1
            if not c.isspace():
                last = k
        if len(in_str) == 1:
            in_str = ""  # an unterminated basic string: invalid TOML, stop at the line's end
        if not in_str and depth <= 0:
            return j, last
        j, k = j + 1, 0
    return len(lines) - 1, len(lines[-1].rstrip("\n"))


def _scan(lines: list[str]) -> list[_Entry]:
    entries: list[_Entry] = []
    table, counts, idx = "", {}, 0
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _HEADER.match(line)
        if m:
            table = m.group(2)
            if m.group(1) == "[[":
                idx = counts.get(table, -1) + 1
                counts[table] = idx
            else:
                idx = 0
            entries.append(_Entry(table=table, index=idx, key="", start=i, end=i))
            i += 1
            continue
        m = _KEYLINE.match(line)
        if m and not line.lstrip().startswith("#"):
            end, end_col = _value_end(lines, i, m.end())
            entries.append(
                _Entry(
                    table=table,
                    index=idx,
                    key=m.group(2).replace("-", "_"),
                    start=i,
                    end=end,
                    col=m.end(),
                    end_col=end_col,
                )
            )
            i = end + 1
            continue
        i += 1
    return entries


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(_toml_str(x) for x in items) + "]"


class _Editor:
    def __init__(self, text: str):
        self.lines = text.splitlines(keepends=True)
        if self.lines and not self.lines[-1].endswith("\n"):
            self.lines[-1] += "\n"

    def entries(self) -> list[_Entry]:
        return _scan(self.lines)

    def find(self, table: str, key: str, index: int = 0) -> _Entry | None:
        return next((e for e in self.entries() if e.table == table and e.key == key and e.index == index), None)

    def table_span(self, table: str, index: int = 0) -> tuple[int, int] | None:
        """First and last line of a table (header included; trailing blank/comment lines excluded)."""
        es = self.entries()
        head = next((e for e in es if e.table == table and e.key == "" and e.index == index), None)
        if head is None:
            return None
        nxt = next((e.start for e in es if e.key == "" and e.start > head.start), len(self.lines))
        last = nxt - 1
        while last > head.start and (not self.lines[last].strip() or self.lines[last].lstrip().startswith("#")):
            last -= 1
        return head.start, last

    def set(self, table: str, key: str, value: str, index: int = 0) -> None:
        e = self.find(table, key, index)
        if e is not None:
            first = self.lines[e.start][: e.col]
            tail = self.lines[e.end][e.end_col :]
            self.lines[e.start : e.end + 1] = [first + value + tail]
            return
        span = self.table_span(table, index)
        if span is None:
            raise RecipeError(f"internal: no table [{table}] to set {key} in")
        self.lines.insert(span[1] + 1, f"{key} = {value}\n")

    def remove(self, table: str, key: str, index: int = 0) -> None:
        e = self.find(table, key, index)
        if e is not None:
            del self.lines[e.start : e.end + 1]

    def comment_out(self, table: str, note: str, index: int = 0) -> None:
        span = self.table_span(table, index)
        if span is None:
            return
        a, b = span
        self.lines[a : b + 1] = [f"# {note}\n", *[("# " + ln) if ln.strip() else "#\n" for ln in self.lines[a : b + 1]]]

    def insert_before(self, table: str, key: str, line: str, index: int = 0) -> None:
        e = self.find(table, key, index)
        if e is None:
            return
        if e.start > 0 and self.lines[e.start - 1] == line:
            return
        self.lines.insert(e.start, line)

    def add_table_after(self, prefix: str, text: str) -> None:
        es = [e for e in self.entries() if e.table == prefix or e.table.startswith(prefix + ".")]
        at = max((e.end for e in es), default=len(self.lines) - 1) + 1
        self.lines[at:at] = ["\n", *[ln + "\n" for ln in text.rstrip("\n").split("\n")]]

    def text(self) -> str:
        return "".join(self.lines)


def rewrite_recipe(
    text: str, *, name: str, base: Base, files: dict[str, str], dropped: dict[str, str], note: str, prov: dict
) -> str:
    """The recipe text with a new name, base and patch files; every other line (prose, comments) kept."""
    ed = _Editor(text)
    ents = ed.entries()
    if any(e.table == "recipe" and e.key == "" for e in ents):
        ed.set("recipe", "name", _toml_str(name))
    else:
        ed.lines[0:0] = ["[recipe]\n", f"name = {_toml_str(name)}\n", "\n"]
    ed.set("base", "source", _toml_str(base.route))
    if base.upstream:
        ed.set("base", "upstream", _toml_str(base.upstream))
    else:
        ed.remove("base", "upstream")
    if base.git is not None:
        if ed.table_span("base.git") is None:
            ed.add_table_after(
                "base", f"[base.git]\nurl = {_toml_str(base.git.url)}\ncommit = {_toml_str(base.git.commit)}"
            )
        else:
            ed.set("base.git", "url", _toml_str(base.git.url))
            ed.set("base.git", "commit", _toml_str(base.git.commit))
    else:
        ed.comment_out("base.git", "(the previous base's git commit; not this recipe's base)")
    if base.sdist is not None:
        sd = base.sdist
        if ed.table_span("base.sdist") is None:
            ed.add_table_after(
                "base",
                f"[base.sdist]\nname = {_toml_str(sd.name)}\nversion = {_toml_str(sd.version)}\nsha256 = {_toml_str(sd.sha256)}\nsubdir = {_toml_str(sd.subdir)}",
            )
        else:
            ed.set("base.sdist", "name", _toml_str(sd.name))
            ed.set("base.sdist", "version", _toml_str(sd.version))
            ed.set("base.sdist", "sha256", _toml_str(sd.sha256))
            ed.remove("base.sdist", "url")  # a direct URL named the old version's file
        if prov.get("sha256_from") == "index":
            ed.insert_before(
                "base.sdist",
                "sha256",
                f"# sha256 taken from the index's JSON simple API ({prov.get('index_url')}, files[].hashes.sha256) by patchkit rebase\n",
            )
    else:
        ed.comment_out("base.sdist", "(the previous base's sdist; it does not vendor this recipe's base)")
    # series: new files; patches already upstream commented out, and no longer depended on
    dropped_ids = set(dropped.values()) | set(dropped)
    n = sum(1 for e in ed.entries() if e.table == "series" and e.key == "")
    for i in range(n):
        e = ed.find("series", "file", i)
        if e is None:
            continue
        data = parse_recipe_value(ed.lines[e.start : e.end + 1], e)
        if data in files:
            ed.set("series", "file", _toml_str(files[data]), i)
        dep = ed.find("series", "depends_on", i)
        if dep is not None and dropped_ids:
            deps = parse_recipe_value(ed.lines[dep.start : dep.end + 1], dep)
            if isinstance(deps, str):
                deps = [deps]
            kept = [d for d in deps if d not in dropped_ids]
            if kept != list(deps):
                if kept:
                    ed.set("series", "depends_on", _toml_list(kept), i)
                else:
                    ed.remove("series", "depends_on", i)
    for i in reversed(range(n)):
        e = ed.find("series", "file", i)
        if e is not None and parse_recipe_value(ed.lines[e.start : e.end + 1], e) in dropped:
            ed.comment_out("series", "already upstream in the new base; dropped by patchkit rebase", i)
    ed.lines[0:0] = [f"# {ln}\n" for ln in _wrap(note, 98)]
    return ed.text()


def parse_recipe_value(lines: list[str], e: _Entry):
    from patchkit.recipe import tomllib

    return tomllib.loads("v = " + "".join(lines)[e.col :])["v"]


def _wrap(text: str, width: int) -> list[str]:
    out, line = [], ""
    for w in text.split():
        if line and len(line) + 1 + len(w) > width:
            out.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    return [*out, line] if line else out


# ---------------------------------------------------------------------------------------------
# Refresh: variant tree commits -> patch files


def _slug(subject: str) -> str:
    s = re.sub(r"[^A-Za-z0-9]+", "-", subject).strip("-").lower()
    return s[:52].rstrip("-") or "patch"


def refresh(
    recipe: Recipe, ws: Workspace, base: source.BaseInfo, variant_name: str | None = None
) -> tuple[list[tuple[str, str]], str]:
    """Export the variant tree's commits to the patch files.

    Commits after the base map 1:1 to the local patches, then to the variant's PR patches; commits
    beyond those (only in the whole-series variant) become new patch files and new [[series]] tables.
    Returns ([(file, 'updated'|'new'|'unchanged')], the variant's name)."""
    variants = series.plan_variants(recipe)
    if variant_name:
        names = [v.name for v in variants]
        if variant_name not in names:
            raise ApplyError(f"unknown variant {variant_name!r}{_hint(variant_name, names)}")
        variant = next(v for v in variants if v.name == variant_name)
    else:
        variant = variants[-1]
    tree = series.tree_path(ws, recipe, variant)
    spath = series.state_path(ws, recipe, variant)
    if not (tree / ".git").exists() or not spath.is_file():
        raise ApplyError(f"variant {variant.name}: no tree at {tree}; run `patchkit apply` first")
    state = series.VariantState(**read_json(spath))  # type: ignore[arg-type]
    if state.base != base.commit:
        raise ApplyError(
            f"variant {variant.name}: {tree} is on base {state.base[:12]}, the recipe's base is {base.commit[:12]}; run `patchkit apply` first"
        )
    with ws.lock(tree):
        dirty = series.dirty_files(tree)
        if dirty:
            raise ApplyError(
                f"variant {variant.name}: {tree} has uncommitted edits ({', '.join(dirty[:3])}{', ...' if len(dirty) > 3 else ''}); commit them first"
            )
        head = _git_ok(tree, "rev-parse", "HEAD")
        # (not `merge-base --is-ancestor`: the base's parents are not in the cache, which misleads it)
        listed = _git(tree, "rev-list", "--reverse", "--parents", f"{state.base}..HEAD")
        chain = [ln.split() for ln in listed.stdout.decode().splitlines()] if listed.returncode == 0 else None
        if chain is None or (chain and chain[0][1:] != [state.base]) or (not chain and head != state.base):
            raise ApplyError(
                f"variant {variant.name}: HEAD {head[:12]} is not on the base {state.base[:12]}; rebase the tree onto it first"
            )
        if any(len(c) > 2 for c in chain):
            raise ApplyError(
                f"variant {variant.name}: {tree} has merge commits after the base; a patch series is linear"
            )
        commits = [c[0] for c in chain]
        mapped = [*recipe.local_patches, *variant.patches]
        if len(commits) < len(mapped):
            missing = mapped[len(commits) :]
            raise ApplyError(
                f"variant {variant.name}: {len(commits)} commits after the base but {len(mapped)} patches (local, then PR) here; "
                f"no commit for {', '.join(p.file for p in missing)}"
            )
        extra = commits[len(mapped) :]
        if extra and variant is not variants[-1]:
            raise ApplyError(
                f"variant {variant.name}: {len(extra)} new commit(s) in a prefix variant; new patches go on top of the whole series (variant {variants[-1].name})"
            )
        exports = [(p, export_patch(tree, c)) for p, c in zip(mapped, commits)]
        out: list[tuple[str, str]] = []
        for p, data in exports:
            path = recipe.patch_path(p)
            if path.read_bytes() != data:
                write_atomic(path, data)
                out.append((p.file, "updated"))
            else:
                out.append((p.file, "unchanged"))
        if extra:
            out += [(p.file, "new") for p in _add_new_patches(recipe, tree, extra)]
    return out, variant.name


def _add_new_patches(recipe: Recipe, tree: Path, commits: list[str]) -> list[Patch]:
    """New patch files for new commits, numbered after the last PR patch, and their [[series]] tables
    in the recipe right after the last PR patch's table."""
    pr = recipe.pr_patches
    folder = Path(pr[-1].file).parent if pr else Path("patches")
    nums = [int(Path(p.file).name[:4]) for p in pr if Path(p.file).name[:4].isdigit()]
    used_ids = {p.key for p in recipe.series}
    n = max(nums, default=0)
    made: list[tuple[Patch, bytes]] = []
    for c in commits:
        n += 1
        while f"{n:04d}" in used_ids:
            n += 1
        used_ids.add(f"{n:04d}")
        data = export_patch(tree, c)
        rel = str(folder / f"{n:04d}-{_slug(series.patch_subject(data.decode('utf-8', 'replace')))}.patch")
        if (recipe.root / rel).exists():
            raise ApplyError(
                f"{recipe.root / rel}: exists but is not in the recipe; move it away or add it to the series"
            )
        made.append((Patch(file=rel, id=f"{n:04d}"), data))
    ed = _Editor(recipe.path.read_text(encoding="utf-8"))
    pr_idx = [i for i, p in enumerate(recipe.series) if not p.local]
    span = ed.table_span("series", pr_idx[-1]) if pr_idx else None
    at = (span[1] + 1) if span else len(ed.lines)
    blocks = "\n\n".join(f"[[series]]\nfile = {_toml_str(p.file)}\nid = {_toml_str(p.id)}" for p, _ in made)
    ed.lines[at:at] = [ln + "\n" for ln in ("\n" + blocks).split("\n")]
    text = ed.text()
    parse_recipe(text, recipe.path, root=recipe.root)  # refuse to write a recipe that does not load
    for p, data in made:
        write_atomic(recipe.root / p.file, data)
    write_atomic(recipe.path, text)
    return [p for p, _ in made]


def record_refreshed(
    recipe_path: Path, ws: Workspace, base: source.BaseInfo, refreshed: str, *, grew: bool = False
) -> str:
    """After a refresh the variant tree *is* what the patch files give: record its state so that
    `patchkit apply` sees it up to date. When new patches were added, the whole-series tree becomes
    the new, longer whole-series variant (its folder is moved). Returns that variant's name."""
    from patchkit.recipe import load_recipe

    recipe = load_recipe(str(recipe_path))
    variants = series.plan_variants(recipe)
    target = variants[-1] if grew else next(v for v in variants if v.name == refreshed)
    tree = series.tree_path(ws, recipe, target)
    if target.name != refreshed:
        old_tree = tree.parent / refreshed
        if (tree / ".git").exists():  # a stale tree of the longer variant from before: patchkit's own
            source.open_cache_repo(ws).git.worktree("remove", "--force", str(tree))
        source.open_cache_repo(ws).git.worktree("move", str(old_tree), str(tree))
        (tree.parent / f"{refreshed}.json").unlink(missing_ok=True)
    head = _git_ok(tree, "rev-parse", "HEAD")
    commits = _git_ok(tree, "rev-list", "--reverse", f"{base.commit}..HEAD").split()
    applied = [
        {
            "id": p.key,
            "file": p.file,
            "sha256": series.patch_sha256(recipe.patch_path(p)),
            "commit": c,
            "local": p.local,
        }
        for p, c in zip([*recipe.local_patches, *target.patches], commits)
    ]
    state = series.VariantState(
        name=target.name, key=series.variant_key(recipe, base, target), base=base.commit, head=head, patches=applied
    )
    write_json(series.state_path(ws, recipe, target), state.to_dict())
    source.open_cache_repo(ws).git.update_ref(f"refs/heads/pk/{recipe.name}/{target.branch_suffix}", head)
    return target.name


def cmd_refresh(args: argparse.Namespace) -> int:
    ctx = workflow.Context.from_args(args)
    base = source.fetch(ctx.recipe.base, ctx.ws, offline=ctx.offline)
    done, name = refresh(ctx.recipe, ctx.ws, base, args.variant)
    changed = [(f, how) for f, how in done if how != "unchanged"]
    for f, how in changed:
        print(f"{how}: {f}")
    if changed:
        name = record_refreshed(ctx.recipe.path, ctx.ws, base, name, grew=any(how == "new" for _, how in changed))
        print(f"variant {name}: recorded as up to date with the refreshed patch files")
    print(f"refresh: {len(changed)} file(s) changed, {len(done) - len(changed)} unchanged")
    return 0


# ---------------------------------------------------------------------------------------------
# Newest base


def cmd_newest_base(args: argparse.Namespace) -> int:
    ctx = workflow.Context.from_args(args)
    recipe, ws = ctx.recipe, ctx.ws
    items = [(p, recipe.patch_path(p)) for p in ordered_patches(recipe)]
    tree = trial_tree(ws, recipe)
    rows: list[dict] = []
    for cand in args.candidates:
        onto = parse_onto(cand)
        entry: dict = {"candidate": cand}
        try:
            base, prov = resolve_base(recipe, onto, ws, git_url=args.git_url or "", offline=ctx.offline)
            info = _fetch_checked(base, ws, ctx.offline)
        except PatchkitError as e:
            entry.update(error=str(e), applies=False)
            print(f"{cand}: ERROR: {e}")
            rows.append(entry)
            continue
        trial = try_series(ws, tree, info.commit, items, recipe.base.prune)
        entry.update(
            base=info.to_dict(),
            provenance=prov,
            patches=[r.to_dict() for r in trial.results],
            summary=trial.summary(),
            applies=not trial.conflicts,
        )
        entry["_trial"], entry["_base"] = trial, base
        print(render_table(f"{cand} ({_base_desc(info)})", trial))
        rows.append(entry)
    best = None
    for entry in reversed(rows):  # newest first
        if not entry.get("applies"):
            continue
        if args.build:
            info = source.BaseInfo(**entry["base"])
            tr, _ = trial_recipe(recipe, ws, entry["_base"], entry["_trial"], short(info.commit))
            built = build_trial(tr, ws, args, tests=[], offline=ctx.offline)
            entry["build"] = built
            ok = all(b["ok"] for b in built["builds"].values())
            print(
                f"{entry['candidate']}: build {'ok' if ok else 'FAILED: ' + next(b['error'] for b in built['builds'].values() if not b['ok'])}"
            )
            if not ok:
                continue
        best = entry
        break
    for e in rows:
        e.pop("_trial", None)
        e.pop("_base", None)
    out = ws.root / "rebase" / f"{recipe.name}-newest-base.json"
    write_json(
        out,
        {
            "schema": SCHEMA,
            "kind": "newest-base",
            "recipe": recipe.name,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "build": bool(args.build),
            "candidates": rows,
            "newest": best["candidate"] if best else None,
        },
    )
    if best is None:
        print(
            f"newest base: none of the {len(rows)} candidates takes the whole series{' and builds' if args.build else ''}"
        )
        print(f"report: {out}")
        return 1
    print(f"newest base: {best['candidate']} ({short(best['base']['commit'])})")
    print(f"report: {out}")
    return 0


# ---------------------------------------------------------------------------------------------
# CLI


def add_parsers(sub, common, build_opts) -> None:
    p = sub.add_parser(
        "rebase", help="try every patch of the series on another base; optionally write a rebased recipe"
    )
    common(p)
    build_opts(p)
    p.add_argument(
        "--onto",
        required=True,
        metavar="BASE",
        help="a full upstream commit, or sdist:VERSION[:SHA256] (a llama-cpp-python sdist)",
    )
    p.add_argument("--git-url", default="", help="where to fetch a commit from (default: the recipe's [base.git] url)")
    p.add_argument("--sha256", default="", help="the sdist's sha256 (default: from the index's JSON simple API)")
    p.add_argument(
        "--write",
        action="store_true",
        help="write patches-<base>/ and recipes/<name>-<base>.toml (refused on conflicts)",
    )
    p.add_argument(
        "--build",
        action="store_true",
        help="build the new base and every prefix that applies (CPU unless --backend cuda)",
    )
    p.add_argument(
        "--test",
        action="append",
        nargs="?",
        const="all",
        metavar="SUITE",
        help="run a recipe suite on every prefix (repeatable; no name: all)",
    )
    p.set_defaults(func=cmd_rebase)

    p = sub.add_parser("refresh", help="write the patch files again from the commits of a variant tree")
    common(p)
    p.add_argument("--variant", default=None, help="the variant tree to export (default: the whole series)")
    p.set_defaults(func=cmd_refresh)

    p = sub.add_parser("newest-base", help="the newest of several candidate bases that the whole series applies to")
    common(p)
    build_opts(p)
    p.add_argument(
        "--candidates",
        nargs="+",
        required=True,
        metavar="BASE",
        help="commits or sdist:VERSION[:SHA256], oldest to newest",
    )
    p.add_argument("--git-url", default="", help="where to fetch commits from (default: the recipe's [base.git] url)")
    p.add_argument(
        "--build", action="store_true", help="also require that every prefix builds (CPU unless --backend cuda)"
    )
    p.set_defaults(func=cmd_newest_base)
