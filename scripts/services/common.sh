# Shared by the service scripts (sourced). A script sets $pidfile and $portfile and defines
# `answers PORT`: whether its service is up and answering on PORT.

# Whether something on 127.0.0.1 accepts a TCP connection on PORT.
accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The port of the service this script started, if it still runs and answers.
running_port() {
  [ -f "$pidfile" ] && [ -f "$portfile" ] || return 1
  local pid port
  pid=$(cat "$pidfile") port=$(cat "$portfile")
  kill -0 "$pid" 2>/dev/null && answers "$port" && echo "$port"
}

# Sends SIGTERM to the process in $pidfile and waits up to 5 s for it to exit; prints its pid
# if it is still there after that.
terminate() {
  [ -f "$pidfile" ] || return 0
  local pid
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.05; done
  echo "$pid"
}

# Waits up to 10 s for the service just started as PID to answer on PORT. When it does, PID and
# PORT go to $pidfile and $portfile; when it does not (it exited, or never answered), PID is
# stopped and the call fails, so the caller can try another port.
came_up() {
  local pid=$1 port=$2
  echo "$pid" >"$pidfile"
  for _ in $(seq 1 200); do
    if answers "$port"; then
      echo "$port" >"$portfile"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill "$pid" 2>/dev/null || true
  return 1
}

# Makes VENV a fresh virtualenv holding the PyPI requirements that follow (pin them), installing
# Debian's python3-venv first when this Python lacks it. Progress and pip's output go to stderr.
fresh_venv() {
  local venv=$1
  shift
  if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends python3-venv >/dev/null ||
      { apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv >/dev/null; }
  fi
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$@" >&2
}
