"""Update the body of the user's own, existing pull request from a rendered report. Never open one.

llama.cpp's CONTRIBUTING/AGENTS.md: automated PR submission can get a contributor banned, and AI-written
PR descriptions are not accepted. So patchkit opens no pull request (NEVER_OPENS says so), and it
replaces a PR's body only after the user has seen what changes:

    GET   /repos/{repo}/pulls/{N}             the current body
          a unified diff, current body -> new body (the report minus its H1 title), and its digest
    PATCH /repos/{repo}/pulls/{N}  {"body"}   only after "y" on a terminal, or `--confirm DIGEST`

The digest (`digest()`) binds the confirmation to exactly that change: the first 12 hex digits of
sha256 over the JSON array ["patchkit-pr-body/1", repo in lower case, N, current body, new body]. If
the PR's body or the report changed since the diff was shown, the digest no longer matches and
nothing is sent.

The token comes from the environment (GITHUB_TOKEN by default) and is sent only as
`Authorization: Bearer ...`, only over https (or plain http to this machine, for a local test server);
it is never printed, logged or put in an error message, in any form (`scrub`: plain, stripped, escaped as
repr/JSON write it, percent-encoded). A trailing newline of the variable is dropped; whitespace or control
characters inside it are refused in one line that names the variable only.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shlex
import sys
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from patchkit.errors import PatchkitError

API = "https://api.github.com"
LOOPBACK = ("127.0.0.1", "::1", "localhost")
_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
TIMEOUT = 30
DIGEST_VERSION = "patchkit-pr-body/1"
NEVER_OPENS = (
    "patchkit never opens pull requests: open it yourself on GitHub, then run "
    "`patchkit pr --repo OWNER/NAME --number N` to update its body with the report"
)

Ask = Callable[[str], str]


@dataclass(frozen=True)
class BodyChange:
    """The change `patchkit pr` would make: PR `number` of `repo`, its body `old` -> `new`."""

    repo: str
    number: int
    title: str  # the PR's title on GitHub (shown, never changed)
    state: str  # open, closed
    old: str
    new: str

    @property
    def digest(self) -> str:
        return digest(self.repo, self.number, self.old, self.new)

    @property
    def empty(self) -> bool:
        """The bodies read the same (line endings and a final newline aside): nothing to change."""
        return self.old.splitlines() == self.new.splitlines()


def check_api_url(api: str) -> str:
    """The API URL, if the token may be sent to it: https, or plain http to this machine only
    (127.0.0.1, ::1, localhost: a local test server). Anything else is refused in one line."""
    u = urllib.parse.urlsplit(api or "")
    if u.scheme == "https" and u.hostname:
        return api
    if u.scheme == "http" and u.hostname in LOOPBACK:
        return api
    raise PatchkitError(
        f"--api {api!r}: the token is sent only over https (or plain http to 127.0.0.1/localhost for a local test)"
    )


def check_repo(repo: str) -> str:
    if not _REPO_RE.match(repo or ""):
        raise PatchkitError(f"--repo must be OWNER/NAME, got {repo!r}")
    return repo


def split_title(markdown: str) -> tuple[str, str]:
    """A rendered report's '# title' first line and the body after it (the PR body does not repeat the title)."""
    first, _, rest = markdown.partition("\n")
    if first.startswith("# "):
        return first[2:].strip(), rest.lstrip("\n")
    return "", markdown


def digest(repo: str, number: int, old: str, new: str) -> str:
    """The confirmation digest of replacing `old` by `new` as the body of repo#number (see the module doc)."""
    data = json.dumps([DIGEST_VERSION, repo.lower(), int(number), old, new], ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(data.encode("ascii")).hexdigest()[:12]


def non_ascii_count(text: str) -> int:
    return sum(1 for c in text if ord(c) > 127)


def _shown(line: str) -> str:
    """A line as it is safe to show on a terminal: control characters (escape sequences) written as \\xNN."""
    return _CONTROL_RE.sub(lambda m: f"\\x{ord(m.group()):02x}", line)


def render_diff(change: BodyChange) -> str:
    """The unified diff (difflib) of the current body -> the new body, control characters made visible."""
    lines = difflib.unified_diff(
        change.old.splitlines(),
        change.new.splitlines(),
        fromfile=f"{change.repo}#{change.number} (current body)",
        tofile=f"{change.repo}#{change.number} (new body, from the report)",
        lineterm="",
    )
    return "\n".join(_shown(line) for line in lines)


def secret_forms(secret: str | None) -> list[str]:
    """Every form in which `secret` may appear in a message: plain, stripped, escaped as repr() and JSON
    write it (a header value quoted by requests), percent-encoded (a URL); longest first."""
    if not secret:
        return []
    forms = set()
    for s in {secret, secret.strip()}:
        if not s:
            continue
        forms |= {s, repr(s)[1:-1], json.dumps(s)[1:-1], s.encode("unicode_escape").decode("ascii")}
        forms |= {urllib.parse.quote(s, safe=""), urllib.parse.quote_plus(s, safe="")}
    return sorted(forms, key=len, reverse=True)


def scrub(text: str, secret: str | None) -> str:
    """`text` with every form of `secret` (see secret_forms) replaced by ***."""
    for form in secret_forms(secret):
        text = text.replace(form, "***")
    return text


def _scrub(s: str, token: str | None) -> str:
    return " ".join(scrub(s, token).split())  # one line, scrubbed before the whitespace is joined


def read_token(token_env: str) -> str | None:
    """The token of the environment variable `token_env`, surrounding whitespace (a trailing newline of a file)
    dropped; None when unset or empty. One whose inside holds whitespace or control characters (no HTTP header
    can carry it) is refused in one line that names the variable, never the value."""
    raw = os.environ.get(token_env) or ""
    token = raw.strip()
    if any(c.isspace() or not c.isprintable() or ord(c) > 126 for c in token):
        raise PatchkitError(
            f"${token_env} holds whitespace, control or non-ASCII characters inside the token (not shown); nothing sent"
        )
    return token or None


def _github_message(resp: Any) -> str:
    try:
        d = resp.json()
    except ValueError:
        return (resp.text or "").strip().splitlines()[0][:200] if (resp.text or "").strip() else resp.reason or ""
    if not isinstance(d, dict):
        return str(d)[:200]
    msg = str(d.get("message") or "")
    details = []
    for e in d.get("errors") or []:
        if isinstance(e, dict):
            details.append(
                str(e.get("message") or " ".join(str(e.get(k)) for k in ("resource", "field", "code") if e.get(k)))
            )
        else:
            details.append(str(e))
    if details:
        msg += ": " + "; ".join(details)
    return msg


def _request(method: str, api: str, path: str, token: str | None, payload: dict | None = None) -> dict[str, Any]:
    """One GitHub REST call; its JSON object. Errors are one line without the token."""
    url = check_api_url(api).rstrip("/") + path
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "patchkit"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        resp = requests.request(method, url, json=payload, headers=headers, timeout=TIMEOUT, allow_redirects=False)
    except requests.RequestException as e:
        raise PatchkitError(_scrub(f"GitHub API {method} {url} failed: {type(e).__name__}: {e}", token)) from None
    if resp.status_code >= 300:
        hint = "" if token or method != "GET" else " (no token was sent: a private repository needs one)"
        raise PatchkitError(
            _scrub(f"GitHub API {method} {path}: HTTP {resp.status_code}: {_github_message(resp)}{hint}", token)
        )
    try:
        out = resp.json()
    except ValueError:
        raise PatchkitError(f"GitHub API {method} {path}: HTTP {resp.status_code} but the answer is not JSON") from None
    if not isinstance(out, dict):
        raise PatchkitError(f"GitHub API {method} {path}: HTTP {resp.status_code} but the answer is not a JSON object")
    return out


def fetch_pr(repo: str, number: int, *, api: str = API, token: str | None = None) -> dict[str, Any]:
    """GET /repos/{repo}/pulls/{number}: GitHub's JSON of the pull request (its body may be null)."""
    pr = _request("GET", api, f"/repos/{check_repo(repo)}/pulls/{int(number)}", token)
    if not isinstance(pr.get("body"), (str, type(None))):
        raise PatchkitError(f"GitHub API GET /repos/{repo}/pulls/{int(number)}: the answer has no body field")
    return pr


def plan_change(repo: str, number: int, new_body: str, *, api: str = API, token: str | None = None) -> BodyChange:
    """What replacing the body of repo#number by `new_body` would change, from the PR as it is now."""
    pr = fetch_pr(repo, number, api=api, token=token)
    return BodyChange(
        repo=repo,
        number=int(number),
        title=str(pr.get("title") or ""),
        state=str(pr.get("state") or "?"),
        old=pr.get("body") or "",
        new=new_body,
    )


def update_body(change: BodyChange, *, api: str = API, token: str) -> dict[str, Any]:
    """PATCH /repos/{repo}/pulls/{number} {"body": change.new}: GitHub's answer. The caller has confirmed."""
    if not token:
        raise PatchkitError("no GitHub token")
    return _request("PATCH", api, f"/repos/{change.repo}/pulls/{change.number}", token, {"body": change.new})


def terminal_ask() -> Ask | None:
    """`input` when both stdin and stdout are a terminal (someone can read the diff and answer), else None."""
    return input if sys.stdin.isatty() and sys.stdout.isatty() else None


def _confirm_command(change: BodyChange, report: Path, api: str) -> str:
    cmd = ["patchkit", "pr", "--repo", change.repo, "--number", str(change.number), "--report", str(report)]
    if api != API:
        cmd += ["--api", api]
    return shlex.join([*cmd, "--confirm", change.digest])


def _show(change: BodyChange, report: Path, api: str, token: str | None) -> None:
    print(scrub(f"{change.repo}#{change.number}: {change.title!r} ({_shown(change.state)})", token))
    print(scrub(render_diff(change), token))
    n = non_ascii_count(change.new)
    if n:
        print(
            f"warning: the new body has {n} non-ASCII character{'s' if n != 1 else ''} "
            "(llama.cpp's AGENTS.md asks for ASCII)",
            file=sys.stderr,
        )
    print(f"digest: {change.digest}  (to send exactly this change: {_confirm_command(change, report, api)})")


def _approved(change: BodyChange, confirm: str | None, ask: Ask | None) -> bool:
    """True if the user approved this exact change; False if they answered no. Raises when they cannot."""
    if confirm is not None:
        if confirm.strip().lower() != change.digest:
            raise PatchkitError(
                f"--confirm {confirm!r} does not match the change that would be sent now (digest {change.digest}): "
                "the PR's body or the report changed since; nothing sent"
            )
        return True
    if ask is None:
        raise PatchkitError(
            f"not sent: no terminal to confirm on; after reading the diff above, rerun with --confirm {change.digest}"
        )
    try:
        answer = ask(f"Replace the body of {change.repo}#{change.number} with this? [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def pr_main(
    report: Path,
    repo: str,
    number: int | None,
    *,
    confirm: str | None = None,
    dry_run: bool = False,
    ask: Ask | None = None,
    api: str = API,
    token_env: str = "GITHUB_TOKEN",
) -> int:
    """`patchkit pr --repo OWNER/NAME --number N [--report FILE] [--confirm DIGEST | --dry-run]`: show the
    diff of the PR's current body -> the report (minus its H1) and its digest; replace the body only when
    `confirm` is that digest or `ask` (a terminal prompt) gets "y"/"yes". Returns the exit code:
    0 (sent, nothing to change, or dry run), 1 (answered no). Raises PatchkitError with one line."""
    if number is None:
        raise PatchkitError(NEVER_OPENS)
    check_repo(repo)
    check_api_url(api)
    token = read_token(token_env)
    if not dry_run and not token:
        raise PatchkitError(f"no GitHub token: set the environment variable {token_env} (or look with --dry-run)")
    try:
        text = Path(report).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PatchkitError(f"{report}: cannot read the report: {getattr(e, 'strerror', None) or e}") from None
    _, body = split_title(text)
    if token and scrub(body, token) != body:
        raise PatchkitError(f"{report}: the report contains the value of ${token_env}; nothing sent")
    change = plan_change(repo, number, body, api=api, token=token)
    if change.empty:
        print(f"{repo}#{number}: the body is already this report; nothing to change")
        return 0
    _show(change, report, api, token)
    if dry_run:
        print("dry run: nothing sent")
        return 0
    if not _approved(change, confirm, ask):
        print("not sent")
        return 1
    if confirm is None and plan_change(repo, number, body, api=api, token=token).old != change.old:
        raise PatchkitError(f"{repo}#{number}: its body changed on GitHub while you read the diff; nothing sent")
    out = update_body(change, api=api, token=token)
    url = out.get("html_url")
    print(f"updated the body of {repo}#{number}" + (f": {url}" if url else ""))
    return 0
