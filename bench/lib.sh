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

# await_port PORT LOG WHAT [retry]: waits up to 5 s for SERVER_PID to accept
# on loopback PORT. If it exits first or does not accept in time, says so on
# stderr (WHAT names it; LOG's last lines when it exited) and returns 1.
# With `retry`: if it exited saying an address was in use, returns 2 and
# says nothing (start_on_free_port starts it again).
await_port() {
  local port=$1 log=$2 what=$3 retry=${4:-}
  for _ in $(seq 250); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      if [[ $retry == retry ]] && grep -qi "address already in use" "$log"; then
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
        return 2
      fi
      echo "$what exited at start-up:" >&2
      tail -5 "$log" >&2
      return 1
    fi
    listens_on "$SERVER_PID" "$port" && return 0
    sleep 0.02
  done
  echo "$what did not accept on port $port within 5 s" >&2
  return 1
}

# listens_on PID PORT: whether process PID has a socket listening on TCP
# PORT. (Not a connect: that would also succeed when another process holds
# the port, and the server, about to exit, never got it.)
listens_on() {
  local hex inode
  hex=$(printf '%04X' "$2")
  while read -r inode; do
    [[ -n $(find "/proc/$1/fd" -lname "socket:\[$inode\]" -print -quit 2>/dev/null) ]] && return 0
  done < <(awk -v p=":$hex" '$2 ~ p "$" && $4 == "0A" { print $10 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null)
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

# start_on_free_port LOG WHAT CMD...: starts CMD, its output in LOG, with
# @PORT@ (and @PORT2@) in its arguments replaced by free loopback ports,
# sets SERVER_PID, FREE_PORT (and FREE_PORT2), and waits until it accepts
# on them (await_port; WHAT names it). free_port only looks: another
# process (a test run beside) may bind the port first, so a server that
# exits saying an address is in use is started again on others, up to 5
# times. Returns 1 if it does not start.
start_on_free_port() {
  local log=$1 what=$2 a rc
  shift 2
  local args=() try
  for try in 1 2 3 4 5; do
    FREE_PORT=$(free_port)
    FREE_PORT2=""
    if [[ "$*" == *@PORT2@* ]]; then
      FREE_PORT2=$(free_port)
      [[ $FREE_PORT2 != "$FREE_PORT" ]] || FREE_PORT2=$(free_port)
    fi
    args=()
    for a in "$@"; do
      a=${a//@PORT@/$FREE_PORT}
      args+=("${a//@PORT2@/$FREE_PORT2}")
    done
    "${args[@]}" >"$log" 2>&1 &
    SERVER_PID=$!
    rc=0
    await_port "$FREE_PORT" "$log" "$what" retry || rc=$?
    # (A server may bind its ports one after the other: the second can
    # still be taken once the first listens.)
    if [[ $rc == 0 && -n $FREE_PORT2 ]]; then
      await_port "$FREE_PORT2" "$log" "$what" retry || rc=$?
    fi
    [[ $rc == 2 ]] || return "$rc"
    echo "$what: a port was taken before it could bind it (try $try of 5)" >&2
  done
  return 1
}

# start_delayqd_two_ports [DELAYQD_FLAG...]: starts $DELAYQD in memory on two
# free loopback ports, BEAN_PORT (beanstalkd) and HTTP_PORT, with the flags
# given, its log in $WORK/delayqd.log; sets SERVER_PID and waits until both
# ports accept.
start_delayqd_two_ports() {
  start_on_free_port "$WORK/delayqd.log" delayqd "$DELAYQD" -l 127.0.0.1 -p @PORT@ \
    --http-port @PORT2@ --in-memory --log-level warn "$@" || die "delayqd did not start"
  # shellcheck disable=SC2034  # the caller's
  BEAN_PORT=$FREE_PORT HTTP_PORT=$FREE_PORT2
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
