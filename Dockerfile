# Orbit Console: one image for the console replicas, the migrate step, the reconciler and the
# audit checkpoint job.
FROM python:3.12-slim-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential default-libmysqlclient-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
COPY --from=ghcr.io/astral-sh/uv:0.9 /uv /usr/local/bin/uv
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never
WORKDIR /app
COPY pyproject.toml uv.lock ./
RUN uv sync --locked --no-dev --extra mysql --no-install-project
COPY manage.py ./
COPY orbit_console ./orbit_console
COPY templates ./templates
COPY static ./static
RUN ORBIT_ENV=production SECRET_KEY=collectstatic-only ORBIT_TOKEN_KEYS=bm90LWEta2V5LWp1c3QtZm9yLWNvbGxlY3RzdGF0aWM= \
    ORBIT_AUDIT_KEYS=bm90LWFuLWF1ZGl0LWtleS1qdXN0LWZvci1jb2xsZWN0c3RhdGljISE= \
    ORBIT_AUDIT_VERIFY_KEYS=URy4O-_XAJeSJjqaHyHmBb1_c3EYUaKEONhPZIbzK_0 \
    DATABASE_URL=sqlite:////tmp/collectstatic.sqlite3 \
    .venv/bin/python manage.py collectstatic --noinput

FROM python:3.12-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends libmariadb3 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /app orbit \
 && install -d -o orbit -g orbit /var/lib/orbit/audit-checkpoints
WORKDIR /app
COPY --from=build --chown=orbit:orbit /app /app
ENV PATH=/app/.venv/bin:$PATH ORBIT_ENV=production PYTHONUNBUFFERED=1 ORBIT_VAR_DIR=/tmp/orbit
USER orbit
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/health/live').status != 200)"
CMD ["python", "manage.py", "serve", "--bind", "0.0.0.0:8000", "--proxy-headers"]
