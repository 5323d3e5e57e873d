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
