#!/usr/bin/env bash
# ensure-mariadb.sh leaves a MariaDB (or MySQL) answering on 127.0.0.1:3306 with a database
# `test` that root reaches over TCP without a password: the default of AX_MYSQL_DSN,
# root@tcp(127.0.0.1:3306)/test. `make db` and `make test` run it; CI runs it on a fresh
# Debian machine.
#
#   - A server answers already: make sure root gets in over TCP and `test` exists; done.
#   - Otherwise: install mariadb-server with apt-get when no mariadbd is installed, create
#     the data directory when it is empty, start mariadbd in the background with
#     start-stop-daemon, wait until it answers, then the same checks as above.
#
# It is idempotent and needs root for anything but the first case. Nothing here prints a
# DSN. Environment (for tests of this script; the defaults are what the project uses):
#   AX_MYSQL_PORT     port to serve on 127.0.0.1 (3306)
#   AX_MYSQL_DATADIR  data directory (/var/lib/mysql)
#   AX_MYSQL_DSN      when it names a server other than 127.0.0.1:$AX_MYSQL_PORT, do nothing
set -euo pipefail

PORT=${AX_MYSQL_PORT:-3306}
DATADIR=${AX_MYSQL_DATADIR:-/var/lib/mysql}
RUNDIR=/run/mysqld
if [ "$PORT" = 3306 ]; then
	SOCKET=$RUNDIR/mysqld.sock # Debian's default, where the client looks
else
	SOCKET=$RUNDIR/mysqld-$PORT.sock
fi
PIDFILE=$RUNDIR/ax-mariadbd-$PORT.pid
LOGFILE=/var/log/mysql/ax-mariadbd-$PORT.log
WAIT=${AX_MYSQL_WAIT:-90}

log() { echo "ensure-mariadb: $*" >&2; }
die() {
	log "$*"
	exit 1
}

# A DSN naming another server is not ours to manage. (Never print it: it may hold a password.)
if [ -n "${AX_MYSQL_DSN:-}" ]; then
	case "$AX_MYSQL_DSN" in
	*"tcp(127.0.0.1:$PORT)"* | *"tcp(localhost:$PORT)"*) ;;
	*)
		log "AX_MYSQL_DSN names another server; nothing to do"
		exit 0
		;;
	esac
fi

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }

client() { command -v mariadb || command -v mysql || true; }

# sql_tcp runs SQL as root over TCP without a password, as the tests connect.
sql_tcp() { "$(client)" --protocol=TCP -h127.0.0.1 -P"$PORT" -uroot --connect-timeout=5 -e "$1"; }

# sql_socket runs SQL as root over the Unix socket: the OS root gets in there through
# unix_socket authentication, Debian's default for root@localhost.
sql_socket() { "$(client)" --protocol=SOCKET -S"$SOCKET" -uroot --connect-timeout=5 -e "$1"; }

ensure_access() {
	if [ -z "$(client)" ]; then
		log "no mariadb/mysql client to check root access and the test database; install mariadb-client"
		return 0
	fi
	if sql_tcp "CREATE DATABASE IF NOT EXISTS test" >/dev/null 2>&1; then
		return 0
	fi
	log "root cannot log in over TCP without a password; allowing it through the socket"
	local grant="CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
		GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
		CREATE DATABASE IF NOT EXISTS test;"
	sql_socket "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket; $grant" 2>/dev/null ||
		sql_socket "ALTER USER 'root'@'localhost' IDENTIFIED BY ''; $grant" ||
		die "could not give root access over TCP (the socket $SOCKET refused root too)"
	sql_tcp "SELECT 1" >/dev/null || die "root still cannot log in over TCP on 127.0.0.1:$PORT"
}

if port_open; then
	ensure_access
	exit 0
fi

[ "$(id -u)" = 0 ] || die "nothing answers on 127.0.0.1:$PORT and starting a server needs root; run: sudo bash $0"

find_daemon() {
	local d
	for d in "$(command -v mariadbd || true)" /usr/sbin/mariadbd "$(command -v mysqld || true)" /usr/sbin/mysqld; do
		if [ -n "$d" ] && [ -x "$d" ]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

# retry runs a command up to 3 times, for apt's network hiccups.
retry() {
	local i
	for i in 1 2 3; do
		"$@" && return 0
		log "attempt $i of: $* failed"
		sleep $((i * 5))
	done
	return 1
}

if ! DAEMON=$(find_daemon); then
	log "installing mariadb-server with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	# Keep the package from starting the service itself (no init system in a container,
	# and we start it below): invoke-rc.d obeys policy-rc.d.
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod +x /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	retry apt-get update -qq || die "apt-get update failed"
	retry apt-get install -y -qq --no-install-recommends mariadb-server mariadb-client >/dev/null ||
		die "apt-get install mariadb-server failed"
	rm -f /usr/sbin/policy-rc.d
	trap - EXIT
	DAEMON=$(find_daemon) || die "mariadb-server is installed but no mariadbd was found"
fi

id mysql >/dev/null 2>&1 || die "no mysql user (the mariadb-server package creates it)"
mkdir -p "$RUNDIR" "$(dirname "$LOGFILE")"
chown mysql:mysql "$RUNDIR" "$(dirname "$LOGFILE")"

if [ ! -d "$DATADIR/mysql" ]; then
	log "initialising the data directory $DATADIR"
	mkdir -p "$DATADIR"
	chown mysql:mysql "$DATADIR"
	INSTALL_DB=$(command -v mariadb-install-db || command -v mysql_install_db || true)
	[ -n "$INSTALL_DB" ] || die "no mariadb-install-db to initialise $DATADIR"
	# Root may log in with an empty password (and as the OS root through the socket).
	"$INSTALL_DB" --user=mysql --datadir="$DATADIR" --auth-root-authentication-method=normal \
		--skip-test-db >"$LOGFILE.install" 2>&1 ||
		"$INSTALL_DB" --user=mysql --datadir="$DATADIR" >>"$LOGFILE.install" 2>&1 ||
		die "initialising $DATADIR failed; see $LOGFILE.install"
fi

log "starting $DAEMON on 127.0.0.1:$PORT"
start-stop-daemon --start --quiet --oknodo --background --make-pidfile --pidfile "$PIDFILE" \
	--exec "$DAEMON" -- --user=mysql --datadir="$DATADIR" --port="$PORT" --bind-address=127.0.0.1 \
	--socket="$SOCKET" --pid-file="$RUNDIR/mariadbd-$PORT.pid" --log-error="$LOGFILE" ||
	die "start-stop-daemon could not start $DAEMON"

for _ in $(seq 1 "$WAIT"); do
	if port_open; then
		ensure_access
		log "ready on 127.0.0.1:$PORT"
		exit 0
	fi
	if ! start-stop-daemon --status --pidfile "$PIDFILE"; then
		tail -n 30 "$LOGFILE" >&2 2>/dev/null || true
		die "$DAEMON exited before answering; its log is above ($LOGFILE)"
	fi
	sleep 1
done
tail -n 30 "$LOGFILE" >&2 2>/dev/null || true
die "$DAEMON did not answer on 127.0.0.1:$PORT within $WAIT s; see $LOGFILE"
