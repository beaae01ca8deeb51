#!/bin/sh
# compose-smoke: build the images, bring the compose stack up, run TestBrowser against it,
# and take it down (always, also after a failure). Needs a running Docker engine and the
# compose plugin (`docker compose`, v2); the browser test needs chromium.
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
PORT=${BATON_PORT:-8080}
URL="http://127.0.0.1:${PORT}"

if ! docker info >/dev/null 2>&1; then
	echo "compose-smoke: no Docker engine answers (start dockerd, or set DOCKER_HOST)" >&2
	exit 1
fi
# Compose v2 only: docker-compose.yml uses ${VAR:+...} interpolation, which the Python
# docker-compose 1.x (Debian's docker-compose package) rejects.
if ! docker compose version >/dev/null 2>&1; then
	echo "compose-smoke: the compose plugin ('docker compose', v2) is not installed" >&2
	exit 1
fi
compose() { docker compose "$@"; }

cleanup() { compose down -v --remove-orphans >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM

BATON_VERSION=${BATON_VERSION:-$(git describe --always --dirty 2>/dev/null || echo dev)}
export BATON_VERSION
compose build
compose up -d

# Ready means the store answers and every agent and MCP server is connected.
i=0
until curl -fsS "${URL}/readyz?strict=1" >/dev/null 2>&1; do
	i=$((i + 1))
	if [ "$i" -ge 120 ]; then
		echo "compose-smoke: the stack did not become ready:" >&2
		curl -sS "${URL}/readyz" >&2 || true
		compose logs >&2 || true
		exit 1
	fi
	sleep 0.5
done
echo "compose-smoke: ready at ${URL}"
BATON_URL="${URL}" "$GO" test -count=1 -run TestBrowser -v ./integration/
