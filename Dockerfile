# The registry on port 4000 as a non-root user (uid 10001), with a read-only root filesystem: it
# writes only to the /data volume (registry storage, database, tokens, the session key) and to /tmp
# (the workers' metrics files):
#
#   docker build -t svc-registry .
#   docker run -d --name registry --read-only --tmpfs /tmp -v registry-data:/data \
#       -p 127.0.0.1:4000:4000 svc-registry
#
# Builds with the classic builder and with BuildKit alike (Debian's docker.io and docker-compose
# 1.29 use the classic one). Behind a proxy, the standard build arguments HTTP_PROXY / HTTPS_PROXY /
# NO_PROXY reach pip and stay out of the image; with a package mirror or a private index instead of
# PyPI: --build-arg PIP_INDEX_URL=https://mirror.example/simple (used by the build stage only).

# Build stage: the dependencies into a virtualenv, copied whole into the image below.
FROM python:3.11-slim AS build
ARG PIP_INDEX_URL=https://pypi.org/simple
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# pyproject.toml alone: the dependencies' layer is rebuilt when they change, not with every source
# change (the project's own packages, not found here, are the sources copied into /app below).
COPY pyproject.toml /src/
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install /src

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH

# The group is made with the same id as the user: /data belongs to 10001:10001, which is what the
# container runs as (USER below) and what Kubernetes' fsGroup: 10001 gives a volume.
RUN groupadd --system --gid 10001 registry \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --shell /usr/sbin/nologin registry \
    && mkdir -p /data \
    && chown registry:registry /data

COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY pyproject.toml manage.py gunicorn.conf.py ./
COPY regsite ./regsite
COPY registry ./registry
COPY tokens ./tokens
COPY ops ./ops
COPY notifications ./notifications
COPY audit ./audit
COPY replication ./replication
COPY templates ./templates
# Now, as root: the code and assets belong to root and are read-only to the service. Bytecode is
# compiled here because the root filesystem is read-only when the service runs.
RUN python -m compileall -q /app \
    && SVC_SECRET_KEY=collectstatic-only SVC_STORAGE_ROOT=/tmp/build/registry \
       SVC_DATABASE_URL=sqlite:////tmp/build/db.sqlite3 SVC_AUTH_TOKEN_STORAGE=/tmp/build/tokens \
       python manage.py collectstatic --noinput --verbosity 0 \
    && rm -rf /tmp/build

ENV SVC_SERVER_BIND=0.0.0.0:4000 \
    SVC_STORAGE_ROOT=/data/registry \
    SVC_DATABASE_URL=sqlite:////data/db.sqlite3 \
    SVC_AUTH_HTPASSWD_FILE=/data/users.htpasswd \
    SVC_AUTH_TOKEN_STORAGE=/data/tokens \
    SVC_SERVER_SECRET_KEY_FILE=/data/secret_key

USER 10001:10001
VOLUME ["/data"]
EXPOSE 4000
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:4000/health', timeout=3)"]
# Entry: migrate the database, then exec gunicorn (PID 1 gets signals).
CMD ["sh", "-c", "python manage.py migrate --noinput && exec gunicorn -c gunicorn.conf.py"]
