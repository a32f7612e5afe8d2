"""End-to-end benchmark: the same Delta table delivered to the same Kafka broker by
each contestant, with the same records checked; prints and writes a Markdown table
(and a PNG chart when matplotlib is there). Run through `bench/e2e.sh`.

Contestants:
  sluice-eos     sluice run, exactly-once, the Rust gold-deals module
  sluice-alo     sluice run, at-least-once, the same module
  sluice-python  sluice run, exactly-once, gold-deals in Python (componentize-py)
  sluice-js      sluice run, exactly-once, gold-deals in JavaScript (componentize-js)
  sluice-c       sluice run, exactly-once, gold-deals in C (clang, wasi-libc)
  sluice-go      sluice run, exactly-once, gold-deals in Go (standard Go, wasip1)
  sluice-replay  sluice-eos as a replay runs: `[source] starting_version = 0` and
                 `ending_version` the table's last, finishing on its own (no
                 --stop-at-latest): a replay's throughput against a normal run
  sluice-eos-x2  sluice-eos with two instances of the module (`[transform] instances = 2`)
  sluice-sasl-ssl  sluice-eos over SASL_SSL with SCRAM-SHA-512 (the local broker's listener)
  sluice-mtls    sluice-eos over mutual TLS
  sluice-oauth   sluice-eos over SASL_SSL with OAUTHBEARER (12-second OIDC tokens)
  sluice-c-avro, sluice-c-json-schema, sluice-c-protobuf
                 sluice-c with the helpers' records written as Avro, JSON Schema or
                 Protobuf in Confluent's wire format (schema registry: scripts/registry.sh)
  sluice-account, sluice-account-js, sluice-account-python, sluice-account-go,
  sluice-account-c
                 sluice run, exactly-once, the account-pipeline example (keyed state:
                 open deals per account, a changelog written with every commit) in Rust,
                 JavaScript, Python, Go and C
  native         Sluice's pipeline with gold-deals compiled into the host
  native-x2      native with two instances
  wasm           the same pipeline as native, in the benchmark's own process, running
                 the gold-deals component
  wasm-shadow    wasm with the same component in the pipeline's shadow (its records
                 compared, not produced): the cost of a shadow deploy
  wasm-shadow-loop
                 wasm with a hostile candidate in its shadow: the misbehaving
                 fixture looping on the first batches until their deadline
  raw            gold-deals' records precomputed, then produced by rdkafka alone
  kafka-perf     Kafka's own producer benchmark (kafka-producer-perf-test's
                 ProducerPerformance, Java client) sending as many records of
                 gold-deals' sizes with the sink's settings, in transactions: the
                 producer limit of this machine and broker
  spark          Spark Structured Streaming: readChangeFeed, the same shaping,
                 Spark's Kafka sink, local[2], availableNow
"""

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from samples import rounds, speed_ratio, spread, wait_for_quiet

ROOT = Path(__file__).resolve().parents[2]
CONTESTANTS = ["sluice-eos", "sluice-replay", "sluice-eos-x2", "sluice-alo", "sluice-python", "sluice-js", "sluice-c", "sluice-go", "sluice-c-avro", "sluice-c-json-schema", "sluice-c-protobuf", "sluice-sasl-ssl", "sluice-mtls", "sluice-oauth", "sluice-account", "sluice-account-js", "sluice-account-python", "sluice-account-go", "sluice-account-c", "native", "native-x2", "wasm", "wasm-shadow", "wasm-shadow-loop", "raw", "kafka-perf", "spark"]
# The gold-deals module each Sluice contestant runs (the Rust one when not named).
MODULES = {"sluice-python": "gold-deals-python.wasm", "sluice-js": "gold-deals-js.wasm", "sluice-c": "gold-deals-c.wasm", "sluice-go": "gold-deals-go.wasm"}
# Contestants that write the helpers' records in a registry format: their bytes differ
# from the JSON contestants', so they are checked by count and among their own runs.
ENCODINGS = {"sluice-c-avro": "avro", "sluice-c-json-schema": "json-schema", "sluice-c-protobuf": "protobuf"}
# Contestants that send records of gold-deals' sizes but not its records (Kafka's own
# producer benchmark picks payloads at random): checked by count only.
SIZED = {"kafka-perf"}
# The hostile candidate's parameters (gold-deals ignores them): the misbehaving fixture
# loops on each of the first three batches of 10,000 rows.
HOSTILE_PARAMS = 'behavior = "loop"\nbad_ids = "deal-0000,deal-10000,deal-20000"'
# The sink's producer settings (host/sink/src/properties.rs), for the Java producer.
SINK_PROPERTIES = ["acks=all", "enable.idempotence=true", "linger.ms=20", "compression.type=lz4"]
for _name in ENCODINGS:
    MODULES[_name] = MODULES["sluice-c"]
# Contestants that keep keyed state (the account example): they make the example's
# records, not gold-deals', so they are checked against each other, every language
# and every run the same bytes.
STATEFUL = {"sluice-account": "account-pipeline.wasm", **{f"sluice-account-{language}": f"account-pipeline-{language}.wasm" for language in ("js", "python", "go", "c")}}
MODULES.update(STATEFUL)
REGISTRY = os.environ.get("SLUICE_BENCH_REGISTRY", f"http://127.0.0.1:{os.environ.get('SLUICE_REGISTRY_PORT', 18081)}/apis/ccompat/v7")
# The local broker's secured listeners (scripts/kafka.sh) and their files.
KAFKA_RUN = Path(os.environ.get("SLUICE_KAFKA_DIR") or Path(os.environ.get("SLUICE_CACHE") or Path.home() / ".cache/sluice") / "kafka-run")


def secured(name):
    """The address and `[sink.kafka]` lines of a contestant over a secured listener."""
    ca, password = KAFKA_RUN / "tls/ca.crt", KAFKA_RUN / "scram-password"
    certificate, key = KAFKA_RUN / "tls/client.crt", KAFKA_RUN / "tls/client.key"
    tls = f'"ssl.ca.location" = "{ca}"\n'
    port = lambda name, default: os.environ.get(f"SLUICE_{name}_PORT", default)  # noqa: E731
    token_url = f"http://127.0.0.1:{port('OIDC', 19180)}/kafka/token"
    if name == "sluice-sasl-ssl":
        return f"127.0.0.1:{port('KAFKA_SASL_SSL', 19096)}", tls + f'"security.protocol" = "SASL_SSL"\n"sasl.mechanism" = "SCRAM-SHA-512"\n"sasl.username" = "sluice"\n"sasl.password" = "${{file:{password}}}"\n'
    if name == "sluice-mtls":
        return f"127.0.0.1:{port('KAFKA_MTLS', 19097)}", tls + f'"security.protocol" = "SSL"\n"ssl.certificate.location" = "{certificate}"\n"ssl.key.location" = "{key}"\n'
    if name == "sluice-oauth":
        return f"127.0.0.1:{port('KAFKA_OAUTH', 19098)}", tls + f'"security.protocol" = "SASL_SSL"\n"sasl.mechanism" = "OAUTHBEARER"\n"sasl.oauthbearer.method" = "oidc"\n"sasl.oauthbearer.token.endpoint.url" = "{token_url}"\n"sasl.oauthbearer.client.id" = "bench"\n"sasl.oauthbearer.client.secret" = "bench"\n'
    return None, ""


TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def process_tree(root):
    """{pid: (cpu seconds, rss bytes)} of `root` and its descendants, from /proc."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command: state ppid ... utime(12) stime(13) ... rss(22)
        stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS, int(fields[21]) * PAGE)
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, (ppid, _, _) in stats.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return {pid: stats[pid][1:] for pid in tree if pid in stats}


def run_measured(argv, env=None, cwd=None):
    """Runs a command; returns (stdout, wall seconds, CPU seconds, peak RSS MiB, stderr).

    CPU and RSS cover the whole process tree (Spark's JVM is a grandchild that its
    driver does not wait for): the larger of what wait4 reports and what sampling
    /proc every 200 ms saw (CPU summed over every process seen, RSS summed at each
    sample)."""
    started = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
    cpu_seen, peak_rss, sampling = {}, [0], [True]

    def sample():
        while sampling[0]:
            tree = process_tree(process.pid)
            for pid, (cpu, _) in tree.items():
                cpu_seen[pid] = max(cpu, cpu_seen.get(pid, 0))
            peak_rss[0] = max(peak_rss[0], sum(rss for _, rss in tree.values()))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out = []
    err = []
    readers = [
        threading.Thread(target=lambda: out.append(process.stdout.read())),
        threading.Thread(target=lambda: err.append(process.stderr.read())),
    ]
    for reader in readers:
        reader.start()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    sampling[0] = False
    sampler.join()
    for reader in readers:
        reader.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        sys.exit(f"{' '.join(map(str, argv))} failed ({process.returncode}):\n{err[0].decode(errors='replace')[-4000:]}")
    cpu = max(usage.ru_utime + usage.ru_stime, sum(cpu_seen.values()))
    rss = max(usage.ru_maxrss * 1024, peak_rss[0]) / 1024 / 1024
    return out[0].decode(), wall, cpu, rss, err[0].decode(errors="replace")


STAGES = ["read", "transform", "send", "commit", "waiting for batches"]


def stages(log):
    """The pipeline's seconds per stage, from its `Pipeline stopped.` log line (None for
    contestants that are not the pipeline)."""
    match = re.search(r"stages=read ([\d.]+) s, transform ([\d.]+) s, send ([\d.]+) s, commit ([\d.]+) s, waiting for batches ([\d.]+) s", log)
    return dict(zip(STAGES, map(float, match.groups()))) if match else None


def state_access(log):
    """Keys a stateful pipeline's module read and wrote, from its `Pipeline stopped.`
    log line (None without it)."""
    match = re.search(r"state_keys_read=(\d+) state_keys_written=(\d+)", log)
    return {"read": int(match.group(1)), "written": int(match.group(2))} if match else None


def last_json(text):
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


class Bench:
    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.table = work / "deals"
        target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
        self.bin = target / args.profile
        self.module = target / "guests" / "components" / "gold-deals.wasm"
        self.run_id = f"{os.getpid()}-{int(time.time())}"

    def topic(self, contestant, attempt):
        return f"bench-{contestant}-{self.run_id}-{attempt}"

    def sluice_config(self, topic, delivery, follow=False, module=None, instances=1, listener=None, source=""):
        bootstrap, kafka = secured(listener)
        # A stateful contestant starts each sample with an empty store and changelog.
        # A key per open deal and per account: more than [state]'s default million.
        state = f'[state]\ndir = "{self.work / ("state-" + topic)}"\nmax_keys = 4000000\n' if listener in STATEFUL else ""
        encoding = ""
        if listener in ENCODINGS:
            encoding = f'[sink.encoding]\nvalue = "{ENCODINGS[listener]}"\n'
            if ENCODINGS[listener] == "protobuf":
                encoding += f'protobuf_schema = "{ROOT / "tests/data/schemas/gold-deal.proto"}"\n'
            encoding += f'[sink.schema_registry]\nurl = "{REGISTRY}"\n'

        config = self.work / f"{topic}.toml"
        config.write_text(
            f"""[pipeline]
name = "{topic}"
[source]
table = "{self.table}"
poll_interval = "{'50ms' if follow else '1s'}"
{source}[transform]
module = "{module or self.module}"
instances = {instances}
[sink]
topic = "{topic}"
delivery = "{delivery}"
change_headers = {'true' if follow else 'false'}
{encoding}{state}[sink.kafka]
"bootstrap.servers" = "{bootstrap or self.args.bootstrap}"
{kafka}"""
        )
        return config

    def create_topic(self, topic):
        # One partition, as the pipelines' default topics; Spark and the raw producer
        # write to the same kind of topic.
        subprocess.run([self.bin / "e2e", "topic", topic, self.args.bootstrap], check=True, capture_output=True)

    def warm_up(self, name):
        """Compiles a Sluice contestant's module into the compile cache (`sluice check`),
        untimed: a pipeline compiles a module once, not at every start."""
        if not name.startswith("sluice-"):
            return
        module = self.module.with_name(MODULES[name]) if name in MODULES else None
        config = self.sluice_config(self.topic(name, "compile"), "exactly-once", module=module, listener=name)
        subprocess.run([self.bin / "sluice", "check", "--config", config], capture_output=True)

    def contestant(self, name, attempt):
        """Runs one contestant once; returns its figures."""
        topic = self.topic(name, attempt)
        self.create_topic(topic)
        if name.startswith("sluice-"):
            delivery = "at-least-once" if name == "sluice-alo" else "exactly-once"
            module = self.module.with_name(MODULES[name]) if name in MODULES else None
            # A replay's range: the whole table, to its last version, where it finishes.
            replay = f"starting_version = 0\nending_version = {self.last_version()}\n" if name == "sluice-replay" else ""
            config = self.sluice_config(topic, delivery, module=module, instances=2 if name.endswith("-x2") else 1, listener=name, source=replay)
            stop = [] if replay else ["--stop-at-latest"]
            _, wall, cpu, rss, err = run_measured([self.bin / "sluice", "run", "--config", config, *stop])
            seconds = wall
        elif name.startswith("native"):
            instances = "2" if name.endswith("-x2") else "1"
            out, wall, cpu, rss, err = run_measured([self.bin / "e2e", "native", self.table, topic, self.args.bootstrap, instances])
            seconds = wall
        elif name.startswith("wasm"):
            shadow = {"wasm": [], "wasm-shadow": ["shadow"], "wasm-shadow-loop": ["shadow", self.module.with_name("misbehaving.wasm"), HOSTILE_PARAMS]}[name]
            out, wall, cpu, rss, err = run_measured([self.bin / "e2e", "wasm", self.table, topic, self.args.bootstrap, self.module, self.work / "wasm-cache", *shadow])
            seconds = wall
            compared = last_json(out)["shadow"]
            if name == "wasm-shadow" and compared["differing"]:
                sys.exit(f"the shadow of gold-deals beside itself found differences: {compared}")
            if name == "wasm-shadow-loop" and compared["batches"] - compared["failed_batches"] > 0:
                sys.exit(f"the looping candidate finished a batch: {compared}")
        elif name == "kafka-perf":
            out, wall, cpu, rss, err = run_measured(self.kafka_perf(topic))
            # The tool's own rate, over producing only (not the JVM's start).
            summary = re.findall(r"^(\d+) records sent, ([\d.]+) records/sec", out, re.M)[-1]
            seconds = int(summary[0]) / float(summary[1])
        elif name == "raw":
            out, wall, cpu, rss, err = run_measured([self.bin / "e2e", "raw", self.table, topic, self.args.bootstrap])
            # Producing only: the records were computed before the clock started.
            seconds = last_json(out)["seconds"]
        else:
            env = dict(os.environ, SLUICE_SPARK_IVY=str(Path(self.args.cache) / "spark-ivy"), PYSPARK_PYTHON=self.args.spark_python)
            checkpoint = self.work / f"checkpoint-{topic}"
            _, wall, cpu, rss, err = run_measured(
                [self.args.spark_python, ROOT / "bench/e2e/spark_job.py", self.table, topic, self.args.bootstrap, checkpoint],
                env=env,
            )
            seconds = wall
        digest = last_json(subprocess.run([self.bin / "e2e", "digest", topic, self.args.bootstrap], check=True, capture_output=True, text=True).stdout)
        return {"seconds": seconds, "cpu": cpu, "rss": rss, "count": digest["count"], "sha256": digest["sha256"], "stages": stages(err), "state": state_access(err)}

    def last_version(self):
        """The table's last version, from its log's commit files."""
        return max(int(f.stem) for f in (Path(self.table) / "_delta_log").glob("*.json"))

    def kafka_perf(self, topic):
        """Kafka's producer benchmark over this table's gold-deals records: as many
        records as the other contestants deliver, with their key and value sizes (each
        payload is a record's key and value bytes), the sink's settings, and
        transactions of 200 ms (about the size of `sluice run`'s 100,000-record
        commits at its speed here)."""
        payloads = self.work / "payloads"
        if not payloads.exists():
            made = last_json(subprocess.run([self.bin / "e2e", "payloads", self.table, payloads], check=True, capture_output=True, text=True).stdout)
            self.payload_records = made["records"]
        return [
            ROOT / "scripts/kafka.sh", "tool", "org.apache.kafka.tools.ProducerPerformance",
            "--bootstrap-server", self.args.bootstrap, "--topic", topic,
            "--num-records", str(self.payload_records), "--payload-file", payloads, "--throughput", "-1",
            "--transactional-id", f"bench-perf-{topic}", "--transaction-duration-ms", "200",
            "--command-property", *SINK_PROPERTIES,
        ]

    def restore(self, name):
        """The last timed sample's state of a stateful contestant, restored from its
        changelog alone (the node's copy deleted, as after a move): seconds, keys,
        changelog offsets and the store's size on disk."""
        topic = self.topic(name, self.args.runs - 1)
        config = self.sluice_config(topic, "exactly-once", module=self.module.with_name(MODULES[name]), listener=name)
        store = self.work / f"state-{topic}"
        shutil.rmtree(store)
        out, wall, cpu, rss, _ = run_measured([self.bin / "sluice", "state", "show", "--json", "--config", config])
        shown = last_json(out)
        disk = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
        return {"seconds": shown["restore_seconds"], "wall": wall, "cpu": cpu, "rss": rss, "keys": shown["keys"], "bytes": shown["bytes"], "offsets": shown["changelog_offset"], "disk": disk}

    def large_commit(self, rows):
        """sluice-eos streaming one commit of `rows` deals: seconds and peak memory."""
        table = self.work / f"large-{rows}"
        subprocess.run([sys.executable, ROOT / "scripts/deals_table.py", table, "bulk", "--rows", str(rows)], check=True, capture_output=True)
        original, self.table = self.table, table
        topic = self.topic(f"large-{rows}", 0)
        self.create_topic(topic)
        config = self.sluice_config(topic, "exactly-once")
        self.table = original
        _, wall, cpu, rss, _ = run_measured([self.bin / "sluice", "run", "--config", config, "--stop-at-latest"])
        # Counted, not digested: sorting 100M records would take more memory than the run.
        count = last_json(subprocess.run([self.bin / "e2e", "count", topic, self.args.bootstrap], check=True, capture_output=True, text=True).stdout)["count"]
        # Its files are gigabytes at 100M rows: only the figures are kept.
        shutil.rmtree(table)
        return {"rows": rows, "records": count, "seconds": wall, "cpu": cpu, "rss": rss}

    def latency(self):
        """Sluice in follow mode: milliseconds from a Delta commit to a read_committed
        consumer seeing its record, over `--commits` small commits."""
        topic = self.topic("latency", 0)
        self.create_topic(topic)
        follow_table = self.work / "follow"
        subprocess.run([sys.executable, ROOT / "scripts/deals_table.py", follow_table, "create", "--rows", "1"], check=True, capture_output=True)
        original, self.table = self.table, follow_table
        config = self.sluice_config(topic, "exactly-once", follow=True)
        self.table = original
        sluice = subprocess.Popen([self.bin / "sluice", "run", "--config", config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            consumer = subprocess.Popen([self.bin / "e2e", "latency", topic, self.args.bootstrap, str(self.args.commits)], stdout=subprocess.PIPE, text=True)
            assert json.loads(consumer.stdout.readline())["ready"]
            time.sleep(3)  # the pipeline has delivered version 0 and is following
            writer = [sys.executable, ROOT / "scripts/deals_table.py", follow_table, "append", "--rows", "1"]
            for i in range(self.args.commits):
                subprocess.run(writer + ["--start", str(10 + i)], check=True, capture_output=True)
                time.sleep(0.3)
            result = json.loads(consumer.stdout.readline())
            consumer.wait()
        finally:
            sluice.terminate()
            sluice.wait()
        millis = sorted(result["latency_ms"])
        return {"p50": percentile(millis, 50), "p99": percentile(millis, 99), "n": len(millis)}


def percentile(sorted_values, p):
    index = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]


def machine():
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        memory = int(Path("/proc/meminfo").read_text().split()[1]) / 1024 / 1024
    except OSError:
        memory = 0
    return f"{os.cpu_count()} cores ({cpu}), {memory:.0f} GiB memory, {platform.system()} {platform.release()}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="deals appended in version 0 (default 1000000)")
    parser.add_argument("--runs", type=int, default=5, help="timed samples per contestant, taken in interleaved rounds after one untimed warm-up run of each (default 5)")
    parser.add_argument("--max-load", type=float, default=0.5, help="cores other processes may keep busy before a sample; the harness waits up to 30 s for less, then takes the sample marked as noisy (default 0.5)")
    parser.add_argument("--commits", type=int, default=300, help="commits timed in follow mode (default 300; 0 skips the latency run)")
    parser.add_argument("--large-commit", type=lambda text: [int(n) for n in text.split(",")], default=[], help="also stream one commit of this many deals with sluice-eos, for its peak memory; several counts, comma-separated, for how it grows (default: skip)")
    parser.add_argument("--contestants", default=",".join(CONTESTANTS), help="comma-separated subset")
    parser.add_argument("--bootstrap", default="127.0.0.1:19092")
    parser.add_argument("--profile", default="release", help="cargo profile of the binaries (release or debug)")
    parser.add_argument("--out", default=str(ROOT / "docs/benchmarks"), help="where README.md and e2e.png go")
    parser.add_argument("--spark-python", default="", help="python of the Spark venv (bench/e2e.sh sets it)")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/sluice"))
    args = parser.parse_args()
    contestants = [c for c in args.contestants.split(",") if c]
    for c in contestants:
        if c not in CONTESTANTS:
            sys.exit(f"unknown contestant {c}; choose from {', '.join(CONTESTANTS)}")

    with tempfile.TemporaryDirectory(prefix="sluice-bench-") as work:
        bench = Bench(args, Path(work))
        deals = [sys.executable, ROOT / "scripts/deals_table.py", bench.table]
        subprocess.run(deals + ["bulk", "--rows", str(args.rows)], check=True, capture_output=True)
        subprocess.run(deals + ["churn", "--rows", str(args.rows)], check=True, capture_output=True)
        # Every contestant runs once untimed (caches, page cache, the broker's first
        # segments), then the timed samples come in rounds of every contestant, so a
        # slow spell of the machine hits all of them rather than one.
        for name in contestants:
            bench.warm_up(name)
            figures = bench.contestant(name, "warm-up")
            print(f"{name} warm-up: {figures['seconds']:.2f} s (not counted)", file=sys.stderr)
        results = {name: [] for name in contestants}
        for round_index, name in rounds(contestants, args.runs):
            load = wait_for_quiet(args.max_load)
            figures = bench.contestant(name, round_index)
            figures["load"] = load
            figures["noisy"] = load > args.max_load
            print(f"{name} sample {round_index + 1}: {figures['seconds']:.2f} s, {figures['count']} records, sha256 {figures['sha256'][:16]}, other processes' load {load:.2f} cores", file=sys.stderr)
            results[name].append(figures)
        # The same records from everyone, or the figures mean nothing: the same bytes
        # from every JSON contestant, and from every run of an encoding contestant; the
        # same count from all.
        digests = {name: {(r["count"], r["sha256"]) for r in runs} for name, runs in results.items()}
        json_digests = {d for name, ds in digests.items() if name not in ENCODINGS and name not in STATEFUL and name not in SIZED for d in ds}
        counts = {count for name, ds in digests.items() if name not in STATEFUL for count, _ in ds}
        stateful_digests = {d for name, ds in digests.items() if name in STATEFUL for d in ds}
        if len(json_digests) > 1 or len(counts) > 1 or len(stateful_digests) > 1 or any(len(digests[n]) != 1 for n in digests if n in ENCODINGS):
            sys.exit("CONTESTANTS DELIVERED DIFFERENT RECORDS:\n" + json.dumps({n: sorted(d) for n, d in digests.items()}, indent=1))
        restored = {name: bench.restore(name) for name in contestants if name in STATEFUL}
        latency = bench.latency() if args.commits and any(c.startswith("sluice") for c in contestants) else None
        large = [bench.large_commit(rows) for rows in args.large_commit]
        report = render(args, results, latency, large, restored)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "README.md").write_text(report)
        chart(results, out / "e2e.png")
        print(report)


def render(args, results, latency, large, restored):
    gold = [runs for name, runs in results.items() if name not in STATEFUL]
    records = (gold or list(results.values()))[0][0]["count"]
    rows = []

    def med(runs, key):
        return spread([r[key] for r in runs])

    seconds_of = {name: [r["seconds"] for r in runs] for name, runs in results.items()}
    # Each contestant's own records: the stateful ones make the example's, not gold-deals'.
    speed = {name: results[name][0]["count"] / statistics.median(s) for name, s in seconds_of.items()}
    loads = [r["load"] for runs in results.values() for r in runs]
    noisy = sum(r["noisy"] for runs in results.values() for r in runs)
    lines = [
        "# End-to-end benchmark",
        "",
        f"The deals table of the motivating case: {args.rows:,} deals appended in version 0, then an update (5% of deals), a delete (2%) and a merge (3% changed, 1% new). Every contestant delivers the same {records:,} records (keys and values checked by count and SHA-256) to one local Kafka broker. Each contestant ran once untimed, then {args.runs} timed samples each were taken in interleaved rounds (every contestant once per round, each round starting one contestant later), so a slow spell of the machine falls on all of them. Figures are medians, with min and max; a ratio `0.82x (0.76-0.88)` is the ratio of the medians and its 90% bootstrap interval from both sides' samples: read the lower end.",
        "",
        f"Machine: {machine()}. Command: `bench/e2e.sh --rows {args.rows} --runs {args.runs} --commits {args.commits}" + (f" --large-commit {','.join(map(str, args.large_commit))}" if args.large_commit else "") + (f" --contestants {','.join(results)}" if list(results) != CONTESTANTS else "") + "`.",
        "",
        f"Other processes kept {statistics.median(loads):.2f} cores busy before the median sample (max {max(loads):.2f}); "
        + (f"**{noisy} samples were taken above {args.max_load} cores and are marked `*`**." if noisy else f"every sample was taken below {args.max_load} cores."),
        "",
        "| contestant | records/s | seconds (min-max) | samples (s) | CPU s | peak RSS MiB | vs sluice-eos | vs native | vs raw | vs kafka-perf | vs Spark | vs sluice-c |",
        "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, runs in results.items():
        seconds, low, high = med(runs, "seconds")
        cpu = med(runs, "cpu")[0]
        rss = med(runs, "rss")[0]
        taken = " ".join(f"{r['seconds']:.2f}" + ("*" if r["noisy"] else "") for r in runs)

        def vs(other):
            if other not in seconds_of or other == name:
                return "-"
            low_ratio, ratio, high_ratio = speed_ratio(seconds_of[name], seconds_of[other])
            return f"{ratio:.2f}x ({low_ratio:.2f}-{high_ratio:.2f})"

        lines.append(f"| {name} | {speed[name]:,.0f} | {seconds:.2f} ({low:.2f}-{high:.2f}) | {taken} | {cpu:.1f} | {rss:.0f} | {vs('sluice-eos')} | {vs('native')} | {vs('raw')} | {vs('kafka-perf')} | {vs('spark')} | {vs('sluice-c')} |")
    lines += [
        "",
        "- `sluice-eos`, `sluice-alo`: `sluice run --stop-at-latest` with the Rust `gold-deals` module, exactly-once and at-least-once; wall time of the whole process, start-up included (the module's compiled code cached by an untimed `sluice check` first, as it is after a pipeline's first start).",
        "- `sluice-python`, `sluice-js`, `sluice-c`, `sluice-go`: the same with gold-deals in Python (componentize-py), JavaScript (componentize-js), C (clang with wasi-libc) and Go (standard Go for wasip1), each on the host's helpers through its SDK.",
        "- `sluice-replay`: `sluice-eos` configured as `sluice pipeline replay` configures its pipeline (`[source] starting_version = 0`, `ending_version` the table's last version), run without `--stop-at-latest`: it finishes on its own after the ending version, as a replay does. A replay's throughput against a normal run is its ratio to `sluice-eos`.",
        "- `sluice-eos-x2`, `native-x2`: the same with two instances of the module transforming batches at the same time (`[transform] instances = 2`; gold-deals keeps no state across batches).",
        "- `sluice-sasl-ssl`, `sluice-mtls`, `sluice-oauth`: `sluice-eos` over the local broker's SASL_SSL listener with SCRAM-SHA-512, its mutual-TLS listener, and its OAUTHBEARER listener with 12-second tokens from the OIDC server `scripts/kafka.sh` starts: the cost of TLS and authentication is the gap to `sluice-eos` (PLAINTEXT).",
        "- `sluice-c-avro`, `sluice-c-json-schema`, `sluice-c-protobuf`: `sluice-c` with `[sink.encoding] value` set to `avro`, `json-schema` or `protobuf` (`tests/data/schemas/gold-deal.proto`): the same records in Confluent's wire format with ids from the schema registry `scripts/registry.sh` runs (Apicurio); the cost of the format is the gap to `sluice-c` (JSON). Their bytes differ from the JSON contestants', so they are checked by count and against their own other runs.",
        "- `sluice-account`, `sluice-account-js`, `-python`, `-go`, `-c`: `sluice run` with the keyed-state example (`transforms/account-pipeline`, and `account-pipeline-js`, `-python`, `-go`, `-c` through each language's SDK): per change row a state read and one or two writes (the deal's group, the group's count), a record per group whose count changed in the batch, and every batch's state changes written to the pipeline's compacted changelog in the transaction of its records; each sample starts with an empty store and changelog. Their records are the example's (fewer than gold-deals'; records/s counts them), checked to be the same bytes in every language and every run. The cost of state is the gap to `sluice-eos` over the same change rows.",
        "- `native`: Sluice's pipeline (the same source, loop and sink as `sluice run`, exactly-once) with the same gold-deals code compiled into the host instead of run as a module (`bench/src/bin/e2e.rs native`): the cost of the Wasm boundary is the gap to `sluice-eos`.",
        "- `wasm-shadow-loop`: `wasm` with a hostile candidate in the shadow, the misbehaving fixture looping on each of the first three batches until the pipeline's `batch_timeout` (10 s by default) stops it, as many as the live run lasts: what a looping candidate costs the live pipeline while it loops. Its output is checked to be the live module's records, as every contestant's.",
        "- `wasm`, `wasm-shadow`: the pipeline of `native` (in the benchmark's process) running the gold-deals component; `wasm-shadow` also runs the same component in the pipeline's shadow, comparing its records with the live ones (none may differ) without producing them: the cost of a shadow deploy on the live pipeline is the gap between the two.",
        "- `raw`: gold-deals' records computed first, then produced by rdkafka alone with the sink's settings in transactions of 100,000 records; seconds cover producing only (CPU and RSS cover the whole process).",
        "- `kafka-perf`: Kafka's own producer benchmark (`kafka-producer-perf-test`'s `ProducerPerformance`, the Java client, from the broker's jars) sending as many records, each payload a gold-deals record's key and value bytes picked at random from the table's records, with the sink's settings (`acks=all`, idempotence, `linger.ms=20`, lz4) in transactions of 200 ms; seconds are the records over the tool's own rate (producing only, not the JVM's start). Its records are of the same sizes, not the same records, so it is checked by count.",
        "- `spark`: pyspark with delta-spark and spark-sql-kafka, `readChangeFeed` from version 0, the same shaping, Spark's Kafka sink (at-least-once), `local[2]`, `availableNow`; wall time of the job, JVM start-up included.",
    ]
    profiled = {name: runs for name, runs in results.items() if all(r["stages"] for r in runs)}
    if profiled:
        lines += [
            "",
            "## Where the time goes",
            "",
            "Seconds per stage of the pipeline, from its own metrics (median of the runs). The stages overlap (the table is read and transformed ahead while the loop sends and commits), so they add up to more than the wall time; the stage nearest the wall time is the bottleneck, and `waiting for batches` is the loop idle for want of transformed batches.",
            "",
            "| contestant | wall s | " + " | ".join(STAGES) + " |",
            "| --- | ---: | " + " | ".join("---:" for _ in STAGES) + " |",
        ]
        for name, runs in profiled.items():
            cells = [f"{statistics.median(r['stages'][stage] for r in runs):.2f}" for stage in STAGES]
            lines.append(f"| {name} | {med(runs, 'seconds')[0]:.2f} | " + " | ".join(cells) + " |")
    accessed = {name: runs for name, runs in results.items() if name in STATEFUL and all(r["state"] and r["stages"] for r in runs)}
    if accessed:
        lines += [
            "",
            "## State calls per SDK",
            "",
            "Keys each language's account example read and wrote through its SDK (each key of a `get-many` counts), from the pipeline's own counters, per second of the transform stage (the module's time, host calls included; median of the runs) and per second of the whole run.",
            "",
            "| contestant | keys read | keys written | transform s | keys/s in transform | keys/s of the run |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name, runs in accessed.items():
            keys = statistics.median(r["state"]["read"] + r["state"]["written"] for r in runs)
            transform = statistics.median(r["stages"]["transform"] for r in runs)
            seconds = med(runs, "seconds")[0]
            lines.append(f"| {name} | {statistics.median(r['state']['read'] for r in runs):,.0f} | {statistics.median(r['state']['written'] for r in runs):,.0f} | {transform:.2f} | {keys / transform:,.0f} | {keys / seconds:,.0f} |")
    for name, figures in restored.items():
        lines += [
            "",
            f"`{name}`'s state after the last sample, restored from its changelog alone (the node's copy deleted, as after a move to another node, with `sluice state show`): {figures['keys']:,} keys ({figures['bytes'] / 1024 / 1024:.0f} MiB of keys and values) from {figures['offsets']:,} changelog offsets in **{figures['seconds']:.1f} s** ({figures['wall']:.1f} s for the whole command, peak RSS {figures['rss']:.0f} MiB); the store takes **{figures['disk'] / 1024 / 1024:.0f} MiB on disk**.",
        ]
    if latency:
        lines += [
            "",
            f"Sluice in follow mode (exactly-once, `poll_interval = \"50ms\"`): from a Delta commit to a read_committed consumer seeing its record, over {latency['n']} one-row commits: **p50 {latency['p50']:.0f} ms, p99 {latency['p99']:.0f} ms**.",
        ]
    for commit in large:
        lines += [
            "",
            f"One commit of {commit['rows']:,} deals (`--large-commit {commit['rows']}`), `sluice-eos` with the default batch and commit sizes: {commit['records']:,} records in {commit['seconds']:.1f} s ({commit['records'] / commit['seconds']:,.0f} records/s), **peak RSS {commit['rss']:.0f} MiB** for the whole process (the reader and transformer queues hold at most 64 MiB each).",
        ]
    if len(large) > 1:
        lines += ["", f"Peak RSS of the largest commit against the smallest: **{large[-1]['rss'] / large[0]['rss']:.2f}x** for {large[-1]['rows'] / large[0]['rows']:.0f}x the rows."]
    return "\n".join(lines) + "\n"


def chart(results, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed; no chart", file=sys.stderr)
        return
    records = next(iter(results.values()))[0]["count"]
    names = list(results)
    speeds = [records / statistics.median(r["seconds"] for r in results[n]) for n in names]
    figure, axis = plt.subplots(figsize=(7, 3.5))
    axis.barh(names, speeds, color=["#2b6cb0" if n.startswith("sluice") else "#a0aec0" for n in names])
    axis.invert_yaxis()
    axis.set_xlabel("records per second (median)")
    axis.set_title("Delta change feed to Kafka, gold-deals")
    for i, v in enumerate(speeds):
        axis.text(v, i, f" {v:,.0f}", va="center")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
