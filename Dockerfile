# The registry on port 4000 as a non-root user; registry storage, database, tokens and the session
# key live on the /data volume. Entry: migrate the database, then exec gunicorn (PID 1 gets signals).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The group is made with the same id as the user: /data belongs to 10001:10001, which is what the
# container runs as (USER below) and what Kubernetes' fsGroup: 10001 gives a volume.
RUN groupadd --system --gid 10001 registry \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --shell /usr/sbin/nologin registry \
    && mkdir -p /data \
    && chown registry:registry /data

WORKDIR /app
COPY pyproject.toml manage.py gunicorn.conf.py ./
COPY regsite ./regsite
COPY registry ./registry
COPY tokens ./tokens
COPY ops ./ops
COPY notifications ./notifications
COPY audit ./audit
COPY templates ./templates
RUN pip install . \
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
CMD ["sh", "-c", "python manage.py migrate --noinput && exec gunicorn -c gunicorn.conf.py"]
