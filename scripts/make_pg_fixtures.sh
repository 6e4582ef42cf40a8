#!/usr/bin/env bash
# Makes tests/fixtures/pg/*.page: single 8 KB pages copied out of a real PostgreSQL
# cluster created with data checksums (initdb -k), so tests/pg_checksum_fixtures.rs can
# check that untorn::checksum::pg_checksum_page reproduces PostgreSQL's stored
# pd_checksum bit for bit.
#
# Needs Debian's postgresql package (apt-get install -y postgresql) and root: initdb
# refuses to run as root, so every PostgreSQL command runs as user postgres.
# The server listens only on a unix socket in a temporary directory (no TCP), on port
# 54329, and is stopped and removed on exit. Usage: sudo scripts/make_pg_fixtures.sh
set -euo pipefail

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PORT=${PORT:-54329}
repo=$(cd "$(dirname "$0")/.." && pwd)
out="$repo/tests/fixtures/pg"

if [ "$(id -u)" -ne 0 ]; then
    echo "run as root: PostgreSQL commands run as user postgres via runuser" >&2
    exit 1
fi
[ -x "$PGBIN/initdb" ] || { echo "no $PGBIN/initdb: apt-get install -y postgresql" >&2; exit 1; }

work=$(mktemp -d /tmp/untorn-pg-fixtures.XXXXXX)
chown postgres: "$work"
as_pg() { runuser -u postgres -- "$@"; }
cleanup() {
    if [ -f "$work/data/postmaster.pid" ]; then
        as_pg "$PGBIN/pg_ctl" -D "$work/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

as_pg "$PGBIN/initdb" -k -A trust -D "$work/data" -U postgres --no-instructions >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$work/data" -l "$work/server.log" -w \
    -o "-c listen_addresses='' -c unix_socket_directories='$work' -p $PORT" start >/dev/null

sql() { as_pg "$PGBIN/psql" -h "$work" -p "$PORT" -U postgres -d postgres -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }

[ "$(sql 'show data_checksums')" = on ] || { echo "data checksums are off" >&2; exit 1; }
version=$(sql 'show server_version')
sql "create table t as select g, md5(g::text) from generate_series(1, 2000) g"
sql "create index t_g on t (g)"
sql "checkpoint"
t_path=$(sql "select pg_relation_filepath('t')")
t_blocks=$(sql "select pg_relation_size('t') / current_setting('block_size')::int")
idx_path=$(sql "select pg_relation_filepath('t_g')")
class_path=$(sql "select pg_relation_filepath('pg_class')")
# A clean (fast) shutdown writes a shutdown checkpoint, so every page on disk is final.
as_pg "$PGBIN/pg_ctl" -D "$work/data" -m fast -w stop >/dev/null

rm -f "$out"/*.page
copy_page() { # relation-file name block
    dd if="$work/data/$1" of="$out/$2_block$3.page" bs=8192 skip="$3" count=1 status=none
    [ "$(stat -c %s "$out/$2_block$3.page")" -eq 8192 ] || { echo "short page $2 $3" >&2; exit 1; }
}
last=$((t_blocks - 1))
for b in 0 3 7 "$last"; do copy_page "$t_path" t "$b"; done
copy_page "$idx_path" t_g 0   # the btree metapage
copy_page "$idx_path" t_g 1   # a leaf page
copy_page "$class_path" pg_class 0

cat > "$out/README.md" <<README
# PostgreSQL page fixtures

Single 8 KB pages copied out of a PostgreSQL cluster created with data checksums, used by
\`tests/pg_checksum_fixtures.rs\` to check that \`untorn::checksum::pg_checksum_page\`
reproduces the stored \`pd_checksum\` (the u16 at byte offset 8) exactly.

Made by \`scripts/make_pg_fixtures.sh\` (run as root) with PostgreSQL $version
(Debian package, $PGBIN), on $(uname -m):

- \`initdb -k -A trust\`, server on a unix socket only;
- \`create table t as select g, md5(g::text) from generate_series(1, 2000) g\`
  ($t_blocks blocks), \`create index t_g on t (g)\`, \`checkpoint\`, fast shutdown;
- pages copied with \`dd bs=8192 skip=N count=1\` from the relation files found with
  \`pg_relation_filepath\`.

A file is named \`<relation>_block<N>.page\`, N being the block number within the
relation (the value PostgreSQL mixes into the checksum):

$(cd "$out" && for f in *.page; do echo "- \`$f\`"; done)

The words are little-endian ($(uname -m)); the checksum reads the page as native-endian
u32 words, so these fixtures are only meaningful on a little-endian machine.
README
echo "wrote $(ls "$out"/*.page | wc -l) pages to $out (PostgreSQL $version)"
