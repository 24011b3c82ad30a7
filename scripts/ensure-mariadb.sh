#!/usr/bin/env bash
# ensure-mariadb.sh leaves a MariaDB (or MySQL) answering on 127.0.0.1:3306 with the
# database `test` reachable as root without a password, the default of AX_MYSQL_DSN.
# Nothing to do when one answers; otherwise it starts the installed mariadbd, installing
# mariadb-server with apt-get first when it is missing.
set -euo pipefail

port_open() { (exec 3<>/dev/tcp/127.0.0.1/3306) 2>/dev/null; }

wait_port() {
	for _ in $(seq 1 60); do
		port_open && return 0
		sleep 1
	done
	return 1
}

if port_open; then
	exit 0
fi

if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
	echo "ensure-mariadb: installing mariadb-server" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq mariadb-server >/dev/null
fi

if [ ! -d /var/lib/mysql/mysql ]; then
	echo "ensure-mariadb: initialising the data directory" >&2
	mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
fi
mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true

echo "ensure-mariadb: starting mariadbd" >&2
start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql --bind-address=127.0.0.1 --port=3306
if ! wait_port; then
	echo "ensure-mariadb: mariadbd did not answer on 127.0.0.1:3306 within 60 s" >&2
	exit 1
fi
# Root over TCP without a password, and the test database.
mariadb -uroot -e "CREATE DATABASE IF NOT EXISTS test" 2>/dev/null ||
	mariadb -uroot -h127.0.0.1 -e "CREATE DATABASE IF NOT EXISTS test"
