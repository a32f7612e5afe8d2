//! Every pipeline operation through the API's router, on a node alone and on nodes of
//! a cluster sharing the cluster's in-memory logs: real components (built from
//! `transforms/tagged`), a real Delta table (from the repository's fixtures), and the
//! pipeline's in-memory sink in place of Kafka. No broker.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use sluice_cluster::{ClusterIo, MemoryGroup, MemoryLogs, slot_of};
use sluice_pipeline::MemorySink;
use tower::ServiceExt as _;

use crate::config::ServeConfig;
use crate::service::Service;

const OPERATOR: &str = "operator-token-0123456789";
const ACME: &str = "acme-token-0123456789";
const GLOBEX: &str = "globex-token-0123456789";

/// Longest a test waits for a pipeline to reach what it expects.
const WAIT: Duration = Duration::from_secs(60);

/// Slots of the test clusters: few, so a test can give each node some.
const SLOTS: u32 = 4;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A table with inserts, updates and deletes over several versions.
fn table() -> PathBuf {
    repo_root()
        .join("tests/data/delta-tables/kernel/cdf-table")
        .canonicalize()
        .expect("the fixture table exists")
}

/// The bytes of the component built from `transforms/tagged/<colour>`, built once per
/// test process (and cached across runs in the build's target folder).
fn tagged(colour: &str) -> Vec<u8> {
    static BUILT: OnceLock<std::sync::Mutex<BTreeMap<String, Vec<u8>>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(bytes) = built.get(colour) {
        return bytes.clone();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| repo_root().join("target"), PathBuf::from)
        .join("guests");
    let options = sluice_build::BuildOptions::new(target.clone(), target.join("components"));
    let component = sluice_build::build_transform(
        &repo_root().join("transforms/tagged").join(colour),
        &options,
    )
    .unwrap_or_else(|e| panic!("building transforms/tagged/{colour} failed: {e}"))
    .component;
    let bytes = std::fs::read(component).unwrap();
    built.insert(colour.to_string(), bytes.clone());
    bytes
}

/// A service in a temporary folder, with tenants `acme` (which may read the fixture
/// tables) and `globex`, delivering to `sink`; alone, or a node of a cluster.
struct Node {
    dir: tempfile::TempDir,
    router: Router,
    sink: MemorySink,
    /// Its name in its cluster; `None` alone.
    name: Option<String>,
}

impl Node {
    /// A node alone.
    fn start() -> Node {
        let (node, _) = Node::configured("", MemorySink::default(), None);
        node
    }

    /// A node alone whose tenant acme may also read the tables under `tables`.
    fn reading(tables: &Path) -> Node {
        let (node, _) = Node::configured_with(tables, "", MemorySink::default(), None);
        node
    }

    /// Node `name` of cluster `test`, holding the slots `group` gives, over the shared
    /// `logs` and delivering to `sink` (which the test's other nodes share, as they
    /// would share a Kafka cluster).
    async fn join(name: &str, logs: &MemoryLogs, group: MemoryGroup, sink: &MemorySink) -> Node {
        let cluster = format!(
            "\n[cluster]\nname = \"test\"\nnode = \"{name}\"\nslots = {SLOTS}\n\n\
             [cluster.kafka]\n\"bootstrap.servers\" = \"memory:9092\"\n"
        );
        let (node, service) = Node::configured(&cluster, sink.clone(), Some(name));
        let io = ClusterIo {
            logs: Arc::new(logs.clone()),
            group: Arc::new(group),
        };
        service.join_cluster_with(io).await.unwrap();
        node
    }

    /// A node with `extra` appended to its config; its service, to start.
    fn configured(extra: &str, sink: MemorySink, name: Option<&str>) -> (Node, Arc<Service>) {
        Node::configured_with(table().parent().unwrap(), extra, sink, name)
    }

    /// [`Node::configured`], acme reading the fixture tables and those under `tables`.
    fn configured_with(
        tables: &Path,
        extra: &str,
        sink: MemorySink,
        name: Option<&str>,
    ) -> (Node, Arc<Service>) {
        let dir = tempfile::tempdir().unwrap();
        for (file, token) in [
            ("operator.token", OPERATOR),
            ("acme.token", ACME),
            ("globex.token", GLOBEX),
        ] {
            std::fs::write(dir.path().join(file), token).unwrap();
        }
        let fixtures = table().parent().unwrap().display().to_string();
        let tables = tables.display().to_string();
        let config = dir.path().join("serve.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\nstate_dir = \"state\"\noperator_token_file = \"operator.token\"\n\n\
                 [tenants.acme]\ntoken_file = \"acme.token\"\ntable_prefixes = [\"{fixtures}/\", \"{tables}/\"]\n\n\
                 [tenants.globex]\ntoken_file = \"globex.token\"\ntable_prefixes = [\"/data/globex/\"]\n{extra}"
            ),
        )
        .unwrap();
        let service =
            Service::with_destination(ServeConfig::load(&config).unwrap(), Arc::new(sink.clone()))
                .unwrap();
        let node = Node {
            dir,
            router: crate::api::router(service.clone()),
            sink,
            name: name.map(str::to_string),
        };
        (node, service)
    }

    /// Calls the API with `token`; the status and the JSON answer (`null` when empty).
    async fn call(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Body,
    ) -> (StatusCode, Value) {
        let (status, bytes) = self.call_raw(method, path, token, body).await;
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn call_raw(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Body,
    ) -> (StatusCode, Bytes) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(body)
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, bytes)
    }

    async fn json(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: Value,
    ) -> (StatusCode, Value) {
        self.call(method, path, token, Body::from(body.to_string()))
            .await
    }

    async fn get(&self, path: &str, token: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, token, Body::empty()).await
    }

    /// Uploads a module for acme; its digest.
    async fn upload(&self, name: &str, bytes: Vec<u8>) -> String {
        let path = format!("/v1/tenants/acme/modules?name={name}");
        let (status, entry) = self
            .call(Method::POST, &path, ACME, Body::from(bytes))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{entry}");
        entry["digest"].as_str().unwrap().to_string()
    }

    /// Creates acme's pipeline `deals` over the fixture table with `module`.
    async fn create(&self, module: &str) -> (StatusCode, Value) {
        self.create_with(module, &table(), "").await
    }

    /// Creates acme's pipeline `deals` over `table` with `module`, with `extra`
    /// sections in its config.
    async fn create_with(&self, module: &str, table: &Path, extra: &str) -> (StatusCode, Value) {
        let config = format!(
            "[source]\ntable = \"{}\"\npoll_interval = \"50ms\"\nbatch_rows = 3\n\n\
             [sink]\ntopic = \"deals\"\n\n[sink.kafka]\n\"bootstrap.servers\" = \"memory:9092\"\n{extra}",
            table.display()
        );
        self.json(
            Method::PUT,
            "/v1/tenants/acme/pipelines/deals",
            ACME,
            json!({ "config": config, "module": module }),
        )
        .await
    }

    /// Deploys `module` to acme's pipeline `deals`, resetting its state when asked.
    async fn deploy(&self, module: &str, reset_state: bool) -> (StatusCode, Value) {
        self.json(
            Method::POST,
            "/v1/tenants/acme/pipelines/deals/deploy",
            ACME,
            json!({ "module": module, "reset_state": reset_state }),
        )
        .await
    }

    /// Deletes acme's pipeline `deals`.
    async fn delete(&self) {
        let path = "/v1/tenants/acme/pipelines/deals";
        let (status, body) = self.call(Method::DELETE, path, ACME, Body::empty()).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    }

    async fn status(&self) -> Value {
        let (status, body) = self.get("/v1/tenants/acme/pipelines/deals", ACME).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    async fn act(&self, action: &str) -> (StatusCode, Value) {
        let path = format!("/v1/tenants/acme/pipelines/deals/{action}");
        self.call(Method::POST, &path, ACME, Body::empty()).await
    }

    /// Waits until the pipeline has committed the table's latest version.
    async fn caught_up(&self) -> Value {
        let started = Instant::now();
        loop {
            let status = self.status().await;
            assert_ne!(status["state"], "failed", "{status}");
            let delivered = status["position"]["version"].as_u64().unwrap_or(0);
            if status["latest_version"]
                .as_u64()
                .is_some_and(|v| delivered > v)
                && !self.sink.seen().committed.is_empty()
            {
                return status;
            }
            assert!(
                started.elapsed() < WAIT,
                "the pipeline did not catch up: {status}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Every committed record's origin; each may appear once.
    fn delivered_once(&self) -> BTreeSet<(u64, u64)> {
        let origins = self.sink.seen().origins();
        let unique: BTreeSet<_> = origins.iter().copied().collect();
        assert_eq!(unique.len(), origins.len(), "a row was delivered twice");
        unique
    }

    /// The values of header `header` of the committed records, in commit order.
    fn header_values(&self, header: &str) -> Vec<String> {
        self.sink
            .seen()
            .committed
            .iter()
            .flat_map(|t| &t.records)
            .flat_map(|r| &r.headers)
            .filter(|(name, _)| name == header)
            .map(|(_, value)| String::from_utf8_lossy(value).into_owned())
            .collect()
    }

    /// The `count` header of every committed record, in commit order.
    fn counts(&self) -> Vec<u64> {
        self.header_values("count")
            .iter()
            .map(|count| count.parse().unwrap())
            .collect()
    }

    /// The changelog topic of acme's pipeline `deals` and where the service keeps its
    /// store, as of its state's generation now.
    async fn state_now(&self) -> (String, PathBuf) {
        let topic = self.status().await["changelog_topic"]
            .as_str()
            .expect("a stateful pipeline names its changelog")
            .to_string();
        let generation = topic.rsplit_once(".g").unwrap().1;
        let dir = self
            .dir
            .path()
            .join(format!("state/state/acme/deals/g{generation}"));
        (topic, dir)
    }

    /// The `tag` header of every committed record.
    fn tags(&self) -> BTreeSet<String> {
        self.header_values("tag").into_iter().collect()
    }

    /// Waits until a pipeline delivering to this node's sink has connected more than
    /// `before` times: it started (again).
    async fn connected_after(&self, before: usize) {
        until("the pipeline to start", async || {
            self.sink.seen().connects > before
        })
        .await;
    }

    /// Whether every connection to this node's sink was released: nothing runs.
    fn idle(&self) -> bool {
        let seen = self.sink.seen();
        seen.connects == seen.released
    }
}

/// Polls `check` until it holds, failing after [`WAIT`] with what it waited for.
async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < WAIT, "waited for {what} for {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates, swaps, pauses, resumes, rolls back, deletes and creates again acme's
/// pipeline through `caller`'s API while `owner` runs it (the same node, or the node of
/// the cluster holding the pipeline's slot), asserting that no row is lost or delivered
/// twice.
async fn lifecycle(caller: &Node, owner: &Node) {
    // Through another node a change is written to the cluster's state and answered;
    // the owner acts on it when it reads it, so what the owner does is waited for.
    let remote = !std::ptr::eq(caller, owner);
    let blue = caller.upload("blue", tagged("blue")).await;
    let green = caller.upload("green", tagged("green")).await;

    let (status, created) = caller.create(&blue).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["state"], "running");
    let (status, again) = caller.create(&blue).await;
    assert_eq!(status, StatusCode::CONFLICT, "{again}");

    let first = owner.caught_up().await;
    let rows = owner.delivered_once();
    assert!(!rows.is_empty());
    assert_eq!(owner.tags(), BTreeSet::from(["blue".to_string()]));
    assert_eq!(first["module"]["digest"], blue.as_str());
    // Every node names the node that runs it (none, alone).
    for node in [caller, owner] {
        until("the status to name the node that runs it", async || {
            node.status().await["node"] == json!(owner.name)
        })
        .await;
    }

    // A swap at the next batch boundary of a pipeline that waits for new versions.
    let (status, report) = caller
        .json(
            Method::POST,
            "/v1/tenants/acme/pipelines/deals/deploy",
            ACME,
            json!({ "module": green, "sample_rows": 5 }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    // The node that runs it answers once it switched; another once the change is
    // written.
    let outcome = if remote { "stored" } else { "switched" };
    assert_eq!(report["outcome"], outcome);
    assert_eq!(
        (report["from"].as_str(), report["to"].as_str()),
        (Some(&*blue), Some(&*green))
    );
    let swapped = caller.status().await;
    assert_eq!(swapped["module"]["digest"], green.as_str());
    assert_eq!(swapped["previous_module"], blue.as_str());
    assert_eq!(swapped["last_swap"]["outcome"], outcome);
    until("the owner to take the swap", async || {
        owner.status().await["module"]["digest"] == green.as_str()
    })
    .await;

    let (status, paused) = caller.act("pause").await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["state"], "paused");
    if remote {
        until("the owner to stop the paused pipeline", async || {
            owner.idle()
        })
        .await;
    } else {
        assert!(owner.idle(), "a paused pipeline holds no connection");
    }

    let connects = owner.sink.seen().connects;
    let (status, resumed) = caller.act("resume").await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    assert_eq!(resumed["state"], "running");
    let (status, twice) = caller.act("resume").await;
    assert_eq!(status, StatusCode::CONFLICT, "{twice}");
    owner.connected_after(connects).await;
    owner.caught_up().await;
    // It resumed from its stored position: nothing again.
    assert_eq!(owner.delivered_once(), rows);

    let (status, report) = caller.act("rollback").await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["to"], blue.as_str());
    assert_eq!(caller.status().await["module"]["digest"], blue.as_str());
    until("the owner to take the rollback", async || {
        owner.status().await["module"]["digest"] == blue.as_str()
    })
    .await;

    caller.delete().await;
    let (status, gone) = caller.get("/v1/tenants/acme/pipelines/deals", ACME).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{gone}");
    let (_, listed) = caller.get("/v1/tenants/acme/pipelines", ACME).await;
    assert_eq!(listed, json!([]));
    until(
        "the owner to stop and forget the deleted pipeline",
        async || {
            let (status, _) = owner.get("/v1/tenants/acme/pipelines/deals", ACME).await;
            status == StatusCode::NOT_FOUND && owner.idle()
        },
    )
    .await;

    // Created again under the same name, it resumes from the stored position.
    let connects = owner.sink.seen().connects;
    let (status, created) = caller.create(&green).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    owner.connected_after(connects).await;
    owner.caught_up().await;
    assert_eq!(owner.delivered_once(), rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_is_created_swapped_paused_resumed_rolled_back_and_deleted_without_losing_or_repeating_a_row()
 {
    let node = Node::start();
    lifecycle(&node, &node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_holding_every_slot_of_its_cluster_runs_the_lifecycle_through_the_shared_state() {
    let logs = MemoryLogs::default();
    let group = MemoryGroup::alone(SLOTS);
    let node = Node::join("only", &logs, group, &MemorySink::default()).await;
    lifecycle(&node, &node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_a_node_that_does_not_run_the_pipeline_is_carried_out_by_the_node_that_does() {
    let (logs, sink) = (MemoryLogs::default(), MemorySink::default());
    let slot = slot_of("acme", "deals", SLOTS);
    let owner = Node::join("owner", &logs, MemoryGroup::holding([slot]), &sink).await;
    let others = MemoryGroup::holding((0..SLOTS).filter(|s| *s != slot));
    let caller = Node::join("caller", &logs, others, &sink).await;
    lifecycle(&caller, &owner).await;
    for (node, slots, running) in [
        (&owner, json!([slot]), json!(["acme/deals"])),
        (
            &caller,
            json!((0..SLOTS).filter(|s| *s != slot).collect::<Vec<_>>()),
            json!([]),
        ),
    ] {
        let (status, view) = node.get("/v1/cluster", OPERATOR).await;
        assert_eq!(status, StatusCode::OK, "{view}");
        assert_eq!(
            (&view["slots"], &view["running"]),
            (&slots, &running),
            "{view}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_that_fails_on_a_sample_or_names_an_unknown_module_changes_nothing() {
    let node = Node::start();
    let blue = node.upload("blue", tagged("blue")).await;
    node.create(&blue).await;
    node.caught_up().await;
    let (status, refused) = node
        .json(
            Method::POST,
            "/v1/tenants/acme/pipelines/deals/deploy",
            ACME,
            json!({ "module": "0".repeat(64) }),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    let (status, same) = node
        .json(
            Method::POST,
            "/v1/tenants/acme/pipelines/deals/deploy",
            ACME,
            json!({ "module": blue }),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{same}");
    let (status, nothing_before) = node.act("rollback").await;
    assert_eq!(status, StatusCode::CONFLICT, "{nothing_before}");
    let unchanged = node.status().await;
    assert_eq!(unchanged["module"]["digest"], blue.as_str());
    assert_eq!(unchanged["state"], "running");
    assert!(unchanged["last_swap"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_is_refused_to_a_caller_without_the_right_to_make_it() {
    let node = Node::start();
    let blue = node.upload("blue", tagged("blue")).await;
    node.create(&blue).await;

    // Another tenant's token, on every call of acme's pipeline.
    for (method, action) in [
        (Method::GET, ""),
        (Method::DELETE, ""),
        (Method::POST, "/pause"),
        (Method::POST, "/resume"),
        (Method::POST, "/rollback"),
        (Method::GET, "/logs"),
        (Method::GET, "/history"),
        (Method::GET, "/dead-letters"),
    ] {
        let path = format!("/v1/tenants/acme/pipelines/deals{action}");
        let (status, body) = node
            .call(method.clone(), &path, GLOBEX, Body::empty())
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {body}");
        assert_eq!(body["error"], "This token may not act for tenant acme.");
    }
    let (status, _) = node
        .json(
            Method::POST,
            "/v1/tenants/acme/pipelines/deals/deploy",
            GLOBEX,
            json!({ "module": blue }),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    for path in [
        "/v1/tenants/acme/modules",
        "/v1/tenants/acme",
        "/v1/tenants/acme/history",
    ] {
        let (status, _) = node.get(path, GLOBEX).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
    }

    // Operator-only calls, each refusal saying what was refused.
    for (method, path, refused) in [
        (Method::GET, "/v1/tenants", "list tenants"),
        (Method::GET, "/v1/host", "see the host's figures"),
        (
            Method::GET,
            "/v1/cluster",
            "see the node's part in its cluster",
        ),
        (Method::GET, "/metrics", "read every tenant's metrics"),
        (Method::PUT, "/v1/tenants/initech", "add or change tenants"),
        (Method::DELETE, "/v1/tenants/globex", "remove tenants"),
    ] {
        let (status, body) = node.json(method.clone(), path, ACME, json!({})).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {body}");
        assert_eq!(
            body["error"],
            format!("Only the operator's token may {refused}.")
        );
    }

    // The operator acts for every tenant; a wrong token for nobody.
    let (status, body) = node.get("/v1/tenants/acme/pipelines/deals", OPERATOR).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = node
        .get("/v1/tenants/acme/pipelines/deals", "wrong-token-0123456789")
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, tenants) = node.get("/v1/tenants", OPERATOR).await;
    assert_eq!(status, StatusCode::OK, "{tenants}");
    assert_eq!(tenants.as_array().map(Vec::len), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_on_a_table_outside_the_tenants_prefixes_or_of_an_unknown_module_is_refused() {
    let node = Node::start();
    let path = "/v1/tenants/globex/modules?name=blue";
    let (status, module) = node
        .call(Method::POST, path, GLOBEX, Body::from(tagged("blue")))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{module}");
    let config = format!(
        "[source]\ntable = \"{}\"\n\n[sink]\ntopic = \"deals\"\n",
        table().display()
    );
    let create = |module: Value| {
        node.json(
            Method::PUT,
            "/v1/tenants/globex/pipelines/deals",
            GLOBEX,
            json!({ "config": config, "module": module }),
        )
    };
    let (status, body) = create(module["digest"].clone()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("/data/globex/"),
        "{body}"
    );
    let (status, body) = create(json!("0".repeat(64))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(node.sink.seen().committed.is_empty());
    let (_, listed) = node.get("/v1/tenants/globex/pipelines", GLOBEX).await;
    assert_eq!(listed, json!([]));
}

/// A copy of the fixture table that a test can commit to.
struct WritableTable {
    dir: tempfile::TempDir,
    next_version: u64,
}

impl WritableTable {
    fn copy() -> WritableTable {
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&table(), &dir.path().join("t"));
        WritableTable {
            dir,
            next_version: 4,
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("t")
    }

    /// Commits a version that adds a copy of one of the table's data files (one row).
    fn append(&mut self) {
        let file = "birthday=2023-12-22/part-00000-592a7e14-f790-4236-9c61-120d006eb3b8.c000.snappy.parquet";
        let copy = format!("birthday=2023-12-22/appended-{}.parquet", self.next_version);
        std::fs::copy(self.path().join(file), self.path().join(&copy)).unwrap();
        let add = json!({"add": {
            "path": copy, "partitionValues": {"birthday": "2023-12-22"}, "size": 694,
            "modificationTime": 1703265018088u64, "dataChange": true,
        }});
        let info = json!({"commitInfo": {"timestamp": 1703265018088u64, "operation": "WRITE"}});
        let log = self
            .path()
            .join(format!("_delta_log/{:020}.json", self.next_version));
        std::fs::write(log, format!("{add}\n{info}\n")).unwrap();
        self.next_version += 1;
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A stateful pipeline (issue 38): a deploy keeps its state (the new module counts on
/// from the old one's count), a deploy with `reset_state` starts the new module on
/// empty state in a new changelog topic and deletes the old one with its store, and
/// deleting the pipeline deletes its state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_keeps_the_state_a_deploy_with_reset_empties_it_and_a_delete_deletes_it() {
    let mut table = WritableTable::copy();
    let node = Node::reading(table.dir.path());
    let blue = node.upload("blue", tagged("blue")).await;
    let green = node.upload("green", tagged("green")).await;
    let stateful = "\n[transform.params]\ncount = \"true\"\n\n[state]\n";
    let (status, created) = node.create_with(&blue, &table.path(), stateful).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    node.caught_up().await;
    let rows = node.delivered_once().len() as u64;
    assert_eq!(node.counts(), (1..=rows).collect::<Vec<_>>());
    // Each row read its count and wrote it back: the metrics count both.
    let status = node.status().await;
    let counted = &status["counters"]["state"];
    assert_eq!(
        (
            counted["keys_read"].as_u64(),
            counted["keys_written"].as_u64()
        ),
        (Some(rows), Some(rows)),
        "{counted}"
    );
    let (_, metrics) = node
        .call_raw(Method::GET, "/metrics", OPERATOR, Body::empty())
        .await;
    let metrics = String::from_utf8_lossy(&metrics);
    for family in ["keys_read_total", "keys_written_total"] {
        let sample = format!(
            "sluice_pipeline_keyed_state_{family}{{tenant=\"acme\",pipeline=\"deals\"}} {rows}\n"
        );
        assert!(metrics.contains(&sample), "{sample} in {metrics}");
    }
    let changelog = |topic: &str| node.sink.latest_records("deals", topic, 1);
    let (first_topic, first_dir) = node.state_now().await;
    assert_eq!(
        changelog(&first_topic)[0].value,
        Some(rows.to_string().into_bytes())
    );
    assert!(first_dir.exists());

    let deploy = async |module: &str, reset: bool| {
        let (status, report) = node.deploy(module, reset).await;
        assert_eq!(status, StatusCode::OK, "{report}");
        report
    };
    // Kept: green counts on from blue's count.
    assert_eq!(deploy(&green, false).await["outcome"], "switched");
    table.append();
    until("the new row to be counted", async || {
        node.counts().len() as u64 == rows + 1
    })
    .await;
    assert_eq!(node.counts().last(), Some(&(rows + 1)));

    // Reset: blue starts from nothing, in the next generation's topic.
    let report = deploy(&blue, true).await;
    assert_eq!(report["outcome"], "restarted", "{report}");
    let (topic, dir) = node.state_now().await;
    assert_ne!(topic, first_topic);
    assert!(
        changelog(&first_topic).is_empty(),
        "the old changelog is deleted"
    );
    assert!(!first_dir.exists(), "the old store is deleted");
    table.append();
    until("the row after the reset to be counted", async || {
        node.counts().len() as u64 == rows + 2
    })
    .await;
    assert_eq!(node.counts().last(), Some(&1), "{:?}", node.counts());
    assert_eq!(changelog(&topic)[0].value, Some(b"1".to_vec()));
    assert_eq!(node.delivered_once().len() as u64, rows + 2);

    // Read through the API, reset through it.
    let state = "/v1/tenants/acme/pipelines/deals/state";
    let (status, summary) = node.get(state, ACME).await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    assert_eq!(summary["changelog_topic"], topic.as_str());
    until("the state's size to be counted", async || {
        node.get(state, ACME).await.1["keys"] == 1
    })
    .await;
    let (status, page) = node.get(&format!("{state}/entries"), ACME).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(
        page,
        json!({"entries": [{"key": "rows", "value": "1"}], "next": null})
    );
    let (status, page) = node.get(&format!("{state}/entries?prefix=x"), ACME).await;
    assert_eq!((status, &page["entries"]), (StatusCode::OK, &json!([])));
    let (status, value) = node
        .get(&format!("{state}/value?key_hex=726f7773"), ACME)
        .await;
    assert_eq!(
        (status, value),
        (StatusCode::OK, json!({"key": "rows", "value": "1"}))
    );
    let (status, missing) = node.get(&format!("{state}/value?key=nope"), ACME).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{missing}");
    let (status, export) = node
        .call_raw(Method::GET, &format!("{state}/export"), ACME, Body::empty())
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(&export[..], b"{\"key\":\"rows\",\"value\":\"1\"}\n");
    let (status, report) = node
        .call(Method::POST, &format!("{state}/reset"), ACME, Body::empty())
        .await;
    assert_eq!(
        (status, &report["outcome"]),
        (StatusCode::OK, &json!("restarted")),
        "{report}"
    );
    let (reset_topic, _) = node.state_now().await;
    assert_ne!(reset_topic, topic);
    assert!(
        changelog(&topic).is_empty(),
        "the reset deletes the changelog"
    );
    table.append();
    until("the row after the API's reset to be counted", async || {
        node.counts().len() as u64 == rows + 3
    })
    .await;
    assert_eq!(node.counts().last(), Some(&1), "{:?}", node.counts());
    let topic = reset_topic;

    // Not running: the state is read where it runs, so a paused pipeline's is refused.
    let (status, paused) = node
        .call(
            Method::POST,
            "/v1/tenants/acme/pipelines/deals/pause",
            ACME,
            Body::empty(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    let (status, refused) = node.get(&format!("{state}/entries"), ACME).await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert!(refused.to_string().contains("resume"), "{refused}");

    // Deleted with the pipeline.
    node.delete().await;
    assert!(changelog(&topic).is_empty());
    assert!(!dir.exists());

    // A reset of a pipeline that keeps no state is refused.
    let (status, created) = node.create_with(&blue, &table.path(), "").await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (status, refused) = node.deploy(&green, true).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert!(refused.to_string().contains("no [state]"), "{refused}");
    let (status, refused) = node.get(&format!("{state}/entries"), ACME).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
}

/// In a cluster, a reset or delete made while another node runs the pipeline leaves
/// the copies of its state on the nodes that ran it before unused: each node removes
/// its own when it learns of the change, and keeps its copy of the current generation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_removes_its_copies_of_a_state_that_a_reset_or_delete_left_unused() {
    let (logs, sink) = (MemoryLogs::default(), MemorySink::default());
    let slot = slot_of("acme", "deals", SLOTS);
    let owner = Node::join("owner", &logs, MemoryGroup::holding([slot]), &sink).await;
    let others = MemoryGroup::holding((0..SLOTS).filter(|s| *s != slot));
    let caller = Node::join("caller", &logs, others, &sink).await;
    let blue = caller.upload("blue", tagged("blue")).await;
    let stateful = "\n[transform.params]\ncount = \"true\"\n\n[state]\n";
    let (status, created) = caller.create_with(&blue, &table(), stateful).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    owner.caught_up().await;
    // The caller ran the pipeline before: it has a copy of this generation.
    let copy_on_caller = |owner_dir: &Path| {
        let generation = owner_dir.file_name().unwrap();
        let copy = caller
            .dir
            .path()
            .join("state/state/acme/deals")
            .join(generation);
        std::fs::create_dir_all(&copy).unwrap();
        std::fs::write(copy.join("state.redb"), b"old").unwrap();
        copy
    };
    let (_, first_dir) = owner.state_now().await;
    let old_copy = copy_on_caller(&first_dir);

    let (status, report) = caller.deploy(&blue, true).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    until(
        "the caller to remove its copy of the old generation",
        async || !old_copy.exists(),
    )
    .await;
    until("the owner to run the new generation", async || {
        owner.state_now().await.1 != first_dir
    })
    .await;
    let (_, current_dir) = owner.state_now().await;
    let current_copy = copy_on_caller(&current_dir);
    let (status, paused) = caller.act("pause").await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    until("the pause to reach the owner", async || {
        owner.status().await["state"] == "paused"
    })
    .await;
    assert!(
        current_copy.exists(),
        "the current generation's copy is kept"
    );

    caller.delete().await;
    until("the caller to remove the pipeline's state", async || {
        !current_copy.parent().unwrap().exists()
    })
    .await;
}
