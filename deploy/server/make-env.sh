#!/bin/bash
# Write topoweb's server environment file from topoweb.env.example, with a freshly generated
# TOPOWEB_SECRET_KEY and database password. Refuses to overwrite a file (the key must be kept).
#
#   make-env.sh OUT             for the systemd units: then set the host names in OUT
#   make-env.sh --compose OUT   for deploy/docker/compose.yaml: the services' host names, and the
#                               database password also in db_password beside OUT (compose's secret)
set -euo pipefail

usage() { echo "usage: $0 [--compose] OUT" >&2; exit 2; }
compose=0
if [ "${1:-}" = "--compose" ]; then compose=1; shift; fi
[ $# -eq 1 ] || usage
out=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
example="$here/topoweb.env.example"

if [ -e "$out" ]; then
    echo "$out exists: not overwritten (its TOPOWEB_SECRET_KEY signs sessions and share links)" >&2
    exit 1
fi
python=$(command -v python3 || command -v python) || { echo "python3 is needed" >&2; exit 1; }
random() { "$python" -c "import secrets, sys; print(secrets.token_urlsafe(int(sys.argv[1])))" "$1"; }
key=$(random 50)
db_password=$(random 24)   # URL-safe: letters, digits, - and _

umask 077
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
sed -e "s|^TOPOWEB_SECRET_KEY=.*|TOPOWEB_SECRET_KEY=$key|" \
    -e "s|@DB_PASSWORD@|$db_password|g" "$example" > "$tmp"
if [ "$compose" = 1 ]; then
    sed -i -e "s|@db.example.org:5432/|@postgres:5432/|" \
           -e "s|redis://redis.example.org:6379/|redis://redis:6379/|g" "$tmp"
    secret="$(dirname "$out")/db_password"
    if [ -e "$secret" ]; then
        echo "$secret exists: not overwritten" >&2
        exit 1
    fi
    printf '%s\n' "$db_password" > "$secret"
fi
mv "$tmp" "$out"
trap - EXIT
echo "wrote $out (mode 0600); set TOPOWEB_ALLOWED_HOSTS$( [ "$compose" = 1 ] || echo ", the database and Redis hosts") in it" >&2
