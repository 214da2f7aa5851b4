#!/usr/bin/env bash
# Runs a command against a throwaway PostgreSQL cluster (temp dir, loopback, free port), with
# SVC_DATABASE_URL pointing at it; the cluster is stopped and removed afterwards.
set -euo pipefail

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$bindir" ]; then
    echo "PostgreSQL server binaries not found (scripts/install-test-deps.sh installs them)" >&2
    exit 1
fi
workdir=$(mktemp -d /tmp/registry-pg.XXXXXX)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# initdb refuses to run as root: as root, the cluster belongs to the postgres system user.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        chown -R postgres: "$workdir"
        su postgres -s /bin/sh -c "$*"
    else
        sh -c "$*"
    fi
}

stop() {
    as_owner "$bindir/pg_ctl -D $workdir/data -m immediate stop" >/dev/null 2>&1 || true
    rm -rf "$workdir"
}
trap stop EXIT

as_owner "$bindir/initdb -D $workdir/data -A trust -U registry --no-sync" >/dev/null
as_owner "$bindir/pg_ctl -D $workdir/data -l $workdir/server.log -w \
    -o '-p $port -k $workdir -c listen_addresses=127.0.0.1 -c fsync=off'" start >/dev/null
as_owner "$bindir/createdb -h 127.0.0.1 -p $port -U registry registry"

SVC_DATABASE_URL="postgresql://registry@127.0.0.1:$port/registry" "$@"
