#!/usr/bin/env bash
# The object-store emulators and the fault proxy the storage tests start (each test starts
# its own on free loopback ports and stops it): Azurite (Azure Blob, from npm),
# fake-gcs-server (Google Cloud Storage) and toxiproxy (resets, stalls and slow answers
# between Sluice and a store), both built with Go through the module proxy, and a Unity
# Catalog server (olai-uc-server from crates.io, an implementation of the Unity Catalog
# REST API; built unoptimised, which is enough for tests and takes a third of the time),
# and Debian's chromium, the browser the console's test drives.
#
# Usage: scripts/stores.sh install | bin
#   install   fetch and build what is missing (once; cached)
#   bin       print the folder holding the programs (the tests look there)
#
# Environment: SLUICE_CACHE (default ~/.cache/sluice) holds them under stores/.
set -euo pipefail
cache=${SLUICE_CACHE:-$HOME/.cache/sluice}
stores=$cache/stores
bin=$stores/bin
azurite_version=3.37.0
fake_gcs_version=v1.56.1
toxiproxy_version=v2.5.0
uc_server_version=0.0.11

# go_tool NAME PACKAGE VERSION BUILT: builds PACKAGE@VERSION (a program go install names
# BUILT) once into $bin/NAME-VERSION, linked as $bin/NAME.
go_tool() {
  local name=$1 package=$2 version=$3 built=$4
  if [ ! -x "$bin/$name-$version" ]; then
    echo "Building $name $version (a minute or two) ..."
    GOTOOLCHAIN=local GOPROXY=$proxy GOBIN=$stores/gobin GOFLAGS=-mod=mod \
      go install "$package@$version"
    mv "$stores/gobin/$built" "$bin/$name-$version"
  fi
  ln -sf "$bin/$name-$version" "$bin/$name"
}

install() {
  mkdir -p "$bin"
  if [ ! -x "$stores/azurite-$azurite_version/node_modules/.bin/azurite-blob" ]; then
    echo "Installing Azurite $azurite_version into $stores ..."
    npm install --silent --no-audit --no-fund --prefix "$stores/azurite-$azurite_version" "azurite@$azurite_version" >/dev/null
  fi
  ln -sf "$stores/azurite-$azurite_version/node_modules/.bin/azurite-blob" "$bin/azurite-blob"

  # Only the module proxy is used: a module it does not serve is an error, not a
  # download from elsewhere.
  proxy=$(GOTOOLCHAIN=local go env GOPROXY)
  proxy=${proxy%,direct}
  go_tool fake-gcs-server "github.com/fsouza/fake-gcs-server" "$fake_gcs_version" fake-gcs-server
  go_tool toxiproxy-server "github.com/Shopify/toxiproxy/v2/cmd/server" "$toxiproxy_version" server

  if [ ! -x "$bin/uc-server-$uc_server_version" ]; then
    echo "Building the Unity Catalog server olai-uc-server $uc_server_version (about ten minutes, once) ..."
    CARGO_PROFILE_DEV_DEBUG=0 cargo install --quiet --locked --debug \
      "olai-uc-server@$uc_server_version" --features bin \
      --root "$stores/uc-server-$uc_server_version" --target-dir "$stores/uc-server-build"
    mv "$stores/uc-server-$uc_server_version/bin/uc-server" "$bin/uc-server-$uc_server_version"
    rm -rf "$stores/uc-server-build" "$stores/uc-server-$uc_server_version"
  fi
  ln -sf "$bin/uc-server-$uc_server_version" "$bin/uc-server"

  if ! command -v chromium >/dev/null; then
    echo "Installing Debian's chromium for the console's browser test ..."
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq chromium >/dev/null
  fi
}

case "${1:-}" in
  install) install ;;
  bin) echo "$bin" ;;
  *)
    echo "usage: $0 install | bin" >&2
    exit 2
    ;;
esac
