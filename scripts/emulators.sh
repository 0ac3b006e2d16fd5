#!/usr/bin/env bash
# scripts/emulators.sh: install, start and stop the local servers redokit's
# tests run against. Nothing here talks to anything but 127.0.0.1 and the
# package registries (Go module proxy, npm, Debian apt).
#
#   S3          versitygw v1.8.0 (posix backend)           Go module
#   GCS         fake-gcs-server v1.56.1 (memory backend)   Go module
#   Azure Blob  Azurite 3.37.0                              npm
#   faults      toxiproxy v2.5.0 server, proxies s3/gcs/azure in front of the above
#   MySQL sink  MariaDB from Debian (mariadb-server-core)   apt
#   PG sink     PostgreSQL from Debian (postgresql)        apt, unless found in
#               PATH or /usr/lib/postgresql/*/bin; as root it runs as the
#               postgres user (it refuses root)
#   jq          jq from Debian, not a server: emulators_tools   apt, unless in PATH
#               (a test runs it on redokit's --json)
#
# Use from a script (this is what scripts/test.sh does):
#
#   source scripts/emulators.sh
#   trap emulators_stop EXIT
#   emulators_start                 # or: emulators_start s3 toxiproxy
#
# or by hand from a terminal:
#
#   scripts/emulators.sh start [names...]   # prints the env file to source
#   source "$(scripts/emulators.sh env-file)"
#   scripts/emulators.sh env                # print the variables
#   scripts/emulators.sh stop
#
# Tools are installed once into ${REDOKIT_TOOLS:-$HOME/.cache/redokit-tools}
# (binaries carry their version in their name, so a version bump here
# reinstalls). Each start makes a fresh state folder $REDOKIT_EMU_DIR (logs,
# data, PIDs, and an `env` file another shell can source); stop kills exactly
# the PIDs this script started, never a process found by name, and deletes the
# folder. Servers bind 127.0.0.1 only, on free ports picked at start.
#
# The variables exported (and written to $REDOKIT_EMU_DIR/env) are the
# contract the Go tests read:
#   S3:    REDOKIT_S3_ENDPOINT, REDOKIT_S3_TOXI_ENDPOINT, AWS_ACCESS_KEY_ID,
#          AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_EC2_METADATA_DISABLED,
#          AWS_REQUEST_CHECKSUM_CALCULATION, AWS_RESPONSE_CHECKSUM_VALIDATION
#   GCS:   STORAGE_EMULATOR_HOST, REDOKIT_GCS_TOXI_HOST
#   Azure: REDOKIT_AZURE_ENDPOINT, REDOKIT_AZURE_TOXI_ENDPOINT,
#          AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY,
#          AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_DOMAIN,
#          AZURE_STORAGE_PROTOCOL, AZURE_STORAGE_IS_LOCAL_EMULATOR
#   toxiproxy: TOXIPROXY_ADDR
#   MariaDB:   REDOKIT_MYSQL_DSN, REDOKIT_MYSQL_ADDR
#   PostgreSQL: REDOKIT_POSTGRES_DSN
#          (postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable, the
#          superuser), REDOKIT_POSTGRES_ADDR (127.0.0.1:PORT). Every role logs
#          in without a password (trust) but one named redokit_pw, which
#          must give its password (scram-sha-256): tests create that role to
#          see a failed login's error. UTF8, C collation, no TLS.
#   REDOKIT_EMULATORS=1 when every requested server started.
#   REDOKIT_EMU_DIR: the state folder.

# Strict mode, except in an interactive shell that sources this file: there
# `set -e` would close the user's terminal at the first failing command.
if [[ $- != *i* ]]; then
	set -euo pipefail
fi

REDOKIT_VERSITYGW_VERSION=v1.8.0
REDOKIT_FAKEGCS_VERSION=v1.56.1
REDOKIT_TOXIPROXY_VERSION=v2.5.0
REDOKIT_AZURITE_VERSION=3.37.0

# The well-known, public Azurite development account and key (not a secret:
# it is printed in Azurite's own documentation).
_EMU_AZ_ACCOUNT=devstoreaccount1
_EMU_AZ_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
# Test-only S3 credentials of the local versitygw.
_EMU_S3_KEY=redokit-test
_EMU_S3_SECRET=redokit-test-secret

_EMU_ALL=(s3 gcs azure toxiproxy mariadb postgres)
# How long a server may take to answer after launch.
_EMU_READY_TIMEOUT=${REDOKIT_EMU_READY_TIMEOUT:-60}

_emu_log() { printf 'emulators: %s\n' "$*" >&2; }
_emu_now() { printf '%s' "${EPOCHREALTIME//[.,]/}"; } # microseconds

_emu_tools() { printf '%s' "${REDOKIT_TOOLS:-$HOME/.cache/redokit-tools}"; }

# --- installs -----------------------------------------------------------------

# _emu_lock DIR: serialise installs into the shared cache between concurrent
# runs (several checkouts on one machine share it). The lock is held by fd 9
# until _emu_unlock.
_emu_lock() {
	mkdir -p "$1"
	exec 9>"$1/.install.lock"
	if command -v flock >/dev/null; then
		flock -w 1800 9 || { _emu_log "timed out waiting for $1/.install.lock"; return 1; }
	fi
}
_emu_unlock() { exec 9>&-; }

# _emu_go_install NAME MODULE@VERSION BINNAME: go install into a temporary
# GOBIN and move the binary to bin/NAME-VERSION (the versioned name is the
# cheap version check).
_emu_go_install() {
	local name=$1 pkg=$2 built=$3 tools dest tmp t0
	tools=$(_emu_tools)
	dest="$tools/bin/$name-${pkg##*@}"
	[[ -x $dest ]] && return 0
	command -v go >/dev/null || { _emu_log "go is not installed: cannot build $pkg"; return 1; }
	tmp=$(mktemp -d "$tools/tmp.XXXXXX")
	_emu_log "installing $pkg (go install, a few minutes on a cold cache)"
	t0=$(_emu_now)
	# Build outside any module so the caller's go.mod has no say; keep the
	# toolchain the machine has.
	if ! (cd / && GOBIN=$tmp GOFLAGS=-buildvcs=false go install "$pkg") >"$tmp.log" 2>&1; then
		_emu_log "go install $pkg failed:"
		tail -n 30 "$tmp.log" >&2
		rm -rf "$tmp" "$tmp.log"
		return 1
	fi
	mkdir -p "$tools/bin"
	mv -f "$tmp/$built" "$dest"
	rm -rf "$tmp" "$tmp.log"
	_emu_log "installed $dest in $(((($(_emu_now) - t0)) / 1000000))s"
}

_emu_azurite_dir() { printf '%s/azurite-%s' "$(_emu_tools)" "$REDOKIT_AZURITE_VERSION"; }
_emu_azurite_main() { printf '%s/node_modules/azurite/dist/src/blob/main.js' "$(_emu_azurite_dir)"; }

_emu_npm_install_azurite() {
	local dir tmp
	dir=$(_emu_azurite_dir)
	[[ -f $(_emu_azurite_main) ]] && return 0
	command -v npm >/dev/null || { _emu_log "npm is not installed (apt-get install nodejs npm): cannot install Azurite"; return 1; }
	_emu_log "installing azurite@$REDOKIT_AZURITE_VERSION (npm, about a minute)"
	tmp=$(mktemp -d "$(_emu_tools)/tmp.XXXXXX")
	# Azurite declares node>=22 but runs on Debian's node 20 (EBADENGINE
	# warnings are expected).
	if ! (cd "$tmp" && npm install --no-audit --no-fund --save-exact --loglevel=error "azurite@$REDOKIT_AZURITE_VERSION") >"$tmp.log" 2>&1; then
		_emu_log "npm install azurite failed:"
		tail -n 30 "$tmp.log" >&2
		rm -rf "$tmp" "$tmp.log"
		return 1
	fi
	chmod 755 "$tmp" # mktemp made it private
	rm -rf "$dir"
	mv "$tmp" "$dir"
	rm -f "$tmp.log"
}

_emu_mariadbd() {
	command -v mariadbd 2>/dev/null && return 0
	[[ -x /usr/sbin/mariadbd ]] && { echo /usr/sbin/mariadbd; return 0; }
	return 1
}

# _emu_pg_bin NAME: the path of PostgreSQL program NAME (postgres, initdb,
# pg_isready, psql): beside the postgres in PATH, else in the newest
# /usr/lib/postgresql/*/bin (Debian keeps the server programs out of PATH).
_emu_pg_bin() {
	local p dir
	if p=$(command -v postgres 2>/dev/null); then
		dir=$(dirname "$(readlink -f "$p")")
		[[ -x $dir/$1 ]] && { echo "$dir/$1"; return 0; }
	fi
	for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV); do
		[[ -x $dir/postgres && -x $dir/$1 ]] && { echo "$dir/$1"; return 0; }
	done
	[[ $1 != postgres && $1 != initdb ]] && command -v "$1" 2>/dev/null && return 0
	return 1
}

# _emu_apt_install NAME...: apt-get install the Debian packages of the named
# servers whose programs are missing, in one apt run (two at once would
# contend for apt's locks).
_emu_apt_install() {
	local pkgs=() n sudo= log
	for n in "$@"; do
		case $n in
		mariadb) _emu_mariadbd >/dev/null || pkgs+=(mariadb-server-core mariadb-client-core) ;;
		postgres) { _emu_pg_bin postgres && _emu_pg_bin initdb && _emu_pg_bin pg_isready; } >/dev/null || pkgs+=(postgresql) ;;
		jq) command -v jq >/dev/null || pkgs+=(jq) ;;
		esac
	done
	((${#pkgs[@]})) || return 0
	command -v apt-get >/dev/null || { _emu_log "${pkgs[*]} missing and there is no apt-get"; return 1; }
	[[ $(id -u) == 0 ]] || sudo=sudo
	if [[ " ${pkgs[*]} " == *" postgresql "* && ! -e /etc/postgresql-common/createcluster.conf ]]; then
		# Debian's postgresql-common makes and starts a "main" cluster on
		# port 5432 when installed; the tests start their own, so ask it not
		# to (its createcluster.conf reads this folder).
		$sudo mkdir -p /etc/postgresql-common/createcluster.d &&
			echo 'create_main_cluster = false' | $sudo tee /etc/postgresql-common/createcluster.d/redokit.conf >/dev/null || true
	fi
	_emu_log "installing ${pkgs[*]} (apt)"
	log=$(mktemp "${TMPDIR:-/tmp}/redokit-apt.XXXXXX")
	if ! { $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update -qq &&
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${pkgs[@]}"; } >"$log" 2>&1; then
		_emu_log "apt-get install ${pkgs[*]} failed:"
		tail -n 30 "$log" >&2
		rm -f "$log"
		return 1
	fi
	rm -f "$log"
}

# emulators_install [names...]: install what the named servers need (default
# all), skipping what is present. Go builds run one after another (they are
# CPU-bound); npm and apt run beside them.
emulators_install() {
	local want=("$@") tools rc=0 npm_pid= apt_pid= n
	((${#want[@]})) || want=("${_EMU_ALL[@]}")
	tools=$(_emu_tools)
	mkdir -p "$tools/bin"
	_emu_lock "$tools" || return 1
	case " ${want[*]} " in
	*" azure "*) _emu_npm_install_azurite & npm_pid=$! ;;
	esac
	case " ${want[*]} " in
	*" mariadb "* | *" postgres "*) _emu_apt_install "${want[@]}" & apt_pid=$! ;;
	esac
	for n in "${want[@]}"; do
		case $n in
		s3) _emu_go_install versitygw "github.com/versity/versitygw/cmd/versitygw@$REDOKIT_VERSITYGW_VERSION" versitygw || rc=1 ;;
		gcs) _emu_go_install fake-gcs-server "github.com/fsouza/fake-gcs-server@$REDOKIT_FAKEGCS_VERSION" fake-gcs-server || rc=1 ;;
		toxiproxy) _emu_go_install toxiproxy-server "github.com/Shopify/toxiproxy/v2/cmd/server@$REDOKIT_TOXIPROXY_VERSION" server || rc=1 ;;
		azure | mariadb | postgres) ;;
		*) _emu_log "unknown server '$n' (known: ${_EMU_ALL[*]})"; rc=1 ;;
		esac
	done
	if [[ -n $npm_pid ]]; then wait "$npm_pid" || rc=1; fi
	if [[ -n $apt_pid ]]; then wait "$apt_pid" || rc=1; fi
	_emu_unlock
	return $rc
}

# emulators_tools: install the programs the tests run beside the servers,
# from Debian's apt like the servers' packages, when missing: jq
# (TestJSONTsThroughJQ feeds `redokit meta --json` through it, as
# docs/OPERATIONS.md tells operators to; under CI it fails without it).
emulators_tools() {
	_emu_apt_install jq
}

# --- ports and probes ------------------------------------------------------------

# Ports handed out by this run, so two servers never get the same one.
_EMU_USED_PORTS=" "

# _emu_python: python3 runs here (a pyenv shim without a selected version
# exists but fails). Checked once.
_emu_python() {
	if [[ -z ${_EMU_PY:-} ]]; then
		_EMU_PY=no
		if command -v python3 >/dev/null && python3 -c 'pass' >/dev/null 2>&1; then _EMU_PY=yes; fi
	fi
	[[ $_EMU_PY == yes ]]
}

# _emu_port_free PORT: nothing listens on it and it can be bound.
_emu_port_free() {
	local p=$1
	[[ $_EMU_USED_PORTS == *" $p "* ]] && return 1
	# Someone listening answers a connect.
	if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
		return 1
	fi
	# Ask the kernel whether it can be bound (catches ports bound but not yet
	# listening); skip quietly without python3.
	if _emu_python; then
		python3 -c 'import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))' "$p" 2>/dev/null || return 1
	fi
	return 0
}

# _emu_free_port: set _EMU_PORT to a free port of 127.0.0.1 (a variable, not
# output: the used-port list must survive, so no subshell). Ports are drawn below the
# kernel's ephemeral range (32768-60999 by default) so no client connection
# of the tests can be holding one when the server binds it; a server that
# still loses the race is restarted on another port by _emu_launch.
_emu_free_port() {
	local i p lo=20000 hi=32000 range
	if [[ -r /proc/sys/net/ipv4/ip_local_port_range ]]; then
		read -r range _ </proc/sys/net/ipv4/ip_local_port_range || true
		if [[ ${range:-0} -gt 21000 ]]; then hi=$((range - 1)); fi
	fi
	for ((i = 0; i < 200; i++)); do
		p=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo)))
		if _emu_port_free "$p"; then
			_EMU_USED_PORTS+="$p "
			_EMU_PORT=$p
			return 0
		fi
	done
	_emu_log "no free port found in $lo-$hi"
	return 1
}

# _emu_http METHOD PORT PATH [BODY]: print the HTTP status code of a request
# to 127.0.0.1:PORT (pure bash, so neither curl nor wget is needed).
_emu_http() {
	local method=$1 port=$2 path=$3 body=${4:-} line
	{ exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 1
	printf '%s %s HTTP/1.0\r\nHost: 127.0.0.1:%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
		"$method" "$path" "$port" "${#body}" "$body" >&3 2>/dev/null || { exec 3>&-; return 1; }
	if ! IFS= read -r -t 5 line <&3; then
		exec 3>&-
		return 1
	fi
	exec 3>&-
	line=${line#HTTP/* }
	printf '%s' "${line%% *}"
}

# --- state -------------------------------------------------------------------------

# _emu_state_dir: the state folder of this shell's emulators, made on first use.
_emu_state_dir() {
	if [[ -z ${REDOKIT_EMU_DIR:-} || ! -d ${REDOKIT_EMU_DIR:-} || ${_EMU_DIR_OWNED:-} != "${REDOKIT_EMU_DIR:-}" ]]; then
		REDOKIT_EMU_DIR=$(mktemp -d "${TMPDIR:-/tmp}/redokit-emu.XXXXXX")
		export REDOKIT_EMU_DIR
		_EMU_DIR_OWNED=$REDOKIT_EMU_DIR
		: >"$REDOKIT_EMU_DIR/pids"
		: >"$REDOKIT_EMU_DIR/env"
	fi
	printf '%s' "$REDOKIT_EMU_DIR"
}

# _emu_set NAME VALUE: export and record for the env file.
_emu_set() {
	export "$1=$2"
	printf 'export %s=%q\n' "$1" "$2" >>"$REDOKIT_EMU_DIR/env"
}

# _emu_pid NAME: the recorded PID of a started server, if it still runs.
_emu_pid() {
	local name pid
	[[ -f ${REDOKIT_EMU_DIR:-}/pids ]] || return 1
	while read -r name pid _; do
		if [[ $name == "$1" ]] && kill -0 "$pid" 2>/dev/null; then
			printf '%s' "$pid"
			return 0
		fi
	done <"$REDOKIT_EMU_DIR/pids"
	return 1
}

# _emu_port NAME: the recorded port of a started server.
_emu_port() {
	local name pid port
	[[ -f ${REDOKIT_EMU_DIR:-}/pids ]] || return 1
	while read -r name pid port; do
		[[ $name == "$1" ]] && { printf '%s' "$port"; return 0; }
	done <"$REDOKIT_EMU_DIR/pids"
	return 1
}

# --- servers ------------------------------------------------------------------------

# Each _emu_cmd_NAME PORT DATA prints nothing and execs the server in the
# foreground (the caller backgrounds it), so $! is the server's own PID.
_emu_cmd_s3() {
	export ROOT_ACCESS_KEY=$_EMU_S3_KEY ROOT_SECRET_KEY=$_EMU_S3_SECRET
	exec "$(_emu_tools)/bin/versitygw-$REDOKIT_VERSITYGW_VERSION" \
		--port "127.0.0.1:$1" --health /health --quiet posix "$2"
}
_emu_cmd_gcs() {
	# -public-host without a port: the XML read API then matches any Host
	# port, including reads through the toxiproxy port.
	exec "$(_emu_tools)/bin/fake-gcs-server-$REDOKIT_FAKEGCS_VERSION" -scheme http -host 127.0.0.1 -port "$1" \
		-public-host 127.0.0.1 -backend memory -log-level warn
}
_emu_cmd_azure() {
	exec node "$(_emu_azurite_main)" --blobHost 127.0.0.1 --blobPort "$1" --location "$2" \
		--skipApiVersionCheck --disableTelemetry --silent
}
_emu_cmd_toxiproxy() {
	export LOG_LEVEL=warn
	exec "$(_emu_tools)/bin/toxiproxy-server-$REDOKIT_TOXIPROXY_VERSION" -host 127.0.0.1 -port "$1"
}
_emu_cmd_mariadb() {
	# --no-defaults must come first. Durability settings are relaxed for
	# speed: the tests check the sink's logic, not InnoDB's fsyncs.
	exec "$(_emu_mariadbd)" --no-defaults --user="$(id -un)" --datadir="$2/data" --port="$1" --bind-address=127.0.0.1 \
		--socket="$2/mysqld.sock" --pid-file="$2/mysqld.pid" --log-error="$2/error.log" --skip-name-resolve \
		--skip-log-bin --innodb-buffer-pool-size=64M --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0
}
_emu_cmd_postgres() {
	# Durability stays as shipped (fsync, synchronous_commit and full-page
	# writes on): the PostgreSQL sink's commits are few and large, so it
	# costs the tests little, and the server behaves as a real one does.
	# -k puts the Unix socket in the state folder, not /var/run/postgresql.
	# wal_level=logical and the slots and senders are for examples/pgcdc's
	# drill, which reads the server's changes through logical replication.
	local as=() u
	u=$(_emu_pg_user) || exit 1
	[[ -z $u ]] || as=(setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups --)
	exec "${as[@]}" "$(_emu_pg_bin postgres)" -D "$2/data" -p "$1" -k "$2" -c listen_addresses=127.0.0.1 \
		-c shared_buffers=64MB -c max_connections=200 \
		-c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20
}

# _emu_pg_user: the user PostgreSQL runs as when this script runs as root
# (postgres refuses root: REDOKIT_PG_OS_USER, default postgres, which
# Debian's package creates); nothing otherwise, as the server then runs as
# the caller.
_emu_pg_user() {
	[[ $(id -u) == 0 ]] || return 0
	local u=${REDOKIT_PG_OS_USER:-postgres}
	if ! id -u "$u" >/dev/null 2>&1; then
		_emu_log "postgres refuses to run as root, and there is no user '$u' to run it as: create one (useradd --system $u) or set REDOKIT_PG_OS_USER"
		return 1
	fi
	command -v setpriv >/dev/null || { _emu_log "setpriv (util-linux) is missing: cannot run postgres as '$u'"; return 1; }
	printf '%s' "$u"
}

_emu_version() {
	case $1 in
	s3) echo "versitygw $REDOKIT_VERSITYGW_VERSION" ;;
	gcs) echo "fake-gcs-server $REDOKIT_FAKEGCS_VERSION" ;;
	azure) echo "azurite $REDOKIT_AZURITE_VERSION" ;;
	toxiproxy) echo "toxiproxy $REDOKIT_TOXIPROXY_VERSION" ;;
	mariadb) echo "mariadb $("$(_emu_mariadbd)" --version 2>/dev/null | sed -n 's/.*Ver \([0-9.]*\).*/\1/p')" ;;
	postgres) echo "postgres $(_emu_pg_version)" ;;
	esac
}

# _emu_ready NAME PORT DATA: one readiness probe.
_emu_ready() {
	local code
	case $1 in
	s3) [[ $(_emu_http GET "$2" /health) == 200 ]] ;;
	gcs) [[ $(_emu_http GET "$2" /_internal/healthcheck) == 200 ]] ;;
	azure) code=$(_emu_http GET "$2" "/$_EMU_AZ_ACCOUNT?comp=list") && [[ -n $code ]] ;; # any answer (403)
	toxiproxy) [[ $(_emu_http GET "$2" /version) == 200 ]] ;;
	mariadb) mariadb --no-defaults --protocol=TCP -h127.0.0.1 -P"$2" -uroot -e 'SELECT 1' >/dev/null 2>&1 ;;
	postgres) "$(_emu_pg_bin pg_isready)" -q -h 127.0.0.1 -p "$2" -U postgres -d postgres -t 2 ;;
	esac
}

# _emu_prepare NAME DATA: per-start preparation of the data folder.
_emu_prepare() {
	case $1 in
	mariadb) _emu_mariadb_datadir "$2/data" ;;
	postgres) _emu_postgres_datadir "$2" ;;
	s3 | azure) _emu_memdir "$2" ;;
	*) mkdir -p "$2" ;;
	esac
}

# _emu_memdir DATA: make DATA a link to a folder in /dev/shm when that is a
# writable tmpfs with user xattrs (versitygw keeps metadata in them): the
# object servers fsync every object, and on disk that made the tests' bulk
# puts 3x slower. Falls back to a plain folder (also when python3, which
# checks the xattrs, is missing). REDOKIT_EMU_ON_DISK=1 opts out.
_emu_memdir() {
	local data=$1 shm
	if [[ -z ${REDOKIT_EMU_ON_DISK:-} && -d /dev/shm && -w /dev/shm ]] &&
		shm=$(mktemp -d /dev/shm/redokit-emu.XXXXXX 2>/dev/null); then
		if _emu_python && python3 -c 'import os,sys; os.setxattr(sys.argv[1], "user.redokit", b"1")' "$shm" 2>/dev/null; then
			printf '%s\n' "$shm" >>"$REDOKIT_EMU_DIR/cleanup"
			ln -s "$shm" "$data"
			return 0
		fi
		rm -rf "$shm"
	fi
	mkdir -p "$data"
}

# The pristine MariaDB data folder is made once per MariaDB version into the
# tool cache and copied for each start (faster than mariadb-install-db).
_emu_mariadb_datadir() {
	local dest=$1 tools ver tmpl tmp
	tools=$(_emu_tools)
	ver=$("$(_emu_mariadbd)" --version 2>/dev/null | sed -n 's/.*Ver \([0-9.]*\).*/\1/p')
	tmpl="$tools/mariadb-datadir-${ver:-unknown}"
	if [[ ! -d $tmpl ]]; then
		tmp=$(mktemp -d "$tools/tmp.XXXXXX")
		if ! mariadb-install-db --no-defaults --user="$(id -un)" --datadir="$tmp/data" --auth-root-authentication-method=normal \
			--skip-test-db --skip-name-resolve >"$tmp.log" 2>&1; then
			_emu_log "mariadb-install-db failed:"
			tail -n 30 "$tmp.log" >&2
			rm -rf "$tmp" "$tmp.log"
			return 1
		fi
		rm -f "$tmp.log"
		mv -T "$tmp/data" "$tmpl" 2>/dev/null || true # another run may have won
		rm -rf "$tmp"
	fi
	mkdir -p "$(dirname "$dest")"
	cp -a "$tmpl" "$dest"
}

_emu_pg_version() { "$(_emu_pg_bin postgres)" --version 2>/dev/null | sed -n 's/.*PostgreSQL) \([0-9.]*\).*/\1/p'; }

# _emu_postgres_datadir DIR: DIR/data, a copy of a pristine cluster made
# once per PostgreSQL version into the tool cache (initdb takes seconds, a
# copy a fraction), with this script's pg_hba.conf. DIR is the socket
# folder. As root, the cluster and DIR belong to the user the server runs
# as, and the state folder becomes traversable (711) so that it reaches DIR.
_emu_postgres_datadir() {
	local dir=$1 u tools ver tmpl tmp
	u=$(_emu_pg_user) || return 1
	tools=$(_emu_tools)
	ver=$(_emu_pg_version)
	tmpl="$tools/postgres-datadir-${ver:-unknown}"
	if [[ ! -d $tmpl ]]; then
		# Made outside the tool cache: as root, initdb runs as $u, who may
		# not reach $HOME.
		tmp=$(mktemp -d "${TMPDIR:-/tmp}/redokit-pginit.XXXXXX")
		[[ -z $u ]] || chown "$u:" "$tmp"
		# UTF8 with the C collation: encoding checked, ordering by bytes
		# (the same on every machine, no locale to install). The superuser
		# is "postgres" whoever runs it.
		if ! (
			as=()
			[[ -z $u ]] || as=(setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups --)
			cd / && "${as[@]}" "$(_emu_pg_bin initdb)" -D "$tmp/data" --username=postgres --encoding=UTF8 --no-locale --auth=trust
		) >"$tmp.log" 2>&1; then
			_emu_log "initdb failed:"
			tail -n 30 "$tmp.log" >&2
			rm -rf "$tmp" "$tmp.log"
			return 1
		fi
		rm -f "$tmp.log"
		mv -T "$tmp/data" "$tmpl" 2>/dev/null || true # another run may have won
		rm -rf "$tmp"
	fi
	mkdir -p "$dir"
	cp -a "$tmpl" "$dir/data"
	# Only 127.0.0.1 listens (and the socket in DIR). Rules match in order.
	cat >"$dir/data/pg_hba.conf" <<-'HBA'
		# TYPE  DATABASE  USER        ADDRESS       METHOD
		local   all       all                       trust
		host    all       redokit_pw  127.0.0.1/32  scram-sha-256
		host    all       all         127.0.0.1/32  trust
	HBA
	if [[ -n $u ]]; then
		chown -R "$u:" "$dir"
		chmod 700 "$dir/data"
		chmod 711 "$REDOKIT_EMU_DIR"
	fi
}

# _emu_launch NAME: start one server in the background on a free port.
# Records "name pid port" and the launch time; does not wait.
declare -gA _EMU_T0=() _EMU_TRIES=()
_emu_launch() {
	local name=$1 dir port data
	_emu_state_dir >/dev/null
	dir=$REDOKIT_EMU_DIR
	_emu_free_port || return 1
	port=$_EMU_PORT
	data="$dir/$name-data"
	rm -rf "$data"
	_emu_prepare "$name" "$data" || return 1
	_EMU_T0[$name]=$(_emu_now)
	# stdin and output away from the caller: a server holding the caller's
	# stdout would hang a `$(...)` or a CI pipe.
	("_emu_cmd_$name" "$port" "$data") </dev/null >"$dir/$name.log" 2>&1 &
	printf '%s %s %s\n' "$name" "$!" "$port" >>"$dir/pids"
}

# _emu_wait NAME: wait until the server answers. On a lost port race it
# relaunches on another port (at most 3 times).
_emu_wait() {
	local name=$1 pid port deadline
	port=$(_emu_port "$name")
	deadline=$((SECONDS + _EMU_READY_TIMEOUT))
	while ((SECONDS < deadline)); do
		if ! pid=$(_emu_pid "$name"); then
			if grep -qsiE 'address already in use|EADDRINUSE|bind.*in use' "$REDOKIT_EMU_DIR/$name.log" "$REDOKIT_EMU_DIR/$name-data/error.log" &&
				((${_EMU_TRIES[$name]:-0} < 3)); then
				_EMU_TRIES[$name]=$((${_EMU_TRIES[$name]:-0} + 1))
				_emu_log "$name lost port $port to another process; retrying on another port"
				_emu_forget "$name"
				_emu_launch "$name" || return 1
				port=$(_emu_port "$name")
				deadline=$((SECONDS + _EMU_READY_TIMEOUT))
				continue
			fi
			_emu_log "$name exited before answering on 127.0.0.1:$port; log tail:"
			tail -n 30 "$REDOKIT_EMU_DIR/$name.log" >&2 2>/dev/null || true
			[[ $name != mariadb ]] || tail -n 30 "$REDOKIT_EMU_DIR/$name-data/error.log" >&2 2>/dev/null || true
			return 1
		fi
		if _emu_ready "$name" "$port"; then
			local us=$(($(_emu_now) - ${_EMU_T0[$name]}))
			printf 'emulators: %-9s %-26s 127.0.0.1:%-6s ready in %d.%02ds\n' "$name" "$(_emu_version "$name")" "$port" \
				$((us / 1000000)) $((us % 1000000 / 10000)) >&2
			return 0
		fi
		sleep 0.1
	done
	_emu_log "$name did not answer on 127.0.0.1:$port within ${_EMU_READY_TIMEOUT}s; log tail:"
	tail -n 30 "$REDOKIT_EMU_DIR/$name.log" >&2 2>/dev/null || true
	return 1
}

# _emu_forget NAME: drop a dead server's line from the PID file.
_emu_forget() {
	local f="$REDOKIT_EMU_DIR/pids"
	grep -v "^$1 " "$f" >"$f.tmp" || true
	mv "$f.tmp" "$f"
}

# _emu_kill NAME PID: stop one server we started: TERM, wait up to 10 s,
# then KILL.
_emu_kill() {
	local pid=$2 i sig=TERM
	# PostgreSQL's TERM waits for every client to disconnect; INT is its
	# fast shutdown (clients cut off, a clean checkpoint).
	[[ $1 != postgres ]] || sig=INT
	kill -0 "$pid" 2>/dev/null || return 0
	kill -"$sig" "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	_emu_log "$1 (pid $pid) ignored SIG$sig for 10s; killing it"
	kill -KILL "$pid" 2>/dev/null || true
}

# _emu_toxi_proxy NAME UPSTREAM_PORT: create a proxy named NAME in front of
# the upstream, on a free port; set _EMU_PORT to the listen port.
_emu_toxi_proxy() {
	local name=$1 up=$2 tport i port code
	tport=$(_emu_port toxiproxy)
	for ((i = 0; i < 5; i++)); do
		_emu_free_port || return 1
		port=$_EMU_PORT
		code=$(_emu_http POST "$tport" /proxies \
			"{\"name\":\"$name\",\"listen\":\"127.0.0.1:$port\",\"upstream\":\"127.0.0.1:$up\",\"enabled\":true}") || code=
		case $code in
		201)
			return 0
			;;
		409) # exists already (a second emulators_start): replace it
			_emu_http DELETE "$tport" "/proxies/$name" >/dev/null || true ;;
		esac
	done
	_emu_log "toxiproxy: could not create proxy $name (last HTTP status ${code:-none})"
	return 1
}

# _emu_export NAME: export a started server's variables.
_emu_export() {
	local name=$1 port tp
	port=$(_emu_port "$name")
	case $name in
	s3)
		_emu_set REDOKIT_S3_ENDPOINT "http://127.0.0.1:$port"
		_emu_set AWS_ACCESS_KEY_ID "$_EMU_S3_KEY"
		_emu_set AWS_SECRET_ACCESS_KEY "$_EMU_S3_SECRET"
		_emu_set AWS_REGION us-east-1
		_emu_set AWS_EC2_METADATA_DISABLED true
		_emu_set AWS_REQUEST_CHECKSUM_CALCULATION when_required
		_emu_set AWS_RESPONSE_CHECKSUM_VALIDATION when_required
		;;
	gcs)
		_emu_set STORAGE_EMULATOR_HOST "127.0.0.1:$port"
		;;
	azure)
		_emu_set REDOKIT_AZURE_ENDPOINT "http://127.0.0.1:$port/$_EMU_AZ_ACCOUNT"
		_emu_set AZURE_STORAGE_ACCOUNT "$_EMU_AZ_ACCOUNT"
		_emu_set AZURE_STORAGE_KEY "$_EMU_AZ_KEY"
		_emu_set AZURE_STORAGE_CONNECTION_STRING "DefaultEndpointsProtocol=http;AccountName=$_EMU_AZ_ACCOUNT;AccountKey=$_EMU_AZ_KEY;BlobEndpoint=http://127.0.0.1:$port/$_EMU_AZ_ACCOUNT;"
		# gocloud's azureblob (v0.48+) needs all three beside the key.
		_emu_set AZURE_STORAGE_DOMAIN "127.0.0.1:$port"
		_emu_set AZURE_STORAGE_PROTOCOL http
		_emu_set AZURE_STORAGE_IS_LOCAL_EMULATOR true
		;;
	toxiproxy)
		_emu_set TOXIPROXY_ADDR "127.0.0.1:$port"
		;;
	mariadb)
		_emu_set REDOKIT_MYSQL_ADDR "127.0.0.1:$port"
		_emu_set REDOKIT_MYSQL_DSN "root@tcp(127.0.0.1:$port)/redokit_test?multiStatements=true&parseTime=true"
		;;
	postgres)
		_emu_set REDOKIT_POSTGRES_ADDR "127.0.0.1:$port"
		_emu_set REDOKIT_POSTGRES_DSN "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
		;;
	esac
}

# _emu_proxies: put toxiproxy proxies (s3, gcs, azure) in front of whichever
# of those run, and export their addresses.
_emu_proxies() {
	local name up tp rc=0
	_emu_pid toxiproxy >/dev/null || return 0
	for name in s3 gcs azure; do
		_emu_pid "$name" >/dev/null || continue
		up=$(_emu_port "$name")
		_emu_toxi_proxy "$name" "$up" || { rc=1; continue; }
		tp=$_EMU_PORT
		case $name in
		s3) _emu_set REDOKIT_S3_TOXI_ENDPOINT "http://127.0.0.1:$tp" ;;
		gcs) _emu_set REDOKIT_GCS_TOXI_HOST "127.0.0.1:$tp" ;;
		azure) _emu_set REDOKIT_AZURE_TOXI_ENDPOINT "http://127.0.0.1:$tp/$_EMU_AZ_ACCOUNT" ;;
		esac
	done
	return $rc
}

# emulators_start [names...]: install what is missing, start the named
# servers (default: all of s3 gcs azure toxiproxy mariadb postgres), wait until each
# answers, and export their variables. Returns non-zero if any failed (the
# others keep running; call emulators_stop in any case).
emulators_start() {
	local want=("$@") started=() n rc=0 t0
	((${#want[@]})) || want=("${_EMU_ALL[@]}")
	t0=$(_emu_now)
	for n in "${want[@]}"; do
		case " ${_EMU_ALL[*]} " in
		*" $n "*) ;;
		*) _emu_log "unknown server '$n' (known: ${_EMU_ALL[*]})"; return 1 ;;
		esac
	done
	emulators_install "${want[@]}" || return 1
	_emu_state_dir >/dev/null
	unset REDOKIT_EMULATORS
	# Launch everything first, then wait: the startups overlap.
	for n in "${want[@]}"; do
		if _emu_pid "$n" >/dev/null; then
			_emu_log "$n already runs (pid $(_emu_pid "$n"))"
			continue
		fi
		_emu_launch "$n" && started+=("$n") || rc=1
	done
	for n in "${started[@]}"; do
		if _emu_wait "$n"; then
			_emu_export "$n"
		else
			rc=1
		fi
	done
	if [[ " ${started[*]} " == *" mariadb "* ]] && _emu_pid mariadb >/dev/null; then
		mariadb --no-defaults --protocol=TCP -h127.0.0.1 -P"$(_emu_port mariadb)" -uroot \
			-e 'CREATE DATABASE IF NOT EXISTS redokit_test' || { _emu_log "mariadb: CREATE DATABASE failed"; rc=1; }
	fi
	_emu_proxies || rc=1
	if ((rc == 0)); then
		_emu_set REDOKIT_EMULATORS 1
	fi
	_emu_set REDOKIT_EMU_DIR "$REDOKIT_EMU_DIR"
	local us=$(($(_emu_now) - t0))
	_emu_log "$( ((rc == 0)) && echo "all up" || echo "SOME FAILED") in $((us / 1000000)).$((us % 1000000 / 10000))s; env: $REDOKIT_EMU_DIR/env"
	return $rc
}

# emulators_stop: stop exactly the servers this state folder started, remove
# their data, and unset the variables. Safe to call twice and from a trap.
emulators_stop() {
	local dir=${REDOKIT_EMU_DIR:-} name pid port var
	[[ -n $dir && -d $dir ]] || return 0
	if [[ -f $dir/pids ]]; then
		# Reverse order: toxiproxy before its upstreams.
		while read -r name pid port; do
			[[ -n $pid ]] && _emu_kill "$name" "$pid"
		done < <(tac "$dir/pids")
	fi
	if [[ -f $dir/env ]]; then
		while read -r _ var; do
			unset "${var%%=*}"
		done <"$dir/env"
	fi
	if [[ -f $dir/cleanup ]]; then
		while read -r var; do
			[[ $var == /dev/shm/redokit-emu.* ]] && rm -rf "$var"
		done <"$dir/cleanup"
	fi
	if [[ -n ${REDOKIT_EMU_KEEP_LOGS:-} ]]; then
		_emu_log "logs kept in $dir (REDOKIT_EMU_KEEP_LOGS)"
		rm -rf "$dir"/*-data
	else
		rm -rf "$dir"
	fi
	unset REDOKIT_EMU_DIR _EMU_DIR_OWNED
	_EMU_USED_PORTS=" "
	return 0
}

# --- direct use ---------------------------------------------------------------------

# The pointer to the state folder of `emulators.sh start` run by hand, so a
# later `emulators.sh stop` in another shell finds it.
_emu_pointer() { printf '%s/redokit-emu.current.%s' "${TMPDIR:-/tmp}" "$(id -u)"; }

_emu_main() {
	local cmd=${1:-}
	shift || true
	case $cmd in
	start)
		# Started by hand, the servers outlive this script; stop them with
		# `emulators.sh stop`.
		if [[ -f $(_emu_pointer) ]] && [[ -d $(cat "$(_emu_pointer)") ]]; then
			_emu_log "emulators from $(cat "$(_emu_pointer)") still recorded; run '$0 stop' first"
			return 1
		fi
		local rc=0
		emulators_start "$@" || rc=$?
		printf '%s\n' "$REDOKIT_EMU_DIR" >"$(_emu_pointer)"
		echo "source $REDOKIT_EMU_DIR/env"
		return $rc
		;;
	stop)
		if [[ -z ${REDOKIT_EMU_DIR:-} && -f $(_emu_pointer) ]]; then
			REDOKIT_EMU_DIR=$(cat "$(_emu_pointer)")
		fi
		_EMU_DIR_OWNED=${REDOKIT_EMU_DIR:-}
		emulators_stop
		rm -f "$(_emu_pointer)"
		;;
	env | env-file)
		local dir=${REDOKIT_EMU_DIR:-}
		[[ -n $dir ]] || dir=$(cat "$(_emu_pointer)" 2>/dev/null) || true
		[[ -n $dir && -f $dir/env ]] || { _emu_log "no emulators running (start them with '$0 start')"; return 1; }
		if [[ $cmd == env ]]; then cat "$dir/env"; else echo "$dir/env"; fi
		;;
	install)
		emulators_install "$@"
		;;
	tools)
		emulators_tools
		;;
	*)
		echo "usage: $0 start [s3] [gcs] [azure] [toxiproxy] [mariadb] [postgres] | stop | env | env-file | install [names...] | tools" >&2
		echo "       or: source $0; emulators_start [names...]; trap emulators_stop EXIT" >&2
		return 2
		;;
	esac
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	_emu_main "$@"
fi
