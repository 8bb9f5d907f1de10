#!/usr/bin/env bash
# Start a throwaway PostgreSQL on loopback for the store conformance tests.
# Prints "URL DATA_DIR" on its last line. Installs the server with apt-get if needed.
# Stop it with: runuser -u postgres -- pg_ctl -D DATA_DIR stop
set -euo pipefail
initdb=$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$initdb" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
  initdb=$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)
fi
bin=$(dirname "$initdb")
dir=$(mktemp -d /tmp/corral-pg.XXXXXX)
chown postgres "$dir"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
runuser -u postgres -- "$bin/initdb" -D "$dir/data" -A trust -U postgres >&2
runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
  -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off" start >&2
echo "postgresql+psycopg://postgres@127.0.0.1:$port/postgres $dir/data $bin"
