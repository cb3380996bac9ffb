"""patchkit.publish against a real local HTTP server (http.server on 127.0.0.1, port 0) standing in for
GitHub's REST API: method, path, JSON body and auth header are checked; errors are one line; the token
never appears in any output or error. Every server is shut down at the end of its test."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from patchkit.errors import PatchkitError
from patchkit.publish import publish, publish_main, split_title

TOKEN = "ghp_TESTTOKEN_0123456789abcdefSECRET"


class FakeGitHub:
    """Records each request; answers with the next (status, json) in `answers` (default 200 {...})."""

    def __init__(self):
        self.requests: list[dict] = []
        self.answers: list[tuple[int, object]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                fake.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": dict(self.headers),
                        "body": json.loads(raw) if raw else None,
                    }
                )
                status, answer = (
                    fake.answers.pop(0) if fake.answers else (200, {"number": 7, "html_url": "http://x/pull/7"})
                )
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


def _no_token(capsys, *texts):
    out = capsys.readouterr()
    for t in (out.out, out.err, *texts):
        assert TOKEN not in t


def test_update_existing_pr_patches_the_body(gh, capsys):
    res = publish("ggml-org/llama.cpp", "the body", title="T", number=12, dry_run=False, api=gh.url)
    assert res == {"number": 7, "html_url": "http://x/pull/7"}
    (r,) = gh.requests
    assert r["method"] == "PATCH" and r["path"] == "/repos/ggml-org/llama.cpp/pulls/12"
    assert r["body"] == {"body": "the body"}
    assert r["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert r["headers"]["Accept"] == "application/vnd.github+json"
    _no_token(capsys)


def test_create_pr_posts_title_head_base_body(gh, capsys):
    gh.answers.append((201, {"number": 99, "html_url": "http://x/pull/99"}))
    res = publish(
        "me/llama.cpp",
        "B" * 5000,
        title="cuda: smaller KV tile",
        head="me:fattn-tile",
        base="master",
        dry_run=False,
        api=gh.url,
    )
    assert res["number"] == 99
    (r,) = gh.requests
    assert r["method"] == "POST" and r["path"] == "/repos/me/llama.cpp/pulls"
    assert r["body"] == {
        "title": "cuda: smaller KV tile",
        "head": "me:fattn-tile",
        "base": "master",
        "body": "B" * 5000,
    }
    _no_token(capsys)


def test_422_is_one_line_with_status_and_github_message(gh, capsys):
    gh.answers.append(
        (
            422,
            {
                "message": "Validation Failed",
                "errors": [
                    {
                        "resource": "PullRequest",
                        "code": "custom",
                        "message": "A pull request already exists for me:fattn-tile.",
                    }
                ],
            },
        )
    )
    with pytest.raises(PatchkitError) as e:
        publish("me/llama.cpp", "body", title="T", head="me:fattn-tile", dry_run=False, api=gh.url)
    msg = str(e.value)
    assert (
        msg == "GitHub API POST /repos/me/llama.cpp/pulls: HTTP 422: Validation Failed: "
        "A pull request already exists for me:fattn-tile."
    )
    assert "\n" not in msg
    _no_token(capsys, msg, repr(e.value), str(e.value.__cause__), str(e.value.__context__))


def test_error_message_echoing_the_token_is_scrubbed(gh, capsys):
    gh.answers.append((401, {"message": f"Bad credentials {TOKEN}"}))
    with pytest.raises(PatchkitError) as e:
        publish("me/llama.cpp", "body", title="T", number=1, dry_run=False, api=gh.url)
    assert "HTTP 401: Bad credentials ***" in str(e.value)
    _no_token(capsys, str(e.value))


def test_missing_token_names_the_variable(monkeypatch, capsys):
    monkeypatch.delenv("PK_TEST_TOKEN", raising=False)
    with pytest.raises(PatchkitError, match=r"^no GitHub token: set the environment variable PK_TEST_TOKEN$"):
        publish(
            "me/llama.cpp",
            "body",
            title="T",
            number=1,
            dry_run=False,
            api="http://127.0.0.1:9",
            token_env="PK_TEST_TOKEN",
        )


def test_dry_run_prints_and_sends_nothing(gh, capsys):
    res = publish("me/llama.cpp", "x" * 1234, title="cuda: T", head="me:b", dry_run=True, api=gh.url)
    out = capsys.readouterr().out
    assert gh.requests == []
    assert f"would POST {gh.url}/repos/me/llama.cpp/pulls" in out
    assert "title: 'cuda: T'" in out and "body: 1234 characters" in out and "$GITHUB_TOKEN is set" in out
    assert TOKEN not in out
    assert res == {
        "dry_run": True,
        "method": "POST",
        "url": f"{gh.url}/repos/me/llama.cpp/pulls",
        "title": "cuda: T",
        "body_length": 1234,
    }


def test_connection_error_is_one_line_without_token(monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    srv = FakeGitHub()
    url = srv.url
    srv.close()  # nothing listens there any more
    with pytest.raises(PatchkitError) as e:
        publish("me/llama.cpp", "body", title="T", number=3, dry_run=False, api=url)
    assert str(e.value).startswith(f"GitHub API PATCH {url}/repos/me/llama.cpp/pulls/3 failed: ConnectionError")
    _no_token(capsys, str(e.value))


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"repo": "not-a-repo", "number": 1}, "OWNER/NAME"),
        ({"repo": "a/b"}, "give the head branch"),
        ({"repo": "a/b", "head": "h", "title": ""}, "needs a title"),
    ],
)
def test_bad_arguments(kw, match):
    repo = kw.pop("repo")
    kw.setdefault("title", "T")
    with pytest.raises(PatchkitError, match=match):
        publish(repo, "body", dry_run=True, **kw)


def test_publish_main_uses_the_report_h1_as_title(gh, tmp_path, capsys):
    md = tmp_path / "pr.md"
    md.write_text("# cuda: smaller KV tile\n\n## Overview\n\ntext\n")
    assert split_title(md.read_text()) == ("cuda: smaller KV tile", "## Overview\n\ntext\n")
    gh.answers.append((201, {"number": 5, "html_url": "http://x/pull/5"}))
    assert publish_main(md, "me/llama.cpp", head="me:b", api=gh.url) == 0
    (r,) = gh.requests
    assert r["body"]["title"] == "cuda: smaller KV tile" and r["body"]["body"].startswith("## Overview")
    out = capsys.readouterr().out
    assert out.strip() == "http://x/pull/5" and TOKEN not in out


@pytest.mark.parametrize(
    "api",
    ["http://api.github.com", "http://example.com:8080/api", "ftp://api.github.com", "api.github.com", "https://"],
)
def test_the_token_is_never_sent_in_clear(gh, api, capsys):
    """Only https, or plain http to this machine (the local server of these tests): refused before
    anything is sent, dry run or not."""
    for dry_run in (False, True):
        with pytest.raises(PatchkitError) as e:
            publish("me/llama.cpp", "body", title="T", number=1, dry_run=dry_run, api=api)
        assert str(e.value) == (
            f"--api {api!r}: the token is sent only over https (or plain http to 127.0.0.1/localhost for a local test)"
        )
    assert gh.requests == []
    _no_token(capsys, str(e.value))
    for local in (gh.url, gh.url.replace("127.0.0.1", "localhost"), "https://github.example.com/api/v3"):
        publish("me/llama.cpp", "body", title="T", number=1, dry_run=True, api=local)
