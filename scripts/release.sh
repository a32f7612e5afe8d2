#!/usr/bin/env bash
# Builds the release archive: the optimised `sluice`, the guest SDKs it builds
# transforms with (and their packages: the Python sdist, the npm tarball, the Go module,
# the C header and sources), completions, man pages and the docs, in one versioned
# .tar.gz with a SHA256SUMS inside and a .sha256 beside it.
#
#   scripts/release.sh [--out-dir DIR] [--binary PATH]
#
# --out-dir: where the archive goes (default: dist/ in the checkout).
# --binary:  package this `sluice` instead of building one (the test command packages
#            its own debug build, so the suite does not build a second profile).
#
# The archive unpacks to sluice-<version>-<target>/ with bin/sluice and
# share/sluice/guest-sdk, which `sluice build` finds beside its binary: unpacked
# anywhere, it builds JavaScript, Python, C and Go transforms with nothing else from
# the checkout.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

out_dir=$root/dist
binary=
while [ $# -gt 0 ]; do
  case $1 in
    --out-dir) out_dir=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "release.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
target=$(rustc -vV | sed -n 's/^host: //p')
name=sluice-$version-$target
if [ -z "$binary" ]; then
  echo "Building the optimised sluice (cargo build --release; a while on a cold cache)."
  cargo build --locked --release -q -p sluice
  binary=${CARGO_TARGET_DIR:-$root/target}/release/sluice
fi
[ -x "$binary" ] || { echo "release.sh: $binary is not an executable sluice" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage=$work/$name
mkdir -p "$stage/bin" "$stage/share/sluice/packages" "$stage/share/man/man1" \
  "$stage/share/bash-completion/completions" "$stage/share/zsh/site-functions" \
  "$stage/share/fish/vendor_completions.d" "$stage/share/doc/sluice"
cp "$binary" "$stage/bin/sluice"

# The SDKs' sources, as `sluice build` reads them (tests and caches left out).
sdk=$stage/share/sluice/guest-sdk
mkdir -p "$sdk"
cp guest-sdk/README.md "$sdk/"
cp -r guest-sdk/conformance "$sdk/"
mkdir -p "$sdk/js" "$sdk/python" "$sdk/c" "$sdk/go"
cp -r guest-sdk/js/package.json guest-sdk/js/README.md guest-sdk/js/src "$sdk/js/"
cp -r guest-sdk/python/pyproject.toml guest-sdk/python/README.md "$sdk/python/"
(cd guest-sdk/python && find sluice_transform -name '*.py' -exec cp --parents {} "$sdk/python/" \;)
cp -r guest-sdk/c/README.md guest-sdk/c/include guest-sdk/c/src "$sdk/c/"
(cd guest-sdk/go && find . -name '*.go' ! -name '*_test.go' -exec cp --parents {} "$sdk/go/" \; &&
  cp go.mod README.md "$sdk/go/")

# The packages a project depends on instead of the sources.
packages=$stage/share/sluice/packages
(cd "$sdk/python" && python3 -c 'import sys; from setuptools import build_meta; build_meta.build_sdist(sys.argv[1])' \
  "$packages" >"$work/sdist.log" 2>&1) ||
  { cat "$work/sdist.log" >&2; echo "release.sh: the Python sdist failed (it needs setuptools 61 or later)." >&2; exit 1; }
(cd "$sdk/js" && npm pack --silent --pack-destination "$packages" >/dev/null)
(cd "$sdk" && tar -czf "$packages/sluice-go-$version.tar.gz" go && tar -czf "$packages/sluice-c-$version.tar.gz" c)
rm -rf "$sdk/python/sluice_transform.egg-info" "$sdk/python/build"

"$stage/bin/sluice" manpages --out-dir "$stage/share/man/man1"
"$stage/bin/sluice" completions bash >"$stage/share/bash-completion/completions/sluice"
"$stage/bin/sluice" completions zsh >"$stage/share/zsh/site-functions/_sluice"
"$stage/bin/sluice" completions fish >"$stage/share/fish/vendor_completions.d/sluice.fish"
cp -r README.md docs "$stage/share/doc/sluice/"

(cd "$stage" && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort |
  xargs -d '\n' sha256sum >SHA256SUMS)
mkdir -p "$out_dir"
archive=$out_dir/$name.tar.gz
tar -C "$work" -czf "$archive" "$name"
(cd "$out_dir" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
echo "$archive"
