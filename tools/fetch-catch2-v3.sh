#!/usr/bin/env bash
# Unpacks Catch2 v3 (Debian bookworm-backports' libcatch2-dev) into DIR without touching the
# system's packages or apt state, and rewrites its pkg-config files to point there, so the unit
# tests can be built against Catch2 v3 on a machine whose system Catch2 is 2.13.
#   tools/fetch-catch2-v3.sh DIR      -> DIR/usr/share/pkgconfig/catch2-with-main.pc
# Exits 77 where there is no Debian bookworm apt source to derive the backports source from.
set -euo pipefail
dir=$(mkdir -p "$1" && cd "$1" && pwd)
sources=/etc/apt/sources.list.d/debian.sources
if [[ ! -f $sources ]] || ! grep -q '^Suites:.*bookworm' "$sources"; then
    echo "fetch-catch2-v3: no Debian bookworm apt source here; cannot fetch bookworm-backports"
    exit 77
fi
state=$dir/apt
mkdir -p "$state/lists/partial" "$state/archives/partial" "$state/sources"
awk 'BEGIN{RS="";ORS="\n\n"} NR==1' "$sources" | sed 's/^Suites:.*/Suites: bookworm-backports/' \
    > "$state/sources/backports.sources"
o=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$state/sources"
   -o "Dir::State::Lists=$state/lists" -o "Dir::Cache::Archives=$state/archives" -o APT::Sandbox::User=root)
apt-get "${o[@]}" -q update >/dev/null
(cd "$state" && apt-get "${o[@]}" -q download -t bookworm-backports libcatch2-dev >/dev/null)
root=$dir/root
rm -rf "$root"
dpkg-deb -x "$state"/libcatch2-dev_*.deb "$root"
libdir=$(dirname "$(find "$root" -name libCatch2.a | head -1)")
sed -i "s|^prefix=.*|prefix=$root/usr|; s|^includedir=.*|includedir=$root/usr/include|; s|^libdir=.*|libdir=$libdir|" \
    "$root"/usr/share/pkgconfig/catch2*.pc
echo "fetch-catch2-v3: $(grep -h '^Version' "$root"/usr/share/pkgconfig/catch2.pc) in $root"
