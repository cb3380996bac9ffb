"""How long patchkit.build.binaries.copy_hashed takes to copy a CUDA build's five ~80 MB binaries, alone and
in two threads beside one CPU-bound Python thread (as a build pool's copies run beside the lane's parse of base's
compiled inputs), for each chunk size given (MiB; default: 1 and 16, the old and the new _CHUNK).

    python3 scripts/bench_copy.py [MiB ...]

Writes its files under a temporary folder (400 MB source, 1.2 GB of copies) and removes them."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from patchkit.build import binaries

FILES, SIZE = 5, 80_000_000


def _busy(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for i in range(10_000):
            x += i


def _copy_all(src: list[Path], dst: Path) -> float:
    t0 = time.monotonic()
    dst.mkdir(exist_ok=True)
    for f in src:
        binaries.copy_hashed(f, dst / f.name)
    return time.monotonic() - t0


def main(argv: list[str]) -> int:
    sizes = [int(a) for a in argv] or [1, 16]
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        src = []
        for i in range(FILES):
            f = root / f"src{i}"
            f.write_bytes(os.urandom(SIZE))
            src.append(f)
        for mib in sizes:
            binaries._CHUNK = mib << 20
            alone = _copy_all(src, root / "alone")
            stop = threading.Event()
            busy = threading.Thread(target=_busy, args=(stop,))
            busy.start()
            took: dict[str, float] = {}

            def one(k: str, took: dict[str, float] = took) -> None:
                took[k] = _copy_all(src, root / k)

            ts = [threading.Thread(target=one, args=(k,)) for k in "ab"]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            stop.set()
            busy.join()
            beside = f"{took['a']:.2f} s, {took['b']:.2f} s"
            print(f"chunk {mib} MiB: alone {alone:.2f} s; two copies beside a busy thread {beside}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
