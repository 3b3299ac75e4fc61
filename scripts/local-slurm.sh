#!/usr/bin/env bash
# local-slurm.sh - a real, self-contained Slurm cluster on loopback for ddlbench.
#
# Usage: scripts/local-slurm.sh up [--accounting] | down [--purge] | status | env
#
# Runs munged, slurmctld and two emulated slurmd nodes (n1, n2) on 127.0.0.1; with
# --accounting (or DDLBENCH_SLURM_ACCOUNTING=1) also mariadbd and slurmdbd, so sacct answers.
# Everything (config, munge key and socket, state, spool, logs, pid files) lives
# in one scratch directory: ${DDLBENCH_SLURM_DIR:-/tmp/ddlbench-slurm}.
# Clients find the cluster through SLURM_CONF:  eval "$(scripts/local-slurm.sh env)"
#
# Tunables (environment):
#   DDLBENCH_SLURM_DIR          scratch directory (absolute or relative, no whitespace)
#   DDLBENCH_SLURM_CTLD_PORT    slurmctld port (default 10817 for the default dir,
#                               otherwise derived from the dir path in 7000-11799)
#   DDLBENCH_SLURM_NODE_PORT    first slurmd port; n2 uses the next one (default 10001
#                               for the default dir, otherwise slurmctld port + 1)
#   DDLBENCH_SLURM_MEM_MB       RealMemory of each emulated node in MB (default 1000)
#   DDLBENCH_SLURM_UP_TIMEOUT   seconds to wait for both nodes to be idle (default 30)
#   DDLBENCH_SLURM_STOP_TIMEOUT seconds to wait for a daemon to exit before SIGKILL (default 10)
#   DDLBENCH_SLURM_ACCOUNTING   1: same as 'up --accounting'
#   DDLBENCH_SLURM_DBD_PORT     slurmdbd port with accounting; mariadbd takes the next one
#                               (default derived from the dir path in 3400-6599)
set -euo pipefail

PROG=$(basename "$0")
SELF="$(cd "$(dirname "$0")" && pwd)/$PROG"
NODES=(n1 n2)
MEM_MB=${DDLBENCH_SLURM_MEM_MB:-1000}
UP_TIMEOUT=${DDLBENCH_SLURM_UP_TIMEOUT:-30}
STOP_TIMEOUT=${DDLBENCH_SLURM_STOP_TIMEOUT:-10}

die() { echo "$PROG: error: $*" >&2; exit 2; }
say() { echo "$PROG: $*"; }

usage() {
    cat <<EOF
Usage: $PROG up [--accounting] | down [--purge] | status | env

  up              start munged, slurmctld and slurmd nodes n1, n2 on 127.0.0.1
  up --accounting also start mariadbd and slurmdbd (job accounting: sacct answers);
                  the same as DDLBENCH_SLURM_ACCOUNTING=1
  down [--purge]  stop the daemons (by pid); --purge also removes the scratch dir
  status          report daemon liveness and sinfo; exit 0 if up, 1 otherwise
  env             print shell exports for clients: eval "\$($PROG env)"

Scratch dir: \${DDLBENCH_SLURM_DIR:-/tmp/ddlbench-slurm}
EOF
}

# --- paths -------------------------------------------------------------------

resolve_dir() {
    local d=${DDLBENCH_SLURM_DIR:-/tmp/ddlbench-slurm}
    [[ -n $d ]] || die "DDLBENCH_SLURM_DIR is empty"
    [[ $d =~ [[:space:]] ]] && die "scratch dir path must not contain whitespace: '$d'"
    [[ $d == /* ]] || d="$PWD/$d"
    # normalise trailing slashes and '//' without requiring the path to exist
    d=$(printf '%s' "$d" | sed -e 's#//*#/#g' -e 's#\(.\)/$#\1#')
    [[ $d == / ]] && die "refusing to use / as the scratch dir"
    [[ $d =~ ^[A-Za-z0-9_./+=@%:,-]+$ ]] ||
        die "scratch dir path has characters Slurm config cannot carry: '$d'"
    DIR=$d
    CONF="$DIR/slurm.conf"
    RUN="$DIR/run"
    LOG="$DIR/log"
    STATE="$DIR/state"
    SPOOL="$DIR/spool"
    MUNGE="$DIR/munge"
    MUNGE_KEY="$MUNGE/munge.key"
    MUNGE_SOCK="$MUNGE/munge.socket"
    JOBCOMP="$DIR/jobcomp.txt"
    DBD_CONF="$DIR/slurmdbd.conf"
    DB_DIR="$DIR/mysql"
    DB_SOCK="$DB_DIR/mysqld.sock"
    ACCT_MARK="$DIR/accounting"
    # Ports: fixed for the default dir; for any other dir derived from its path
    # so that clusters in different dirs (parallel test runs) do not collide. All below
    # 12000, far from the kernel's ephemeral range from which ddlbench's jobs get their ports.
    local base
    if [[ $DIR == /tmp/ddlbench-slurm ]]; then
        CTLD_PORT=${DDLBENCH_SLURM_CTLD_PORT:-10817}
        NODE_PORT=${DDLBENCH_SLURM_NODE_PORT:-10001}
    else
        base=$(printf '%s' "$DIR" | cksum | cut -d' ' -f1)
        base=$((7000 + (base % 1600) * 3))
        CTLD_PORT=${DDLBENCH_SLURM_CTLD_PORT:-$base}
        NODE_PORT=${DDLBENCH_SLURM_NODE_PORT:-$((CTLD_PORT + 1))}
    fi
    # accounting daemons: a second range, below the first, two ports per dir
    base=$(printf '%s' "$DIR" | cksum | cut -d' ' -f1)
    DBD_PORT=${DDLBENCH_SLURM_DBD_PORT:-$((3400 + (base % 1600) * 2))}
    DB_PORT=$((DBD_PORT + 1))
    [[ $CTLD_PORT =~ ^[0-9]+$ && $NODE_PORT =~ ^[0-9]+$ && $DBD_PORT =~ ^[0-9]+$ ]] ||
        die "ports must be numbers"
}

# true if something already listens on 127.0.0.1:$1
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pidfile_of() {
    case $1 in
        munged) echo "$RUN/munged.pid" ;;
        slurmctld) echo "$RUN/slurmctld.pid" ;;
        slurmdbd) echo "$RUN/slurmdbd.pid" ;;
        mariadbd) echo "$RUN/mariadbd.pid" ;;
        slurmd-*) echo "$RUN/$1.pid" ;;
        *) die "unknown daemon $1" ;;
    esac
}

# the daemons of this cluster, in start order; the accounting ones only when it has accounting
daemons() {
    local n
    echo munged
    if accounting_on; then printf "%s\n" mariadbd slurmdbd; fi
    echo slurmctld
    for n in "${NODES[@]}"; do echo "slurmd-$n"; done
}

accounting_on() { [[ -e $ACCT_MARK ]]; }

# comm name the kernel reports for a daemon (at most 15 chars)
comm_of() {
    case $1 in
        munged) echo munged ;;
        slurmctld) echo slurmctld ;;
        slurmdbd) echo slurmdbd ;;
        mariadbd) echo mariadbd ;;
        slurmd-*) echo slurmd ;;
    esac
}

# Print the pid of a daemon if its pid file names a live process of the right
# program (guards against pid reuse); print nothing otherwise.
live_pid() {
    local f pid comm
    f=$(pidfile_of "$1")
    [[ -r $f ]] || return 0
    pid=$(tr -dc '0-9' <"$f" 2>/dev/null || true)
    [[ -n $pid ]] || return 0
    [[ -r /proc/$pid/comm ]] || return 0
    comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
    [[ $comm == "$(comm_of "$1")" ]] || return 0
    # a killed daemon stays a zombie until init reaps it: count it as dead
    [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]] && return 0
    echo "$pid"
}

# --- slurm.conf ----------------------------------------------------------------

write_conf() {
    local cpus last_port
    cpus=$(nproc)
    last_port=$((NODE_PORT + ${#NODES[@]} - 1))
    cat >"$CONF" <<EOF
# Generated by ddlbench scripts/local-slurm.sh; rewritten on every 'up'.
ClusterName=ddlbench-local
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root

AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCK

StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL/slurmd-%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info

ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
$(accounting_conf)
JobCompType=jobcomp/filetxt
JobCompLoc=$JOBCOMP
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true

SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
DependencyParameters=kill_invalid_depend
EnforcePartLimits=ALL
SlurmdParameters=config_overrides

ReturnToService=2
MinJobAge=3600
MaxJobCount=100000
MaxArraySize=100001
KillWait=2
OverTimeLimit=0
InactiveLimit=0
Waittime=0
MessageTimeout=10

NodeName=n[1-${#NODES[@]}] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[$NODE_PORT-$last_port] CPUs=$cpus RealMemory=$MEM_MB State=UNKNOWN
PartitionName=debug Nodes=n[1-${#NODES[@]}] Default=YES MaxTime=INFINITE State=UP
PartitionName=short Nodes=n[1-${#NODES[@]}] Default=NO MaxTime=1 State=UP
EOF
}

# slurm.conf lines for job accounting: through slurmdbd when the cluster has it
accounting_conf() {
    if accounting_on; then
        echo "AccountingStorageType=accounting_storage/slurmdbd"
        echo "AccountingStorageHost=localhost"
        echo "AccountingStoragePort=$DBD_PORT"
        echo "AccountingStoragePass=$MUNGE_SOCK"
    else
        echo "AccountingStorageType=accounting_storage/none"
    fi
}

write_dbd_conf() {
    (
        umask 077
        cat >"$DBD_CONF" <<EOF
# Generated by ddlbench scripts/local-slurm.sh up --accounting; rewritten on every 'up'.
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$RUN/slurmdbd.pid
LogFile=$LOG/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=ddlbench-local
StorageLoc=slurm_acct_db
EOF
    )
}

# --- install -------------------------------------------------------------------

# apt-get install "$@" (root only); apt-get update only if the first attempt fails
apt_install() {
    [[ $(id -u) -eq 0 ]] || die "need root to apt-get install $*"
    export DEBIAN_FRONTEND=noninteractive
    local apt=(apt-get install -y -q --no-install-recommends "$@")
    local log="/tmp/ddlbench-slurm-apt.$$.log"
    if ! "${apt[@]}" >"$log" 2>&1; then
        apt-get update -q >>"$log" 2>&1 || true
        "${apt[@]}" >>"$log" 2>&1 || die "apt-get install $* failed; see $log"
    fi
    rm -f "$log"
}

ensure_accounting_packages() {
    local missing=() b
    for b in slurmdbd mariadbd mariadb-install-db mariadb-admin mariadb sacctmgr; do
        command -v "$b" >/dev/null 2>&1 || missing+=("$b")
    done
    ((${#missing[@]} == 0)) && return 0
    say "installing slurmdbd and mariadb-server (missing: ${missing[*]})"
    apt_install slurmdbd mariadb-server
    for b in slurmdbd mariadbd mariadb-install-db; do
        command -v "$b" >/dev/null 2>&1 || die "$b still missing after install"
    done
}

ensure_packages() {
    local missing=() b
    for b in slurmctld slurmd sinfo munged; do
        command -v "$b" >/dev/null 2>&1 || missing+=("$b")
    done
    ((${#missing[@]} == 0)) && return 0
    say "installing slurm-wlm and munge (missing: ${missing[*]})"
    apt_install slurm-wlm munge
    for b in slurmctld slurmd sinfo munged; do
        command -v "$b" >/dev/null 2>&1 || die "$b still missing after install"
    done
}

# --- stop ----------------------------------------------------------------------

# Stop daemons by name: SIGTERM to all of them at once, wait up to
# STOP_TIMEOUT for them to exit, then SIGKILL whatever is left and wait again.
stop_daemons() {
    local d pid i left
    local -A pids=()
    for d in "$@"; do
        pid=$(live_pid "$d")
        [[ -n $pid ]] && pids[$d]=$pid
    done
    ((${#pids[@]} == 0)) && return 0
    for d in "${!pids[@]}"; do kill -TERM "${pids[$d]}" 2>/dev/null || true; done
    for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
        left=0
        for d in "${!pids[@]}"; do kill -0 "${pids[$d]}" 2>/dev/null && left=1; done
        ((left)) || break
        sleep 0.1
    done
    for d in "${!pids[@]}"; do
        if kill -0 "${pids[$d]}" 2>/dev/null; then
            say "$d (pid ${pids[$d]}) ignored SIGTERM for ${STOP_TIMEOUT}s; sending SIGKILL"
            kill -KILL "${pids[$d]}" 2>/dev/null || true
        fi
    done
    for ((i = 0; i < 50; i++)); do
        left=0
        for d in "${!pids[@]}"; do kill -0 "${pids[$d]}" 2>/dev/null && left=1; done
        ((left)) || break
        sleep 0.1
    done
    for d in "${!pids[@]}"; do
        if kill -0 "${pids[$d]}" 2>/dev/null; then
            say "warning: $d (pid ${pids[$d]}) still present after SIGKILL"
        else
            say "stopped $d (pid ${pids[$d]})"
        fi
    done
}

# pids of processes whose environment carries SLURM_CONF=$CONF and whose comm
# is slurmstepd: step daemons of this cluster that outlived their slurmd.
stray_stepds() {
    local p comm
    for p in /proc/[0-9]*; do
        comm=$(cat "$p/comm" 2>/dev/null || true)
        [[ $comm == slurmstepd ]] || continue
        if tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qxF "SLURM_CONF=$CONF"; then
            echo "${p#/proc/}"
        fi
    done
}

# all descendants of a pid (children first listed after parents)
descendants() {
    local parent=$1 p ppid
    for p in /proc/[0-9]*; do
        ppid=$(awk '{print $4}' "$p/stat" 2>/dev/null || true)
        if [[ $ppid == "$parent" ]]; then
            echo "${p#/proc/}"
            descendants "${p#/proc/}"
        fi
    done
}

cancel_all_jobs() {
    local ids i
    [[ -n $(live_pid slurmctld) ]] || return 0
    ids=$(SLURM_CONF=$CONF timeout 10 squeue -h -o %A -t PD,R,CG,S,CF,RQ,SE 2>/dev/null || true)
    [[ -n $ids ]] || return 0
    # shellcheck disable=SC2086 # word splitting of the id list is intended
    SLURM_CONF=$CONF timeout 10 scancel $ids 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        ids=$(SLURM_CONF=$CONF timeout 5 squeue -h -o %A -t R,CG,S,CF 2>/dev/null || true)
        [[ -z $ids ]] && return 0
        sleep 0.1
    done
}

stop_all() {
    local d s k n nodes=()
    cancel_all_jobs
    for n in "${NODES[@]}"; do nodes+=("slurmd-$n"); done
    # slurm daemons first (together), then accounting (slurmdbd flushes to the database),
    # munged last: they all authenticate through it. By pid file, whatever 'up' started.
    stop_daemons slurmctld "${nodes[@]}"
    stop_daemons slurmdbd
    stop_daemons mariadbd
    stop_daemons munged
    for d in munged mariadbd slurmdbd slurmctld "${nodes[@]}"; do rm -f "$(pidfile_of "$d")"; done
    for s in $(stray_stepds); do
        say "killing stray slurmstepd $s and its tasks"
        for k in $(descendants "$s") "$s"; do
            kill -KILL "$k" 2>/dev/null || true
        done
    done
    rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
}

# --- start ---------------------------------------------------------------------

wait_pidfile() {
    local d=$1 i
    for ((i = 0; i < 100; i++)); do
        [[ -n $(live_pid "$d") ]] && return 0
        sleep 0.1
    done
    return 1
}

fail_up() {
    echo "$PROG: error: $*" >&2
    echo "$PROG: logs are in $LOG; last lines:" >&2
    local f
    for f in "$LOG"/*.log; do
        [[ -f $f ]] || continue
        echo "--- $f" >&2
        tail -n 5 "$f" >&2
    done
    stop_all >&2 || true
    exit 1
}

# every node is in one of the states of the extended regular expression $1 (the controller
# answering is part of it)
nodes_in_states() {
    local out n
    out=$(SLURM_CONF=$CONF timeout 5 sinfo -h -N -p debug -o '%N %T' 2>/dev/null) || return 1
    for n in "${NODES[@]}"; do
        grep -qE "^$n ($1)$" <<<"$out" || return 1
    done
}

nodes_idle() { nodes_in_states idle; }

cmd_up() {
    local t0 t1 d pid alive=0 total=0 n i acct=0 had_acct=0
    case ${1:-} in
        "") ;;
        --accounting) acct=1 ;;
        *) die "unknown option for up: $1" ;;
    esac
    [[ ${DDLBENCH_SLURM_ACCOUNTING:-0} =~ ^(1|yes|true|on)$ ]] && acct=1
    t0=$(date +%s.%N)
    ensure_packages
    ((acct)) && ensure_accounting_packages
    mkdir -p "$DIR"
    exec 9>"$DIR/.lock"
    flock -w 120 9 || die "another up/down holds $DIR/.lock"
    accounting_on && had_acct=1

    for d in $(daemons); do
        total=$((total + 1))
        [[ -n $(live_pid "$d") ]] && alive=$((alive + 1))
    done
    if ((alive == total && acct == had_acct)) && nodes_idle_or_busy; then
        say "cluster already running in $DIR"
        return 0
    fi
    ((alive > 0 && acct != had_acct)) &&
        say "restarting the cluster $( ((acct)) && echo with || echo without) accounting"
    if ((alive > 0)); then
        say "cluster partly running ($alive/$total daemons); restarting it"
    elif compgen -G "$RUN/*.pid" >/dev/null; then
        say "removing stale pid files of a dead cluster"
    fi
    stop_all

    local p
    for ((p = NODE_PORT; p < NODE_PORT + ${#NODES[@]}; p++)); do
        port_busy "$p" && die "port $p (slurmd) is already in use; set DDLBENCH_SLURM_NODE_PORT"
    done
    port_busy "$CTLD_PORT" && die "port $CTLD_PORT (slurmctld) is already in use; set DDLBENCH_SLURM_CTLD_PORT"

    # fresh state: no old jobs, job ids restart at 1
    rm -rf "$STATE" "$SPOOL" "$RUN" "$JOBCOMP"
    mkdir -p "$RUN" "$LOG" "$STATE" "$MUNGE"
    for n in "${NODES[@]}"; do mkdir -p "$SPOOL/slurmd-$n"; done
    chmod 0755 "$DIR" "$RUN" "$LOG" "$STATE" "$SPOOL"
    chmod 0755 "$MUNGE"
    touch "$JOBCOMP"
    if ((acct)); then touch "$ACCT_MARK"; else rm -f "$ACCT_MARK" "$DBD_CONF"; fi
    write_conf

    if [[ ! -s $MUNGE_KEY ]]; then
        if command -v mungekey >/dev/null 2>&1; then
            mungekey -c -f -k "$MUNGE_KEY"
        else
            dd if=/dev/urandom of="$MUNGE_KEY" bs=1024 count=1 status=none
        fi
    fi
    chmod 0400 "$MUNGE_KEY"

    export SLURM_CONF=$CONF
    munged --key-file="$MUNGE_KEY" --socket="$MUNGE_SOCK" \
        --pid-file="$RUN/munged.pid" --log-file="$LOG/munged.log" \
        --seed-file="$MUNGE/munged.seed" >>"$LOG/munged.log" 2>&1 9>&- ||
        fail_up "munged failed to start"
    wait_pidfile munged || fail_up "munged did not write its pid file"
    for ((i = 0; i < 50; i++)); do [[ -S $MUNGE_SOCK ]] && break; sleep 0.1; done
    [[ -S $MUNGE_SOCK ]] || fail_up "munge socket $MUNGE_SOCK did not appear"
    ((acct)) && start_accounting

    slurmctld -f "$CONF" >>"$LOG/slurmctld.log" 2>&1 9>&- || fail_up "slurmctld failed to start"
    wait_pidfile slurmctld || fail_up "slurmctld did not write its pid file"
    for n in "${NODES[@]}"; do
        slurmd -f "$CONF" -N "$n" >>"$LOG/slurmd-$n.log" 2>&1 9>&- || fail_up "slurmd -N $n failed to start"
    done
    for n in "${NODES[@]}"; do
        wait_pidfile "slurmd-$n" || fail_up "slurmd $n did not write its pid file"
    done

    for ((i = 0; i < UP_TIMEOUT * 10; i++)); do
        nodes_idle && break
        sleep 0.1
    done
    nodes_idle || fail_up "nodes ${NODES[*]} not idle after ${UP_TIMEOUT}s"
    for d in $(daemons); do
        [[ -n $(live_pid "$d") ]] || fail_up "$d died during bring-up"
    done
    t1=$(date +%s.%N)
    say "cluster up in $DIR (${#NODES[@]} nodes idle$( ((acct)) && echo ", accounting: slurmdbd on port $DBD_PORT")) in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s"
    # the scratch dir goes into the hint unless it is the default: a new shell finds this one
    if [[ $DIR == /tmp/ddlbench-slurm ]]; then
        say "clients: eval \"\$($SELF env)\""
    else
        say "clients: eval \"\$(DDLBENCH_SLURM_DIR=$DIR $SELF env)\""
    fi
}

# mariadbd (its data folder kept across 'up', the accounting database emptied) and slurmdbd
start_accounting() {
    local i sql
    local db=(--no-defaults --datadir="$DB_DIR/data" --innodb-log-file-size=8M)
    mkdir -p "$DB_DIR"
    if [[ ! -d $DB_DIR/data/mysql ]]; then
        rm -rf "$DB_DIR/data"
        mariadb-install-db "${db[@]}" --user=root --skip-test-db \
            --auth-root-authentication-method=socket >>"$LOG/mariadb-install.log" 2>&1 9>&- ||
            fail_up "mariadb-install-db failed (see $LOG/mariadb-install.log)"
    fi
    port_busy "$DB_PORT" && fail_up "port $DB_PORT (mariadbd) is in use; set DDLBENCH_SLURM_DBD_PORT"
    port_busy "$DBD_PORT" && fail_up "port $DBD_PORT (slurmdbd) is in use; set DDLBENCH_SLURM_DBD_PORT"
    setsid mariadbd "${db[@]}" --user=root --socket="$DB_SOCK" --port="$DB_PORT" \
        --bind-address=127.0.0.1 --skip-name-resolve --innodb-buffer-pool-size=32M \
        --pid-file="$RUN/mariadbd.pid" --log-error="$LOG/mariadbd.log" \
        </dev/null >>"$LOG/mariadbd.log" 2>&1 9>&- &
    for ((i = 0; i < UP_TIMEOUT * 10; i++)); do
        mariadb-admin --no-defaults --socket="$DB_SOCK" -u root ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    wait_pidfile mariadbd || fail_up "mariadbd did not start (see $LOG/mariadbd.log)"
    sql="DROP DATABASE IF EXISTS slurm_acct_db; CREATE DATABASE slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'ddlbench-local';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
    mariadb --no-defaults --socket="$DB_SOCK" -u root -e "$sql" >>"$LOG/mariadbd.log" 2>&1 ||
        fail_up "could not create the accounting database in mariadbd"
    write_dbd_conf
    slurmdbd >>"$LOG/slurmdbd.log" 2>&1 9>&- || fail_up "slurmdbd failed to start"
    wait_pidfile slurmdbd || fail_up "slurmdbd did not write its pid file"
    for ((i = 0; i < UP_TIMEOUT * 10; i++)); do
        port_busy "$DBD_PORT" && break
        sleep 0.1
    done
    port_busy "$DBD_PORT" || fail_up "slurmdbd does not listen on port $DBD_PORT"
    sacctmgr -i add cluster ddlbench-local >>"$LOG/slurmdbd.log" 2>&1 ||
        fail_up "sacctmgr could not register the cluster with slurmdbd"
}

# controller answers and both nodes are known (idle, mixed, allocated...)
nodes_idle_or_busy() { nodes_in_states 'idle|mixed|allocated|completing'; }

cmd_down() {
    local purge=0
    case ${1:-} in
        "") ;;
        --purge) purge=1 ;;
        *) die "unknown option for down: $1" ;;
    esac
    if [[ ! -d $DIR ]]; then
        say "no cluster in $DIR"
        return 0
    fi
    exec 9>"$DIR/.lock"
    flock -w 120 9 || die "another up/down holds $DIR/.lock"
    stop_all
    if ((purge)); then
        rm -rf "$DIR"
        say "cluster down; removed $DIR"
    else
        say "cluster down; files kept in $DIR"
    fi
}

cmd_status() {
    local d pid up=1
    echo "scratch dir: $DIR"
    for d in $(daemons); do
        pid=$(live_pid "$d")
        if [[ -n $pid ]]; then
            printf '  %-10s running (pid %s)\n' "$d" "$pid"
        else
            printf '  %-10s not running\n' "$d"
            up=0
        fi
    done
    if [[ -n $(live_pid slurmctld) ]] &&
        SLURM_CONF=$CONF timeout 10 sinfo 2>&1; then
        :
    else
        up=0
    fi
    if ((up)); then
        echo "cluster: up"
        return 0
    fi
    echo "cluster: down"
    return 1
}

cmd_env() {
    echo "export DDLBENCH_SLURM_DIR=$DIR"
    echo "export SLURM_CONF=$CONF"
}

main() {
    local cmd=${1:-}
    [[ $# -gt 0 ]] && shift
    case $cmd in
        -h | --help | help) usage; return 0 ;;
        up | down | status | env) ;;
        *) usage >&2; exit 2 ;;
    esac
    resolve_dir
    PATH="$PATH:/usr/sbin:/sbin"
    case $cmd in
        up) [[ $# -le 1 ]] || die "up takes at most one option (--accounting)"; cmd_up "$@" ;;
        down) cmd_down "$@" ;;
        status) [[ $# -eq 0 ]] || die "status takes no arguments"; cmd_status ;;
        env) [[ $# -eq 0 ]] || die "env takes no arguments"; cmd_env ;;
    esac
}

main "$@"
