#!/usr/bin/env bash
# Installs the system tools the test suite drives (real registry clients and helpers) when missing.
set -euo pipefail

need=()
command -v skopeo >/dev/null || need+=(skopeo)
command -v htpasswd >/dev/null || need+=(apache2-utils)
command -v promtool >/dev/null || need+=(prometheus)
command -v chromium >/dev/null || need+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
# A real S3 server for the tests (tests/support/rgw.py): Ceph RGW on a one-node cluster.
command -v radosgw >/dev/null || need+=(radosgw)
command -v ceph-mon >/dev/null || need+=(ceph-mon)
command -v ceph-osd >/dev/null || need+=(ceph-osd)
# Several replicas behind a load balancer (tests/support/cluster.py), and podman as a client.
command -v haproxy >/dev/null || need+=(haproxy)
command -v podman >/dev/null || need+=(podman)
command -v curl >/dev/null || need+=(curl)
command -v docker-compose >/dev/null || need+=(docker-compose)
# A real Docker engine as a client (tests/support/docker.py), running static busybox.
command -v dockerd >/dev/null || need+=(docker.io)
[ -x /usr/bin/busybox ] || need+=(busybox-static)
# The stand-in for the image's python:3.11-slim base, made from Debian packages since Docker Hub
# cannot be reached (tests/support/image_build.py).
command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)
# The CNCF registry (distribution 2.8) as the upstream of the pull-through cache tests and the
# reference of the benchmark.
command -v docker-registry >/dev/null || need+=(docker-registry)
# PostgreSQL highly available (tests/support/patroni.py): Patroni, with etcd as its store.
command -v patroni >/dev/null || need+=(patroni)
command -v etcd >/dev/null || need+=(etcd-server)
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then SUDO=sudo; else
        echo "missing test tools (${need[*]}) and not root: install them with apt-get" >&2
        exit 1
    fi
else
    SUDO=
fi
echo "installing test tools: ${need[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
