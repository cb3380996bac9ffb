"""Session fixtures for integration tests: the real sdist fetched once, real git, real builds.

The work folder persists across sessions in $PATCHKIT_TEST_WORK (default ~/.cache/patchkit-test) so a
developer pays the download and the CPU build once; CI starts empty and pays them once per run.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from patchkit import proc, source
from patchkit.recipe import load_recipe, parse_recipe
from patchkit.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
    # a module that leaves the shared CPU build folder's tree at a variant of its own (`RUN_LAST = True`) runs
    # after the others, so that no later test's variant build recompiles what it changed (test_cpu_change:
    # 12 ggml-cpu Ninja steps, about 65 s on 2 cores)
    items.sort(key=lambda item: bool(getattr(getattr(item, "module", None), "RUN_LAST", False)))


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def work() -> Workspace:
    root = Path(os.environ.get("PATCHKIT_TEST_WORK", Path.home() / ".cache" / "patchkit-test"))
    root.mkdir(parents=True, exist_ok=True)
    return Workspace.at(root)


@pytest.fixture(scope="session")
def default_recipe():
    return load_recipe(str(ROOT / "recipes" / "default.toml"))


@pytest.fixture(scope="session")
def base(work) -> source.BaseInfo:
    """The pinned base from the real llama-cpp-python 0.3.36 sdist (downloaded once)."""
    path = ROOT / "recipes" / "default.toml"
    return source.fetch(parse_recipe(path.read_text(), path).base, work)


def _in_process(args: tuple[str, ...], cwd: Path, env: dict | None) -> subprocess.CompletedProcess:
    """`patchkit.cli.main(args)` in this interpreter, in `cwd` with `env` added to the environment, its stdout
    and stderr captured: what `python -m patchkit` does (`sys.exit(main())`), less the interpreter's start
    and the imports (about a second each on 2 cores, scipy and matplotlib among them)."""
    from patchkit import cli

    out, err = io.StringIO(), io.StringIO()
    old_cwd, old_env = Path.cwd(), dict(os.environ)
    os.chdir(cwd)
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main(list(args))
            except SystemExit as e:  # argparse: --help, --version, a bad argument
                rc = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    finally:
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)
    if proc.interrupted():  # a signal to this process (CI cancelled, a timeout): it ends the session, as it would
        raise KeyboardInterrupt(f"patchkit {' '.join(args)}: interrupted")  # have ended `python -m patchkit`
    return subprocess.CompletedProcess(["python", "-m", "patchkit", *args], rc or 0, out.getvalue(), err.getvalue())


# commands that make or resume a run folder: its lock names the process that holds it and is let go when that
# process ends, so a second command on the folder from this process would find it "in use by pid <ours>"
RUN_FOLDER_COMMANDS = frozenset({"run", "test", "bench", "reparse", "import"})


def run_cli(
    *args: str, cwd: Path = ROOT, env: dict | None = None, check: bool = True, process: bool = False
) -> subprocess.CompletedProcess:
    """The command line, in process (as tox runs its commands' logic) unless `process`: a test of what only a
    separate interpreter shows (a Ray driver of its own, signals, the process's own exit)."""
    if process or args[0] in RUN_FOLDER_COMMANDS:
        full_env = {**os.environ, **(env or {})}
        r = subprocess.run(["python", "-m", "patchkit", *args], cwd=cwd, env=full_env, capture_output=True, text=True)
    else:
        r = _in_process(args, cwd, env)
    if check and r.returncode != 0:
        raise AssertionError(
            f"patchkit {' '.join(args)} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr[-4000:]}"
        )
    return r


@pytest.fixture(scope="session")
def cli():
    return run_cli


class Background:
    """`python -m patchkit <args>` started now, in a process of its own, its stdout and stderr in files of
    `folder`; `result()` waits for it and gives what run_cli(..., check=False) would have."""

    def __init__(self, args: list[str], folder: Path, cwd: Path = ROOT):
        folder.mkdir(parents=True, exist_ok=True)
        self.args, self.out, self.err = ["python", "-m", "patchkit", *args], folder / "stdout", folder / "stderr"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(self.args, cwd=cwd, stdout=out, stderr=err)

    def result(self) -> subprocess.CompletedProcess:
        rc = self.proc.wait()
        return subprocess.CompletedProcess(self.args, rc, self.out.read_text(), self.err.read_text())

    def stop(self) -> None:
        """SIGTERM (patchkit stops what it runs, proc.stop_on_signals), SIGKILL a minute later."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session", autouse=True)
def early(request, work, tmp_path_factory):
    """{module name: Background} of the session's modules that define `early_start(work, tmp_path_factory)`:
    a long run of real tools that no other test touches (test_older_base_cpu.py: a second base's fetch and
    CPU build, about 6 minutes on 2 cores), started at the session's first test so that it uses the cores
    the tests before it leave idle (git, Python, single-threaded configures); the module's fixture waits for
    it (or starts it, when the session did not). Stopped at the session's end if still running."""
    started: dict[str, Background] = {}
    for module in dict.fromkeys(getattr(item, "module", None) for item in request.session.items):
        start = getattr(module, "early_start", None)
        if start is not None:
            started[module.__name__] = start(work, tmp_path_factory)
    yield started
    for bg in started.values():
        bg.stop()


MMA_INSTANCES = "ggml/src/ggml-cuda/template-instances"


def mma_instance(tree: Path, dkq: int, dv: int, ncols1: int, ncols2: int) -> str:
    """The FA MMA template instance unit of `tree` (a variant's applied sources) that instantiates the kernel of
    head sizes dkq/dv and columns ncols1 x ncols2, as a path relative to the tree: the generated
    fattn-mma-f16-instance-ncols1_A-ncols2_B.cu, or its -dkq_256 / -dkq_not256 part where the recipe lists the
    local build-only patch 0009 (each unit split in two). Exactly one unit must declare it."""
    decl = f"DECL_FATTN_MMA_F16_CASE({dkq}, {dv}, {ncols1}, {ncols2});"
    found = [
        f"{MMA_INSTANCES}/{f.name}"
        for f in sorted((tree / MMA_INSTANCES).glob(f"fattn-mma-f16-instance-ncols1_{ncols1}-ncols2_{ncols2}*.cu"))
        if decl in f.read_text().splitlines()
    ]
    assert len(found) == 1, (decl, found)
    return found[0]


def make_project(tmp: Path, recipe_text: str, patches: dict[str, str]) -> Path:
    """A throwaway patchkit project: recipes/<name>.toml and patch files."""
    (tmp / "recipes").mkdir(parents=True, exist_ok=True)
    for rel, text in patches.items():
        p = tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (tmp / "recipes" / "toy.toml").write_text(recipe_text)
    return tmp


@pytest.fixture
def toy_project(tmp_path):
    return lambda text, patches: make_project(tmp_path / "proj", text, patches)


def copy_cache(src: Workspace, dst_root: Path) -> Workspace:
    """A fresh work folder sharing the session's downloaded sdist (hard links: no second download)."""
    dst = Workspace.at(dst_root)
    (dst.cache / "sdist").mkdir(parents=True, exist_ok=True)
    for f in (src.cache / "sdist").glob("*.tar.gz"):
        target = dst.cache / "sdist" / f.name
        try:
            os.link(f, target)
        except OSError:
            shutil.copy2(f, target)
    return dst


def copy_base(src: Workspace, base: source.BaseInfo, dst_root: Path) -> Workspace:
    """A fresh work folder that already holds the session's base: `copy_cache`, the base's record, its ref and
    the cache repo's objects (hard links: objects are immutable), so that its first fetch finds the base
    (about 11 s on 2 cores: the sdist's extraction and import) and still re-hashes the sdist. For tests whose
    subject is not the fetch; those that test it start from `copy_cache`."""
    dst = copy_cache(src, dst_root)
    repo = source.open_cache_repo(dst)
    for f in (src.repo / "objects").rglob("*"):
        if f.is_file() and f.parent.name != "info":
            target = dst.repo / "objects" / f.relative_to(src.repo / "objects")
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                os.link(f, target)
    repo.run("update-ref", base.ref, base.commit)
    shutil.copy2(src.repo / "shallow", dst.repo / "shallow")
    dst.base_meta(base.key).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src.base_meta(base.key), dst.base_meta(base.key))
    shutil.copytree(src.cache / "sdist-project", dst.cache / "sdist-project", dirs_exist_ok=True)
    return dst


@pytest.fixture(scope="session")
def cpu_build(work, base, cli):
    """The default recipe's three variants built for the CPU backend (about 3.5 minutes on 2 cores, once)."""
    import json

    r = cli("build", "--backend", "cpu", "-j", "2", "--work", str(work.root))
    manifests = {
        v: json.loads((work.builds("seed-fattn", "cpu") / "bin" / v / "manifest.json").read_text())
        for v in ("base", "+0001", "+0001+0002")
    }
    return r, manifests


@pytest.fixture(scope="session")
def sm89_check(base, work, cli):
    """`patchkit build --arch 89 --check --variant +0001+0002` of the default recipe, once a session (about 2 minutes
    on 2 cores: the series end compiles fattn.cu and the four 8-column FA MMA instances for sm_89; +0001, which
    compiles the same five units with its own header, is left to the GPU command's --check-arch 89, to keep CI
    under 30 minutes), with the flag that
    `patchkit run --check-arch 89` adds for ptxas's resource report (patchkit.measure.resources), so that the
    check folder is configured as the run's check step configures it and the logs carry registers and shared
    memory per kernel. Returns the command's result and its logs folder (check-cuda-89-<variant>.log)."""
    from patchkit import build as build_mod
    from patchkit.measure import resources

    recipe = load_recipe(None)
    opts = build_mod.options_from(recipe, backend="cuda", archs=("89",))
    [flag] = resources.ptxas_cmake_options(build_mod.toolchain(opts).cmake_args, ())
    r = cli(
        "build",
        "--arch",
        "89",
        "--check",
        "--variant",
        "+0001+0002",
        "-j",
        "2",
        f"--cmake-option={flag}",
        "--work",
        str(work.root),
    )
    return r, work.root / "logs" / recipe.name
