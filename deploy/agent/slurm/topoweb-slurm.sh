#!/bin/bash
# topoweb agent hook for Slurm: use it as a Prolog (run by slurmd before each job) or as the
# HealthCheckProgram (run by slurmd every HealthCheckInterval), or call it from the one you have.
# slurm.conf lines: slurm.conf.example beside this file; docs/deploy.md "Slurm".
#
# It never delays a job and never marks a node down: it starts the agent in the background, in a
# session of its own (slurmd does not wait for it, nor kill it with the prolog), under `timeout`,
# and returns 0 at once, whatever happens -- no configuration, no agent, server unreachable. It
# prints nothing on stdout. A node reports at most once per TOPOWEB_MIN_INTERVAL seconds however
# many jobs start on it, and never runs two agents at once.
#
# Configuration (all optional but the first two, which are normally in /etc/topoweb/agent.env,
# root-only, the file topoweb-agent.service reads):
#   TOPOWEB_SERVER        the server, e.g. https://topoweb.example.org
#   TOPOWEB_TOKEN         the cluster's agent token (passed to the agent in its environment)
#   TOPOWEB_SPLAY         the agent's --splay (default 300 s)
#   TOPOWEB_ENV_FILE      default /etc/topoweb/agent.env
#   TOPOWEB_AGENT         the agent file (default /usr/local/lib/topoweb/topoweb_agent.py)
#   TOPOWEB_AGENT_FETCH   1: fetch SERVER/agent.py with curl before each run (in the background,
#                         bounded by --max-time), so the agent follows the server's version
#   TOPOWEB_MIN_INTERVAL  seconds between two runs on a node (default 3600)
#   TOPOWEB_AGENT_TIMEOUT seconds after which the agent is stopped (default 1800)
#   TOPOWEB_STATE_DIR     stamp, lock and log of the last run (default /var/lib/topoweb)
#   TOPOWEB_PYTHON        the interpreter (default python3)
#   TOPOWEB_USE_SYSTEMD   auto (default): where systemd runs and topoweb-agent.service is
#                         installed, start that unit (--no-block) instead: the agent then runs
#                         with the unit's hardening and timeout, outside slurmd's and the job's
#                         cgroups; 1: always; 0: never

PATH="${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
export PATH
trap 'exit 0' EXIT   # whatever went wrong, slurmd sees success

env_file="${TOPOWEB_ENV_FILE:-/etc/topoweb/agent.env}"

# KEY=value lines of the env file; only the keys named here are taken, nothing is executed.
load_env_file() {
    local key value
    [ -r "$env_file" ] || return 0
    while IFS='=' read -r key value || [ -n "$key" ]; do
        key="${key//[[:space:]]/}"
        value="${value%$'\r'}"
        value="${value#\"}"; value="${value%\"}"; value="${value#\'}"; value="${value%\'}"
        case "$key" in
            TOPOWEB_SERVER|TOPOWEB_TOKEN|TOPOWEB_SPLAY|TOPOWEB_AGENT|TOPOWEB_AGENT_FETCH|TOPOWEB_MIN_INTERVAL|\
            TOPOWEB_AGENT_TIMEOUT|TOPOWEB_PYTHON|TOPOWEB_USE_SYSTEMD)
                # the environment wins over the file
                if [ -z "${!key+set}" ]; then printf -v "$key" '%s' "$value"; export "${key?}"; fi ;;
        esac
    done < "$env_file"
}

is_number() { case "$1" in ''|*[!0-9]*) return 1 ;; esac; return 0; }

use_systemd() {
    case "${TOPOWEB_USE_SYSTEMD:-auto}" in
        1) return 0 ;;
        auto) [ -d /run/systemd/system ] && timeout 10 systemctl cat topoweb-agent.service >/dev/null 2>&1 ;;
        *) return 1 ;;
    esac
}

# The background part: the systemd unit, or fetch (optional) then the agent under timeout, one at a time.
run_agent() {
    if use_systemd; then
        echo "topoweb-slurm: $(date -u +%Y-%m-%dT%H:%M:%SZ) starting topoweb-agent.service"
        timeout 30 systemctl start --no-block topoweb-agent.service
        echo "topoweb-slurm: systemctl exited with status $?"
        return 0
    fi
    local agent="${TOPOWEB_AGENT:-/usr/local/lib/topoweb/topoweb_agent.py}"
    local python="${TOPOWEB_PYTHON:-python3}" timeout_s="${TOPOWEB_AGENT_TIMEOUT:-1800}"
    local splay="${TOPOWEB_SPLAY:-300}"
    { is_number "$timeout_s" && [ "$timeout_s" -gt 0 ]; } || timeout_s=1800   # timeout 0 would mean none
    is_number "$splay" || splay=300
    if [ "${TOPOWEB_AGENT_FETCH:-0}" = 1 ]; then
        local fetched="$state_dir/topoweb_agent.py"
        if curl -fsS --max-time 60 -o "$fetched.new" "${TOPOWEB_SERVER%/}/agent.py"; then
            mv -f "$fetched.new" "$fetched" && agent="$fetched"
        else
            rm -f "$fetched.new"
            [ -r "$fetched" ] && agent="$fetched"   # the copy of the previous run
        fi
    fi
    if [ ! -r "$agent" ]; then
        echo "topoweb-slurm: no agent at $agent (install it, or set TOPOWEB_AGENT_FETCH=1)"
        return 0
    fi
    echo "topoweb-slurm: $(date -u +%Y-%m-%dT%H:%M:%SZ) starting $agent"
    local locker=()
    command -v flock >/dev/null && locker=(flock -n "$state_dir/lock")
    "${locker[@]}" timeout -k 30 "$timeout_s" "$python" "$agent" --server "$TOPOWEB_SERVER" \
        --splay "$splay" --quiet
    echo "topoweb-slurm: agent exited with status $?"
}

load_env_file
state_dir="${TOPOWEB_STATE_DIR:-/var/lib/topoweb}"

if [ "${1:-}" = "--run" ]; then        # internal: the detached child below
    run_agent
    exit 0
fi

[ -n "${TOPOWEB_SERVER:-}" ] && [ -n "${TOPOWEB_TOKEN:-}" ] || exit 0   # not configured: nothing to do
{ mkdir -p "$state_dir" && chmod 0700 "$state_dir"; } 2>/dev/null || exit 0

# At most one start per interval: the stamp's age decides.
interval="${TOPOWEB_MIN_INTERVAL:-3600}"
is_number "$interval" || interval=3600
stamp="$state_dir/last-start"
if [ -e "$stamp" ]; then
    last=$(stat -c %Y "$stamp" 2>/dev/null) || last=0
    now=$(date +%s)
    is_number "$last" && [ $((now - last)) -lt "$interval" ] && [ "$last" -le "$now" ] && exit 0
fi
touch "$stamp" 2>/dev/null || exit 0

# Detached: a new session (setsid), stdin from /dev/null, output to a log of the last run.
if command -v setsid >/dev/null; then
    setsid "${BASH:-bash}" "$0" --run </dev/null >"$state_dir/last-run.log" 2>&1 &
else
    nohup "${BASH:-bash}" "$0" --run </dev/null >"$state_dir/last-run.log" 2>&1 &
fi
exit 0
