"""`patchkit run --executor ray` on a real Ray cluster of three nodes on this machine (no mocks of Ray).

Raylets started with the `ray` CLI stand in for machines: the head with the custom resource node_a,
two more nodes with node_b (so that a target whose node dies has another one to run on), each with
one CPU and its own temp folder. The default recipe's CPU builds in the test work folder are reused
(the nodes share it). The first test runs a small comparison on targets a and b and checks the one
merged report; the second kills (kill -9) whichever node runs b's measure task (its worker with the
programs it started, its raylet and the node's other processes), then the node it was retried on, and
checks that a's results are kept, b reads "not run: node lost" after two attempts, and a target whose
resource no node has reads "not run: no alive node".

Skipped only where `import ray` fails (pip install -e '.[ray]').
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]' (the --executor ray extra)")

ROOT = Path(__file__).resolve().parents[2]
SMALL_TESTS = r"hsk=64,hsv=64,nh=4,nr23=\[1,1\],kv=113,"
RECIPE = "seed-fattn"
# every process of the test cluster: no token authentication (a loopback test cluster; else a token a
# `ray.init()` left in ~/.ray/auth_token switches the head to token mode and the nodes cannot join)
NO_AUTH = {"RAY_AUTH_MODE": "disabled"}
# the GCS notices a dead raylet within seconds, not the default half minute
FAST_HEALTH = {
    **NO_AUTH,
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


def _ppid(pid: str) -> int:
    """The parent of process `pid` (/proc/<pid>/stat's fourth field; OSError, ValueError: gone or unreadable)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _kill_all(pids: list[int]) -> list[int]:
    """kill -9 each of `pids` (one already gone is skipped)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """Raylets (`ray start`), each in a process group of its own: only what this test started is ended."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="pkray-", dir="/tmp"))  # short: Ray's socket paths are limited
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.groups: dict[str, int] = {}

    def start(self, name: str, resource: str, *head: str) -> None:
        argv = [
            "ray",
            "start",
            *(head or ("--address", self.address)),
            "--node-ip-address",
            "127.0.0.1",
            "--num-cpus",
            "1",
            "--resources",
            json.dumps({resource: 1}),
            "--object-store-memory",
            str(100 * 1024 * 1024),
            "--disable-usage-stats",
            "--temp-dir",
            str(self.tmp / name),
        ]
        log = self.tmp / f"ray-start-{name}.log"
        with open(log, "w") as out:
            p = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **FAST_HEALTH}, start_new_session=True
            )
            self.groups[name] = p.pid  # the daemons it leaves stay in this process group
            rc = p.wait(timeout=180)
        assert rc == 0, f"{' '.join(argv)} exited {rc}:\n{log.read_text()[-3000:]}"

    def task(self, title: str) -> tuple[int, str] | None:
        """(pid, node) of the worker running the Ray task `title` (its process title), if one does."""
        for d in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if not cmd.startswith(title):
                    continue
                ppid = _ppid(d)
            except (OSError, ValueError, IndexError):
                continue
            for name in self.groups:
                if ppid in self.pids(name, "raylet/raylet"):
                    return int(d), name
        return None

    def pids(self, name: str, needle: str = "") -> list[int]:
        """Processes of node `name`: in its process group or naming its temp folder (its workers)."""
        out = []
        mark = str(self.tmp / name)
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                pgid = os.getpgid(int(d))
            except (OSError, ProcessLookupError):
                continue
            if (pgid == self.groups.get(name) or mark in cmd) and needle in cmd:
                out.append(int(d))
        return out

    @staticmethod
    def tree(pid: int) -> list[int]:
        """`pid` and every process below it (children, their children, ...)."""
        children: dict[int, list[int]] = {}
        for d in filter(str.isdigit, os.listdir("/proc")):
            try:
                ppid = _ppid(d)
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d))
        out, todo = [], [pid]
        while todo:
            out.append(q := todo.pop())
            todo.extend(children.get(q, ()))
        return out

    def kill(self, name: str, needle: str = "") -> list[int]:
        return _kill_all(self.pids(name, needle))

    def stop(self) -> None:
        """Instead of `ray stop --force`, which would end every Ray cluster on this machine."""
        for name in reversed(list(self.groups)):
            self.kill(name)
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(cpu_build):
    c = Cluster()
    try:
        c.start("a", "node_a", "--head", "--port", str(c.port), "--include-dashboard=false")
        c.start("b1", "node_b")
        c.start("b2", "node_b")
        yield c
    finally:
        c.stop()


def _argv(cluster: Cluster, work, label: str, *targets: str) -> list[str]:
    return [
        "run",
        "--backend",
        "cpu",
        "--executor",
        "ray",
        "--address",
        cluster.address,
        *(x for t in targets for x in ("--target", t)),
        "--work",
        str(work.root),
        "--label",
        label,
        "--filter",
        SMALL_TESTS,
        "--skip",
        "numerics",
        "--skip",
        "bench:decode",
        "--skip",
        "bench:kernel",
        "--depths",
        "0",
        "--no-reuse",  # each target runs its tests on its own node (a reused log would finish before a kill)
        "--measure-same-code",  # the CPU variants compile to base's code: measure them anyway
    ]


def _clean(work, label: str) -> None:
    for old in work.runs(RECIPE).glob(f"*-{label}*"):
        shutil.rmtree(old)


def _run_of(work, label: str, target: str) -> tuple[Path, dict]:
    [run] = list(work.runs(RECIPE).glob(f"*-{label}-{target}"))
    return run, json.loads((run / "results.json").read_text())


def test_two_targets_one_merged_report(cluster, work, cli):
    label = "ray-ci"
    _clean(work, label)
    t0 = time.monotonic()
    r = cli(*_argv(cluster, work, label, "a=node_a", "b=node_b"), env=NO_AUTH, process=True)  # a Ray driver of its own
    print(f"two targets: {time.monotonic() - t0:.0f} s")
    runs = {}
    for t in ("a", "b"):
        run, res = _run_of(work, label, t)
        assert res["target"] == t and res["executor"]["resource"] == f"node_{t}"
        assert res["steps"]["test:flash_attn"]["status"] == "ok", res["steps"]["test:flash_attn"]
        assert res["steps"]["build:cpu"]["status"] == "ok"
        assert (run / "env.json").is_file() and (run / res["steps"]["test:flash_attn"]["logs"][0]).is_file()
        runs[t] = (run, res)
        assert f"target {t} (node_{t}): ok" in r.stdout
    # each comparison ran whole on one node, the two targets on the two nodes
    assert runs["a"][1]["executor"]["node_id"] != runs["b"][1]["executor"]["node_id"]
    merged = runs["a"][0].with_name(runs["a"][0].name.removesuffix("-a"))
    text = (merged / "report.md").read_text()
    assert f"report: {merged / 'report.md'}" in r.stdout
    for t in ("a", "b"):
        assert runs[t][0].name in text  # each run labelled by its run id, which ends in its target
    targets = json.loads((merged / "targets.json").read_text())["targets"]
    assert [(x["name"], x["status"]) for x in targets] == [("a", 0), ("b", 0)]


def _kill_where(cluster: Cluster, title: str, skip: str, log: Path, p: subprocess.Popen) -> str:
    """Wait for the task `title` to run on a node other than `skip`, then kill -9 that node as a lost machine
    goes: the worker running the task with the programs it started, the raylet and the node's other processes.
    (A raylet killed alone leaves its worker running for seconds: on CI it finished the measured step and
    recorded it ok before it noticed, and the test read a race, not the executor.)"""
    deadline = time.monotonic() + 240
    while (found := cluster.task(title)) is None or found[1] == skip:
        assert p.poll() is None, log.read_text()[-4000:]
        assert time.monotonic() < deadline, f"{title} never ran on a node other than {skip!r}"
        time.sleep(0.05)
    pid, node = found
    assert cluster.pids(node, "raylet/raylet"), f"no raylet of node {node}"
    _kill_all(cluster.tree(pid))
    cluster.kill(node)
    return node


def test_node_lost_mid_run_keeps_the_other_target(cluster, work):
    label = "ray-ci-lost"
    _clean(work, label)
    log = cluster.tmp / "lost.log"
    t0 = time.monotonic()
    argv = _argv(cluster, work, label, "a=node_a", "b=node_b", "c=node_none")
    with open(log, "w") as out:
        p = subprocess.Popen(
            [sys.executable, "-m", "patchkit", *argv],
            cwd=ROOT,
            env={**os.environ, **NO_AUTH},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            first = _kill_where(cluster, "ray::measure-b", "", log, p)  # b's node dies mid-run ...
            second = _kill_where(cluster, "ray::measure-b", first, log, p)  # ... and so does the one it was retried on
            rc = p.wait(timeout=300)
        finally:
            if p.poll() is None:
                p.kill()
    print(f"node lost: {time.monotonic() - t0:.0f} s")
    text = log.read_text()
    assert rc == 1, text[-4000:]
    assert {first, second} == {"b1", "b2"}
    run_a, a = _run_of(work, label, "a")
    assert a["steps"]["test:flash_attn"]["status"] == "ok"  # the finished target is kept
    _, b = _run_of(work, label, "b")
    step = b["steps"]["test:flash_attn"]
    assert b["target"] == "b" and step["status"] == "not_run" and step["reason"].startswith("node lost ("), step
    assert "target b (node_b): not run: node lost (" in text
    _, c = _run_of(work, label, "c")
    assert c["steps"]["test:flash_attn"]["reason"] == "no alive node with resource 'node_none'"
    merged = run_a.with_name(run_a.name.removesuffix("-a"))
    targets = {x["name"]: x for x in json.loads((merged / "targets.json").read_text())["targets"]}
    assert targets["a"]["status"] == 0 and targets["a"]["attempts"] == 1
    assert targets["b"]["status"] == 1 and targets["b"]["attempts"] == 2 and len(set(targets["b"]["nodes"])) == 2
    assert targets["c"]["attempts"] == 0
    report = (merged / "report.md").read_text()  # one report: the lost and never-run targets merge with a
    assert "not run: node lost (" in report and "not run: no alive node with resource 'node_none'" in report
    assert run_a.name in report
