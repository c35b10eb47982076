# shellcheck shell=bash
# Start a throwaway PostgreSQL server on 127.0.0.1 for the annotation_db tests and benchmark.
#
#   source .ci/postgres.sh      # exports MAGNET_TEST_PG_URL=postgresql+psycopg://...
#
# Installs Debian's `postgresql` when no server binaries are present, creates a private
# cluster in $MAGNET_PG_DIR (default /tmp/magnet-pg) listening on 127.0.0.1:$MAGNET_PG_PORT
# (default 54329), a role `magnet` (password auth) and a database `magnet_test`.
# Idempotent: a second run reuses the running server. Sourced, so it never calls `exit` on
# success; on failure it prints why and returns non-zero (aborting a `set -e` caller).
# `magnet_pg_stop` stops the server again if this shell's `source` started it (a server that
# was already running is left running).

_magnet_pg_fail() {
    echo "postgres.sh: $*" >&2
    if [ -n "${_MAGNET_PG_DIR:-}" ] && [ -f "$_MAGNET_PG_DIR/server.log" ]; then
        tail -n 20 "$_MAGNET_PG_DIR/server.log" >&2
    fi
    return 1
}

_magnet_pg_setup() {
    local port="${MAGNET_PG_PORT:-54329}"
    local dir="${MAGNET_PG_DIR:-/tmp/magnet-pg}"
    local password="${MAGNET_PG_PASSWORD:-magnet}"
    _MAGNET_PG_DIR="$dir"
    _MAGNET_PG_STARTED=""

    if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
        echo "postgres.sh: installing Debian package postgresql" >&2
        if [ "$(id -u)" != 0 ]; then
            _magnet_pg_fail "PostgreSQL is not installed and installing it needs root"
            return 1
        fi
        DEBIAN_FRONTEND=noninteractive apt-get update -qq \
            && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null \
            || { _magnet_pg_fail "apt-get install postgresql failed"; return 1; }
    fi
    local bin
    bin="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d | sort -V | tail -n 1)"
    [ -x "$bin/initdb" ] || { _magnet_pg_fail "no initdb under /usr/lib/postgresql"; return 1; }

    # The server refuses to run as root: use Debian's `postgres` account when we are root.
    local -a as_owner=()
    if [ "$(id -u)" = 0 ]; then
        id postgres >/dev/null 2>&1 || { _magnet_pg_fail "no 'postgres' system user"; return 1; }
        as_owner=(runuser -u postgres --)
    fi

    if ! "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
        mkdir -p "$dir" || { _magnet_pg_fail "cannot create $dir"; return 1; }
        [ "$(id -u)" = 0 ] && chown postgres: "$dir" && chmod 700 "$dir"
        if [ ! -s "$dir/PG_VERSION" ]; then
            "${as_owner[@]}" "$bin/initdb" -D "$dir" -U postgres --auth-local=trust \
                --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir.initdb.log" 2>&1 \
                || { cat "$dir.initdb.log" >&2; _magnet_pg_fail "initdb failed"; return 1; }
        fi
        "${as_owner[@]}" "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
            -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir -c max_connections=200" \
            start >/dev/null \
            || { _magnet_pg_fail "pg_ctl start failed"; return 1; }
        _MAGNET_PG_STARTED="$bin"
    fi

    local -a psql=("${as_owner[@]}" "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d postgres)
    "${psql[@]}" -c "DO \$\$ BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'magnet') THEN
                CREATE ROLE magnet LOGIN PASSWORD '$password';
            ELSE
                ALTER ROLE magnet LOGIN PASSWORD '$password';
            END IF;
        END \$\$;" || { _magnet_pg_fail "cannot create role magnet"; return 1; }
    if [ "$("${psql[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = 'magnet_test'")" != 1 ]; then
        "${psql[@]}" -c "CREATE DATABASE magnet_test OWNER magnet" \
            || { _magnet_pg_fail "cannot create database magnet_test"; return 1; }
    fi
    export MAGNET_TEST_PG_URL="postgresql+psycopg://magnet:${password}@127.0.0.1:${port}/magnet_test"
    echo "MAGNET_TEST_PG_URL=$MAGNET_TEST_PG_URL"
}

# Stop the server this shell started (fast shutdown: open sessions are ended). Never fails.
magnet_pg_stop() {
    [ -n "${_MAGNET_PG_STARTED:-}" ] || return 0
    local -a as_owner=()
    [ "$(id -u)" = 0 ] && as_owner=(runuser -u postgres --)
    "${as_owner[@]}" "$_MAGNET_PG_STARTED/pg_ctl" -D "$_MAGNET_PG_DIR" -m fast -w stop >/dev/null \
        || echo "postgres.sh: could not stop the server in $_MAGNET_PG_DIR" >&2
    _MAGNET_PG_STARTED=""
    return 0
}

_magnet_pg_setup || return 1 2>/dev/null || exit 1
