"""``python -m bench.ldap_cpu``: a Basic-auth manifest GET as an LDAP user against the htpasswd user, in
process (Django's test client, no gunicorn, no sockets), CPU time per request.

The manifest-ldap workload's request rates spread by tens of percent on a busy machine; this process's
CPU time per request (best of REPEAT x NUMBER, the two users alternated ROUNDS times) is what the
LDAP path adds to a request once its bind is cached, which drift moves much less.
"""
from __future__ import annotations

import base64
import os
import shutil
import tempfile
import time
import timeit
from functools import partial
from pathlib import Path

from bench import ldap
from bench.client import ACCEPT, EMPTY_JSON, tiny_manifest
from bench.servers import BENCH_PASSWORD, BENCH_USER, make_htpasswd
from bench.workloads import MANIFEST_PATH, MANIFEST_REPO

REPEAT = 5
NUMBER = 400
ROUNDS = 3


def main() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="bench-ldap-cpu-"))
    slapd = ldap.start(scratch / "slapd")
    try:
        os.environ |= {"SVC_AUTH_ENABLED": "true", "SVC_LDAP_URL": slapd.url,
                       "SVC_LDAP_USER_DN_TEMPLATE": f"uid={{username}},{ldap.PEOPLE}",
                       "SVC_LDAP_GROUP_SEARCH_BASE": ldap.GROUPS}
        from bench.queries import _push, _setup

        _setup()
        from django.conf import settings
        from django.test import Client

        make_htpasswd(Path(settings.AUTH_HTPASSWD_FILE))
        basic = "Basic " + base64.b64encode(f"{BENCH_USER}:{BENCH_PASSWORD}".encode()).decode()
        clients = {"htpasswd": Client(HTTP_AUTHORIZATION=basic), "ldap": Client(HTTP_AUTHORIZATION=ldap.BASIC)}
        _push(MANIFEST_REPO, EMPTY_JSON)
        put = clients["htpasswd"].put(MANIFEST_PATH, tiny_manifest("latest"),
                                      content_type="application/vnd.oci.image.manifest.v1+json")
        assert put.status_code == 201, put.content

        def get(client: Client) -> None:
            assert client.get(MANIFEST_PATH, HTTP_ACCEPT=ACCEPT).status_code == 200

        for client in clients.values():
            get(client)  # the bind (LDAP) or bcrypt run (htpasswd), then the caches
        for _ in range(ROUNDS):
            for name, client in clients.items():
                best = min(timeit.repeat(partial(get, client), number=NUMBER, repeat=REPEAT,
                                         timer=time.process_time)) / NUMBER
                print(f"manifest GET, Basic auth, {name:8} user  {best * 1e6:7.0f} us CPU per request", flush=True)
        print(f"binds as {ldap.USER}: {slapd.binds(f'uid={ldap.USER},{ldap.PEOPLE}')}")
    finally:
        slapd.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
