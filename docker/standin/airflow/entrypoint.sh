#!/usr/bin/env bash
# The official Airflow image's /entrypoint, reduced to what docker-compose.yaml uses: `bash ...` and
# `python ...` run as they are, anything else is an airflow subcommand (`api-server`, `celery worker`, ...).
set -euo pipefail
case "${1:-}" in
    "") exec airflow --help ;;
    bash | python | python3) exec "$@" ;;
    airflow) shift; exec airflow "$@" ;;
    *) exec airflow "$@" ;;
esac
