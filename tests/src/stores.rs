//! Object-store emulators and a fault proxy for the storage tests, each started on a free
//! loopback port and stopped on drop: moto (S3), Azurite (Azure Blob), fake-gcs-server
//! (Google Cloud Storage) and toxiproxy, as `scripts/stores.sh` installs them.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::repo_root;

/// Azurite's account and key: the emulator's well-known development credentials.
const AZURITE_ACCOUNT: &str = "devstoreaccount1";
const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// The S3 secret key the tests give moto; it must never appear in a log.
pub const S3_SECRET: &str = "moto-secret-key-not-in-logs";

/// A kind of object store with an emulator here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Store {
    /// S3, emulated by moto.
    S3,
    /// Azure Blob Storage, emulated by Azurite.
    Azure,
    /// Google Cloud Storage, emulated by fake-gcs-server.
    Gcs,
}

impl Store {
    /// Every store with an emulator.
    pub const ALL: [Store; 3] = [Store::S3, Store::Azure, Store::Gcs];

    /// Its short name (the upload script's, and a topic prefix).
    pub fn name(self) -> &'static str {
        match self {
            Store::S3 => "s3",
            Store::Azure => "azure",
            Store::Gcs => "gcs",
        }
    }
}

/// A free TCP port on loopback.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("a loopback port")
        .local_addr()
        .expect("it has an address")
        .port()
}

/// The folder `scripts/stores.sh` installs the emulators into.
fn stores_bin(program: &str) -> PathBuf {
    let cache = std::env::var_os("SLUICE_CACHE").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/sluice"),
        PathBuf::from,
    );
    let path = cache.join("stores/bin").join(program);
    assert!(
        path.exists(),
        "{} is missing: run scripts/stores.sh install (scripts/test.sh runs it)",
        path.display()
    );
    path
}

fn wait_for_port(port: u16, what: &str, process: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = process.try_wait().expect("the process can be polled") {
            panic!("{what} exited with {status} before listening");
        }
        assert!(Instant::now() < deadline, "{what} did not start in 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running emulator of one store.
pub struct Emulator {
    process: Child,
    /// Which store it emulates.
    pub store: Store,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

impl Emulator {
    /// Starts the emulator of `store`.
    pub fn start(store: Store) -> Emulator {
        let port = free_port();
        Emulator::start_as(store, port, port)
    }

    /// Starts the emulator of `store` to be reached through a proxy on `public_port`
    /// (fake-gcs-server answers its XML API only to requests naming its public host).
    pub fn start_behind(store: Store, public_port: u16) -> Emulator {
        Emulator::start_as(store, free_port(), public_port)
    }

    fn start_as(store: Store, port: u16, public_port: u16) -> Emulator {
        let mut command = match store {
            Store::S3 => {
                let mut command = Command::new("python3");
                command.args([
                    "-m",
                    "moto.server",
                    "-H",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                ]);
                command
            }
            Store::Azure => {
                let mut command = Command::new(stores_bin("azurite-blob"));
                // Without --disableTelemetry Azurite calls a cloud metadata address and
                // ignores SIGTERM.
                command.args([
                    "--silent",
                    "--disableTelemetry",
                    "--inMemoryPersistence",
                    "--blobHost",
                    "127.0.0.1",
                    "--blobPort",
                    &port.to_string(),
                    "--skipApiVersionCheck",
                    "--loose",
                ]);
                command
            }
            Store::Gcs => {
                let mut command = Command::new(stores_bin("fake-gcs-server"));
                let public = format!("127.0.0.1:{public_port}");
                command.args([
                    "-scheme",
                    "http",
                    "-host",
                    "127.0.0.1",
                    "-port",
                    &port.to_string(),
                    "-backend",
                    "memory",
                    "-log-level",
                    "error",
                    "-public-host",
                    &public,
                    "-external-url",
                    &format!("http://{public}"),
                ]);
                command
            }
        };
        let mut process = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("the {} emulator does not start: {e}", store.name()));
        wait_for_port(port, store.name(), &mut process);
        Emulator {
            process,
            store,
            port,
        }
    }

    /// Its endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Copies the local table at `table` to `<bucket>/<prefix>` (data files first, then
    /// the log in version order; files already there are skipped).
    pub fn upload(&self, bucket: &str, prefix: &str, table: &Path) {
        let status = Command::new("python3")
            .arg(repo_root().join("tests/support/upload_table.py"))
            .args([self.store.name(), &self.endpoint(), bucket, prefix])
            .arg(table)
            .env("AWS_SECRET_ACCESS_KEY", S3_SECRET)
            .status()
            .expect("python3 runs");
        assert!(status.success(), "uploading {} failed", table.display());
    }

    /// The table's URL in this store.
    pub fn table_url(&self, bucket: &str, prefix: &str) -> String {
        match self.store {
            Store::S3 => format!("s3://{bucket}/{prefix}"),
            Store::Azure => format!("az://{bucket}/{prefix}"),
            Store::Gcs => format!("gs://{bucket}/{prefix}"),
        }
    }

    /// `[source.storage_options]` (with its header) for reaching the store at
    /// `endpoint` (its own, or a proxy's in front of it), beside `more` lines.
    pub fn storage_options(&self, endpoint: &str, more: &str) -> String {
        let options = match self.store {
            Store::S3 => format!(
                "aws_endpoint = \"{endpoint}\"\naws_allow_http = \"true\"\naws_region = \"us-east-1\""
            ),
            Store::Azure => format!(
                "azure_storage_account_name = \"{AZURITE_ACCOUNT}\"\nazure_storage_endpoint = \"{endpoint}/{AZURITE_ACCOUNT}\"\nazure_allow_http = \"true\""
            ),
            Store::Gcs => format!(
                "google_service_account_key = '{{\"gcs_base_url\": \"{endpoint}\", \"disable_oauth\": true, \"client_email\": \"\", \"private_key\": \"\", \"private_key_id\": \"\"}}'"
            ),
        };
        format!("[source.storage_options]\n{options}\n{more}")
    }

    /// The credentials a `sluice` process reading the store takes from its environment.
    pub fn credentials(&self) -> Vec<(&'static str, &'static str)> {
        match self.store {
            Store::S3 => vec![
                ("AWS_ACCESS_KEY_ID", "test"),
                ("AWS_SECRET_ACCESS_KEY", S3_SECRET),
            ],
            Store::Azure => vec![("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY)],
            Store::Gcs => Vec::new(),
        }
    }
}

/// A running toxiproxy server: TCP proxies whose connections can be reset, stalled or
/// slowed on demand.
pub struct FaultProxy {
    process: Child,
    api: String,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// A fault a proxy can inject into every connection through it.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// Connections are reset as soon as data arrives.
    Reset,
    /// Answers are held back this many milliseconds (plus up to half as much again).
    Latency(u64),
    /// Data stops flowing: requests stall until they time out.
    Stall,
    /// Answers trickle at this many KB/s.
    Bandwidth(u64),
}

impl FaultProxy {
    /// Starts toxiproxy on a free port.
    pub fn start() -> FaultProxy {
        let port = free_port();
        let mut process = Command::new(stores_bin("toxiproxy-server"))
            .args(["-host", "127.0.0.1", "-port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("toxiproxy starts");
        wait_for_port(port, "toxiproxy", &mut process);
        FaultProxy {
            process,
            api: format!("http://127.0.0.1:{port}"),
        }
    }

    /// A proxy named `name` on 127.0.0.1:`listen` in front of 127.0.0.1:`upstream`;
    /// returns its endpoint.
    pub fn proxy(&self, name: &str, listen: u16, upstream: u16) -> String {
        let body = serde_json::json!({
            "name": name,
            "listen": format!("127.0.0.1:{listen}"),
            "upstream": format!("127.0.0.1:{upstream}"),
            "enabled": true,
        });
        self.post(&format!("{}/proxies", self.api), &body);
        format!("http://127.0.0.1:{listen}")
    }

    /// Injects `fault` into the answers through proxy `name` until [`FaultProxy::heal`].
    pub fn inject(&self, name: &str, fault: Fault) {
        let (kind, attributes) = match fault {
            Fault::Reset => ("reset_peer", serde_json::json!({ "timeout": 0 })),
            Fault::Latency(ms) => (
                "latency",
                serde_json::json!({ "latency": ms, "jitter": ms / 2 }),
            ),
            Fault::Stall => ("timeout", serde_json::json!({ "timeout": 0 })),
            Fault::Bandwidth(rate) => ("bandwidth", serde_json::json!({ "rate": rate })),
        };
        let body = serde_json::json!({
            "name": "fault",
            "type": kind,
            "stream": "downstream",
            "toxicity": 1.0,
            "attributes": attributes,
        });
        self.post(&format!("{}/proxies/{name}/toxics", self.api), &body);
    }

    /// Removes the fault of proxy `name`.
    pub fn heal(&self, name: &str) {
        ureq::delete(&format!("{}/proxies/{name}/toxics/fault", self.api))
            .call()
            .expect("toxiproxy removes the fault");
    }

    fn post(&self, url: &str, body: &serde_json::Value) {
        ureq::post(url)
            .header("Content-Type", "application/json")
            .send(body.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("toxiproxy refused {url}: {e}"));
    }
}

/// A running Unity Catalog server (olai-uc-server) with catalog `main` and schema
/// `main.sales`, keeping its metadata in memory.
pub struct CatalogServer {
    process: Child,
    _dir: tempfile::TempDir,
    /// Its URL.
    pub url: String,
}

impl Drop for CatalogServer {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

impl CatalogServer {
    /// Starts a server that may place tables under `root`. With `proxied_identity`, it
    /// expects callers' identity from a reverse proxy and refuses requests without one
    /// (401), as a server behind an authenticating proxy does.
    pub fn start(root: &Path, proxied_identity: bool) -> CatalogServer {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = free_port();
        let auth = if proxied_identity {
            "auth:\n  mode: reverse-proxy\n"
        } else {
            ""
        };
        let config = dir.path().join("uc.yaml");
        std::fs::write(
            &config,
            format!(
                "host: 127.0.0.1\nport: {port}\nbackend:\n  engine: sqlite\n  path: \":memory:\"\nui:\n  serve: false\nlocal_storage:\n  allowed-roots: [\"{}\"]\n{auth}",
                root.display()
            ),
        )
        .expect("the catalog's config is written");
        let mut process = Command::new(stores_bin("uc-server"))
            .args(["serve", "--no-ui", "-c"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("the catalog server does not start: {e}"));
        wait_for_port(port, "the catalog server", &mut process);
        let server = CatalogServer {
            process,
            _dir: dir,
            url: format!("http://127.0.0.1:{port}"),
        };
        let root_url = format!("file://{}", root.display());
        // A storage credential is required for an external location, even a local one.
        server.post(
            "credentials",
            serde_json::json!({"name": "local", "purpose": "STORAGE",
                "aws_iam_role": {"role_arn": "arn:aws:iam::123456789012:role/sluice-tests"}}),
        );
        server.post(
            "external-locations",
            serde_json::json!({"name": "lake", "url": root_url, "credential_name": "local"}),
        );
        server.post(
            "catalogs",
            serde_json::json!({"name": "main", "storage_root": format!("{root_url}/managed")}),
        );
        server.post(
            "schemas",
            serde_json::json!({"name": "sales", "catalog_name": "main"}),
        );
        server
    }

    /// Registers the Delta table at `table` as the external table `main.sales.{name}`.
    pub fn add_table(&self, name: &str, table: &Path) {
        self.post(
            "tables",
            serde_json::json!({"name": name, "catalog_name": "main", "schema_name": "sales",
                "table_type": "EXTERNAL", "data_source_format": "DELTA", "columns": [],
                "storage_location": format!("file://{}", table.display())}),
        );
    }

    fn post(&self, path: &str, body: serde_json::Value) {
        let url = format!("{}/api/2.1/unity-catalog/{path}", self.url);
        ureq::post(&url)
            .header("Content-Type", "application/json")
            .header("x-forwarded-user", "sluice-tests")
            .send(body.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("the catalog refused {url}: {e}"));
    }
}
