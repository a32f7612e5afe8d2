#!/usr/bin/env bash
# A single-node Apache Kafka broker (KRaft mode) on 127.0.0.1 for tests and the demo.
#
#   scripts/kafka.sh install   fetch the jars of the broker and its OIDC token server with Maven (once; cached)
#   scripts/kafka.sh start     install if needed, start with an empty log, wait until ready
#   scripts/kafka.sh stop      stop the broker started by `start`
#   scripts/kafka.sh status    say whether it runs, and where
#   scripts/kafka.sh tool CLASS ARGS...
#                              run one of the distribution's tools (its scripts' main
#                              classes, e.g. org.apache.kafka.tools.ProducerPerformance)
#
# A three-node KRaft cluster for fault tests (replication factor 3, min.insync.replicas 2,
# no automatic topic creation), nodes at 127.0.0.1:19201..19203:
#   scripts/kafka.sh cluster-start        start it with an empty log, wait until ready
#   scripts/kafka.sh cluster-stop         stop every node
#   scripts/kafka.sh node-kill N...       kill nodes (1..3) with SIGKILL
#   scripts/kafka.sh node-start N...      start nodes again, keeping their data
#
# The single broker has a listener for each way users secure Kafka (ports below); its
# certificates are made at every start under $SLUICE_KAFKA_DIR/tls: `ca.crt` (the CA the
# listeners' certificates chain to), `client.crt`/`client.key` (a client certificate the
# mTLS listener accepts) and `stranger.crt`/`stranger.key` (one from another CA, refused).
# The OAUTHBEARER listener trusts an OIDC token server started with the broker
# (NAV's mock-oauth2-server from Maven Central): issuer `kafka` at
# http://127.0.0.1:$SLUICE_OIDC_PORT/kafka hands out 12-second tokens to any client
# (client-credentials grant; the server does not check secrets), issuer `expired` tokens
# already expired, issuer `stranger` tokens the broker does not trust. Its requests are
# logged to $SLUICE_KAFKA_DIR/oidc.log (a token request's URL and body on one line).
#
# The user `sluice` (SCRAM, PLAIN, OAUTHBEARER) may see but not write topics named
# `denied-*`, and may not even see `hidden-*` (ACLs set at start), so tests can meet
# authorization failures; other principals are super users.
#
# Environment: SLUICE_CACHE (default ~/.cache/sluice) holds the jars;
# SLUICE_KAFKA_DIR (default $SLUICE_CACHE/kafka-run) holds config, data, log and PID;
# SLUICE_KAFKA_PORT (default 19092, PLAINTEXT), SLUICE_KAFKA_SCRAM_PORT (default 19094,
# SASL_PLAINTEXT with SCRAM-SHA-256 or PLAIN, user `sluice`, password in
# $SLUICE_KAFKA_DIR/scram-password)
# SLUICE_KAFKA_TLS_PORT (default 19095, SSL with a CA made at start: $SLUICE_KAFKA_DIR/tls/ca.crt),
# SLUICE_KAFKA_SASL_SSL_PORT (default 19096, SASL_SSL with PLAIN, SCRAM-SHA-256 and
# SCRAM-SHA-512, same user and password), SLUICE_KAFKA_MTLS_PORT (default 19097, SSL that
# requires a client certificate), SLUICE_KAFKA_OAUTH_PORT (default 19098, SASL_SSL with
# OAUTHBEARER), SLUICE_KAFKA_ELSEWHERE_PORT (default 19099, SSL whose certificate names
# another host: hostname verification fails), SLUICE_OIDC_PORT (default 19180, the token
# server) and SLUICE_KAFKA_CONTROLLER_PORT (default 19093). The cluster lives in
# SLUICE_KAFKA_CLUSTER_DIR (default $SLUICE_CACHE/kafka-cluster).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
version=4.4.0
cache=${SLUICE_CACHE:-$HOME/.cache/sluice}
libs=$cache/kafka-$version/libs
run_dir=${SLUICE_KAFKA_DIR:-$cache/kafka-run}
port=${SLUICE_KAFKA_PORT:-19092}
controller_port=${SLUICE_KAFKA_CONTROLLER_PORT:-19093}
scram_port=${SLUICE_KAFKA_SCRAM_PORT:-19094}
scram_password=sluice-scram-secret
tls_port=${SLUICE_KAFKA_TLS_PORT:-19095}
tls_dir=$run_dir/tls
tls_password=sluice-tls-secret
sasl_ssl_port=${SLUICE_KAFKA_SASL_SSL_PORT:-19096}
mtls_port=${SLUICE_KAFKA_MTLS_PORT:-19097}
oauth_port=${SLUICE_KAFKA_OAUTH_PORT:-19098}
elsewhere_port=${SLUICE_KAFKA_ELSEWHERE_PORT:-19099}
oidc_port=${SLUICE_OIDC_PORT:-19180}
oidc_version=6.0.2
oidc_libs=$cache/mock-oauth2-server-$oidc_version/libs
oidc_pid_file=$run_dir/oidc.pid
pid_file=$run_dir/kafka.pid
cluster_dir=${SLUICE_KAFKA_CLUSTER_DIR:-$cache/kafka-cluster}
cluster_nodes=3

install() {
  if [ -f "$libs/kafka_2.13-$version.jar" ]; then
    return
  fi
  echo "Fetching Apache Kafka $version jars into $libs ..."
  mvn -q -B -f "$here/kafka/pom.xml" dependency:copy-dependencies -DoutputDirectory="$libs"
}

install_oidc() {
  if [ -f "$oidc_libs/mock-oauth2-server-$oidc_version.jar" ]; then
    return
  fi
  echo "Fetching the OIDC token server (mock-oauth2-server $oidc_version) into $oidc_libs ..."
  mvn -q -B -f "$here/oidc/pom.xml" dependency:copy-dependencies -DoutputDirectory="$oidc_libs"
}

# A log4j2 config at FILE: the console at LEVEL (default INFO).
write_log4j() {
  cat >"$1" <<PROPS
rootLogger.level = ${2:-INFO}
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
PROPS
}

running() {
  [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null
}

port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# A throwaway CA with certificates made anew at every start: the broker's for 127.0.0.1,
# one naming another host, a client's, and a client's from a second CA the broker does
# not trust.
make_tls() {
  rm -rf "$tls_dir"
  mkdir -p "$tls_dir"
  # `set -e` does not reach into a subshell on the left of `||`, so every step is chained.
  (
    cd "$tls_dir" &&
      openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=Sluice test CA" &&
      openssl req -x509 -newkey rsa:2048 -nodes -keyout stranger-ca.key -out stranger-ca.crt -days 2 -subj "/CN=Another CA" &&
      issue broker ca "/CN=localhost" "subjectAltName=IP:127.0.0.1,DNS:localhost" &&
      issue elsewhere ca "/CN=kafka.elsewhere.invalid" "subjectAltName=DNS:kafka.elsewhere.invalid" &&
      issue client ca "/CN=sluice-client" "extendedKeyUsage=clientAuth" &&
      issue stranger stranger-ca "/CN=sluice-client" "extendedKeyUsage=clientAuth" &&
      openssl pkcs12 -export -in broker.crt -inkey broker.key -certfile ca.crt -out broker.p12 -password "pass:$tls_password" &&
      openssl pkcs12 -export -in elsewhere.crt -inkey elsewhere.key -certfile ca.crt -out elsewhere.p12 -password "pass:$tls_password"
  ) >"$run_dir/tls.log" 2>&1 || { cat "$run_dir/tls.log" >&2; exit 1; }
}

# Issues certificate $1 signed by CA $2 for subject $3 with extensions $4, in the
# current directory.
issue() {
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$3" &&
    printf '%s\n' "$4" >"$1.ext" &&
    openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -out "$1.crt" -days 2 -extfile "$1.ext"
}

# Whether the broker runs with every listener (not one an older script started) and the
# token server its OAUTHBEARER listener needs.
running_complete() {
  running && oidc_running && grep -q "^listeners=.*OAUTH://" "$run_dir/server.properties"
}

oidc_running() {
  [ -f "$oidc_pid_file" ] && kill -0 "$(cat "$oidc_pid_file")" 2>/dev/null
}

# Starts the OIDC token server the OAUTHBEARER listener validates tokens against; the
# broker fetches its keys at start, so it runs first.
start_oidc() {
  install_oidc
  if oidc_running; then
    return
  fi
  if port_open "$oidc_port"; then
    echo "Port $oidc_port is taken by another process; set SLUICE_OIDC_PORT to a free port." >&2
    exit 1
  fi
  # At DEBUG the server logs every request (tests count token requests in it).
  SERVER_HOSTNAME=127.0.0.1 SERVER_PORT=$oidc_port JSON_CONFIG_PATH="$here/oidc/issuers.json" LOG_LEVEL=DEBUG \
    nohup java -Xms32m -Xmx128m -cp "$oidc_libs/*" \
    no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt >"$run_dir/oidc.log" 2>&1 &
  echo $! >"$oidc_pid_file"
  for _ in $(seq 1 60); do
    if ! oidc_running; then
      echo "The OIDC token server exited during start-up; its log ($run_dir/oidc.log):" >&2
      tail -n 30 "$run_dir/oidc.log" >&2
      exit 1
    fi
    if timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$oidc_port && printf 'GET /kafka/jwks HTTP/1.0\r\n\r\n' >&3 && grep -q '\"keys\"' <&3" 2>/dev/null; then
      return
    fi
    sleep 0.5
  done
  echo "The OIDC token server did not become ready within 30 s; see $run_dir/oidc.log." >&2
  exit 1
}

# Stops process $1 with SIGTERM, and with SIGKILL if it is still there after $2 seconds.
terminate() {
  local pid=$1
  kill "$pid"
  for _ in $(seq 1 $(($2 * 2))); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.5
  done
  kill -9 "$pid" 2>/dev/null || true
}

stop_oidc() {
  if oidc_running; then
    terminate "$(cat "$oidc_pid_file")" 10
  fi
  rm -f "$oidc_pid_file"
}

# Adds a prefixed ACL on the single broker.
acl() {
  java -Dlog4j2.configurationFile="$run_dir/log4j2.properties" -cp "$libs/*" org.apache.kafka.tools.AclCommand \
    --bootstrap-server "127.0.0.1:$port" --add --resource-pattern-type prefixed "$@" \
    >>"$run_dir/acl.log" 2>&1 || { cat "$run_dir/acl.log" >&2; exit 1; }
}

start() {
  install
  if running_complete; then
    echo "Kafka is already running at 127.0.0.1:$port (PID $(cat "$pid_file"))."
    return
  fi
  if running; then
    echo "Kafka runs without every listener or without its OIDC token server; starting it anew."
    stop
  fi
  if port_open "$port"; then
    echo "Port $port is taken by another process; set SLUICE_KAFKA_PORT to a free port." >&2
    exit 1
  fi
  rm -rf "$run_dir/data"
  mkdir -p "$run_dir/data"
  make_tls
  start_oidc
  local issuer=http://127.0.0.1:$oidc_port/kafka
  cat >"$run_dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=PLAINTEXT://127.0.0.1:$port,SASL_PLAINTEXT://127.0.0.1:$scram_port,SSL://127.0.0.1:$tls_port,SASL_SSL://127.0.0.1:$sasl_ssl_port,MTLS://127.0.0.1:$mtls_port,OAUTH://127.0.0.1:$oauth_port,ELSEWHERE://127.0.0.1:$elsewhere_port,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port,SASL_PLAINTEXT://127.0.0.1:$scram_port,SSL://127.0.0.1:$tls_port,SASL_SSL://127.0.0.1:$sasl_ssl_port,MTLS://127.0.0.1:$mtls_port,OAUTH://127.0.0.1:$oauth_port,ELSEWHERE://127.0.0.1:$elsewhere_port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,MTLS:SSL,OAUTH:SASL_SSL,ELSEWHERE:SSL,CONTROLLER:PLAINTEXT
ssl.keystore.location=$tls_dir/broker.p12
ssl.keystore.type=PKCS12
ssl.keystore.password=$tls_password
ssl.key.password=$tls_password
listener.name.elsewhere.ssl.keystore.location=$tls_dir/elsewhere.p12
listener.name.elsewhere.ssl.keystore.type=PKCS12
listener.name.elsewhere.ssl.keystore.password=$tls_password
listener.name.elsewhere.ssl.key.password=$tls_password
listener.name.mtls.ssl.client.auth=required
listener.name.mtls.ssl.truststore.location=$tls_dir/ca.crt
listener.name.mtls.ssl.truststore.type=PEM
sasl.enabled.mechanisms=SCRAM-SHA-256,PLAIN
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_sluice="$scram_password";
listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_sluice="$scram_password";
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
listener.name.oauth.oauthbearer.sasl.oauthbearer.jwks.endpoint.url=$issuer/jwks
listener.name.oauth.oauthbearer.sasl.oauthbearer.expected.audience=kafka
listener.name.oauth.oauthbearer.sasl.oauthbearer.expected.issuer=$issuer
listener.name.oauth.oauthbearer.connections.max.reauth.ms=60000
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
allow.everyone.if.no.acl.found=true
log.dirs=$run_dir/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
PROPS
  write_log4j "$run_dir/log4j2.properties"
  local java_opts=(-Xms256m -Xmx512m -Dlog4j2.configurationFile="$run_dir/log4j2.properties"
    -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="$issuer/jwks" -cp "$libs/*")
  local cluster_id
  cluster_id=$(java "${java_opts[@]}" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
  java "${java_opts[@]}" kafka.tools.StorageTool format -t "$cluster_id" -c "$run_dir/server.properties" \
    --add-scram "SCRAM-SHA-256=[name=sluice,password=$scram_password]" \
    --add-scram "SCRAM-SHA-512=[name=sluice,password=$scram_password]" \
    >"$run_dir/format.log" 2>&1 || { cat "$run_dir/format.log" >&2; stop_oidc; exit 1; }
  printf '%s\n' "$scram_password" >"$run_dir/scram-password"
  nohup java "${java_opts[@]}" kafka.Kafka "$run_dir/server.properties" >"$run_dir/kafka.log" 2>&1 &
  echo $! >"$pid_file"
  for _ in $(seq 1 120); do
    if ! running; then
      stop_oidc
      echo "Kafka exited during start-up; the end of its log ($run_dir/kafka.log):" >&2
      tail -n 30 "$run_dir/kafka.log" >&2
      exit 1
    fi
    if grep -q "Kafka Server started" "$run_dir/kafka.log" && port_open "$port"; then
      # Topics `denied-*`: the SCRAM user may see them but not write; `hidden-*`: not even see.
      acl --allow-principal User:sluice --operation Describe --topic denied-
      acl --deny-principal User:sluice --operation Write --topic denied-
      acl --deny-principal User:sluice --operation All --topic hidden-
      echo "Kafka $version is running at 127.0.0.1:$port, SASL at :$scram_port, TLS at :$tls_port, SASL_SSL at :$sasl_ssl_port, mTLS at :$mtls_port, OAUTHBEARER at :$oauth_port (tokens from $issuer), a mismatched certificate at :$elsewhere_port (PID $(cat "$pid_file"))."
      return
    fi
    sleep 0.5
  done
  echo "Kafka did not become ready within 60 s; see $run_dir/kafka.log." >&2
  stop
  exit 1
}

stop() {
  stop_oidc
  if ! running; then
    rm -f "$pid_file"
    echo "Kafka is not running."
    return
  fi
  terminate "$(cat "$pid_file")" 30
  rm -f "$pid_file"
  echo "Kafka stopped."
}

status() {
  if running && ! running_complete; then
    echo "Kafka is running at 127.0.0.1:$port without every listener or its OIDC token server; scripts/kafka.sh start starts it anew."
    return 1
  elif running; then
    echo "Kafka is running at 127.0.0.1:$port (PID $(cat "$pid_file"))."
  else
    echo "Kafka is not running."
    return 1
  fi
}

node_port() { echo $((19200 + $1)); }
node_controller_port() { echo $((19210 + $1)); }
node_pid_file() { echo "$cluster_dir/node-$1/kafka.pid"; }

node_running() {
  local pid_file
  pid_file=$(node_pid_file "$1")
  [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null
}

node_java() {
  java -Xms128m -Xmx384m -Dlog4j2.configurationFile="$cluster_dir/log4j2.properties" -cp "$libs/*" "$@"
}

# Starts node $1 from its existing config and data, and waits until it serves.
node_launch() {
  local node=$1 dir=$cluster_dir/node-$1
  nohup java -Xms128m -Xmx384m -Dlog4j2.configurationFile="$cluster_dir/log4j2.properties" -cp "$libs/*" \
    kafka.Kafka "$dir/server.properties" >>"$dir/kafka.log" 2>&1 &
  echo $! >"$(node_pid_file "$node")"
}

node_wait() {
  local node=$1 dir=$cluster_dir/node-$1
  for _ in $(seq 1 120); do
    if ! node_running "$node"; then
      echo "Kafka node $node exited during start-up; the end of its log ($dir/kafka.log):" >&2
      tail -n 30 "$dir/kafka.log" >&2
      exit 1
    fi
    if port_open "$(node_port "$node")" && grep -q "Kafka Server started" "$dir/kafka.log"; then
      return
    fi
    sleep 0.5
  done
  echo "Kafka node $node did not become ready within 60 s; see $dir/kafka.log." >&2
  exit 1
}

cluster_start() {
  install
  cluster_stop >/dev/null
  rm -rf "$cluster_dir"
  mkdir -p "$cluster_dir"
  write_log4j "$cluster_dir/log4j2.properties"
  local voters="" node
  for node in $(seq 1 $cluster_nodes); do
    voters="$voters${voters:+,}$node@127.0.0.1:$(node_controller_port "$node")"
  done
  local cluster_id
  cluster_id=$(node_java kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
  for node in $(seq 1 $cluster_nodes); do
    if port_open "$(node_port "$node")"; then
      echo "Port $(node_port "$node") is taken by another process." >&2
      exit 1
    fi
    local dir=$cluster_dir/node-$node
    mkdir -p "$dir/data"
    cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=$node
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$(node_port "$node"),CONTROLLER://127.0.0.1:$(node_controller_port "$node")
advertised.listeners=PLAINTEXT://127.0.0.1:$(node_port "$node")
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
auto.create.topics.enable=false
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
group.initial.rebalance.delay.ms=0
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
PROPS
    node_java kafka.tools.StorageTool format -t "$cluster_id" -c "$dir/server.properties" \
      >"$dir/format.log" 2>&1 || { cat "$dir/format.log" >&2; exit 1; }
  done
  for node in $(seq 1 $cluster_nodes); do
    node_launch "$node"
  done
  for node in $(seq 1 $cluster_nodes); do
    node_wait "$node"
  done
  echo "Kafka $version cluster of $cluster_nodes nodes is running at $(cluster_bootstrap)."
}

cluster_bootstrap() {
  local list="" node
  for node in $(seq 1 $cluster_nodes); do
    list="$list${list:+,}127.0.0.1:$(node_port "$node")"
  done
  echo "$list"
}

node_kill() {
  local node=$1
  if node_running "$node"; then
    kill -9 "$(cat "$(node_pid_file "$node")")"
    echo "Kafka node $node killed."
  fi
  rm -f "$(node_pid_file "$node")"
}

# Starts the given nodes again, all before waiting: a node finishes starting only once
# a majority of the controllers runs.
node_start() {
  local node
  for node in "$@"; do
    node_running "$node" || node_launch "$node"
  done
  for node in "$@"; do
    node_wait "$node"
    echo "Kafka node $node is running at 127.0.0.1:$(node_port "$node")."
  done
}

cluster_stop() {
  local node
  for node in $(seq 1 $cluster_nodes); do
    if node_running "$node"; then
      terminate "$(cat "$(node_pid_file "$node")")" 20
    fi
    rm -f "$(node_pid_file "$node")"
  done
  echo "Kafka cluster stopped."
}

valid_nodes() {
  [ $# -gt 0 ] || { echo "usage: $0 node-kill|node-start N [N ...] (N in 1..3)" >&2; exit 2; }
  local node
  for node in "$@"; do
    case "$node" in
      1|2|3) ;;
      *) echo "usage: $0 node-kill|node-start N [N ...] (N in 1..3)" >&2; exit 2 ;;
    esac
  done
}

command=${1:-}
shift || true
case "$command" in
  install) install; install_oidc ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  tool)
    install
    mkdir -p "$run_dir"
    write_log4j "$run_dir/tool-log4j2.properties" WARN
    exec java -Dlog4j2.configurationFile="$run_dir/tool-log4j2.properties" -cp "$libs/*" "$@"
    ;;
  cluster-start) cluster_start ;;
  cluster-stop) cluster_stop ;;
  node-kill) valid_nodes "$@"; for node in "$@"; do node_kill "$node"; done ;;
  node-start) valid_nodes "$@"; node_start "$@" ;;
  *) echo "usage: $0 install|start|stop|status|tool CLASS ARGS...|cluster-start|cluster-stop|node-kill N...|node-start N..." >&2; exit 2 ;;
esac
