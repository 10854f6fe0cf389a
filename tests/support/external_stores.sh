#!/usr/bin/env bash
# A PostgreSQL and a Redis of the operating system's own packages, run as plain servers under one
# directory (not as system services), for running the test suite against external stores.
#
#   tests/support/external_stores.sh install   # apt-get the packages (root; once per machine)
#   eval "$(tests/support/external_stores.sh start)"   # start both (idempotent) and export
#                                              # WAKE_TEST_PG_DSN and WAKE_TEST_REDIS_URL
#   tests/support/external_stores.sh env       # print the exports again
#   tests/support/external_stores.sh status    # exit 0 when both answer
#   tests/support/external_stores.sh stop      # stop both (idempotent); the data stays
#   tests/support/external_stores.sh destroy   # stop both and remove the directory
#
# With WAKE_EXT_POOLER=pgbouncer (install, start, env, status, stop), Debian's PgBouncer runs in
# transaction mode in front of that PostgreSQL too, and `start`/`env` export WAKE_TEST_PG_POOLER_DSN
# (the same login through PgBouncer): the suite then points wake's DSN through it
# (docs/testing.md). It authenticates wake's per-agent tool roles with an auth_query as the
# servers' login, and ends a transaction idle longer than $WAKE_EXT_POOLER_IDLE_TX_S (default 5 s)
# as PostgreSQL's idle_in_transaction_session_timeout would (docs/configuration.md).
#
# Both listen on 127.0.0.1 and on a unix socket under $WAKE_EXT_STORES_DIR (default
# /tmp/ext-stores), with a password generated on the first start. Started as root, they run as
# $WAKE_EXT_STORES_USER (default postgres), since PostgreSQL refuses to run as root. These are test
# servers: fsync is off. One test session at a time per pair of servers (the suite drops and
# recreates its template database at the start of each session).
set -euo pipefail

BASE=${WAKE_EXT_STORES_DIR:-/tmp/ext-stores}
PG_PORT=${WAKE_EXT_PG_PORT:-55432}
REDIS_PORT=${WAKE_EXT_REDIS_PORT:-56379}
RUN_AS=${WAKE_EXT_STORES_USER:-postgres}
PG_USER=wake
POOLER=${WAKE_EXT_POOLER:-}
POOLER_PORT=${WAKE_EXT_POOLER_PORT:-56432}
POOLER_IDLE_TX_S=${WAKE_EXT_POOLER_IDLE_TX_S:-5}

say() { echo "external_stores: $*" >&2; }
die() { say "$*"; exit 1; }

pg_bin() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [[ -n "$dir" && -x "$dir/pg_ctl" ]] || die "no PostgreSQL server found in /usr/lib/postgresql (run: $0 install)"
    echo "$dir"
}

redis_bin() {
    [[ -x /usr/bin/redis-server ]] || die "no /usr/bin/redis-server (run: $0 install)"
    echo /usr/bin
}

# Run a command as the servers' user: that user when we are root, ourselves otherwise.
as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        id -u "$RUN_AS" >/dev/null 2>&1 || die "user $RUN_AS does not exist (set WAKE_EXT_STORES_USER)"
        runuser -u "$RUN_AS" -- "$@"
    else
        "$@"
    fi
}

password() { cat "$BASE/password"; }

pg_running() { [[ -d "$BASE/pg/data" ]] && as_owner "$(pg_bin)/pg_ctl" status -D "$BASE/pg/data" >/dev/null 2>&1; }

redis_running() {
    [[ -S "$BASE/redis/redis.sock" ]] || return 1
    REDISCLI_AUTH=$(password) "$(redis_bin)/redis-cli" -s "$BASE/redis/redis.sock" ping 2>/dev/null | grep -q PONG
}

pooler_running() {
    [[ -s "$BASE/pgbouncer/pgbouncer.pid" ]] && kill -0 "$(cat "$BASE/pgbouncer/pgbouncer.pid")" 2>/dev/null
}

check_pooler() {
    case "$POOLER" in
        "") return 1 ;;
        pgbouncer) [[ -x /usr/sbin/pgbouncer ]] || die "no /usr/sbin/pgbouncer (run: WAKE_EXT_POOLER=pgbouncer $0 install)" ;;
        *) die "WAKE_EXT_POOLER=$POOLER: the only pooler known is pgbouncer" ;;
    esac
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

prepare_dirs() {
    mkdir -p "$BASE"
    chmod 755 "$BASE"
    if [[ ! -s "$BASE/password" ]]; then
        (umask 077 && head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$BASE/password")
    fi
    mkdir -p "$BASE/pg/run" "$BASE/redis"
    if [[ $(id -u) -eq 0 ]]; then
        chown "$RUN_AS" "$BASE/pg" "$BASE/pg/run" "$BASE/redis"
    fi
    chmod 700 "$BASE/pg"
    chmod 755 "$BASE/pg/run" "$BASE/redis"
}

start_pg() {
    local bin pwfile
    bin=$(pg_bin)
    if pg_running; then
        say "postgres already running ($BASE/pg/data)"
        return
    fi
    port_free "$PG_PORT" || die "127.0.0.1:$PG_PORT is taken by something else (set WAKE_EXT_PG_PORT)"
    if [[ ! -f "$BASE/pg/data/PG_VERSION" ]]; then
        pwfile="$BASE/pg/pwfile"
        (umask 077 && password >"$pwfile")
        [[ $(id -u) -eq 0 ]] && chown "$RUN_AS" "$pwfile"
        as_owner "$bin/initdb" -D "$BASE/pg/data" -U "$PG_USER" --pwfile="$pwfile" \
            --auth-local=scram-sha-256 --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$BASE/pg/initdb.log" 2>&1 \
            || { cat "$BASE/pg/initdb.log" >&2; die "initdb failed"; }
        rm -f "$pwfile"
    fi
    as_owner "$bin/pg_ctl" start -D "$BASE/pg/data" -l "$BASE/pg/server.log" -w -t 120 -o \
        "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $BASE/pg/run -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
        >/dev/null || { tail -n 20 "$BASE/pg/server.log" >&2; die "postgres did not start"; }
    say "postgres started on 127.0.0.1:$PG_PORT and $BASE/pg/run"
}

start_redis() {
    local bin
    bin=$(redis_bin)
    if redis_running; then
        say "redis already running ($BASE/redis)"
        return
    fi
    port_free "$REDIS_PORT" || die "127.0.0.1:$REDIS_PORT is taken by something else (set WAKE_EXT_REDIS_PORT)"
    rm -f "$BASE/redis/redis.sock"
    # the password goes in through stdin (a config read from "-"), not the process's arguments
    printf 'requirepass %s\n' "$(password)" | as_owner "$bin/redis-server" - \
        --bind 127.0.0.1 --port "$REDIS_PORT" --unixsocket "$BASE/redis/redis.sock" --unixsocketperm 777 \
        --dir "$BASE/redis" --save "" --appendonly no --daemonize yes \
        --pidfile "$BASE/redis/redis.pid" --logfile "$BASE/redis/server.log" >&2
    for _ in $(seq 1 200); do
        redis_running && { say "redis started on 127.0.0.1:$REDIS_PORT and $BASE/redis/redis.sock"; return; }
        sleep 0.1
    done
    tail -n 20 "$BASE/redis/server.log" >&2
    die "redis did not answer within 20 s"
}

# PgBouncer in transaction mode before the PostgreSQL above. Every database name is passed through
# (`*`), so the suite's per-test databases need no entry. The servers' login comes from the
# auth_file; every other login (wake's per-agent tool roles, made at run time) through the
# auth_query, whose SCRAM secret PgBouncer also logs in to the server with.
start_pooler() {
    local dir=$BASE/pgbouncer
    if pooler_running; then
        say "pgbouncer already running ($dir)"
        return
    fi
    port_free "$POOLER_PORT" || die "127.0.0.1:$POOLER_PORT is taken by something else (set WAKE_EXT_POOLER_PORT)"
    mkdir -p "$dir"
    [[ $(id -u) -eq 0 ]] && chown "$RUN_AS" "$dir"
    chmod 700 "$dir"
    (umask 077 && printf '"%s" "%s"\n' "$PG_USER" "$(password)" >"$dir/userlist.txt")
    cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$PG_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $POOLER_PORT
unix_socket_dir = $dir
pidfile = $dir/pgbouncer.pid
logfile = $dir/pgbouncer.log
pool_mode = transaction
auth_type = scram-sha-256
auth_file = $dir/userlist.txt
auth_user = $PG_USER
auth_query = SELECT usename, passwd FROM pg_shadow WHERE usename=\$1
admin_users = $PG_USER
max_client_conn = 1000
default_pool_size = 40
max_db_connections = 0
idle_transaction_timeout = $POOLER_IDLE_TX_S
server_idle_timeout = 30
autodb_idle_timeout = 30
ignore_startup_parameters = extra_float_digits
server_login_retry = 1
INI
    [[ $(id -u) -eq 0 ]] && chown "$RUN_AS" "$dir/userlist.txt" "$dir/pgbouncer.ini"
    as_owner /usr/sbin/pgbouncer -d "$dir/pgbouncer.ini" >&2 || { tail -n 20 "$dir/pgbouncer.log" >&2; die "pgbouncer did not start"; }
    for _ in $(seq 1 100); do
        pooler_running && ! port_free "$POOLER_PORT" && { say "pgbouncer (transaction mode) started on 127.0.0.1:$POOLER_PORT"; return; }
        sleep 0.1
    done
    tail -n 20 "$dir/pgbouncer.log" >&2
    die "pgbouncer did not listen within 10 s"
}

stop_pooler() {
    if pooler_running; then
        kill -INT "$(cat "$BASE/pgbouncer/pgbouncer.pid")"  # SIGINT: a fast shutdown
        for _ in $(seq 1 100); do
            pooler_running || break
            sleep 0.1
        done
        say "pgbouncer stopped"
    fi
}

print_env() {
    local pw
    pw=$(password)
    echo "export WAKE_TEST_PG_DSN='postgresql://$PG_USER:$pw@127.0.0.1:$PG_PORT/postgres'"
    echo "export WAKE_TEST_REDIS_URL='redis://:$pw@127.0.0.1:$REDIS_PORT/0'"
    if check_pooler; then
        echo "export WAKE_TEST_PG_POOLER_DSN='postgresql://$PG_USER:$pw@127.0.0.1:$POOLER_PORT/postgres'"
    fi
}

stop_all() {
    stop_pooler
    if pg_running; then
        as_owner "$(pg_bin)/pg_ctl" stop -D "$BASE/pg/data" -m fast -w >/dev/null
        say "postgres stopped"
    fi
    if redis_running; then
        REDISCLI_AUTH=$(password) "$(redis_bin)/redis-cli" -s "$BASE/redis/redis.sock" shutdown nosave >/dev/null 2>&1 || true
        for _ in $(seq 1 100); do
            [[ -S "$BASE/redis/redis.sock" ]] || break
            sleep 0.1
        done
        say "redis stopped"
    fi
}

case "${1:-}" in
    install)
        [[ $(id -u) -eq 0 ]] || die "install needs root (apt-get)"
        apt-get update -q >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql redis-server >&2
        if [[ -n "$POOLER" ]]; then
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$POOLER" >&2
        fi
        ;;
    start)
        pg_bin >/dev/null
        redis_bin >/dev/null
        prepare_dirs
        check_pooler || true
        start_pg
        start_redis
        if check_pooler; then
            start_pooler
        fi
        print_env
        ;;
    env)
        [[ -s "$BASE/password" ]] || die "not started yet ($BASE)"
        print_env
        ;;
    status)
        pg_running && say "postgres running" || { say "postgres not running"; exit 1; }
        redis_running && say "redis running" || { say "redis not running"; exit 1; }
        if check_pooler; then
            pooler_running && say "pgbouncer running" || { say "pgbouncer not running"; exit 1; }
        fi
        ;;
    stop)
        [[ -d "$BASE" ]] && stop_all
        ;;
    destroy)
        if [[ -d "$BASE" ]]; then
            stop_all
            rm -rf "$BASE"
            say "removed $BASE"
        fi
        ;;
    *)
        sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
