"""The live report of `patchkit run`: the answer first.

After every step the run folder records, report.md and report.json are rewritten (atomically, from what
results.json holds then) and the step's verdict is printed, so that the kernel table can be read while the
tests, decode and numerics still run, and a run stopped after its verdict (Ctrl-C) leaves a report that
matches its results.json. The seconds from the command to each step's verdict are kept in results.json
(`verdict_s`; `timeline.to_kernel_verdict_s` at the end) and the report's wall-time line says them.

Rendering runs on a thread of its own, so a step never waits for it: when several steps are recorded while
one render runs, the next render takes them all (the report is always of a state results.json had). A
render that fails prints one line and leaves the last report in place; the run goes on and the command
renders the final report at its end as before.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from patchkit.results import Bundle, Status, Step

REPORT_MD, REPORT_JSON = "report.md", "report.json"
VERDICT_STEPS = {"bench:kernel": "kernel time ratio", "bench:decode": "decode t/s ratio", "numerics": "numerics"}
FLUSH_S = 30.0  # the longest the command waits for the last render when it ends or is stopped


class LiveReport:
    """Watches a run folder's bundle (Bundle.watchers); `flush()` waits for the last render and stops."""

    def __init__(self, bundle: Bundle, t0: float, *, render: bool = True):
        self.bundle, self.t0, self.render = bundle, t0, render
        self.verdict_s: dict[str, float] = dict(bundle.data.get("verdict_s") or {})
        self._cv = threading.Condition()
        self._pending: list[str] = []
        self._asked = self._done = 0
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="live-report", daemon=True)

    def start(self) -> LiveReport:
        self.bundle.watchers.append(self.recorded)
        self._thread.start()
        return self

    def recorded(self, step: Step) -> None:
        """Bundle.record's watcher: the seconds from the command to this step's result, and a render asked."""
        with self._cv:
            self.verdict_s[step.name] = round(time.time() - self.t0, 1)
            self._pending.append(step.name)
            self._asked += 1
            self._cv.notify_all()

    def flush(self, timeout: float = FLUSH_S) -> None:
        """Wait (at most `timeout`) until every recorded step is in the report, then stop the thread."""
        deadline = time.monotonic() + timeout
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
            while self._done < self._asked and (left := deadline - time.monotonic()) > 0:
                self._cv.wait(left)
        if self.bundle.watchers and self.recorded in self.bundle.watchers:
            self.bundle.watchers.remove(self.recorded)

    def _loop(self) -> None:
        while True:
            with self._cv:
                while self._done == self._asked and not self._stopping:
                    self._cv.wait()
                if self._done == self._asked:
                    return
                names, self._pending = self._pending, []
                asked, verdicts = self._asked, dict(self.verdict_s)
            self._one(names, verdicts)
            with self._cv:
                self._done = asked
                self._cv.notify_all()

    def _one(self, names: list[str], verdicts: dict[str, float]) -> None:
        try:
            self.bundle.set_meta(verdict_s=verdicts)
            if not self.render:
                return
            lines = write_reports(self.bundle.path, names)
        except Exception as e:  # the live report never fails the run: the final one is rendered at its end
            print(f"[report] not rewritten after {', '.join(names)}: {type(e).__name__}: {e}")
            return
        for line in lines:
            print(line)


def write_reports(run: Path, names: list[str]) -> list[str]:
    """report.md and report.json of the run folder as it is now (atomically), and the verdict lines of the
    steps `names` (those of VERDICT_STEPS and test:*), as the summary shows them."""
    from patchkit.report.collect import evidence  # the report's modules load matplotlib: only when rendering
    from patchkit.report.render import PLOT_FILE, decode_png, render_markdown
    from patchkit.report.summary import step_verdicts
    from patchkit.workspace import write_atomic

    bundle = Bundle.open(run)
    ev = evidence([bundle])
    png = decode_png(ev) if "bench:decode" in names or not (run / PLOT_FILE).is_file() else None
    if png is not None:
        write_atomic(run / PLOT_FILE, png)
    if (run / PLOT_FILE).is_file():
        ev.plot = PLOT_FILE
    write_atomic(run / REPORT_MD, render_markdown(ev))
    write_atomic(run / REPORT_JSON, ev.to_json())
    out = []
    for name in names:
        step = bundle.step(name)
        if step is None or step.status not in (Status.OK, Status.FAIL):  # a step not run said why already
            continue
        column = VERDICT_STEPS.get(name) or ("tests" if name.startswith("test:") else "")
        out += [f"[{name}] verdict: {line}" for line in step_verdicts(ev, column)] if column else []
    return out
