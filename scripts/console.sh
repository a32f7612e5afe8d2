#!/usr/bin/env bash
# The web console's built files are kept in host/console/dist, so building Sluice (and
# `cargo install`) needs no Node. Whoever changes host/console/web rebuilds them here.
#
#   scripts/console.sh build   rebuild host/console/dist from web/ (npm ci when needed)
#   scripts/console.sh check   fail when host/console/dist differs from a fresh build
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
web="$root/host/console/web"
dist="$root/host/console/dist"

install() {
  # `npm ci` again only when the lock file is newer than what is installed.
  if [ ! -f "$web/node_modules/.package-lock.json" ] ||
    [ "$web/package-lock.json" -nt "$web/node_modules/.package-lock.json" ]; then
    (cd "$web" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

build_into() {
  install
  (cd "$web" && node node_modules/vite/bin/vite.js build --logLevel warn --emptyOutDir --outDir "$1")
}

case "${1:-}" in
  build)
    build_into "$dist"
    echo "Built the console into $dist; commit it with the change to web/."
    ;;
  check)
    fresh=$(mktemp -d)
    trap 'rm -rf "$fresh"' EXIT
    build_into "$fresh"
    if ! diff -r "$fresh" "$dist" >/dev/null; then
      diff -r "$fresh" "$dist" | head -20 >&2 || true
      echo "host/console/dist does not match a fresh build of host/console/web: run scripts/console.sh build and commit host/console/dist." >&2
      exit 1
    fi
    echo "host/console/dist matches host/console/web."
    ;;
  *)
    echo "usage: scripts/console.sh build|check" >&2
    exit 2
    ;;
esac
