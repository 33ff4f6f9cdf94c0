#!/bin/sh
# progcache-textfile.sh CACHE_DIR [OUTPUT.prom]
#
# Write the statistics of a progcache cache directory for node_exporter's
# textfile collector (docs/OPERATIONS.md, "Metrics"), atomically: into a
# temporary file in the output's own directory, then renamed over the
# output, so the collector never reads half a file. The collector reads
# only names ending in .prom, so the temporary one is never scraped.
#
# OUTPUT.prom defaults to Debian's textfile directory
# (/var/lib/prometheus/node-exporter/progcache.prom). One output per cache
# directory: two caches need two files (each file's HELP and TYPE lines are
# its own). $PROGCACHE names the progcache command (default: progcache on
# PATH). Exit status: progcache's, and the output is left as it was.
set -eu
usage="usage: progcache-textfile.sh CACHE_DIR [OUTPUT.prom]"
dir=${1:?$usage}
out=${2:-/var/lib/prometheus/node-exporter/progcache.prom}
case $out in
*.prom) ;;
*) echo "progcache-textfile.sh: $out: the collector reads only *.prom files" >&2; exit 2 ;;
esac
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
"${PROGCACHE:-progcache}" stats --format prometheus --dir "$dir" > "$tmp"
chmod 0644 "$tmp"
mv -f "$tmp" "$out"
trap - EXIT
