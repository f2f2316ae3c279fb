# Shared by the fan-out tests that need a chain of real daemons (sourced
# after lib.sh, not run): relay_daemons N... starts one rdmacpd on each
# 127.0.0.N (one port, each its own config and modules under $T/mN), each
# relaying with a client certificate of its own ("relay") that every module
# trusts with 'relay from'. Modules: data (allow client, relay = yes) and
# dev (the same, with devices = yes: block devices written in place).
# Then CLIENT=(rdmacp with the client's identity and the port). A test with modules
# of its own defines relay_conf after sourcing this. Also same_meta, dest_field, and
# kill_daemon, opened and wait_opened for the tests that kill a hop mid-copy.

command -v jq >/dev/null || skip "jq not installed"

# relay_conf N: the config of the daemon on 127.0.0.N.
relay_conf() {
	local n=$1
	mkdir -p "$T/m$n/data" "$T/m$n/dev"
	cat >"$T/d$n.conf" <<-EOF
		[global]
		listen = 127.0.0.$n:$PORT
		cert = $T/certs/server.crt
		key = $T/certs/server.key
		ca = $T/certs/ca.crt
		relay certificate = $T/certs/relay.crt
		relay key = $T/certs/relay.key
		relay to = 127.0.0.*
		handshake timeout = 10
		idle timeout = 60
	EOF
	{
		echo "[data]"
		echo "path = $T/m$n/data"
		echo "allow = client"
		echo "relay = yes"
		echo "relay from = relay"
		echo
		echo "[dev]"
		echo "path = $T/m$n/dev"
		echo "allow = client"
		echo "relay = yes"
		echo "relay from = relay"
		echo "devices = yes"
	} | as_root_modules >>"$T/d$n.conf"
}

# start_relay_daemon N: the daemon on 127.0.0.N (its pid in DPID[N]), listening before it
# returns; a daemon started again appends to its log.
declare -A DPID
start_relay_daemon() {
	local n=$1 i
	"$RDMACPD" --config "$T/d$n.conf" -v >>"$T/d$n.log" 2>&1 &
	DPID[$n]=$!
	DAEMON_PIDS+=("$!")
	for i in $(seq 1 200); do
		(exec 3<>"/dev/tcp/127.0.0.$n/$PORT") 2>/dev/null && return 0
		kill -0 "${DPID[$n]}" 2>/dev/null || { cat "$T/d$n.log"; die "daemon $n exited"; }
		sleep 0.05
	done
	die "daemon $n did not listen on 127.0.0.$n:$PORT"
}

relay_daemons() {
	local n hosts=()
	for n in "$@"; do
		python3 -c "import socket; socket.socket().bind(('127.0.0.$n', 0))" 2>/dev/null ||
			skip "cannot bind 127.0.0.$n (the daemons each need a loopback address)"
		hosts+=(--host "127.0.0.$n")
	done
	PORT=$(free_port)
	"$RDMACP" certs init "$T/certs" "${hosts[@]}" >/dev/null || die "certs init"
	"$RDMACP" certs issue "$T/certs" --client relay >/dev/null || die "certs issue relay"
	for n in "$@"; do
		relay_conf "$n"
		"$RDMACPD" --config "$T/d$n.conf" --check >"$T/check$n.out" 2>&1 ||
			die "rdmacpd --check: $(cat "$T/check$n.out")"
		start_relay_daemon "$n"
	done
	CLIENT=("$RDMACP" --config /dev/null --cert "$T/certs/client.crt"
		--key "$T/certs/client.key" --ca "$T/certs/ca.crt" -P "$PORT")
}

# same_meta DESC A B: the same names, modes and mtimes (to the second) under A and B.
same_meta() {
	(cd "$2" && find . -printf '%P %y %m %T@\n' | sed 's/\.[0-9]*$//' | sort) >"$T/meta.a"
	(cd "$3" && find . -printf '%P %y %m %T@\n' | sed 's/\.[0-9]*$//' | sort) >"$T/meta.b"
	if diff "$T/meta.a" "$T/meta.b" >"$T/meta.diff"; then
		pass "$1: modes and times kept"
	else
		fail "$1: modes or times differ: $(head -4 "$T/meta.diff" | tr '\n' ' ')"
	fi
}

# dest_field JSON HOST FIELD: that destination's field in the summary's destinations.
dest_field() {
	jq -r --arg h "$2" "select(.event == \"summary\") | .destinations[] |
		select(.host == \$h) | .$3" "$1"
}

# held N: the bytes 127.0.0.N holds of big in its partial store, else of the file.
held() {
	local f
	f=$(ls "$T/m$1/data/.rdmacp-partial/"*.data 2>/dev/null | head -1)
	[ -n "$f" ] || f="$T/m$1/data/big"
	[ -e "$f" ] && du -B1 --apparent-size "$f" 2>/dev/null | cut -f1 || echo 0
}

# wait_held N BYTES [SECONDS]: until 127.0.0.N holds BYTES of big (at most SECONDS, default
# 120). Then 0.
wait_held() {
	local i
	for i in $(seq 1 $((${3:-120} * 20))); do
		[ "$(held "$1")" -ge "$2" ] && return 0
		sleep 0.05
	done
	return 1
}

# clear_dests N...: the modules of 127.0.0.N... empty again (the directories stay: each
# daemon holds its own).
clear_dests() {
	local n
	for n in "$@"; do
		find "$T/m$n/data" -mindepth 1 -delete
	done
}

# kill_daemon N: the daemon on 127.0.0.N and its sessions, kill -9 (a relay child dies with its
# session).
kill_daemon() {
	local p
	for p in $(pgrep -P "${DPID[$1]}"); do kill -KILL "$p" 2>/dev/null; done
	kill -KILL "${DPID[$1]}" 2>/dev/null
	wait "${DPID[$1]}" 2>/dev/null
}

# opened N: whether a session of 127.0.0.N has a file of its module open (its copy began).
opened() {
	local p f
	for p in $(pgrep -P "${DPID[$1]}"); do
		for f in /proc/"$p"/fd/*; do
			case "$(readlink "$f" 2>/dev/null)" in
			"$T/m$1/data/"*) return 0 ;;
			esac
		done
	done
	return 1
}

# wait_opened N: until opened N (at most 120 s). Then 0.
wait_opened() {
	local i
	for i in $(seq 1 2400); do
		opened "$1" && return 0
		sleep 0.05
	done
	return 1
}
