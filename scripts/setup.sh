#!/usr/bin/env bash
# Installs everything Sluice needs to build, test and run its demo, skipping what is
# already there: Debian packages, the Wasm target, Python's Delta writer, and the Kafka
# broker's jars. Safe to run again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

apt_packages=(cmake g++ make pkg-config libssl-dev zlib1g-dev libsasl2-dev libcurl4-openssl-dev openssl python3 python3-pip python3-venv openjdk-17-jre-headless maven kcat
  # C transforms: clang, its wasm32 runtime and wasi-libc.
  clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32
  # JavaScript transforms: sluice build installs componentize-js with npm.
  nodejs npm)
missing=()
for package in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
# A JDK and Maven installed outside Debian's packages count as present.
if command -v java >/dev/null && command -v mvn >/dev/null; then
  filtered=()
  for package in "${missing[@]}"; do
    case "$package" in openjdk-17-jre-headless | maven) ;; *) filtered+=("$package") ;; esac
  done
  missing=("${filtered[@]}")
fi
# A Node.js installed outside Debian's packages counts as present.
if command -v node >/dev/null && command -v npm >/dev/null; then
  filtered=()
  for package in "${missing[@]}"; do
    case "$package" in nodejs | npm) ;; *) filtered+=("$package") ;; esac
  done
  missing=("${filtered[@]}")
fi
if command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1; then
  filtered=()
  for package in "${missing[@]}"; do
    case "$package" in python3 | python3-pip | python3-venv) ;; *) filtered+=("$package") ;; esac
  done
  missing=("${filtered[@]}")
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "Installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
  echo "Rust is missing: install it with rustup (Rust 1.95 or newer), then run this again." >&2
  exit 1
fi
# The web console's tests and rebuilds (scripts/console.sh) and JS transforms need Node
# 20.19 or newer; building Sluice itself does not.
node_version=$(node --version 2>/dev/null | sed 's/^v//')
if ! printf '20.19.0\n%s\n' "${node_version:-0}" | sort -V -C; then
  echo "Node.js 20.19 or newer is missing (found: ${node_version:-none}); the tests and JS transforms need it. Install it and put node and npm on PATH, then run this again." >&2
  exit 1
fi
# Go transforms build with the machine's Go (wasip1 reactors and go:wasmexport).
go_minor=$(GOTOOLCHAIN=local go env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
if [ -z "$go_minor" ] || [ "$go_minor" -lt 25 ]; then
  echo "Go 1.25 or newer is missing (found: $(GOTOOLCHAIN=local go env GOVERSION 2>/dev/null || echo none)): install it and put go on PATH, then run this again." >&2
  exit 1
fi
# wasm32-unknown-unknown builds transforms; wasm32-wasip2 builds the test fixture that
# asks for files, sockets and environment (the host must refuse it).
for target in wasm32-unknown-unknown wasm32-wasip2; do
  rustup target list --installed | grep -qx "$target" || rustup target add "$target"
done

python3 -c 'import deltalake, pyarrow' 2>/dev/null ||
  python3 -m pip install --quiet --disable-pip-version-check 'deltalake==1.6.6' 'pyarrow>=17'
python3 -c 'import pytest' 2>/dev/null ||
  python3 -m pip install --quiet --disable-pip-version-check 'pytest>=8'
# Python transforms are built into components with componentize-py.
command -v componentize-py >/dev/null && componentize-py --version | grep -q ' 0.25.1$' ||
  python3 -m pip install --quiet --disable-pip-version-check 'componentize-py==0.25.1'
# A local S3 endpoint for the object-store tests, and the clients that upload tables to
# the emulators (S3 and Azure Blob).
python3 -c 'import moto.server, boto3' 2>/dev/null ||
  python3 -m pip install --quiet --disable-pip-version-check 'moto[server]==5.2.1'
python3 -c 'import azure.storage.blob' 2>/dev/null ||
  python3 -m pip install --quiet --disable-pip-version-check 'azure-storage-blob==12.31.1'

# Confluent's client and its schema-registry deserializers read the encoding tests' topics
# (protoc from grpcio-tools compiles the Protobuf consumer's message class).
python3 -c 'import confluent_kafka.schema_registry.avro, confluent_kafka.schema_registry.json_schema, confluent_kafka.schema_registry.protobuf, grpc_tools.protoc' 2>/dev/null ||
  python3 -m pip install --quiet --disable-pip-version-check 'confluent-kafka[avro,schemaregistry,json,protobuf]==2.16.0' 'grpcio-tools==1.76.0'

"$here/kafka.sh" install
"$here/registry.sh" install
# The Debezium readers the envelope tests run events through: Flink's debezium-json
# format, and a Kafka Connect sink's Avro converter with Debezium's ExtractNewRecordState.
for reader in flink-debezium connect-debezium; do
  "$here/../tests/support/install_jars.sh" "$reader" >/dev/null
done
