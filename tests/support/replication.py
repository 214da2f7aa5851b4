"""Helpers of the replication tests: [[replication]] entries as the configuration loader makes them,
and a policy's runner stepped in the test's thread until it has nothing left to do."""
from __future__ import annotations

import time
from typing import Any

from regsite import config


def policy_entry(**keys: Any) -> dict[str, Any]:
    """A complete entry: the schema's defaults and ``keys``, checked as start-up checks it."""
    entry = {key: (value.copy() if isinstance(value, (list, dict)) else value)
             for key, value in config.LISTS["replication"].items() if not isinstance(value, config.Required)}
    entry.update({"name": "dr", **keys})
    config.LIST_VALIDATORS["replication"]([entry])
    return entry


def run_until_idle(name: str = "dr", timeout: float = 60.0, ignore_backoff: bool = False) -> Any:
    """Step the policy's runner until no item is pending or running and no run is open; the runner."""
    from replication import queries
    from replication.feed import find
    from replication.runner import Runner

    policy = find(name)
    assert policy is not None, f"no policy {name!r} in settings.REPLICATION"
    runner = Runner(policy)
    runner.resume()
    deadline = time.monotonic() + timeout
    try:
        while True:
            if ignore_backoff:
                queries.retry_now([name])
            runner.step()
            for _key, future in list(runner.running.values()):
                future.result()
            runner.step()
            if not runner.running and not queries.window(name, 1) and not any(
                    queries.open_job(name, trigger) for trigger in ("event", "schedule", "manual")) \
                    and not queries.unclaimed(name):
                return runner
            if time.monotonic() > deadline:
                raise AssertionError(f"policy {name} still had work after {timeout} s")
            time.sleep(0.05)
    finally:
        runner.close()
