"""The series: variants (base and every prefix of the PR patches), each a git worktree made with `git am -3`.

Local test-only patches go into every variant first, so every variant shares them and the PR diff
(variant vs base) never contains them. A variant is keyed by the base commit and the sha256 of every
patch in it; an unchanged variant is left alone, a changed one is rebuilt from the base, and a
variant tree with uncommitted edits or files git does not track is never touched unless forced.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from patchkit import vcs
from patchkit.errors import ApplyError
from patchkit.parsers.patch import CONFLICT, parse_hunks
from patchkit.recipe import Patch, Recipe
from patchkit.source import BaseInfo
from patchkit.workspace import DamagedFile, Workspace, read_json, write_json

# Deterministic identity and dates: the same base and patches give the same commit shas everywhere.
GIT_ENV = {
    "GIT_COMMITTER_NAME": "patchkit",
    "GIT_COMMITTER_EMAIL": "patchkit@localhost",
}


@dataclass(frozen=True, kw_only=True)
class Variant:
    name: str  # "base", "+0001", "+0001+0002", "-0001" (leave-one-out)
    patches: tuple[Patch, ...]  # PR patches in order (local ones are added to every variant)

    @property
    def folder(self) -> str:
        """Its folder, state file, lock and branch name: the name, bounded (folder_name)."""
        return folder_name(self.name)

    @property
    def branch_suffix(self) -> str:
        return self.folder.replace("+", "p").replace("-", "m") if self.name != "base" else "base"


FOLDER_MAX = 64  # a variant's name longer than this is not a path component (255 bytes from ~51 patches)


def folder_name(name: str) -> str:
    """A variant's name as one path component of a bounded length: the name itself while short; else its
    first and last patch, how many, and a hash of the whole name (the display name stays the name)."""
    if len(name) <= FOLDER_MAX:
        return name
    parts = re.findall(r"[+-][^+-]+", name)
    first, last = (parts[0], parts[-1]) if parts else (name[:8], "")
    return f"{first[:20]}_{last[:20]}_{len(parts)}p_{hashlib.sha256(name.encode()).hexdigest()[:16]}"


def plan_variants(recipe: Recipe, *, leave_one_out: bool = False, only: tuple[str, ...] = ()) -> list[Variant]:
    pr = recipe.pr_patches
    out = [Variant(name="base", patches=())]
    for i in range(1, len(pr) + 1):
        out.append(Variant(name="".join(f"+{p.key}" for p in pr[:i]), patches=pr[:i]))
    if leave_one_out and len(pr) > 1:
        for p in pr:
            rest = tuple(q for q in pr if q is not p)
            if any(p.key in q.depends_on for q in rest):
                continue  # removing a dependency is not a meaningful variant
            out.append(Variant(name=f"-{p.key}", patches=rest))
    if only:
        names = {v.name for v in out}
        for n in only:
            if n not in names:
                from patchkit.recipe import _hint

                raise ApplyError(f"unknown variant {n!r}{_hint(n, names)}")
        out = [v for v in out if v.name in only]
    return out


def patch_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def variant_key(recipe: Recipe, base: BaseInfo, variant: Variant) -> str:
    h = hashlib.sha256()
    h.update(base.commit.encode())
    for p in (*recipe.local_patches, *variant.patches):
        h.update(b"\0" + p.key.encode() + b"\0" + patch_sha256(recipe.patch_path(p)).encode())
    h.update(b"\0prune\0" + "\0".join(recipe.base.prune).encode())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# Patch files: the hunks (patchkit.parsers.patch), to name the one that failed.


def patch_subject(patch_text: str) -> str:
    """The Subject of a format-patch file, with its [PATCH n/m] prefix removed and folded lines joined."""
    lines = patch_text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Subject: "):
            subj = line[len("Subject: ") :]
            for cont in lines[i + 1 :]:
                if cont.startswith((" ", "\t")):
                    subj += cont if cont.startswith(" ") else " " + cont.strip()
                else:
                    break
            return re.sub(r"^\[PATCH[^\]]*\]\s*", "", subj).strip()
    return ""


def patch_body(patch_text: str) -> str:
    """The commit message body (after the Subject, before the '---' of the diffstat/diff)."""
    lines = patch_text.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.startswith("Subject: "))
    except StopIteration:
        return ""
    i = start + 1
    while i < len(lines) and lines[i].startswith((" ", "\t")):
        i += 1
    body: list[str] = []
    for ln in lines[i:]:
        if ln == "---" or ln.startswith("diff --git "):
            break
        body.append(ln)
    return "\n".join(body).strip()


_FAILED_AT = re.compile(r"patch failed: (\S+):(\d+)")
_NOT_EXIST = re.compile(r"error: (\S+): does not exist in index")
_EXISTS = re.compile(r"error: (\S+): already exists in (?:index|working directory)")
_CORRUPT = re.compile(r"error: corrupt patch at line (\d+)")
_BEYOND_LINK = re.compile(r"affected file '([^']+)' is beyond a symbolic link")
_NO_DIFF = re.compile(r"No valid patches in input|Patch format detection failed|Patch is empty")
# git's advice around an `am` that stopped: never part of patchkit's one line
_GIT_ADVICE = re.compile(
    r"^(?:hint:|When you have resolved|If you prefer to skip|To restore the original|To record the empty"
    r"|Patch failed at|Applying:|Using index info|Falling back to)"
)


def _hunk_at_patch_line(patch_text: str, line: int) -> str:
    """'file F, hunk #N (@@ ... @@)' of the hunk that holds line `line` (1-based) of the patch file."""
    found = ""
    current, n = "", 0
    for i, ln in enumerate(patch_text.splitlines(), 1):
        if i > line:
            break
        if ln.startswith("diff --git "):
            current, n, found = ln.split(" b/", 1)[-1], 0, ""
        elif ln.startswith("@@ ") and current:
            n += 1
            found = f"file {current}, hunk #{n} ({ln.strip()})"
    return found


def _git_error_lines(output: str) -> list[str]:
    """git's own lines, unwrapped from GitPython's `stderr: '...'` and without its advice."""
    out = []
    for ln in output.splitlines():
        ln = ln.strip()
        for pre in ("stderr: '", "stdout: '"):
            if ln.startswith(pre):
                ln = ln[len(pre) :].rstrip("'")
        if ln and not _GIT_ADVICE.match(ln):
            out.append(ln)
    return out


def _unwrap(s: object) -> str:
    """GitPython's "\n  stderr: '<git's output>'" as git's output."""
    t = str(s or "").strip()
    if t.startswith(("stderr: '", "stdout: '")) and t.endswith("'"):
        t = t[len("stderr: '") : -1]
    return t


def git_says(e: vcs.GitError) -> str:
    """'git <subcommand> failed: <git's first error line>' of a git command that failed."""
    lines = _git_error_lines(f"{_unwrap(e.stderr)}\n{_unwrap(e.stdout)}")
    errs = [ln for ln in lines if ln.startswith(("error:", "fatal:"))]
    cmd = e.command if isinstance(e.command, list) else str(e.command).split()
    sub = next((c for c in cmd[1:] if not c.startswith("-")), "")
    return f"git {sub} failed: " + (errs or lines or [f"exit status {e.status}"])[0]


def describe_failure(patch_file: Path, output: str) -> str:
    """One line naming where the patch fails: 'file F, hunk #N (@@ ... @@)' for the first failing hunk
    that git names, else git's first error line (never git's advice on how to continue an `am`)."""
    text = patch_file.read_text(encoding="utf-8", errors="replace")
    hunks = parse_hunks(text)
    m = _BEYOND_LINK.search(output)
    if m:  # checked first: git's 3-way fallback then says "CONFLICT (...): There is ..." of no file
        return (
            f"file {m.group(1)}: a folder on its path is a symbolic link (made by an earlier patch or the base), "
            "and git writes no file through a link; have the patch name the path the link points to"
        )
    m = _FAILED_AT.search(output)
    if m:
        f, line = m.group(1), int(m.group(2))
        for h in hunks:
            if h.file == f and h.old_start == line:
                return f"file {f}, hunk #{h.index} ({h.header})"
        return f"file {f}, hunk at line {line}"
    m = CONFLICT.search(output) or _NOT_EXIST.search(output)
    if m:
        f = m.group(1)
        idx = [h for h in hunks if h.file == f]
        return f"file {f}" + (", hunks " + ", ".join(f"#{h.index}" for h in idx) if idx else "")
    m = _EXISTS.search(output)
    if m:
        return f"file {m.group(1)}: the patch creates it, but it is already in the tree"
    m = _CORRUPT.search(output)
    if m:
        where = _hunk_at_patch_line(text, int(m.group(1)))
        return f"corrupt patch at line {m.group(1)}" + (
            f": {where} (its line counts do not match its lines)" if where else ""
        )
    if _NO_DIFF.search(output) or not (hunks or "diff --git " in text):
        return "no diff in it (not a git format-patch or unified diff, or an empty one)"
    lines = _git_error_lines(output)
    errs = [ln for ln in lines if ln.startswith(("error:", "fatal:"))]
    return (errs or lines or ["git am failed"])[0]


# ---------------------------------------------------------------------------------------------
# Worktrees


@dataclass(frozen=True, kw_only=True)
class VariantState:
    name: str
    key: str
    base: str
    head: str
    patches: list[dict]  # [{id, file, sha256, commit, local}]

    def to_dict(self) -> dict:
        return asdict(self)


def state_path(ws: Workspace, recipe: Recipe, variant: Variant) -> Path:
    return ws.variants(recipe.name) / f"{variant.folder}.json"


def tree_path(ws: Workspace, recipe: Recipe, variant: Variant) -> Path:
    return ws.variants(recipe.name) / variant.folder


def dirty_files(tree: Path) -> list[str]:
    out = vcs.repo(tree).run("status", "--porcelain", "--untracked-files=no")
    return [ln[3:] for ln in out.splitlines() if ln.strip()]


def untracked_files(tree: Path, new_head: str) -> list[str]:
    """The user's files in a variant tree that git does not track: every untracked file git's ignore rules
    do not hide, and every ignored one the variant's new head would write over (`reset --hard` would)."""
    wt = vcs.repo(tree)
    out = wt.run("status", "--porcelain", "--untracked-files=all", "-z")
    files = [e[3:] for e in out.split("\0") if e.startswith("?? ")]
    rc, added, _ = wt.attempt("diff", "--name-only", "--no-renames", "--diff-filter=A", "-z", "HEAD", new_head)
    added = added if rc == 0 else ""  # no HEAD to compare with: the untracked files git lists only
    files += [f for f in added.split("\0") if f and f not in files and (tree / f).is_file()]
    return files


def _listed(files: list[str]) -> str:
    return ", ".join(files[:3]) + (f", ... ({len(files)} in all)" if len(files) > 3 else "")


_WORKTREES = threading.Lock()
_NUMSTAT = re.compile(r"(?:\d+|-)\t(?:\d+|-)\t(.*)", re.S)


def _sparse_pattern(path: str) -> str:
    """The sparse-checkout (gitignore-style) pattern of exactly one file of the tree."""
    return "/" + re.sub(r"[*?\[\\!#]|^ | $", lambda m: "\\" + m.group(), path)


def checkout_base(
    repo: vcs.Repo, tree: Path, commit: str, prune: tuple[str, ...], only: tuple[str, ...] = ()
) -> vcs.Repo:
    """A worktree at `tree` on `commit` (detached), with the recipe's pruned paths left out; `only`: with
    just these files written (a scratch tree for `git am`: its commits are the same, git's index holds
    every file either way)."""
    if not (tree / ".git").exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        with _WORKTREES:  # the build lane and the CPU steps may add one each at once (patchkit.run.lanes)
            repo.run("worktree", "prune")
            repo.run("worktree", "add", "--no-checkout", "--detach", "--force", str(tree), commit)
    wt = vcs.repo(tree)
    if only:
        wt.run("sparse-checkout", "set", "--no-cone", *[_sparse_pattern(f) for f in only])
    elif prune:
        wt.run("sparse-checkout", "set", "--no-cone", "/*", *[f"!/{p.strip('/')}/" for p in prune])
    if wt.run("rev-parse", "--abbrev-ref", "HEAD") != "HEAD":
        wt.run("checkout", "--detach")
    wt.attempt("am", "--abort")
    wt.run("reset", "--hard", commit)
    return wt


def _am(wt: vcs.Repo, patch_file: Path, cr: str) -> str:
    """`git am -3` of one patch file, its CRs kept (`--keep-cr`) or not (`--no-keep-cr`): '' where it
    applied, else git's output (the am aborted)."""
    try:
        wt.run("am", "-3", cr, "--committer-date-is-author-date", str(patch_file), env=GIT_ENV)
        return ""
    except vcs.GitError as e:
        wt.attempt("am", "--abort")
        return f"{e.stdout or ''}\n{e.stderr or ''}"


def am(wt: vcs.Repo, patch_file: Path, patch: Patch, variant: str) -> str:
    """Apply one patch: with its CRs kept (a patch of files with CRLF lines), and where that fails and the
    patch file has CRLF line endings, as plain `git am` does (CRs dropped: a patch saved with CRLF)."""
    out = _am(wt, patch_file, "--keep-cr")
    crlf = bool(out) and b"\r\n" in patch_file.read_bytes()
    if crlf:
        out = _am(wt, patch_file, "--no-keep-cr") and out
    if out:
        # `am -3` may fail before it says where (no usable blob ids); `apply --check` always says
        _, _, check_err = wt.attempt("apply", "--check", "--verbose", str(patch_file))
        out = f"{check_err}\n{out}"
        if "No space left on device" in out or "Disk quota exceeded" in out:
            raise ApplyError(
                f"variant {variant}: patch {patch.file}: git could not write in {wt.working_dir}: no space left "
                "on device; free space there and rerun the same command (the variants' trees are as they were)"
            ) from None
        endings = " (its lines end in CRLF: it applies neither with the CRs kept nor dropped)" if crlf else ""
        raise ApplyError(
            f"variant {variant}: patch {patch.file} does not apply: {describe_failure(patch_file, out)}{endings}"
        ) from None
    return wt.run("rev-parse", "HEAD")


class Chain:
    """The commits made so far by one apply, by the prefix of patches they hold, and the one scratch worktree
    they are made in: N prefix variants cost N `git am`s in one tree, not N*(N+1)/2 in N trees (the commits are
    the ones a variant applied alone gets: fixed committer, dates from the patch). `close()` removes the tree."""

    def __init__(self, repo: vcs.Repo, ws: Workspace, recipe: Recipe):
        self.repo, self.ws, self.recipe = repo, ws, recipe
        self.made: dict[str, tuple[str, list[dict]]] = {}  # prefix digest -> (head, applied)
        self.scratch: Path | None = None

    def tree(self, head: str, patches: list[Path]) -> vcs.Repo:
        """The scratch worktree at `head` (made at the first call), with the files `patches` touch written
        (`git apply --numstat`; every file where git cannot list them): a checkout of the whole tree and
        its removal took 1.45 s of a warm loop on 2 cores, before the build could start."""
        only = self._touched(patches)
        if self.scratch is None:
            root = self.ws.cache / "tmp"
            root.mkdir(parents=True, exist_ok=True)
            self.scratch = Path(tempfile.mkdtemp(dir=root, prefix=f"apply-{folder_name(self.recipe.name)}-")) / "tree"
        elif only and (self.scratch / ".git").exists() and self._at(head):
            wt = vcs.repo(self.scratch)  # at `head` already: the files of the patches still to apply written too
            wt.run("sparse-checkout", "add", *[_sparse_pattern(f) for f in only])
            return wt
        return checkout_base(self.repo, self.scratch, head, self.recipe.base.prune, only)

    def _at(self, head: str) -> bool:
        return self.scratch is not None and vcs.repo(self.scratch).attempt("rev-parse", "HEAD")[1] == head

    def _touched(self, patches: list[Path]) -> tuple[str, ...]:
        """Every path the patches name (old and new names), or () where git cannot list one's."""
        paths: list[str] = []
        for pf in patches:
            rc, out, _ = self.repo.attempt("apply", "--numstat", "-z", str(pf))
            if rc != 0:
                return ()
            for entry in filter(None, out.split("\0")):  # "added<TAB>deleted<TAB>path"; a rename: "..<TAB>", old, new
                m = _NUMSTAT.fullmatch(entry)
                paths.append(m.group(1) if m else entry)
        return tuple(dict.fromkeys(p for p in paths if p))

    def close(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch.parent, ignore_errors=True)
            self.scratch = None
            self.repo.run("worktree", "prune")


def series_commits(
    repo: vcs.Repo, ws: Workspace, recipe: Recipe, base: BaseInfo, variant: Variant, chain: Chain | None = None
) -> tuple[str, list[dict]]:
    """The variant's commits, made with `git am -3` in a scratch worktree: (head, applied patches). With a
    `chain` (shared by the variants of one apply), started from the longest prefix of its patches made already.
    A patch that does not apply raises ApplyError and leaves every variant's tree as it was."""
    own = chain is None
    chain = Chain(repo, ws, recipe) if chain is None else chain
    todo = (*recipe.local_patches, *variant.patches)
    digests, h = [], hashlib.sha256(base.commit.encode())
    for p in todo:
        h.update(b"\0" + p.key.encode() + b"\0" + patch_sha256(recipe.patch_path(p)).encode())
        digests.append(h.hexdigest())
    done = next((n for n in range(len(todo), 0, -1) if digests[n - 1] in chain.made), 0)
    head, applied = chain.made[digests[done - 1]] if done else (base.commit, [])
    if done == len(todo):
        return head, list(applied)
    try:
        wt = chain.tree(head, [recipe.patch_path(p) for p in todo[done:]])
        applied = list(applied)
        for n in range(done, len(todo)):
            p, pf = todo[n], recipe.patch_path(todo[n])
            commit = am(wt, pf, p, variant.name)
            applied.append(
                {"id": p.key, "file": p.file, "sha256": patch_sha256(pf), "commit": commit, "local": p.local}
            )
            chain.made[digests[n]] = (commit, list(applied))
        return commit, applied
    finally:
        if own:
            chain.close()


def _read_state(spath: Path) -> VariantState:
    """A variant's state file (variants/<recipe>/<variant>.json), one line when it is damaged."""
    try:
        data = read_json(spath)
    except DamagedFile as e:
        raise ApplyError(f"{e}; deleting it has the variant applied again") from None
    want = set(VariantState.__dataclass_fields__)
    if not isinstance(data, dict) or set(data) != want:
        got = sorted(data) if isinstance(data, dict) else f"a JSON {type(data).__name__}"
        raise ApplyError(
            f"{spath}: damaged variant state (expected the keys {', '.join(sorted(want))}, got {got}); "
            "delete it to have the variant applied again"
        )
    return VariantState(**data)


def apply_variant(
    recipe: Recipe, base: BaseInfo, ws: Workspace, variant: Variant, *, force: bool = False, chain: Chain | None = None
) -> tuple[VariantState, bool]:
    """Make the variant's worktree; returns its state and whether anything was (re)done."""
    from patchkit.source import open_cache_repo

    key = variant_key(recipe, base, variant)
    tree = tree_path(ws, recipe, variant)
    spath = state_path(ws, recipe, variant)
    old = _read_state(spath) if spath.is_file() else None
    with ws.lock(tree):
        if (tree / ".git").exists():
            wt = vcs.repo(tree)
            dirty = dirty_files(tree)
            if dirty and not force:
                raise ApplyError(
                    f"variant {variant.name}: {tree} has uncommitted edits ({', '.join(dirty[:3])}"
                    f"{', ...' if len(dirty) > 3 else ''}); commit them and run `patchkit refresh`, or pass --force"
                )
            head = wt.run("rev-parse", "HEAD")
            if old and old.key == key and old.head == head and not dirty:
                return old, False
            if old and head != old.head and not force:
                raise ApplyError(
                    f"variant {variant.name}: {tree} has commits patchkit did not make (HEAD {head[:12]}); "
                    "run `patchkit refresh` to export them, or pass --force to discard"
                )
        repo = open_cache_repo(ws)
        try:
            head, applied = series_commits(repo, ws, recipe, base, variant, chain)  # raises before the tree is touched
        except vcs.GitError as e:  # a full disk, say: git's own words, one line
            raise ApplyError(f"variant {variant.name}: {git_says(e)} (its tree is as it was)") from None
        if (tree / ".git").exists():
            _keep_untracked(tree, variant.name, head, force)
        spath.unlink(missing_ok=True)
        try:
            checkout_base(repo, tree, head, recipe.base.prune)
            repo.run("update-ref", f"refs/heads/pk/{recipe.name}/{variant.branch_suffix}", head)
        except vcs.GitError as e:  # a half-made tree (a full disk) is not left to look like the user's edits
            shutil.rmtree(tree, ignore_errors=True)
            repo.attempt("worktree", "prune")
            raise ApplyError(
                f"variant {variant.name}: {git_says(e)} (its tree {tree} is not made: `patchkit apply` makes it again)"
            ) from None
        state = VariantState(name=variant.name, key=key, base=base.commit, head=head, patches=applied)
        write_json(spath, state.to_dict())
        return state, True


def _keep_untracked(tree: Path, variant: str, head: str, force: bool) -> None:
    """Files the user made in a variant tree are their work: a tree to be made again with them in it is
    refused, unless forced (then they are discarded: the tree becomes exactly the variant)."""
    extra = untracked_files(tree, head)
    if not extra:
        return
    if not force:
        raise ApplyError(
            f"variant {variant}: {tree} has files git does not track ({_listed(extra)}) and its patches changed; "
            "move them out of the tree to keep them, or pass --force to discard them"
        )
    wt = vcs.repo(tree)
    wt.run("reset", "--hard")
    wt.run("clean", "-f", "-d", "-q", "--", *extra)
    print(f"variant {variant}: --force: discarded {len(extra)} untracked file(s) in {tree} ({_listed(extra)})")


def apply_all(
    recipe: Recipe, base: BaseInfo, ws: Workspace, variants: list[Variant], *, force: bool = False
) -> tuple[list[VariantState], list[ApplyError]]:
    """Every variant is tried; failures are collected so one bad patch leaves the others intact."""
    states, errors = [], []
    from patchkit.source import open_cache_repo

    chain = Chain(open_cache_repo(ws), ws, recipe)  # one `git am` per patch of the series, not one per prefix
    try:
        for v in variants:
            try:
                state, changed = apply_variant(recipe, base, ws, v, force=force, chain=chain)
                print(f"{v.name}: {'applied' if changed else 'up to date'} ({state.head[:12]})")
                states.append(state)
            except ApplyError as e:
                print(f"{v.name}: FAILED: {e}")
                errors.append(e)
    finally:
        chain.close()
    return states, errors
