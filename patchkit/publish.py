"""Create or update a pull request's description through GitHub's REST API.

    publish(repo, body, title=..., number=N)        PATCH /repos/{repo}/pulls/{N}  {"body"}
    publish(repo, body, title=..., head="me:branch") POST  /repos/{repo}/pulls      {"title", "head", "base", "body"}

The token comes from the environment (GITHUB_TOKEN by default) and is sent only as
`Authorization: Bearer ...`; it is never printed, logged or put in an error message. With dry_run,
what would be sent is printed (method, URL, title, body length) and nothing is sent.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path
from typing import Any

from patchkit.errors import PatchkitError

API = "https://api.github.com"
LOOPBACK = ("127.0.0.1", "::1", "localhost")
_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
TIMEOUT = 30


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


def split_title(markdown: str) -> tuple[str, str]:
    """A rendered report's '# title' first line and the body after it (the PR body does not repeat the title)."""
    first, _, rest = markdown.partition("\n")
    if first.startswith("# "):
        return first[2:].strip(), rest.lstrip("\n")
    return "", markdown


def _scrub(s: str, token: str | None) -> str:
    s = " ".join(s.split())  # one line
    return s.replace(token, "***") if token else s


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


def publish(
    repo: str,
    body: str,
    *,
    title: str,
    number: int | None = None,
    head: str | None = None,
    base: str = "master",
    dry_run: bool = False,
    api: str = API,
    token_env: str = "GITHUB_TOKEN",
) -> dict[str, Any]:
    """Update PR `number`'s body, or (without number) open a PR from `head` into `base`. Returns GitHub's
    JSON answer (or, with dry_run, what would have been sent). Raises PatchkitError with one line."""
    if not _REPO_RE.match(repo or ""):
        raise PatchkitError(f"repository must be OWNER/NAME, got {repo!r}")
    check_api_url(api)
    if number is None and not head:
        raise PatchkitError(
            "to open a pull request, give the head branch (OWNER:BRANCH or BRANCH); to update one, its number"
        )
    if number is not None:
        method, path, payload = "PATCH", f"/repos/{repo}/pulls/{int(number)}", {"body": body}
    else:
        if not title:
            raise PatchkitError("a new pull request needs a title")
        method, path, payload = (
            "POST",
            f"/repos/{repo}/pulls",
            {"title": title, "head": head, "base": base, "body": body},
        )
    url = api.rstrip("/") + path
    if dry_run:
        have = "set" if os.environ.get(token_env) else "NOT set"
        print(f"dry run: would {method} {url}")
        print(f"  title: {title!r}" + ("" if method == "POST" else " (not sent: an update changes the body only)"))
        if method == "POST":
            print(f"  head: {head}  base: {base}")
        print(f"  body: {len(body)} characters")
        print(f"  token: ${token_env} is {have}")
        return {"dry_run": True, "method": method, "url": url, "title": title, "body_length": len(body)}
    token = os.environ.get(token_env)
    if not token:
        raise PatchkitError(f"no GitHub token: set the environment variable {token_env}")
    import requests

    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": "patchkit",
    }
    try:
        resp = requests.request(method, url, json=payload, headers=headers, timeout=TIMEOUT, allow_redirects=False)
    except requests.RequestException as e:
        raise PatchkitError(_scrub(f"GitHub API {method} {url} failed: {type(e).__name__}: {e}", token)) from None
    if resp.status_code >= 300:
        raise PatchkitError(
            _scrub(f"GitHub API {method} {path}: HTTP {resp.status_code}: {_github_message(resp)}", token)
        )
    try:
        out = resp.json()
    except ValueError:
        raise PatchkitError(f"GitHub API {method} {path}: HTTP {resp.status_code} but the answer is not JSON") from None
    return out if isinstance(out, dict) else {"answer": out}


def publish_main(
    report: Path,
    repo: str,
    *,
    number: int | None = None,
    head: str | None = None,
    base: str = "master",
    title: str | None = None,
    dry_run: bool = False,
    api: str = API,
    token_env: str = "GITHUB_TOKEN",
) -> int:
    """`patchkit publish REPORT.md --repo OWNER/NAME (--number N | --head BRANCH)`: the report's H1 is the
    title (unless given) and the rest the body. Prints the PR's URL. Returns the exit code (0)."""
    try:
        text = Path(report).read_text(encoding="utf-8")
    except OSError as e:
        raise PatchkitError(f"{report}: cannot read the report: {e.strerror}") from None
    h1, body = split_title(text)
    out = publish(
        repo,
        body,
        title=title or h1,
        number=number,
        head=head,
        base=base,
        dry_run=dry_run,
        api=api,
        token_env=token_env,
    )
    if not dry_run:
        print(out.get("html_url") or f"{repo}#{out.get('number', number)}")
    return 0
