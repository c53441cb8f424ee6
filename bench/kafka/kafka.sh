#!/usr/bin/env bash
# Apache Kafka for replog's benchmarks: fetch its jars with Maven, run a 3-node KRaft cluster on
# loopback, stop it. Bench only: nothing in CI calls this (docs/benchmarks.md, "Harness").
#
#   bench/kafka/kafka.sh fetch            jars into $KAFKA_CACHE/libs (once; Maven's cache after)
#   bench/kafka/kafka.sh start            fetch if needed, write configs, format, start, wait
#   bench/kafka/kafka.sh stop             SIGTERM every node, SIGKILL after 30 s
#   bench/kafka/kafka.sh kill NODE_ID     SIGKILL one node (the failover timeline)
#   bench/kafka/kafka.sh restart NODE_ID  start a stopped node again and wait for its listener
#   bench/kafka/kafka.sh bootstrap        print the bootstrap servers
#
# Settings (environment):
#   KAFKA_VERSION      4.4.0 (the pom's default; any 4.x that Maven Central serves)
#   KAFKA_CACHE        ~/.cache/replog-bench/kafka-$KAFKA_VERSION (jars, outside the checkout)
#   KAFKA_CLUSTER_DIR  $KAFKA_CACHE/cluster (configs, data, logs, pids; wiped by `start`)
#   KAFKA_BASE_PORT    29092: node i's broker listener is base+i-1, its controller base+100+i-1
#   KAFKA_HEAP         512m per node (three nodes and replog's share 2 cores and 24 GiB)
#   KAFKA_SEGMENT_BYTES 1073741824, replog's (and Kafka's) default segment.bytes
#   KAFKA_START_TIMEOUT_S 90: how long `start` and `restart` wait for a node's listener (a node
#                      restarted with 10,000 partitions on a loaded machine takes minutes)
#   KAFKA_PROPERTIES   more lines of every node's server.properties, one KEY=VALUE a line, after
#                      the ones below (a later line wins: log.cleaner.enable=false, ...)
#   KAFKA_SECURITY     plaintext (default), ssl or sasl_ssl: the protocol of every link, the
#                      brokers' listener (clients and replication; named as its protocol) and
#                      the controllers'. ssl: TLS, client certificates required on both.
#                      sasl_ssl: the brokers' listener SASL_SSL with SCRAM-SHA-512 (no client
#                      certificate asked), the brokers signing in to each other as
#                      KAFKA_SASL_USER; the controllers' listener mutual TLS
#   KAFKA_TLS_DIR      ssl, sasl_ssl: PEM files, ca.pem (every node's truststore) and node-<id>.pem
#                      (node id's keystore: its unencrypted PKCS#8 key, its certificate, the CA's)
#   KAFKA_SASL_USER    sasl_ssl: the user the brokers sign in as (default admin)
#   KAFKA_SASL_PASSWORD_FILE  sasl_ssl: a file holding its password ([A-Za-z0-9._~-] only),
#                      formatted into the metadata log as a SCRAM-SHA-512 credential
#
# Settings matched to replog's cluster (`replog cluster start`): 3 combined nodes (broker and
# controller), replication factor 3, min.insync.replicas=2, no fsync per message (Kafka's and
# replog's default: flush.messages unset), the same segment size, KAFKA_SECURITY as `--security`
# (replog/cli/bench/kafka_security.py writes the files from the same code). Clients choose acks=all.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
KAFKA_CACHE="${KAFKA_CACHE:-$HOME/.cache/replog-bench/kafka-$KAFKA_VERSION}"
KAFKA_CLUSTER_DIR="${KAFKA_CLUSTER_DIR:-$KAFKA_CACHE/cluster}"
KAFKA_BASE_PORT="${KAFKA_BASE_PORT:-29092}"
KAFKA_HEAP="${KAFKA_HEAP:-512m}"
KAFKA_SEGMENT_BYTES="${KAFKA_SEGMENT_BYTES:-1073741824}"
NODES=3
START_TIMEOUT_S="${KAFKA_START_TIMEOUT_S:-90}"
KAFKA_SECURITY="${KAFKA_SECURITY:-plaintext}"
KAFKA_SASL_USER="${KAFKA_SASL_USER:-admin}"
SCRAM_MECHANISM=SCRAM-SHA-512
SCRAM_LOGIN_MODULE=org.apache.kafka.common.security.scram.ScramLoginModule
STOP_TIMEOUT_S=30

die() { echo "kafka.sh: $*" >&2; exit 1; }

broker_port() { echo $((KAFKA_BASE_PORT + $1 - 1)); }
controller_port() { echo $((KAFKA_BASE_PORT + 100 + $1 - 1)); }

fetch() {
  if [[ -f "$KAFKA_CACHE/libs/kafka_2.13-$KAFKA_VERSION.jar" ]]; then
    return 0
  fi
  command -v mvn >/dev/null || die "mvn not found: Maven fetches Kafka's jars"
  echo "kafka.sh: fetching Apache Kafka $KAFKA_VERSION's jars with Maven into $KAFKA_CACHE/libs" >&2
  mkdir -p "$KAFKA_CACHE/libs.partial"
  mvn -q -B -f "$HERE/pom.xml" "-Dkafka.version=$KAFKA_VERSION" dependency:copy-dependencies \
    -DincludeScope=runtime "-DoutputDirectory=$KAFKA_CACHE/libs.partial" \
    || die "Maven could not fetch org.apache.kafka:kafka_2.13:$KAFKA_VERSION"
  rm -rf "$KAFKA_CACHE/libs"
  mv "$KAFKA_CACHE/libs.partial" "$KAFKA_CACHE/libs"
}

java_cmd() {
  # The JVM flags of Kafka's kafka-run-class.sh and kafka-server-start.sh, with a smaller heap;
  # an array, so the classpath's `*` reaches java unexpanded.
  JAVA=(java "-Xms$KAFKA_HEAP" "-Xmx$KAFKA_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20
    -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent
    -Djava.awt.headless=true "-Dlog4j2.configurationFile=$KAFKA_CLUSTER_DIR/log4j2.properties"
    -cp "$KAFKA_CACHE/libs/*")
}

voters() {
  local i out=""
  for i in $(seq 1 $NODES); do out+="${out:+,}$i@127.0.0.1:$(controller_port "$i")"; done
  echo "$out"
}

bootstrap() {
  local i out=""
  for i in $(seq 1 $NODES); do out+="${out:+,}127.0.0.1:$(broker_port "$i")"; done
  echo "$out"
}

write_configs() {
  mkdir -p "$KAFKA_CLUSTER_DIR"
  cat >"$KAFKA_CLUSTER_DIR/log4j2.properties" <<'EOF'
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.server.name = org.apache.kafka.server
logger.server.level = INFO
# Each cleaning pass's statistics: bench/cleaner_produce.py counts the passes.
logger.cleaner.name = org.apache.kafka.storage.internals.log.LogCleaner
logger.cleaner.level = INFO
logger.cleanerthread.name = org.apache.kafka.storage.internals.log.LogCleaner$CleanerThread
logger.cleanerthread.level = INFO
EOF
  local i
  for i in $(seq 1 $NODES); do
    mkdir -p "$KAFKA_CLUSTER_DIR/node-$i/data"
    cat >"$KAFKA_CLUSTER_DIR/node-$i/server.properties" <<EOF
# Written by bench/kafka/kafka.sh: node $i of a 3-node KRaft cluster on loopback.
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$(voters)
listeners=$LISTENER://127.0.0.1:$(broker_port "$i"),CONTROLLER://127.0.0.1:$(controller_port "$i")
advertised.listeners=$LISTENER://127.0.0.1:$(broker_port "$i")
controller.listener.names=CONTROLLER
inter.broker.listener.name=$LISTENER
listener.security.protocol.map=CONTROLLER:$CONTROLLER_PROTOCOL,$LISTENER:$LISTENER
log.dirs=$KAFKA_CLUSTER_DIR/node-$i/data
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
log.segment.bytes=$KAFKA_SEGMENT_BYTES
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
EOF
    security_properties "$i" >>"$KAFKA_CLUSTER_DIR/node-$i/server.properties"
    if [[ -n "${KAFKA_PROPERTIES:-}" ]]; then
      printf '%s\n' "$KAFKA_PROPERTIES" >>"$KAFKA_CLUSTER_DIR/node-$i/server.properties"
    fi
  done
}

check_security() {
  # KAFKA_SECURITY's listener name and controller protocol, and the files it needs, checked
  # before anything is written.
  case "$KAFKA_SECURITY" in
    plaintext) LISTENER=PLAINTEXT CONTROLLER_PROTOCOL=PLAINTEXT; return 0 ;;
    ssl) LISTENER=SSL CONTROLLER_PROTOCOL=SSL ;;
    sasl_ssl) LISTENER=SASL_SSL CONTROLLER_PROTOCOL=SSL ;;
    *) die "KAFKA_SECURITY=$KAFKA_SECURITY: plaintext, ssl or sasl_ssl" ;;
  esac
  [[ -n "${KAFKA_TLS_DIR:-}" ]] || die "KAFKA_SECURITY=$KAFKA_SECURITY needs KAFKA_TLS_DIR"
  local i file
  for file in ca.pem $(for i in $(seq 1 $NODES); do echo "node-$i.pem"; done); do
    [[ -r "$KAFKA_TLS_DIR/$file" ]] || die "KAFKA_TLS_DIR: $KAFKA_TLS_DIR/$file is not readable"
  done
  [[ "$KAFKA_SECURITY" == sasl_ssl ]] || return 0
  local path="${KAFKA_SASL_PASSWORD_FILE:-}"
  [[ -n "$path" && -r "$path" ]] \
    || die "KAFKA_SECURITY=sasl_ssl needs KAFKA_SASL_PASSWORD_FILE, a readable file (got '$path')"
  SASL_PASSWORD="$(tr -d '\n' <"$path")"
  # Both go into a JAAS option's quotes and into --add-scram's brackets as they are.
  [[ "$SASL_PASSWORD" =~ ^[A-Za-z0-9._~-]+$ ]] \
    || die "KAFKA_SASL_PASSWORD_FILE: $path holds no password of [A-Za-z0-9._~-] only"
  [[ "$KAFKA_SASL_USER" =~ ^[A-Za-z0-9._~-]+$ ]] \
    || die "KAFKA_SASL_USER=$KAFKA_SASL_USER: characters other than [A-Za-z0-9._~-]"
}

security_properties() {
  # Node $1's TLS and SASL lines (none under plaintext).
  [[ "$KAFKA_SECURITY" == plaintext ]] && return 0
  printf '%s\n' "ssl.keystore.type=PEM" "ssl.keystore.location=$KAFKA_TLS_DIR/node-$1.pem" \
    "ssl.truststore.type=PEM" "ssl.truststore.location=$KAFKA_TLS_DIR/ca.pem"
  if [[ "$KAFKA_SECURITY" == ssl ]]; then
    echo "ssl.client.auth=required"
    return 0
  fi
  local jaas="$SCRAM_LOGIN_MODULE required username=\"$KAFKA_SASL_USER\" password=\"$SASL_PASSWORD\";"
  printf '%s\n' "ssl.client.auth=none" "listener.name.controller.ssl.client.auth=required" \
    "sasl.enabled.mechanisms=$SCRAM_MECHANISM" \
    "sasl.mechanism.inter.broker.protocol=$SCRAM_MECHANISM" \
    "listener.name.sasl_ssl.${SCRAM_MECHANISM,,}.sasl.jaas.config=$jaas"
}

scram_arguments() {
  # StorageTool format's arguments that put the brokers' SCRAM credential into the metadata log
  # before any node runs (none but under sasl_ssl).
  SCRAM=()
  if [[ "$KAFKA_SECURITY" == sasl_ssl ]]; then
    SCRAM=(--add-scram "$SCRAM_MECHANISM=[name=$KAFKA_SASL_USER,password=$SASL_PASSWORD]")
  fi
}

random_cluster_id() {
  # StorageTool logs to stdout through log4j before it prints the id: keep only the id, a
  # Kafka Uuid (22 characters of URL-safe base64), or every tool would print a two-line ClusterId.
  local said id
  said="$("${JAVA[@]}" kafka.tools.StorageTool random-uuid)" || die "StorageTool random-uuid failed: $said"
  id="$(printf '%s\n' "$said" | grep -E '^[A-Za-z0-9_-]{22}$' | tail -n 1)"
  [[ -n "$id" ]] || die "StorageTool random-uuid printed no cluster id: $said"
  echo "$id"
}

pid_of() { cat "$KAFKA_CLUSTER_DIR/node-$1/node.pid" 2>/dev/null || true; }

alive() { [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null; }

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  fetch
  command -v java >/dev/null || die "java not found: Kafka $KAFKA_VERSION needs Java 17 or later"
  local i
  for i in $(seq 1 $NODES); do
    alive "$(pid_of "$i")" && die "node $i already runs (pid $(pid_of "$i")); run: $0 stop"
    for port in "$(broker_port "$i")" "$(controller_port "$i")"; do
      listening "$port" && die "port $port is taken (set KAFKA_BASE_PORT)"
    done
  done
  check_security
  rm -rf "$KAFKA_CLUSTER_DIR"
  # Its owner's only: under sasl_ssl every server.properties holds the brokers' password.
  (umask 077 && write_configs)
  java_cmd
  scram_arguments
  local cluster_id
  cluster_id="$(random_cluster_id)"
  for i in $(seq 1 $NODES); do
    "${JAVA[@]}" kafka.tools.StorageTool format -t "$cluster_id" \
      -c "$KAFKA_CLUSTER_DIR/node-$i/server.properties" ${SCRAM[@]+"${SCRAM[@]}"} \
      >"$KAFKA_CLUSTER_DIR/node-$i/format.log" \
      || die "formatting node $i failed: $(cat "$KAFKA_CLUSTER_DIR/node-$i/format.log")"
  done
  for i in $(seq 1 $NODES); do
    spawn_node "$i"
  done
  echo "kafka.sh: waiting up to ${START_TIMEOUT_S}s for 3 brokers to listen on $(bootstrap)" >&2
  for i in $(seq 1 $NODES); do
    wait_listening "$i"
  done
  echo "kafka.sh: Kafka $KAFKA_VERSION runs: bootstrap servers $(bootstrap)" >&2
}

spawn_node() {
  # A node keeps each replica's log file open: take every open file the hard limit allows.
  ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
  # setsid: the node outlives this script and gets no terminal's signals.
  setsid "${JAVA[@]}" kafka.Kafka "$KAFKA_CLUSTER_DIR/node-$1/server.properties" \
    >>"$KAFKA_CLUSTER_DIR/node-$1/node.log" 2>&1 </dev/null &
  echo $! >"$KAFKA_CLUSTER_DIR/node-$1/node.pid"
}

wait_listening() {
  local deadline=$((SECONDS + START_TIMEOUT_S))
  until listening "$(broker_port "$1")"; do
    if ! alive "$(pid_of "$1")" || ((SECONDS > deadline)); then
      tail -n 30 "$KAFKA_CLUSTER_DIR/node-$1/node.log" >&2 || true
      stop
      die "node $1 did not start (its log: $KAFKA_CLUSTER_DIR/node-$1/node.log)"
    fi
    sleep 0.5
  done
}

restart_node() {
  alive "$(pid_of "$1")" && die "node $1 already runs (pid $(pid_of "$1"))"
  java_cmd
  spawn_node "$1"
  wait_listening "$1"
}

stop() {
  local i pid
  for i in $(seq 1 $NODES); do
    pid="$(pid_of "$i")"
    alive "$pid" && kill -TERM "$pid"
  done
  for i in $(seq 1 $NODES); do
    pid="$(pid_of "$i")"
    local deadline=$((SECONDS + STOP_TIMEOUT_S))
    while alive "$pid"; do
      if ((SECONDS > deadline)); then
        echo "kafka.sh: node $i (pid $pid) ignored SIGTERM for ${STOP_TIMEOUT_S}s: SIGKILL" >&2
        kill -KILL "$pid" || true
      fi
      sleep 0.2
    done
    rm -f "$KAFKA_CLUSTER_DIR/node-$i/node.pid"
  done
}

kill_node() {
  local pid
  pid="$(pid_of "$1")"
  alive "$pid" || die "node $1 does not run"
  kill -KILL "$pid"
}

case "${1:-}" in
  fetch) fetch ;;
  start) start ;;
  stop) stop ;;
  kill) kill_node "${2:?usage: $0 kill NODE_ID}" ;;
  restart) restart_node "${2:?usage: $0 restart NODE_ID}" ;;
  bootstrap) bootstrap ;;
  *) die "usage: $0 fetch|start|stop|kill NODE_ID|restart NODE_ID|bootstrap" ;;
esac
