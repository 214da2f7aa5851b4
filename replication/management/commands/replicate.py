"""manage.py replicate: run a [[replication]] policy now, see what it would copy, or list the policies."""
from __future__ import annotations

import threading
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from registry.locks import LockHeld, default_locks
from registry.policies.globs import format_size
from regsite.config import PATHS_NOTE
from replication import plan, queries, runner
from replication.feed import configured, find
from replication.policies import Policy
from replication.queries import JobRow
from replication.remote import Remote, RemoteError
from replication.status import statuses


class Command(BaseCommand):
    help = ("Run a [[replication]] policy now (a manual run, whatever its trigger): the server runs it if it is "
            "up, else this command does; --dry-run prints what it would copy or delete and changes nothing; "
            "--list shows every policy's state, last runs and errors. " + PATHS_NOTE)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", nargs="?", help="The policy's name.")
        parser.add_argument("--dry-run", action="store_true", help="Print what a run would do; change nothing.")
        parser.add_argument("--list", action="store_true", help="Each policy's state, backlog and latest runs.")
        parser.add_argument("--no-wait", action="store_true", help="Queue the run for the server and return.")
        parser.add_argument("--retry", action="store_true",
                            help="End the policy's backoff: its waiting items are tried at once.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["list"]:
            self._list(options.get("name"))
            return
        policy = self._policy(options.get("name"))
        if options["retry"]:
            waiting = queries.retry_now([policy.name])
            self.stdout.write(f"{policy.name}: " + ("retrying now" if waiting else "not waiting out a backoff"))
        elif options["dry_run"]:
            self._dry_run(policy)
        else:
            self._run(policy, wait=not options["no_wait"])

    def _policy(self, name: str | None) -> Policy:
        known = ", ".join(policy.name for policy in configured()) or "none is configured"
        if not name:
            raise CommandError(f"name a policy ([[replication]] name): {known}")
        policy = find(name)
        if policy is None:
            raise CommandError(f"no [[replication]] policy {name!r}: {known}")
        return policy

    def _dry_run(self, policy: Policy) -> None:
        remote = Remote(policy)
        engine = runner.Runner.engine_for(policy, remote)
        changes = 0
        self.stdout.write(f"{policy.name}: {policy.direction} {policy.remote} (dry run: nothing is changed)")
        try:
            for number, new in enumerate(plan.items(policy, remote), 1):
                item = queries.ItemRow(number, None, new.action, new.repository, new.tag, new.digest, 0, None)
                line = engine.preview(item)
                changes += line.startswith("would")
                self.stdout.write(f"  {line}")
        except RemoteError as exc:
            raise CommandError(f"{policy.name}: {exc.message}") from None
        self.stdout.write(f"{changes} to copy" + ("" if changes else ": everything is up to date"))

    def _run(self, policy: Policy, wait: bool) -> None:
        job_id = queries.create_job(policy.name, "manual", timezone.now())
        try:
            with default_locks().hold(runner.lock_name(policy.name)):
                self.stdout.write(f"{policy.name}: run {job_id} (this command runs it: the server does not)")
                runner.lead(policy, threading.Event(), until=lambda: _ended(job_id))
        except LockHeld:
            self.stdout.write(f"{policy.name}: run {job_id} queued; the server runs it")
            if not wait:
                return
            while not _ended(job_id):
                time.sleep(0.2)
        self._report(queries.job(job_id))

    def _report(self, job: JobRow | None) -> None:
        if job is None:
            raise CommandError("the run is gone (removed meanwhile)")
        error = f": {job.error}" if job.error else ""
        self.stdout.write(f"run {job.id} {job.state}: {job.done} copied, {job.skipped} skipped (up to date), "
                          f"{job.failed} failed, {format_size(job.bytes)} moved{error}")
        for repository, tag, digest, _state, note in queries.job_items(job.id, ("failed",), 20):
            self.stdout.write(f"  failed {repository}:{tag or digest}: {note}")
        for repository, tag, note in queries.left_alone(job.id, 20):
            self.stdout.write(f"  left {repository}:{tag}: {note}")
        if job.state == "failed":
            raise CommandError(f"run {job.id} failed")

    def _list(self, only: str | None) -> None:
        rows = [row for row in statuses(jobs=3) if only is None or row.name == only]
        if not rows:
            raise CommandError(f"no policy {only!r}" if only else "no [[replication]] policies are configured")
        for row in rows:
            where = (f"{row.direction} {row.remote}  trigger={row.trigger}  repositories={','.join(row.repositories)}"
                     if row.configured else "(not in the configuration)")
            self.stdout.write(f"{row.name}  {row.state}  {where}")
            self.stdout.write(f"    pending {row.pending} (lag {row.lag_seconds:.0f} s)  items {row.items}  "
                              f"bytes {format_size(row.bytes)}  failures {row.failures}")
            if row.last_error:
                self.stdout.write(f"    last error: {row.last_error}")
            for job in row.jobs:
                self.stdout.write(f"    run {job.id} {job.trigger} {job.state}: {job.done} copied, {job.skipped} "
                                  f"skipped, {job.failed} failed, {format_size(job.bytes)}")


def _ended(job_id: int) -> bool:
    job = queries.job(job_id)
    return job is None or job.state in ("succeeded", "failed")
