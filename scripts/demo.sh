#!/usr/bin/env bash
# A real demo on one machine: fresh certificates, rdmacpd on loopback with one
# module, rdmacp pushing files into it, and the copies checked.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
scripts/deps.sh
scripts/build.sh build

demo=$(mktemp -d /tmp/rdmacp-demo.XXXXXX)
port=$((20000 + RANDOM % 20000))
daemon=
cleanup() {
	[ -n "$daemon" ] && kill -TERM "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
	rm -rf "$demo"
}
trap cleanup EXIT

echo "== certificates: a private CA, a server and a client certificate"
build/rdmacp certs init "$demo/certs"
mkdir -p "$demo/module" "$demo/src"
cat >"$demo/rdmacpd.conf" <<CONF
[global]
listen = 127.0.0.1:$port
cert = $demo/certs/server.crt
key = $demo/certs/server.key
ca = $demo/certs/ca.crt

[demo]
path = $demo/module
allow = client
# Sessions run as this user (a module without 'uid' runs as the user rdmacp).
uid = $(id -u)
gid = $(id -g)
CONF
echo "== rdmacpd on 127.0.0.1:$port, module 'demo'"
build/rdmacpd --config "$demo/rdmacpd.conf" 2>"$demo/rdmacpd.log" &
daemon=$!
for _ in $(seq 50); do grep -q ready "$demo/rdmacpd.log" && break; sleep 0.1; done

client=(build/rdmacp --config /dev/null --cert "$demo/certs/client.crt"
	--key "$demo/certs/client.key" --ca "$demo/certs/ca.crt" -P "$port")
echo "== rdmacp ping: mutual TLS 1.3 and protocol version exchange"
"${client[@]}" ping 127.0.0.1

echo "== rdmacp push: 64 MiB of random data and 100 small files (tcp transport)"
head -c $((64 << 20)) /dev/urandom >"$demo/src/big.bin"
for i in $(seq 100); do head -c $((RANDOM * 3)) /dev/urandom >"$demo/src/small-$i.dat"; done
"${client[@]}" -v "$demo/src/big.bin" 127.0.0.1:demo/
"${client[@]}" "$demo"/src/small-*.dat 127.0.0.1:demo/small/

echo "== rdmacp pull: the small files back, as a tree (-r)"
mkdir -p "$demo/pulled"
"${client[@]}" -r 127.0.0.1:demo/small "$demo/pulled/"

echo "== comparing source and destination"
cmp "$demo/src/big.bin" "$demo/module/big.bin"
for i in $(seq 100); do
	cmp "$demo/src/small-$i.dat" "$demo/module/small/small-$i.dat"
	cmp "$demo/src/small-$i.dat" "$demo/pulled/small/small-$i.dat"
done
echo "all files identical; the daemon's log:"
kill -TERM "$daemon"
wait "$daemon" || true
daemon=
sed 's/^/  /' "$demo/rdmacpd.log"
echo "demo done"
