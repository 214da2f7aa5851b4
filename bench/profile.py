"""py-spy profiles of our gunicorn workers during a workload, and a summary of where time went.

``python -m bench --profile --only NAME`` records every worker while our side runs (raw stack
files in bench/out/profiles/); ``python -m bench.profile FILE...`` summarises such files: the share
of samples per function, inclusive and as the innermost frame.
"""
from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

IDLE = ("EpollSelector.select", "_worker thread.py", "Condition.wait", "Event.wait")


class Recorder:
    """py-spy on each given process until ``stop``."""

    def __init__(self, pids: list[int], out_prefix: Path, rate: int = 200) -> None:
        binary = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(binary).exists():
            raise RuntimeError("py-spy is missing: .venv/bin/pip install -e '.[bench]'")
        out_prefix.parent.mkdir(parents=True, exist_ok=True)
        self.paths = [Path(f"{out_prefix}-{pid}.txt") for pid in pids]
        self.procs = [
            subprocess.Popen([binary, "record", "--gil", "--nonblocking", "-r", str(rate), "-f", "raw",
                              "-p", str(pid), "-o", str(path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for pid, path in zip(pids, self.paths, strict=True)
        ]

    def stop(self) -> list[Path]:
        for proc in self.procs:
            proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return [p for p in self.paths if p.exists()]


def _frame(raw: str) -> str:
    """``func (path/to/file.py:12)`` -> ``func file.py``."""
    name, _, where = raw.partition(" (")
    return f"{name} {where.split(':')[0].rsplit('/', 1)[-1]}".strip()


def summarise(paths: list[Path], top: int = 25) -> str:
    inclusive: Counter[str] = Counter()
    innermost: Counter[str] = Counter()
    total = 0
    for path in paths:
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = [_frame(f) for f in stack.split(";")]
            if any(frames[-1].startswith(idle) for idle in IDLE):
                continue  # a thread waiting for work, not time spent on a request
            n = int(count)
            total += n
            innermost[frames[-1]] += n
            for frame in set(frames):
                inclusive[frame] += n
    if not total:
        return "no samples"
    lines = [f"{total} samples outside idle waits", "", "innermost frame:"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in innermost.most_common(top)]
    lines += ["", "inclusive:"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in inclusive.most_common(top)]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarise([Path(p) for p in sys.argv[1:]]))
