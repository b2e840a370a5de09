#!/usr/bin/env bash
# The official postgres image's first start, reduced to what docker-compose.yaml uses: initialise an empty PGDATA
# with POSTGRES_USER / POSTGRES_PASSWORD (password authentication over TCP), create POSTGRES_DB, run
# /docker-entrypoint-initdb.d/*.sql and *.sh, then run the server as the postgres user, listening on every address.
set -euo pipefail

if [ "${1:-}" = postgres ] && [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA" /var/run/postgresql
    chown -R postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
    user="${POSTGRES_USER:-postgres}"
    db="${POSTGRES_DB:-$user}"
    : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set (as for the official image)}"
    pwfile="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 -D "$PGDATA" >/dev/null
    rm -f "$pwfile"
    echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    if [ "$db" != postgres ]; then
        psql -v ON_ERROR_STOP=1 --username "$user" --dbname postgres -qc "CREATE DATABASE \"$db\""
    fi
    for f in /docker-entrypoint-initdb.d/*; do
        case "$f" in
            *.sql)
                echo "docker-entrypoint.sh: running $f"
                psql -v ON_ERROR_STOP=1 --username "$user" --dbname "$db" -f "$f" ;;
            *.sh) echo "docker-entrypoint.sh: running $f"; . "$f" ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    echo "docker-entrypoint.sh: PostgreSQL initialised in $PGDATA"
fi

exec "$@"
