# syntax=docker/dockerfile:1
#
# The bot's image: `finetune-bot serve` (ENTRYPOINT finetune-bot, CMD serve), Python 3.12 slim. The trainer
# extra (torch, TRL) is not installed: training runs in the trainer image (trainer/Dockerfile).
#
# Build from the repository root:   docker build -t REGISTRY/finetune-bot:GIT_SHA .
# Pin the base by digest for a release build:
#   --build-arg PYTHON_IMAGE=python:3.12-slim-bookworm@sha256:<digest>
# (resolve <digest> with `docker buildx imagetools inspect python:3.12-slim-bookworm`).
ARG PYTHON_IMAGE=python:3.12-slim-bookworm

# ---- builder: the project and every dependency as wheels, at the versions in constraints.txt -------------
FROM ${PYTHON_IMAGE} AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY bot/ ./bot/
COPY handlers/ ./handlers/
COPY storage/ ./storage/
COPY datarows/ ./datarows/
# Every pinned dependency ships a manylinux wheel for CPython 3.12, so no compiler is needed here either;
# one that needs building would fail this step rather than reach the final image.
RUN pip wheel --wheel-dir /wheels -c constraints.txt .

# ---- final: a virtualenv installed from those wheels only; no compilers, no build tools -----------------
FROM ${PYTHON_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    HOME=/home/bot \
    MPLCONFIGDIR=/tmp/matplotlib \
    POLYAXON_NO_CONFIG=true \
    FINETUNE_CATALOG_DIR=/app/manifests \
    FINETUNE_HTTP_HOST=0.0.0.0 \
    FINETUNE_HTTP_PORT=3000

# The wheels and constraints are bind-mounted from the builder, so neither stays in a layer.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    --mount=type=bind,from=builder,source=/src/constraints.txt,target=/tmp/constraints.txt \
    python -m venv /opt/venv \
    && pip install --no-index --find-links=/wheels -c /tmp/constraints.txt finetune-bot \
    && groupadd --system --gid 10001 bot \
    && useradd --system --uid 10001 --gid bot --home-dir /home/bot --create-home --shell /usr/sbin/nologin bot

WORKDIR /app
# The catalog (recipes, presets, components) that FINETUNE_CATALOG_DIR points at.
COPY manifests/ ./manifests/

USER 10001:10001
EXPOSE 3000

# urllib raises on a refused connection and on any non-2xx answer (/healthz is 503 when the database is down).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('FINETUNE_HTTP_PORT', '3000'), timeout=4)"]

ENTRYPOINT ["finetune-bot"]
CMD ["serve"]
