# shellcheck shell=bash
# Shell helpers shared by the benchmark scripts (sourced, not run). The
# caller sets SERVER_PID when it starts a server and defines die().

# stop_server [grace seconds]: SIGTERM, then SIGKILL after the grace period
# (default 1 s).
stop_server() {
  if [[ -n ${SERVER_PID:-} ]]; then
    local grace=${1:-1}
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq $((grace * 50))); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.02; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
  fi
}

# await_port PORT LOG WHAT: waits up to 5 s for SERVER_PID to accept on
# loopback PORT. If it exits first or does not accept in time, says so on
# stderr (WHAT names it; LOG's last lines when it exited) and returns 1.
await_port() {
  local port=$1 log=$2 what=$3
  for _ in $(seq 250); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "$what exited at start-up:" >&2
      tail -5 "$log" >&2
      return 1
    fi
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.02
  done
  echo "$what did not accept on port $port within 5 s" >&2
  return 1
}

port_in_use() {
  if command -v ss >/dev/null; then
    [[ -n $(ss -Htan "( sport = :$1 )" 2>/dev/null) ]]
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}

# A free loopback port (random, so that parallel runs rarely collide).
free_port() {
  local p
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 40000))
    port_in_use "$p" || { echo "$p"; return 0; }
  done
  die "no free loopback port found"
}

# start_delayqd_two_ports [DELAYQD_FLAG...]: starts $DELAYQD in memory on two
# free loopback ports, BEAN_PORT (beanstalkd) and HTTP_PORT, with the flags
# given, its log in $WORK/delayqd.log; sets SERVER_PID and waits until both
# ports accept.
start_delayqd_two_ports() {
  BEAN_PORT=$(free_port)
  HTTP_PORT=$(free_port)
  [[ $HTTP_PORT != "$BEAN_PORT" ]] || HTTP_PORT=$(free_port)
  "$DELAYQD" -l 127.0.0.1 -p "$BEAN_PORT" --http-port "$HTTP_PORT" --in-memory --log-level warn \
    "$@" >"$WORK/delayqd.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 250); do
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -5 "$WORK/delayqd.log" >&2; die "delayqd exited"; }
    if (exec 3<>"/dev/tcp/127.0.0.1/$HTTP_PORT") 2>/dev/null &&
      (exec 3<>"/dev/tcp/127.0.0.1/$BEAN_PORT") 2>/dev/null; then
      return 0
    fi
    sleep 0.02
  done
  die "delayqd did not accept within 5 s"
}

# start_redis_under_callgrind NAME [REDIS_FLAG...]: checks for Valgrind,
# redis-cli and $REDIS_SERVER, makes the work directory WORK (removed at exit,
# with the server stopped), starts $REDIS_SERVER (no persistence, unless a
# flag asks for it) under Valgrind's callgrind with instrumentation off, its
# profiles and log in $WORK; sets PORT and SERVER_PID and waits until it
# answers.
start_redis_under_callgrind() {
  [[ -x $REDIS_SERVER ]] || die "$REDIS_SERVER not found (Debian: apt-get install redis-server)"
  local t
  for t in valgrind callgrind_control redis-cli; do
    command -v $t >/dev/null || die "$t not found (Debian: apt-get install valgrind redis-tools)"
  done
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  shift
  trap 'stop_server 5; rm -rf "$WORK"' EXIT
  trap 'exit 130' INT TERM
  PORT=$(free_port)
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$WORK/callgrind.%p" \
    "$REDIS_SERVER" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$WORK" "$@" >"$WORK/redis.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 300); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$PORT" ping >/dev/null 2>&1 || die "redis-server did not start: $(tail -5 "$WORK/redis.log")"
}

# median "V1 V2 ...": the median of the numbers (of an even count, the mean
# of the middle two, to two decimals).
median() {
  tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 }
    END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
