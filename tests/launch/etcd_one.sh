# etcd_one.sh — sourced by the launch tests that need an etcd of their own (as a user's etcd
# would be): start_etcd NAME DIR starts Debian's etcd, one plain-HTTP member on free loopback
# ports, its data in DIR/etcd, waits until it answers, and sets etcd_pid and cport (its client
# port). Returns non-zero when it does not come up; the caller kills etcd_pid when done.
start_etcd() {
  local name=$1 dir=$2 pport
  read -r cport pport < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
  etcd --name "$name" --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$cport" \
    --advertise-client-urls "http://127.0.0.1:$cport" --listen-peer-urls "http://127.0.0.1:$pport" \
    --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
    --initial-cluster "$name=http://127.0.0.1:$pport" --log-level error >"$dir/etcd.log" 2>&1 &
  etcd_pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$cport/health" >/dev/null && return 0; sleep 0.2; done
  curl -sf "http://127.0.0.1:$cport/health" >/dev/null
}
