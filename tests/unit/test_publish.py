"""patchkit.cli.publish and `patchkit pr` against a real local HTTP server (http.server on 127.0.0.1, port 0)
standing in for GitHub's REST API: it holds one pull request (GET answers it, PATCH changes its body) and
records every request. patchkit never opens a PR (no POST, ever), and replaces a body only after the diff
was shown and confirmed (a terminal's "y", or --confirm with that diff's digest). The CLI runs through
patchkit.cli.main (pytest's stdin is no terminal) and once end to end as `python -m patchkit pr ...` with
stdin /dev/null; the terminal prompt is driven through pr_main's `ask`. The token never appears in any
output or error. Every server is shut down at the end of its test."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from patchkit.cli import main
from patchkit.cli.publish import BodyChange, digest, pr_main, render_diff, split_title
from patchkit.errors import PatchkitError

TOKEN = "ghp_TESTTOKEN_0123456789abcdefSECRET"
REPO = "me/llama.cpp"
OLD = "## Overview\n\nold text\n\n## Numbers\n\n| a | b |\n"
REPORT = "# cuda: smaller KV tile\n\n## Overview\n\nnew text\n\n## Numbers\n\n| a | b |\n"
NEW = split_title(REPORT)[1]


class FakeGitHub:
    """One PR (#12 of me/llama.cpp) served at GET/PATCH /repos/me/llama.cpp/pulls/12; every request is
    recorded. `answers` (status, json) override the next answers (to test errors)."""

    def __init__(self, body: str | None = OLD):
        self.requests: list[dict] = []
        self.answers: list[tuple[int, object]] = []
        self.pr = {"number": 12, "title": "cuda: smaller KV tile", "state": "open", "body": body}
        self.pr["html_url"] = "https://github.com/me/llama.cpp/pull/12"
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                req = {"method": self.command, "path": self.path, "headers": dict(self.headers)}
                req["body"] = json.loads(raw) if raw else None
                fake.requests.append(req)
                status, answer = fake.answers.pop(0) if fake.answers else fake.answer(req)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_PATCH = do_POST = do_GET = _handle

            def log_message(self, *a):  # keep test output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, req: dict) -> tuple[int, object]:
        if req["path"] != "/repos/me/llama.cpp/pulls/12":
            return 404, {"message": "Not Found"}
        if req["method"] == "GET":
            return 200, self.pr
        if req["method"] == "PATCH":
            self.pr["body"] = req["body"]["body"]
            return 200, self.pr
        return 405, {"message": "Method Not Allowed"}

    def methods(self) -> list[str]:
        return [r["method"] for r in self.requests]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def gh(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    srv = FakeGitHub()
    try:
        yield srv
    finally:
        srv.close()
    assert not srv.thread.is_alive()


@pytest.fixture
def report(tmp_path):
    md = tmp_path / "report.md"
    md.write_text(REPORT, encoding="utf-8")
    return md


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def cli(*args: str, token: str | None = TOKEN) -> Ran:
    """`patchkit pr ARGS` through patchkit.cli.main in this process: stdin is pytest's (not a terminal)."""
    mp = pytest.MonkeyPatch()
    try:
        if token:
            mp.setenv("GITHUB_TOKEN", token)
        else:
            mp.delenv("GITHUB_TOKEN", raising=False)
        assert not sys.stdin.isatty()
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(["pr", *args])
            except SystemExit as e:  # argparse
                rc = e.code
    finally:
        mp.undo()
    p = Ran(rc, out.getvalue(), err.getvalue())
    assert TOKEN not in p.stdout and TOKEN not in p.stderr
    return p


def cli_subprocess(*args: str) -> subprocess.CompletedProcess:
    """`python -m patchkit pr ARGS` in a subprocess, stdin /dev/null (not a terminal)."""
    env = {**os.environ, "GITHUB_TOKEN": TOKEN}
    p = subprocess.run(
        [sys.executable, "-m", "patchkit", "pr", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert TOKEN not in p.stdout and TOKEN not in p.stderr
    return p


def pr_args(gh, report, *more: str) -> list[str]:
    return ["--repo", REPO, "--number", "12", "--report", str(report), "--api", gh.url, *more]


def printed_digest(out: str) -> str:
    (d,) = re.findall(r"^digest: ([0-9a-f]{12})  \(to send exactly this change: .* --confirm \1\)$", out, re.M)
    return d


def _no_token(capsys, *texts):
    out = capsys.readouterr()
    for t in (out.out, out.err, *texts):
        assert TOKEN not in t


# --- never open a pull request


@pytest.mark.parametrize(
    "extra",
    [
        [],  # no --number
        ["--head", "me:fattn-tile"],
        ["--head", "me:fattn-tile", "--number", "12"],
        ["--head", "me:fattn-tile", "--confirm", "0123456789ab"],
    ],
)
def test_pr_never_opens_a_pull_request(gh, report, extra):
    p = cli("--repo", REPO, "--report", str(report), "--api", gh.url, *extra)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == (
        "patchkit: error: patchkit never opens pull requests: open it yourself on GitHub, then run "
        "`patchkit pr --repo me/llama.cpp --number N` to update its body with the report\n"
    )
    assert gh.requests == []


def test_pr_offline_is_refused(gh, report):
    p = cli(*pr_args(gh, report, "--offline", "--dry-run"))
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == "patchkit: error: --offline: patchkit pr reads and updates the PR on GitHub; nothing sent\n"
    assert gh.requests == []


def test_pr_has_no_base_option_any_more(gh, report):
    p = cli(*pr_args(gh, report, "--base", "master"))
    assert p.returncode == 2 and "unrecognized arguments: --base master" in p.stderr
    assert gh.requests == []


# --- the diff first, then a confirmation bound to it


def test_without_a_terminal_or_confirm_the_diff_is_shown_and_nothing_sent(gh, report):
    p = cli(*pr_args(gh, report))
    assert p.returncode == 2
    assert gh.methods() == ["GET"] and gh.pr["body"] == OLD
    d = digest(REPO, 12, OLD, NEW)
    assert p.stderr == (
        "patchkit: error: not sent: no terminal to confirm on; after reading the diff above, "
        f"rerun with --confirm {d}\n"
    )
    lines = p.stdout.splitlines()
    assert lines[0] == "me/llama.cpp#12: 'cuda: smaller KV tile' (open)"
    assert lines[1:3] == ["--- me/llama.cpp#12 (current body)", "+++ me/llama.cpp#12 (new body, from the report)"]
    assert "-old text" in lines and "+new text" in lines and " ## Overview" in lines
    assert "# cuda: smaller KV tile" not in p.stdout.replace("## ", "")  # the H1 is not part of the body
    assert printed_digest(p.stdout) == d
    assert f"--report {report}" in lines[-1] and f"--api {gh.url}" in lines[-1]
    get = gh.requests[0]
    assert get["path"] == "/repos/me/llama.cpp/pulls/12" and get["headers"]["Authorization"] == f"Bearer {TOKEN}"


def test_end_to_end_in_a_subprocess_without_a_terminal(gh, report):
    """The installed command with stdin /dev/null: the diff, its digest, one line of error, nothing sent."""
    p = cli_subprocess(*pr_args(gh, report))
    assert p.returncode == 2 and "-old text" in p.stdout and "+new text" in p.stdout
    assert printed_digest(p.stdout) == digest(REPO, 12, OLD, NEW)
    assert p.stderr.startswith("patchkit: error: not sent: no terminal to confirm on") and p.stderr.count("\n") == 1
    assert gh.methods() == ["GET"] and gh.pr["body"] == OLD


def test_confirm_with_the_printed_digest_sends_exactly_one_patch_of_the_body(gh, report):
    d = printed_digest(cli(*pr_args(gh, report, "--dry-run")).stdout)
    gh.requests.clear()
    p = cli(*pr_args(gh, report, "--confirm", d))
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    assert p.stdout.splitlines()[-1] == "updated the body of me/llama.cpp#12: https://github.com/me/llama.cpp/pull/12"
    assert gh.methods() == ["GET", "PATCH"]
    patch = gh.requests[1]
    assert patch["path"] == "/repos/me/llama.cpp/pulls/12" and patch["body"] == {"body": NEW}
    assert patch["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert patch["headers"]["Accept"] == "application/vnd.github+json"
    assert gh.pr["body"] == NEW
    # done: the same command again finds nothing to change
    gh.requests.clear()
    p = cli(*pr_args(gh, report, "--confirm", d))
    assert p.returncode == 0 and p.stdout == "me/llama.cpp#12: the body is already this report; nothing to change\n"
    assert gh.methods() == ["GET"]


def test_a_stale_digest_is_refused(gh, report, tmp_path):
    d = printed_digest(cli(*pr_args(gh, report, "--dry-run")).stdout)
    gh.pr["body"] = OLD + "\nedited on GitHub meanwhile\n"
    gh.requests.clear()
    p = cli(*pr_args(gh, report, "--confirm", d))
    now = digest(REPO, 12, gh.pr["body"], NEW)
    assert p.returncode == 2 and now != d
    assert p.stderr == (
        f"patchkit: error: --confirm '{d}' does not match the change that would be sent now (digest {now}): "
        "the PR's body or the report changed since; nothing sent\n"
    )
    assert gh.methods() == ["GET"]
    assert "+edited on GitHub meanwhile" not in p.stdout and "-edited on GitHub meanwhile" in p.stdout
    # another report, same PR body: refused too
    other = tmp_path / "other.md"
    other.write_text(REPORT.replace("new text", "other text"))
    p = cli(*pr_args(gh, other, "--confirm", now))
    assert p.returncode == 2 and "does not match the change that would be sent now" in p.stderr
    assert gh.methods() == ["GET", "GET"] and gh.pr["body"].endswith("meanwhile\n")


def test_dry_run_sends_only_the_get(gh, report):
    p = cli(*pr_args(gh, report, "--dry-run"))
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout.splitlines()[-1] == "dry run: nothing sent"
    assert printed_digest(p.stdout) == digest(REPO, 12, OLD, NEW)
    assert gh.methods() == ["GET"]
    # without a token: the GET goes without Authorization, still nothing else
    p = cli(*pr_args(gh, report, "--dry-run"), token=None)
    assert p.returncode == 0 and printed_digest(p.stdout) == digest(REPO, 12, OLD, NEW)
    assert gh.methods() == ["GET", "GET"] and "Authorization" not in gh.requests[1]["headers"]


def test_confirm_and_dry_run_exclude_each_other(gh, report):
    p = cli(*pr_args(gh, report, "--dry-run", "--confirm", "0123456789ab"))
    assert p.returncode == 2 and "not allowed with argument" in p.stderr
    assert gh.requests == []


def test_without_a_token_nothing_is_sent_and_the_variable_is_named(gh, report):
    p = cli(*pr_args(gh, report, "--confirm", digest(REPO, 12, OLD, NEW)), token=None)
    assert p.returncode == 2
    assert p.stderr == (
        "patchkit: error: no GitHub token: set the environment variable GITHUB_TOKEN (or look with --dry-run)\n"
    )
    assert gh.requests == []


@pytest.mark.parametrize("body", [NEW, NEW.replace("\n", "\r\n"), NEW.rstrip("\n")])
def test_an_identical_body_sends_nothing(gh, report, capsys, body):
    """Identical, or the same lines with CRLF endings (GitHub's web editor) or without the final newline."""
    gh.pr["body"] = body
    assert pr_main(report, REPO, 12, confirm=None, ask=None, api=gh.url) == 0
    assert capsys.readouterr().out == "me/llama.cpp#12: the body is already this report; nothing to change\n"
    assert gh.methods() == ["GET"]


# --- the terminal prompt (pr_main's `ask`)


@pytest.mark.parametrize("answer, sent", [("y", True), ("yes", True), (" YES ", True), ("", False), ("n", False)])
def test_terminal_prompt_only_yes_proceeds(gh, report, capsys, answer, sent):
    prompts = []

    def ask(prompt):
        prompts.append(prompt)
        return answer

    rc = pr_main(report, REPO, 12, ask=ask, api=gh.url)
    assert prompts == ["Replace the body of me/llama.cpp#12 with this? [y/N] "]
    out = capsys.readouterr().out
    assert "-old text" in out and "+new text" in out
    if sent:
        assert rc == 0 and gh.methods() == ["GET", "GET", "PATCH"] and gh.pr["body"] == NEW
    else:
        assert rc == 1 and gh.methods() == ["GET"] and gh.pr["body"] == OLD
        assert out.splitlines()[-1] == "not sent"
    _no_token(capsys, out)


def test_terminal_eof_is_no(gh, report):
    def ask(prompt):
        raise EOFError

    assert pr_main(report, REPO, 12, ask=ask, api=gh.url) == 1
    assert gh.methods() == ["GET"]


def test_body_changed_while_the_user_read_the_diff_is_refused(gh, report):
    def ask(prompt):
        gh.pr["body"] = "someone else's edit\n"
        return "y"

    with pytest.raises(PatchkitError, match=r"^me/llama.cpp#12: its body changed on GitHub while you read the diff"):
        pr_main(report, REPO, 12, ask=ask, api=gh.url)
    assert gh.methods() == ["GET", "GET"] and gh.pr["body"] == "someone else's edit\n"


def test_a_matching_confirm_needs_no_prompt(gh, report):
    def ask(prompt):
        raise AssertionError("asked despite --confirm")

    assert pr_main(report, REPO, 12, confirm=digest(REPO, 12, OLD, NEW).upper(), ask=ask, api=gh.url) == 0
    assert gh.methods() == ["GET", "PATCH"]


# --- what is shown, the digest, ASCII, the token


def test_the_digest_definition():
    data = json.dumps(["patchkit-pr-body/1", "me/llama.cpp", 12, OLD, NEW], ensure_ascii=True, separators=(",", ":"))
    assert digest("Me/Llama.cpp", 12, OLD, NEW) == hashlib.sha256(data.encode()).hexdigest()[:12]
    assert len({digest(REPO, 12, OLD, NEW), digest(REPO, 13, OLD, NEW), digest(REPO, 12, OLD + " ", NEW)}) == 3


def test_non_ascii_body_is_warned_about_not_refused(gh, tmp_path):
    md = tmp_path / "r.md"
    md.write_text(REPORT.replace("new text", "new text \u2014 1.5\u00d7 faster"), encoding="utf-8")
    d = printed_digest(cli(*pr_args(gh, md, "--dry-run")).stdout)
    p = cli(*pr_args(gh, md, "--confirm", d))
    assert p.returncode == 0
    assert p.stderr == "warning: the new body has 2 non-ASCII characters (llama.cpp's AGENTS.md asks for ASCII)\n"
    assert gh.methods() == ["GET", "GET", "PATCH"] and "\u2014" in gh.pr["body"]


def test_control_characters_of_the_current_body_are_shown_escaped():
    change = BodyChange(REPO, 12, "T", "open", "a\n\x1b[2Khidden\n", "a\n")
    assert render_diff(change).splitlines()[-1] == "-\\x1b[2Khidden"


def test_a_report_holding_the_token_is_not_sent(gh, tmp_path, capsys):
    md = tmp_path / "r.md"
    md.write_text(REPORT + f"\nenv: GITHUB_TOKEN={TOKEN}\n")
    with pytest.raises(PatchkitError) as e:
        pr_main(md, REPO, 12, confirm="0" * 12, api=gh.url)
    assert str(e.value) == f"{md}: the report contains the value of $GITHUB_TOKEN; nothing sent"
    assert gh.requests == []
    _no_token(capsys, str(e.value))


# --- errors: one line, no token


def test_http_errors_are_one_line_and_scrubbed(gh, report, capsys):
    gh.answers.append((401, {"message": f"Bad credentials {TOKEN}"}))
    with pytest.raises(PatchkitError) as e:
        pr_main(report, REPO, 12, dry_run=True, api=gh.url)
    assert str(e.value) == "GitHub API GET /repos/me/llama.cpp/pulls/12: HTTP 401: Bad credentials ***"
    _no_token(capsys, str(e.value), repr(e.value))
    gh.answers.append((422, {"message": "Validation Failed", "errors": [{"resource": "PullRequest", "code": "x"}]}))
    with pytest.raises(PatchkitError) as e:
        pr_main(report, REPO, 12, ask=lambda p: "y", api=gh.url)
    assert str(e.value) == "GitHub API GET /repos/me/llama.cpp/pulls/12: HTTP 422: Validation Failed: PullRequest x"


def test_a_missing_pr_without_token_hints_at_the_token(gh, report, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN")
    with pytest.raises(PatchkitError) as e:
        pr_main(report, REPO, 99, dry_run=True, api=gh.url)
    assert str(e.value) == (
        "GitHub API GET /repos/me/llama.cpp/pulls/99: HTTP 404: Not Found "
        "(no token was sent: a private repository needs one)"
    )


def test_connection_error_is_one_line_without_token(monkeypatch, report, capsys):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    srv = FakeGitHub()
    url = srv.url
    srv.close()  # nothing listens there any more
    with pytest.raises(PatchkitError) as e:
        pr_main(report, REPO, 12, confirm="0" * 12, api=url)
    assert str(e.value).startswith(f"GitHub API GET {url}/repos/me/llama.cpp/pulls/12 failed: ConnectionError")
    assert "\n" not in str(e.value)
    _no_token(capsys, str(e.value))


@pytest.mark.parametrize(
    "repo, number, match",
    [("not-a-repo", 1, "^--repo must be OWNER/NAME, got 'not-a-repo'$"), (REPO, None, "^patchkit never opens")],
)
def test_bad_arguments_send_nothing(gh, report, repo, number, match):
    with pytest.raises(PatchkitError, match=match):
        pr_main(report, repo, number, dry_run=True, api=gh.url)
    assert gh.requests == []


def test_an_unreadable_report_is_named(gh, tmp_path):
    with pytest.raises(PatchkitError, match=r"missing\.md: cannot read the report: No such file or directory$"):
        pr_main(tmp_path / "missing.md", REPO, 12, dry_run=True, api=gh.url)
    assert gh.requests == []


def test_split_title():
    assert split_title(REPORT) == ("cuda: smaller KV tile", NEW)
    assert split_title("no title\n") == ("", "no title\n")


@pytest.mark.parametrize(
    "api",
    ["http://api.github.com", "http://example.com:8080/api", "ftp://api.github.com", "api.github.com", "https://"],
)
def test_the_token_is_never_sent_in_clear(gh, report, api, capsys):
    """Only https, or plain http to this machine (the local server of these tests): refused before
    anything is sent, dry run or not."""
    for kw in ({"dry_run": True}, {"confirm": digest(REPO, 12, OLD, NEW)}):
        with pytest.raises(PatchkitError) as e:
            pr_main(report, REPO, 12, api=api, **kw)
        assert str(e.value) == (
            f"--api {api!r}: the token is sent only over https (or plain http to 127.0.0.1/localhost for a local test)"
        )
    assert gh.requests == []
    _no_token(capsys, str(e.value))
    assert pr_main(report, REPO, 12, dry_run=True, api=gh.url.replace("127.0.0.1", "localhost")) == 0
    assert gh.methods() == ["GET"]


# --- the token in every form (issue 34): never printed, whatever form a message quotes it in

ODD_TOKEN = "ghp_TEST/tok+en=0123&SECRET"  # changes when percent-encoded


def _no_form_of(secret: str, *texts: str) -> None:
    import urllib.parse

    for t in texts:
        for form in (secret, repr(secret)[1:-1], json.dumps(secret)[1:-1], urllib.parse.quote(secret, safe="")):
            assert form not in t, (form, t)


@pytest.mark.parametrize("tail", ["\n", "\r\n", " "])
def test_a_token_with_a_trailing_newline_is_sent_stripped_and_never_printed(gh, report, tail):
    """Before: requests refused the header and quoted it escaped ('Bearer ghp_...\\n') in the error, which the
    scrub (plain string only) let through in clear."""
    p = cli(*pr_args(gh, report, "--dry-run"), token=TOKEN + tail)
    assert p.returncode == 0, p.stderr
    assert gh.methods() == ["GET"]
    assert gh.requests[0]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    _no_form_of(TOKEN, p.stdout, p.stderr)


def test_a_token_with_whitespace_inside_is_refused_by_name_only(gh, report):
    p = cli(*pr_args(gh, report, "--dry-run"), token="ghp_first\nghp_SECONDPART")
    assert p.returncode == 2
    assert p.stderr == (
        "patchkit: error: $GITHUB_TOKEN holds whitespace, control or non-ASCII characters inside the token "
        "(not shown); nothing sent\n"
    )
    assert "ghp_" not in p.stdout + p.stderr
    assert gh.requests == []


def test_every_form_of_the_token_in_an_answer_is_scrubbed(gh, report, monkeypatch, capsys):
    """A server (or proxy) that quotes the token back escaped, JSON-quoted or percent-encoded."""
    import urllib.parse

    monkeypatch.setenv("GITHUB_TOKEN", ODD_TOKEN + "\n")
    forms = [ODD_TOKEN, repr(ODD_TOKEN + "\n"), json.dumps(ODD_TOKEN), urllib.parse.quote(ODD_TOKEN, safe="")]
    forms.append(urllib.parse.quote_plus(ODD_TOKEN + "\n"))
    gh.answers.append((401, {"message": "Bad credentials " + " ".join(forms)}))
    with pytest.raises(PatchkitError) as e:
        pr_main(report, REPO, 12, dry_run=True, api=gh.url)
    out = capsys.readouterr()
    _no_form_of(ODD_TOKEN, str(e.value), out.out, out.err)
    assert "SECRET" not in str(e.value)
    assert str(e.value).startswith("GitHub API GET /repos/me/llama.cpp/pulls/12: HTTP 401: Bad credentials ***")
    assert "\n" not in str(e.value)


def test_the_current_body_holding_the_token_is_shown_scrubbed(gh, report, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    gh.pr["body"] = f"leaked {TOKEN}\n"
    assert pr_main(report, REPO, 12, dry_run=True, api=gh.url) == 0
    out = capsys.readouterr()
    assert "-leaked ***" in out.out
    _no_form_of(TOKEN, out.out, out.err)
