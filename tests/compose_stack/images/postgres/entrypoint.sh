#!/bin/bash
# The official image's first start: an empty data directory gets a cluster with POSTGRES_USER (password
# POSTGRES_PASSWORD, checked over TCP) and the database POSTGRES_DB. The port is PGPORT's (default 5432).
set -euo pipefail
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s' "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}" > "$pwfile"
  initdb --username="${POSTGRES_USER:=postgres}" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  if [ "${POSTGRES_DB:-$POSTGRES_USER}" != postgres ]; then
    createdb --username="$POSTGRES_USER" "${POSTGRES_DB:-$POSTGRES_USER}"
  fi
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
if [ "${1:-}" = postgres ]; then
  shift
  exec postgres -c listen_addresses='*' "$@"  # a later -c listen_addresses (the command's) wins
fi
exec "$@"
