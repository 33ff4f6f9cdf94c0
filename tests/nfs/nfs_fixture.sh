#!/usr/bin/env bash
# A network file system for tests: one directory served by a private sshd
# on 127.0.0.1 and mounted twice with sshfs, as two nodes of a cluster
# mounting one NFS export (docs/SHARED.md). Used by tests/nfs/ (through
# nfs_fixture.c) and usable from any shell test:
#
#   source tests/nfs/nfs_fixture.sh
#   nfs_fixture_start            # or exits 77 with the reason
#   ... "$NFS_EXPORT" (the server's directory), "$NFS_NODE_A", "$NFS_NODE_B"
#   (nfs_fixture_stop runs at exit, or call it yourself)
#
# Run as a command: `nfs_fixture.sh start DIR WATCH_PID` sets up under DIR
# (which must exist and be empty) and prints the three paths, one a line;
# `nfs_fixture.sh stop DIR` undoes it. Everything lives under DIR: keys
# made for this run, sshd_config, the pid file, logs, the export, the
# mount points.
#
# Whatever happens, nothing is left behind: the mounts are undone and sshd
# stopped by nfs_fixture_stop (an EXIT trap when sourced), and also by a
# watchdog that outlives a test killed with SIGKILL (a CTest timeout): it
# waits for WATCH_PID to go away and then cleans up itself.
#
# The mounts behave like NFS's close-to-open consistency: no directory or
# attribute cache (dir_cache=no, attr_timeout=0, entry_timeout=0,
# negative_timeout=0), so a file another node renamed into place is seen at
# the next lookup, and auto_cache drops cached pages when a file's mtime or
# size changed at open. NFS (actimeo=0 or its default close-to-open) gives
# the same guarantees progcache relies on; sshfs, unlike NFS with a lock
# manager, takes no byte-range lock across mounts, and has no user
# extended attributes: the two things tests/nfs/ are about.

nfs__fail() { echo "nfs_fixture: $*" >&2; return 1; }

# Exit status 77 with a reason when this machine cannot run the fixture.
nfs__require() {
  local b
  for b in sshfs fusermount3 ssh ssh-keygen; do
    command -v "$b" >/dev/null || { echo "SKIPPED: $b not installed (scripts/deps.sh installs sshfs, openssh-server)" >&2; return 77; }
  done
  [ -x /usr/sbin/sshd ] || { echo "SKIPPED: /usr/sbin/sshd not installed (openssh-server)" >&2; return 77; }
  [ -c /dev/fuse ] || { echo "SKIPPED: no /dev/fuse: FUSE cannot mount here" >&2; return 77; }
  [ "$(id -u)" = 0 ] ||
    { echo "SKIPPED: the fixture runs sshd as root (for its own keys and config); run as root" >&2; return 77; }
  return 0
}

nfs__free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Whether $1 is mounted, from the mount table: stat-based checks (mountpoint)
# fail on a mount whose server is gone ("transport endpoint is not
# connected"), which is exactly the one to undo.
nfs__mounted() { awk -v m="$1" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }

nfs__unmount() {
  local m=$1
  nfs__mounted "$m" || return 0
  fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
}

# nfs__stop DIR: undo what nfs__start did under DIR. Idempotent.
nfs__stop() {
  local d=$1
  [ -n "$d" ] && [ -d "$d" ] || return 0
  nfs__unmount "$d/node-a"
  nfs__unmount "$d/node-b"
  if [ -s "$d/sshd.pid" ]; then
    kill "$(cat "$d/sshd.pid")" 2>/dev/null
    rm -f "$d/sshd.pid"
  fi
  if [ -s "$d/watchdog.pid" ]; then
    local w; w=$(cat "$d/watchdog.pid"); rm -f "$d/watchdog.pid"
    [ "$w" != "$$" ] && kill "$w" 2>/dev/null
  fi
  # Only once nothing is mounted: never remove through a live mount.
  if ! nfs__mounted "$d/node-a" && ! nfs__mounted "$d/node-b"; then
    rm -rf --one-file-system "$d"
  fi
}

nfs__mount() {
  local d=$1 port=$2 at=$3
  sshfs "root@127.0.0.1:$d/export" "$at" -p "$port" \
    -o IdentityFile="$d/client_key",UserKnownHostsFile="$d/known_hosts" \
    -o StrictHostKeyChecking=yes,BatchMode=yes,ConnectTimeout=10 \
    -o dir_cache=no,auto_cache,attr_timeout=0,entry_timeout=0,negative_timeout=0 \
    -o ServerAliveInterval=5,reconnect </dev/null >/dev/null 2>>"$d/sshfs.log"
}

# nfs__sshd DIR PORT: configure and start sshd on PORT; 0 once a login
# works, else 1 (sshd stopped).
nfs__sshd() {
  local d=$1 port=$2 i
  echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$d/host_key.pub")" >"$d/known_hosts"
  printf '%s\n' "Port $port" "ListenAddress 127.0.0.1" "HostKey $d/host_key" \
    "PidFile $d/sshd.pid" "AuthorizedKeysFile $d/authorized_keys" \
    "PermitRootLogin prohibit-password" "PasswordAuthentication no" \
    "KbdInteractiveAuthentication no" "PubkeyAuthentication yes" "UsePAM no" \
    "StrictModes no" "Subsystem sftp internal-sftp" "LogLevel ERROR" >"$d/sshd_config"
  rm -f "$d/sshd.pid"
  # Nothing started here keeps the caller's stdout or stderr open: a caller
  # that reads them to the end (popen, subprocess) would wait forever.
  /usr/sbin/sshd -D -f "$d/sshd_config" -E "$d/sshd.log" </dev/null >/dev/null 2>&1 &
  local pid=$!
  for i in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || return 1 # could not bind, or refused its config
    [ -s "$d/sshd.pid" ] && ssh -p "$port" -i "$d/client_key" -o UserKnownHostsFile="$d/known_hosts" \
      -o StrictHostKeyChecking=yes -o BatchMode=yes root@127.0.0.1 true 2>/dev/null && return 0
    sleep 0.1
  done
  kill "$pid" 2>/dev/null
  return 1
}

# nfs__start DIR WATCH_PID: serve DIR/export and mount it at DIR/node-a and
# DIR/node-b. 0, 77 (cannot run here) or 1.
nfs__start() {
  local d=$1 watch=$2 rc
  nfs__require || return $?
  mkdir -p "$d/export" "$d/node-a" "$d/node-b" /run/sshd || return 1
  chmod 0755 "$d"
  ssh-keygen -q -t ed25519 -N '' -f "$d/host_key" || return 1
  ssh-keygen -q -t ed25519 -N '' -f "$d/client_key" || return 1
  cp "$d/client_key.pub" "$d/authorized_keys"
  # The watchdog first, so that even a kill during the set-up is cleaned.
  # It re-runs this script's stop once WATCH_PID is gone.
  local self; self=$(readlink -f "${BASH_SOURCE[0]}")
  setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec bash "$2" stop "$3"' \
    nfs-watchdog "$watch" "$self" "$d" </dev/null >/dev/null 2>&1 &
  echo $! >"$d/watchdog.pid"
  # A port found free may be taken before sshd binds it (another test):
  # up to three ports.
  local port attempt
  for attempt in 1 2 3; do
    port=$(nfs__free_port) || return 1
    nfs__sshd "$d" "$port" && break
    [ "$attempt" = 3 ] && { nfs__fail "sshd did not come up: $(cat "$d/sshd.log")"; return 1; }
  done
  for n in node-a node-b; do
    if ! nfs__mount "$d" "$port" "$d/$n"; then
      # A FUSE that cannot mount is this machine's limit, not a failure.
      if grep -qiE "fuse: device not found|/dev/fuse|fusermount3?: .*(permission denied|operation not permitted)" "$d/sshfs.log"; then
        echo "SKIPPED: FUSE cannot mount here: $(tail -n1 "$d/sshfs.log")" >&2
        return 77
      fi
      nfs__fail "sshfs mount of $n failed: $(cat "$d/sshfs.log")"
      return 1
    fi
  done
  return 0
}

# The sourced interface.
nfs_fixture_start() {
  NFS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/progcache-nfs.XXXXXX") || exit 1
  trap 'nfs_fixture_stop' EXIT
  trap 'nfs_fixture_stop; exit 130' INT TERM
  local rc=0
  nfs__start "$NFS_DIR" $$ || rc=$?
  if [ $rc != 0 ]; then nfs_fixture_stop; exit $rc; fi
  NFS_EXPORT=$NFS_DIR/export NFS_NODE_A=$NFS_DIR/node-a NFS_NODE_B=$NFS_DIR/node-b
  export NFS_EXPORT NFS_NODE_A NFS_NODE_B
}
nfs_fixture_stop() { nfs__stop "${NFS_DIR:-}"; }

# The command interface (nfs_fixture.c).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
  start)
    rc=0
    nfs__start "$2" "$3" || rc=$?
    if [ $rc != 0 ]; then nfs__stop "$2"; exit $rc; fi
    printf '%s\n%s\n%s\n' "$2/export" "$2/node-a" "$2/node-b" ;;
  stop) nfs__stop "$2" ;;
  *) echo "usage: $0 start DIR WATCH_PID | stop DIR" >&2; exit 2 ;;
  esac
fi
