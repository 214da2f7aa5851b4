"""``python -m bench [--quick] [--only NAME,...]``: our registry against the CNCF registry, side by side.

Starts the servers each workload pair needs on loopback ports with fresh data directories, runs
every workload A B B A (ours, other, other, ours) so that drift of the shared machine cancels out,
prints one table and writes ``bench/out/results.json`` and ``results.md``. The servers are stopped
by PID at the end, on errors and on Ctrl-C or SIGTERM.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import access, failover, ldap, notify, proxy, replicate, report
from bench.profile import Recorder, summarise
from bench.servers import (
    BENCH_PASSWORD,
    BENCH_USER,
    Endpoint,
    Ours,
    Reference,
    S3Bucket,
    cpu_seconds,
    ensure_reference_installed,
)
from tests.support.server import free_port
from bench.workloads import QUICK, Figure, Side, Sizes, Workload, workloads

OUT_DIR = Path(__file__).resolve().parent / "out"
BASIC = "Basic " + base64.b64encode(f"{BENCH_USER}:{BENCH_PASSWORD}".encode()).decode()


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


class Servers:
    """The servers of this run, started together (in threads) and all stopped by ``stop``."""

    def __init__(self, scratch: Path, upstream_rate: int = 0, access_rules: bool = False,
                 with_ldap: bool = False) -> None:
        self.scratch = scratch
        self.access_rules = access_rules
        self.with_ldap = with_ldap
        self.slapd: Any = None
        self.upstream_rate = upstream_rate
        self.relay: proxy.PacedRelay | None = None
        self.started: list[Any] = []
        self.sides: dict[str, tuple[Side, Side]] = {}
        self.starting: list[threading.Thread] = []
        self.rgw: Any = None

    def start(self, pairs: set[str]) -> None:
        anon = bool(pairs & {"anon", "bearer"})
        auth = bool(pairs & {"basic", "bearer", "ldap"})
        bucket = self._start_s3() if "s3" in pairs else None
        cache = upstream = cncf = None
        if pairs & {"proxy", "proxy-local"}:
            # The upstream's port is chosen first: the cache's [[proxy]] tables name it.
            upstream = Reference(self.scratch / "upstream", port=free_port())
            self.relay = proxy.PacedRelay(upstream.endpoint, self.upstream_rate)
            cache = Ours(self.scratch / "ours-proxy", config=proxy.config_toml(upstream.endpoint, self.relay))
            cncf = proxy.CncfProxies(self.scratch / "cncf-proxy", upstream.endpoint, self.relay) \
                if "proxy" in pairs else None
            proxied: list[Any] = [s for s in (cache, upstream, cncf) if s is not None]
            for server in proxied:
                server.proxy_upstream, server.proxy_relay = upstream, self.relay
        servers = {
            "ours": Ours(self.scratch / "ours") if anon else None,
            "reference": Reference(self.scratch / "reference") if anon else None,
            "ours-auth": Ours(self.scratch / "ours-auth", auth=True, config=self._auth_config()) if auth else None,
            "reference-auth": Reference(self.scratch / "reference-auth", auth=True) if "basic" in pairs else None,
            "ours-s3": Ours(self.scratch / "ours-s3", s3=bucket) if bucket else None,
            "reference-s3": Reference(self.scratch / "reference-s3", s3=bucket) if bucket else None,
            "ours-proxy": cache,
            "upstream": upstream,
            "ours-quiet": Ours(self.scratch / "ours-quiet") if "notify" in pairs else None,
            "ours-hooks": Ours(self.scratch / "ours-hooks", config=notify.hooks_config())
            if "notify" in pairs else None,
            "cncf-proxy": cncf,
            "ours-repl": Ours(self.scratch / "ours-repl", config=replicate.source_config(self.scratch))
            if "repl" in pairs else None,
            "ours-paused": Ours(self.scratch / "ours-paused", config=replicate.event_config(self.scratch, False))
            if "repl-push" in pairs else None,
            "ours-mirrored": Ours(self.scratch / "ours-mirrored", config=replicate.event_config(self.scratch, True))
            if "repl-live" in pairs else None,
            "ours-unmirrored": Ours(self.scratch / "ours-unmirrored") if pairs & {"repl-push", "repl-live"} else None,
        }
        self.started = [s for s in servers.values() if s is not None]
        errors: list[BaseException] = []

        def start_one(server: Any) -> None:
            try:
                server.start()
            except BaseException as exc:
                errors.append(exc)

        self.starting = [threading.Thread(target=start_one, args=(s,)) for s in self.started]
        for thread in self.starting:
            thread.start()
        for thread in self.starting:
            thread.join()
        if errors:
            raise errors[0]
        if anon:
            self.sides["anon"] = (self._side("ours", servers["ours"], None),
                                  self._side("reference", servers["reference"], None))
        if "basic" in pairs:
            self.sides["basic"] = (self._side("ours", servers["ours-auth"], BASIC, "ours-basic"),
                                   self._side("reference", servers["reference-auth"], BASIC,
                                              "reference-basic"))
        if bucket:
            self.sides["s3"] = (self._side("ours", servers["ours-s3"], None, "ours-s3"),
                                self._side("reference", servers["reference-s3"], None, "reference-s3"))
        if cncf is not None:
            self.sides["proxy"] = (self._side(proxy.OURS, cache, None, "ours-proxy"),
                                   self._side(proxy.CNCF, cncf, None, "cncf-proxy"))
        if cache is not None:
            self.sides["proxy-local"] = (self._side(proxy.CACHED, cache, None, "ours-cached"),
                                         self._side(proxy.NORMAL, cache, None, "ours-normal"))
        if "notify" in pairs:
            self.sides["notify"] = (self._side("ours hooks", servers["ours-hooks"], None, "ours-hooks"),
                                    self._side("ours no hooks", servers["ours-quiet"], None, "ours-quiet"))
        if "repl" in pairs:
            self.sides["repl"] = (self._side(replicate.OURS, servers["ours-repl"], None, "ours-replicate"),
                                  self._side(replicate.SKOPEO, servers["ours-repl"], None, "skopeo-sync"))
        if "repl-push" in pairs:
            self.sides["repl-push"] = (self._side(replicate.PAUSED, servers["ours-paused"], None, "ours-paused"),
                                       self._side(replicate.PLAIN, servers["ours-unmirrored"], None, "ours-plain-1"))
        if "repl-live" in pairs:
            self.sides["repl-live"] = (self._side(replicate.MIRRORED, servers["ours-mirrored"], None, "ours-mirrored"),
                                       self._side(replicate.PLAIN, servers["ours-unmirrored"], None, "ours-plain-2"))
        if "ldap" in pairs:
            self.sides["ldap"] = (self._side("ours ldap", servers["ours-auth"], ldap.BASIC, "ours-ldap"),
                                  self._side("ours htpasswd", servers["ours-auth"], BASIC, "ours-htpasswd"))
        token = servers["ours-auth"].token if auth else None
        if "bearer" in pairs and token:
            self.sides["bearer"] = (self._side("ours", servers["ours-auth"], f"Bearer {token}", "ours-bearer"),
                                    self._side("ours anon", servers["ours"], None, "ours-anon"))

    def _auth_config(self) -> str:
        """config.toml of the auth workloads' server: ``--access-rules``, ``--ldap`` (slapd started here)."""
        text = access.configure(self.scratch / "ours-auth", BENCH_USER) if self.access_rules else ""
        if self.with_ldap:
            self.slapd = ldap.start(self.scratch / "slapd")
            text = ldap.config_toml(self.slapd) + "\n" + text
        return text

    def _start_s3(self) -> S3Bucket:
        """Ceph RGW on loopback (tests/support/rgw.py) and one bucket both registries write to."""
        from tests.support.rgw import start_rgw
        from tests.support.s3 import rgw_driver

        os.environ.pop("AWS_CA_BUNDLE", None)
        print("  starting Ceph RGW for the s3 workloads", flush=True)
        self.rgw = start_rgw(debug_rgw=0, memstore_bytes=12 * 1024 ** 3)
        bucket = rgw_driver(self.rgw.endpoint, self.rgw.access_key, self.rgw.secret_key).bucket
        return S3Bucket(self.rgw.endpoint, bucket, self.rgw.access_key, self.rgw.secret_key)

    def _side(self, label: str, server: Any, authorization: str | None, name: str = "") -> Side:
        endpoint = Endpoint(label, server.endpoint.host, server.endpoint.port, authorization)
        return Side(label, endpoint, server, self.scratch / "client" / (name or label))

    def stop(self) -> None:
        for thread in self.starting:  # interrupted while starting: let each finish, then stop it
            thread.join()

        def stop_one(server: Any) -> None:
            try:
                server.stop()
            except Exception as exc:  # keep stopping the others
                print(f"could not stop {server.label}: {exc}", file=sys.stderr)

        threads = [threading.Thread(target=stop_one, args=(s,)) for s in self.started]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if self.rgw is not None:
            self.rgw.stop()
        if self.slapd is not None:
            self.slapd.stop()
        if self.relay is not None:
            self.relay.close()
        notify.stop_receivers()
        replicate.stop_destinations()


def run_workload(workload: Workload, a: Side, b: Side, sizes: Sizes, rounds: int,
                 profile_dir: Path | None = None, judged: bool = True
                 ) -> tuple[list[report.Row], report.Row]:
    """The workload's figures (median of each side's runs) and the server CPU each run used."""
    for side in (a, b):
        side.scratch.mkdir(parents=True, exist_ok=True)
        if workload.prepare:
            workload.prepare(side, sizes)
    runs: dict[str, list[dict[str, float]]] = {a.label: [], b.label: []}
    order = (a, b, b, a) * rounds
    profiles: list[Path] = []
    for index, side in enumerate(order):
        recorder = None
        if profile_dir is not None and isinstance(side.server, Ours):
            prefix = profile_dir / f"{workload.name}-{side.label.replace(' ', '-')}-{index + 1}"
            recorder = Recorder(side.server.worker_pids(), prefix)
        cpu_before = cpu_seconds(side.server.pids())
        figures = workload.run(side, sizes, len(runs[side.label]))
        used = cpu_seconds(side.server.pids()) - cpu_before
        if recorder is not None:
            profiles += recorder.stop()
        figures["cpu_ms"] = used * 1000 / figures.pop("ops", 1)
        runs[side.label].append(figures)
        shown = ", ".join(f"{k}={v:.4g}" for k, v in figures.items())
        print(f"  {workload.name:16} {side.label:10} run {index + 1}/{len(order)}: {shown}", flush=True)
    if profiles and profile_dir is not None:
        summary = profile_dir / f"{workload.name}.txt"
        summary.write_text(summarise(profiles) + "\n")
        print(f"  {workload.name}: profile of our workers in {summary}", flush=True)
    cpu_figure = Figure("cpu_ms", f"{workload.name}: server CPU per {workload.op}", "ms", False)
    rows = []
    for figure in [*workload.figures, cpu_figure]:
        ours = [r[figure.key] for r in runs[a.label]]
        other = [r[figure.versus or figure.key] for r in runs[b.label if figure.versus is None else a.label]]
        rows.append(report.Row(figure, statistics.median(ours), statistics.median(other),
                               figure.versus_label or b.label, ours, other, judged))
    return rows[:-1], rows[-1]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, short loads: under a minute")
    parser.add_argument("--only", default="", help="comma-separated workload names to run")
    parser.add_argument("--keep", action="store_true", help="keep the temp data directory")
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    parser.add_argument("--profile", action="store_true",
                        help="record our workers with py-spy into bench/out/profiles/ (skews our figures)")
    parser.add_argument("--scale-size", type=int, default=1000,
                        help="the scale workload's size: tags in its big repository (at most 100,000) and "
                             "single-image repositories; issue 25 measures 1000, 100000 and 1000000")
    parser.add_argument("--scale-databases", default="sqlite,postgres", help="ours on which databases")
    parser.add_argument("--scale-reference-size", type=int, default=None,
                        help="the CNCF registry's size (default: the same, at most 100000; 0: leave it out)")
    parser.add_argument("--scale-no-scrub", action="store_true",
                        help="the scale workload skips manage.py scrub after loading (the skopeo pulls still run)")
    parser.add_argument("--access-rules", action="store_true",
                        help=f"the auth workloads' server with {access.RULES} [[access]] rules and {access.GROUPS} "
                             "groups (bench/access.py)")
    parser.add_argument("--ldap", action="store_true",
                        help="the auth workloads' server with [ldap] against a throwaway slapd, and manifest-ldap: "
                             "Basic auth as an LDAP user against the htpasswd user (bench/ldap.py)")
    return parser.parse_args(argv)


SCALE = "scale"


def run_scale(args: argparse.Namespace) -> None:
    """The scale workload (bench/scale.py): its own servers, its own table, in bench/out/scale-<size>.*"""
    from bench import scale

    reference = min(args.scale_size, 100_000) if args.scale_reference_size is None else args.scale_reference_size
    scratch = Path(tempfile.mkdtemp(prefix="registry-bench-scale-"))
    try:
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        partial = OUT_DIR / f"scale-{args.scale_size}.partial.md"
        markdown, figures = scale.run(args.scale_size, args.scale_databases.split(","), reference, scratch,
                                      lambda line: print(f"  {line}", flush=True), partial.write_text,
                                      not args.scale_no_scrub)
    finally:
        if args.keep:
            print(f"data kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / f"scale-{args.scale_size}.md").write_text(f"{markdown}\n\nmachine: {json.dumps(report.machine())}\n")
    (OUT_DIR / f"scale-{args.scale_size}.json").write_text(json.dumps({"size": args.scale_size,
                                                                       "figures": figures}, indent=1))
    print(f"\n{markdown}\n\nwritten to {OUT_DIR / f'scale-{args.scale_size}.md'}")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    sizes = QUICK if args.quick else Sizes()
    selected = workloads(sizes)
    with_failover = True  # bench.failover: ours alone, no pair
    if args.list:
        print("\n".join(f"{w.name:16} {w.figures[0].label}" for w in selected))
        print(f"{SCALE:16} issue 25's measures at --scale-size (ours on SQLite and PostgreSQL, the CNCF registry)")
        print(f"{failover.NAME:16} unavailability window of a PostgreSQL failover under load (ours alone)")
        return 0
    with_scale = not args.only or SCALE in args.only.split(",")
    if args.only:
        wanted = set(args.only.split(",")) - {SCALE}
        unknown = wanted - {w.name for w in selected} - {failover.NAME}
        if unknown:
            print(f"unknown workload(s): {', '.join(sorted(unknown))} (see --list)", file=sys.stderr)
            return 2
        selected = [w for w in selected if w.name in wanted]
        with_failover = failover.NAME in wanted
    if not args.ldap:  # its LDAP user lives in the slapd --ldap starts
        if any(w.pair == "ldap" for w in selected) and args.only:
            print("manifest-ldap needs --ldap", file=sys.stderr)
            return 2
        selected = [w for w in selected if w.pair != "ldap"]
    ensure_reference_installed()
    if with_scale:
        run_scale(args)
        if not selected and not with_failover:
            return 0
    signal.signal(signal.SIGTERM, _interrupt)
    scratch = Path(tempfile.mkdtemp(prefix="registry-bench-"))
    servers = Servers(scratch, sizes.proxy_upstream_rate, args.access_rules, args.ldap)
    rows: list[report.Row] = []
    cpu_rows: list[report.Row] = []
    started = time.monotonic()
    try:
        if selected:
            servers.start({w.pair for w in selected})
        print(f"  servers up: {time.monotonic() - started:.1f} s", flush=True)
        for workload in selected:
            pair = servers.sides.get(workload.pair)
            if pair is None:
                print(f"  {workload.name}: skipped (no API token could be created)", flush=True)
                continue
            began = time.monotonic()
            figures, cpu = run_workload(workload, *pair, sizes, 1 if args.quick else workload.rounds,
                                        OUT_DIR / "profiles" if args.profile else None, not args.quick)
            rows += figures
            cpu_rows.append(cpu)
            print(f"  {workload.name}: {time.monotonic() - began:.1f} s", flush=True)
    finally:
        servers.stop()
        if args.keep:
            print(f"data kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    scenarios = failover.run(OUT_DIR, args.quick) if with_failover else []
    written = OUT_DIR / "failover.json"
    if rows:
        command = "python -m bench " + " ".join(argv)
        written, _ = report.write(OUT_DIR, rows, cpu_rows, report.machine(), command.strip())
        print()
        if args.quick:
            print("--quick: sizes are too small for the targets, which are left unjudged.")
        print(report.text_table(rows))
        print("\nCPU time used by the server process tree, per run (drift moves it less than wall time):")
        print(report.text_table(cpu_rows))
    if scenarios:
        print("\nPostgreSQL failover under load (8 clients, 2 replicas on RGW; bench/failover.py):")
        print("\n".join(f"  {scenario.line()}" for scenario in scenarios))
    print(f"\n{time.monotonic() - started:.0f} s; written to {written}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        print("\ninterrupted: every server this run started has been stopped", file=sys.stderr)
        sys.exit(130)
