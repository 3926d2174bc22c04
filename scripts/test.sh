#!/usr/bin/env bash
# The README's test command: install everything into .venv, start what the tests need, lint, type-check, test.
# Any failing step fails the script; pytest's exit 5 ("no tests ran") fails it too.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# constraints.txt pins the versions this project was tested with; torch must stay 2.13.0 (CPU build).
.venv/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[trainer,dev]'
# polyaxon 2.18 declares Jinja2<3.1.5, but transformers' chat templates need >=3.1.6; polyaxon runs fine on 3.1.6
# (the whole suite runs on it), so the newer one is laid over the resolved set without touching anything else.
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps 'Jinja2==3.1.6'

export POLYAXON_NO_CONFIG=true
# Where PYTHONDONTWRITEBYTECODE is set (these machines set it), pytest keeps no rewritten test modules: every
# worker rewrote the asserts of all ~300 again at every run (collecting took 20.6 s of CPU per worker instead of
# 16.0 s from a checkout's second run on), and every process the tests start compiled the project again (~0.3 s).
unset PYTHONDONTWRITEBYTECODE
export HF_HUB_OFFLINE=1
export FINETUNE_TEST_POSTGRES_URL=${FINETUNE_TEST_POSTGRES_URL:-postgresql+psycopg://postgres@127.0.0.1:5432/test}

# PostgreSQL runs on these machines before a session starts; start it if it has stopped.
if command -v pg_isready >/dev/null && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start || true
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi

echo "== ruff"
.venv/bin/ruff check .
echo "== hadolint"
.venv/bin/hadolint --config .hadolint.yaml --failure-threshold warning Dockerfile trainer/Dockerfile
echo "== manifests check"
.venv/bin/finetune-bot manifests check --catalog-dir manifests
echo "== mypy"
.venv/bin/mypy
echo "== pytest"
# The local Polyaxon server and the Slack stand-in are started by session fixtures inside pytest (one stack per
# worker). The end-to-end tests mostly wait (on Polyaxon, the agent, the trainer's start, the watcher's tick), so
# three workers on 2 cores overlap those waits: 603 s of pytest against 702 s with two on one 2-core run (fresh
# clones since: 583-622 s; 562-702 s once the catalog read YAML with libyaml and fork servers froze their objects,
# the slower runs while the machine ran the same training job up to ~25 % slower; 618 s, then 536, 552 and 536 s once
# the local agent left the cron to the server and jobs no longer started Polyaxon's CLI for `fswatch`; on 2026-12-07
# 594-720 s one evening and 397-399 s the next morning for nearly the same code: the machine's speed moves it most),
# the cores then ~90 % busy (4 workers timed tests out); a module stays on one worker. PYTEST_WORKERS=0 runs in
# one process. The slowest 25 are printed so the suite's time can be watched.
.venv/bin/pytest -m "not slow and not gpu" -n "${PYTEST_WORKERS:-3}" --dist loadfile --durations=25 "$@"
