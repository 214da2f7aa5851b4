"""Figures of a run, compared: the printed table, the JSON record and the Markdown for RESULTS.md."""
from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from bench.workloads import Figure


@dataclass
class Row:
    figure: Figure
    ours: float
    other: float
    other_label: str
    ours_runs: list[float]
    other_runs: list[float]
    judged: bool = True  # targets are set for the full sizes: a --quick run is not judged

    @property
    def ratio(self) -> float:
        return self.ours / self.other if self.other else float("inf")

    @property
    def target(self) -> str:
        f = self.figure
        if f.ours_limit is not None:
            return f"ours < {f.ours_limit:g}"
        if f.ratio_target is None:
            return ""
        return f"{'>=' if f.higher_is_better else '<='} {f.ratio_target:g}"

    @property
    def met(self) -> bool | None:
        f = self.figure
        if not self.judged:
            return None
        if f.ours_limit is not None:
            return self.ours < f.ours_limit
        if f.ratio_target is None:
            return None
        return self.ratio >= f.ratio_target if f.higher_is_better else self.ratio <= f.ratio_target


def _num(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _cells(row: Row) -> list[str]:
    other = _num(row.other) + ("" if row.other_label == "reference" else f" ({row.other_label})")
    met = {True: "yes", False: "NO", None: ""}[row.met]
    # An absolute limit is judged on our figure alone; a ratio to a near-zero figure means nothing.
    ratio = "" if row.figure.ours_limit is not None else f"{row.ratio:.3g}"
    return [row.figure.label, row.figure.unit, _num(row.ours), other, ratio, row.target, met]


HEADER = ["figure", "unit", "ours", "reference", "ratio", "target", "met"]


def text_table(rows: list[Row]) -> str:
    lines = [HEADER] + [_cells(r) for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    out = []
    for n, line in enumerate(lines):
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True))]
        out.append("  ".join(cells).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def markdown_table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in _cells(r)) + " |" for r in rows]
    return "\n".join(lines)


def _version(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unknown"


def machine() -> dict[str, object]:
    with open("/proc/meminfo") as fh:
        total_kib = int(next(line for line in fh if line.startswith("MemTotal:")).split()[1])
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "ram_mib": total_kib // 1024,
        "loadavg_at_end": os.getloadavg(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "reference": _version(["docker-registry", "--version"]),
        "skopeo": _version(["skopeo", "--version"]),
    }


def _record(row: Row) -> dict[str, object]:
    return {**asdict(row.figure), "ours": row.ours, "other": row.other, "other_label": row.other_label,
            "ratio": row.ratio, "met": row.met, "ours_runs": row.ours_runs, "other_runs": row.other_runs}


def write(out_dir: Path, rows: list[Row], cpu_rows: list[Row], info: dict[str, object], command: str
          ) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    record = {
        "machine": info,
        "command": command,
        "figures": [_record(r) for r in rows],
        "server_cpu_seconds": [_record(r) for r in cpu_rows],
    }
    json_path = out_dir / "results.json"
    json_path.write_text(json.dumps(record, indent=2) + "\n")
    md_path = out_dir / "results.md"
    md_path.write_text(
        f"Run {info['date']} on {info['nproc']} CPUs, {info['ram_mib']} MiB RAM "
        f"(load average at the end {', '.join(f'{x:.2f}' for x in info['loadavg_at_end'])}); "  # type: ignore[union-attr]
        f"reference: {info['reference']}.\n\nCommand: `{command}`\n\n{markdown_table(rows)}\n\n"
        f"Server CPU per run:\n\n{markdown_table(cpu_rows)}\n"
    )
    return json_path, md_path
