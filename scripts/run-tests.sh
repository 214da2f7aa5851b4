#!/usr/bin/env bash
# `make test`'s test runs: the whole suite on SQLite, and the unit tests (tests/test_*.py) that reach
# the database (marked `database`, tests/support/database_mark.py) again on a throwaway PostgreSQL
# cluster (scripts/with-postgres.sh): the others run the same on any database.
#
# 1. In parallel: the SQLite run in TEST_WORKERS pytest-xdist processes and, alongside it, the
#    PostgreSQL run in PG_TEST_WORKERS (its output is shown when both are done). Tests sharing a
#    server stay in one process (tests/support/parallel.py).
# 2. Then, alone on the machine, the tests marked serial (timing-sensitive: latency, rate and
#    duration bounds), on SQLite and then on PostgreSQL.
#
# `scripts/run-tests.sh postgres` runs only the PostgreSQL half (`make test-postgres`).
set -uo pipefail
cd "$(dirname "$0")/.."

bin=.venv/bin
workers=${TEST_WORKERS:-4}
pg_workers=${PG_TEST_WORKERS:-2}
on_postgres=(scripts/with-postgres.sh "$bin/pytest" -q -p no:cacheprovider)
unit=(tests/test_*.py)
on_database="database and not database_duplicate"  # the tests that can behave differently on PostgreSQL
started=$SECONDS

took() {
    echo "== $1: $(($SECONDS - $2)) s"
}

# A full disk fails dozens of tests with errors far from the cause (a clean-clone run at b2ccebc
# used 2.8 GiB of the temp directory at its peak): say so once, up front.
scratch=${TMPDIR:-/tmp}
need_mib=${TEST_MIN_FREE_MIB:-6144}
free_mib=$(df --output=avail -B1M "$scratch" | tail -n 1 | tr -d ' ')
if [ "$free_mib" -lt "$need_mib" ]; then
    echo "only $free_mib MiB free in $scratch; the tests need $need_mib (TEST_MIN_FREE_MIB)." >&2
    echo "Directories earlier runs may have left there: ls -d $scratch/registry-* $scratch/pytest-of-*" >&2
    exit 1
fi

if [ "${1:-}" = postgres ]; then
    phase=$SECONDS
    "${on_postgres[@]}" -n "$pg_workers" -m "$on_database and not serial" "${unit[@]}" || exit 1
    took "unit tests on PostgreSQL, parallel" $phase
    phase=$SECONDS
    "${on_postgres[@]}" -m "$on_database and serial" "${unit[@]}" || exit 1
    took "unit tests on PostgreSQL, serial" $phase
    exit 0
fi

log=$(mktemp /tmp/registry-pg-tests.XXXXXX)
trap 'rm -f "$log"' EXIT

phase=$SECONDS
"${on_postgres[@]}" -n "$pg_workers" -m "$on_database and not serial" "${unit[@]}" >"$log" 2>&1 &
postgres_run=$!
"$bin/pytest" -n "$workers" -m "not serial"
sqlite=$?
took "whole suite on SQLite, parallel" $phase
wait $postgres_run
postgres=$?
echo "== unit tests on PostgreSQL, parallel, run alongside:"
cat "$log"
took "both parallel runs" $phase
if [ $sqlite -ne 0 ] || [ $postgres -ne 0 ]; then
    exit 1
fi

phase=$SECONDS
"$bin/pytest" -m serial || exit 1
took "whole suite on SQLite, serial" $phase
phase=$SECONDS
"${on_postgres[@]}" -m "$on_database and serial" "${unit[@]}" || exit 1
took "unit tests on PostgreSQL, serial" $phase
took "all test runs" $started
