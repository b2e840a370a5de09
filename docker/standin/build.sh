#!/usr/bin/env bash
# Stand-ins for the official images of docker-compose.yaml (postgres, redis, apache/airflow), for machines that
# cannot pull from Docker Hub: a Debian base made by debootstrap (needs root), then Debian's PostgreSQL and Redis,
# and Python with Airflow from the project's pinned requirements.txt and constraints.txt.
#
#   eval "$(sudo docker/standin/build.sh)"       # prints POSTGRES_IMAGE=... REDIS_IMAGE=... AIRFLOW_BASE_IMAGE=...
#   docker-compose build --build-arg AIRFLOW_BASE_IMAGE="$AIRFLOW_BASE_IMAGE" airflow-init
#   docker-compose --profile emulator up -d
#
# Cached: the base is tagged by a hash of its inputs (suite, mirror, the host's CA bundle, this script) and made
# only when that tag is missing; the images on it are plain `docker build`s, whose layer cache rebuilds what a
# changed input (a Dockerfile, requirements.txt, constraints.txt) invalidates. Progress goes to stderr.
#
# The host's CA bundle goes into the base (/usr/local/share/ca-certificates) so that builds behind a proxy that
# re-signs TLS, as the host trusts it, reach PyPI too.
#
# Settings: DOCKER (the docker command), STANDIN_SUITE (bookworm), STANDIN_MIRROR, STANDIN_CA_BUNDLE,
# STANDIN_PREFIX (image names, default findings-standin).
set -euo pipefail
cd "$(dirname "$0")/../.."

DOCKER="${DOCKER:-docker}"
SUITE="${STANDIN_SUITE:-bookworm}"
MIRROR="${STANDIN_MIRROR:-http://deb.debian.org/debian}"
CA_BUNDLE="${STANDIN_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
PREFIX="${STANDIN_PREFIX:-findings-standin}"
export DOCKER_BUILDKIT=0  # the legacy builder, as docker-compose 1.x builds

log() { echo "standin: $*" >&2; }

key="$({
    echo "suite=$SUITE mirror=$MIRROR variant=minbase"
    cat "$0"
    if [ -f "$CA_BUNDLE" ]; then cat "$CA_BUNDLE"; fi
} | sha256sum | cut -c1-12)"
BASE="$PREFIX/debian:$SUITE-$key"

if "$DOCKER" image inspect "$BASE" >/dev/null 2>&1; then
    log "base $BASE (cached)"
else
    command -v debootstrap >/dev/null || { log "debootstrap is not installed"; exit 1; }
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    log "debootstrap $SUITE from $MIRROR"
    if ! debootstrap --variant=minbase "$SUITE" "$tmp/root" "$MIRROR" >"$tmp/debootstrap.log" 2>&1; then
        tail -n 30 "$tmp/debootstrap.log" >&2
        exit 1
    fi
    if [ -f "$CA_BUNDLE" ]; then
        install -d "$tmp/root/usr/local/share/ca-certificates"
        cp "$CA_BUNDLE" "$tmp/root/usr/local/share/ca-certificates/host-ca-bundle.crt"
    fi
    rm -rf "$tmp"/root/var/cache/apt/archives/*.deb "$tmp"/root/var/lib/apt/lists/*
    tar -C "$tmp/root" -c . | "$DOCKER" import -c 'ENV LANG=C.UTF-8' -c 'CMD ["bash"]' - "$BASE" >/dev/null
    rm -rf "$tmp"
    trap - EXIT
    # earlier bases of this suite are unused now (their images are rebuilt on the new one)
    "$DOCKER" image ls --format '{{.Repository}}:{{.Tag}}' "$PREFIX/debian" | grep -vxF "$BASE" \
        | xargs -r "$DOCKER" rmi >/dev/null 2>&1 || true
    log "base $BASE imported"
fi

logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

# build IMAGE DOCKERFILE CONTEXT: a docker build on the base; the image it replaces is removed when unused
build() {
    local image="$1" dockerfile="$2" context="$3" old new
    old="$("$DOCKER" image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
    log "building $image"
    if ! "$DOCKER" build --build-arg "BASE_IMAGE=$BASE" -t "$image" -f "$dockerfile" "$context" \
            >"$logs/build.log" 2>&1; then
        tail -n 40 "$logs/build.log" >&2
        log "building $image failed"
        exit 1
    fi
    new="$("$DOCKER" image inspect --format '{{.Id}}' "$image")"
    if [ -n "$old" ] && [ "$old" != "$new" ]; then
        "$DOCKER" rmi "$old" >/dev/null 2>&1 || true
    fi
}

build "$PREFIX/postgres:$SUITE" docker/standin/postgres/Dockerfile docker/standin/postgres
build "$PREFIX/redis:$SUITE" docker/standin/redis/Dockerfile docker/standin/redis
build "$PREFIX/airflow:$SUITE" docker/standin/airflow/Dockerfile .

echo "POSTGRES_IMAGE=$PREFIX/postgres:$SUITE"
echo "REDIS_IMAGE=$PREFIX/redis:$SUITE"
echo "AIRFLOW_BASE_IMAGE=$PREFIX/airflow:$SUITE"
