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
