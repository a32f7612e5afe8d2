//! A schema registry that goes away is waited out: a gate between the pipeline and the
//! real registry (which other tests share, so it keeps running) refuses connections for
//! a minute, mid-run and at a pipeline's start, and the pipelines wait, saying so in
//! their status and metrics, then deliver every record once. Past `max_outage` the
//! pipeline stops with what to do, and a rerun delivers everything once.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sluice_tests::service::{Serve, pipeline_config};
use sluice_tests::{
    Extra, PipelineFiles, deals_table, kafka_bootstrap, registry_decoded, registry_url,
    run_expecting_failure, run_to_latest, transform_component, unique_topic,
};

/// How long the gates stay shut.
const OUTAGE: Duration = Duration::from_secs(60);

/// What a gate does with a connection.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Passes it on to the registry.
    Forward,
    /// Takes it and never answers, as a stalled registry.
    Stall,
}

/// A TCP gate in front of the test registry: open, it forwards (or stalls) connections;
/// shut, nothing listens on its port, so connections are refused.
struct Gate {
    port: u16,
    upstream: String,
    mode: Mode,
    running: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl Gate {
    /// A gate on a free port, open in `mode`.
    fn open(mode: Mode) -> Gate {
        let upstream = registry_url();
        let authority = upstream
            .trim_start_matches("http://")
            .split('/')
            .next()
            .expect("the registry's host and port")
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut gate = Gate {
            port: listener.local_addr().unwrap().port(),
            upstream: authority,
            mode,
            running: None,
        };
        gate.serve(listener);
        gate
    }

    /// The registry's url through the gate.
    fn url(&self) -> String {
        let base = registry_url();
        let path = base
            .trim_start_matches("http://")
            .split_once('/')
            .map_or(String::new(), |(_, path)| format!("/{path}"));
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Stops listening and cuts the connections through the gate.
    fn shut(&mut self) {
        if let Some((stop, thread)) = self.running.take() {
            stop.store(true, Ordering::SeqCst);
            thread.join().unwrap();
        }
    }

    /// Listens again, on the same port.
    fn reopen(&mut self) {
        assert!(self.running.is_none(), "the gate is open");
        let deadline = Instant::now() + Duration::from_secs(30);
        let listener = loop {
            match TcpListener::bind(("127.0.0.1", self.port)) {
                Ok(listener) => break listener,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("port {} not free yet: {e}", self.port);
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => panic!("the gate cannot listen on {} again: {e}", self.port),
            }
        };
        self.serve(listener);
    }

    fn serve(&mut self, listener: TcpListener) {
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (upstream, mode, stopping) = (self.upstream.clone(), self.mode, stop.clone());
        let thread = std::thread::spawn(move || {
            let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
            while !stopping.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        client.set_nonblocking(false).unwrap();
                        open.lock().unwrap().push(client.try_clone().unwrap());
                        if mode == Mode::Forward {
                            forward(client, &upstream, &open);
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(e) => panic!("the gate's accept failed: {e}"),
                }
            }
            for stream in open.lock().unwrap().drain(..) {
                let _ = stream.shutdown(Shutdown::Both);
            }
        });
        self.running = Some((stop, thread));
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.shut();
    }
}

/// Copies both ways between `client` and a new connection to `upstream`.
fn forward(client: TcpStream, upstream: &str, open: &Arc<Mutex<Vec<TcpStream>>>) {
    let Ok(server) = TcpStream::connect(upstream) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    open.lock().unwrap().push(server.try_clone().unwrap());
    for (mut from, mut to) in [
        (client.try_clone().unwrap(), server.try_clone().unwrap()),
        (server, client),
    ] {
        std::thread::spawn(move || {
            let mut buffer = [0u8; 16 * 1024];
            while let Ok(n) = from.read(&mut buffer) {
                if n == 0 || to.write_all(&buffer[..n]).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(Shutdown::Write);
        });
    }
}

/// `[sink]` lines writing whole rows as Avro, registered through `registry`.
fn avro_through(registry: &str, more: &str) -> String {
    format!(
        "[sink.encoding]\nvalue = \"avro\"\n[sink.schema_registry]\nurl = \"{registry}\"\n{more}\n"
    )
}

/// Whole change rows (the module passes every row on).
const ROWS: &str = "behavior = \"rows\"";

/// Every record of `topic`, decoded against the registry, sorted.
fn decoded(topic: &str) -> Vec<String> {
    let mut lines = registry_decoded(topic, "avro", &[]);
    lines.sort();
    lines
}

/// A `sluice run` pipeline of the whole rows of `table` into `topic`, with `sink` lines.
fn rows_pipeline(table: &Path, topic: &str, sink: &str) -> PipelineFiles {
    PipelineFiles::new(
        table,
        &transform_component("misbehaving/behaviors-c"),
        topic,
        &kafka_bootstrap(),
        Extra {
            sink,
            params: ROWS,
            ..Extra::default()
        },
    )
}

/// The records of `table`, delivered straight to the registry into a topic of their own:
/// what a pipeline that waited out an outage must have delivered, each once.
fn expected(table: &Path) -> Vec<String> {
    let topic = unique_topic("outage-reference");
    let files = rows_pipeline(table, &topic, &avro_through(&registry_url(), ""));
    run_to_latest(&files.config);
    decoded(&topic)
}

fn waiting_gauge(serve: &Serve, pipeline: &str) -> Option<String> {
    let (_, metrics) = serve.call("GET", "/metrics", Some(&serve.operator), None);
    let series = format!(
        "sluice_pipeline_waiting{{tenant=\"acme\",pipeline=\"{pipeline}\",for=\"registry\"}} "
    );
    metrics
        .as_str()
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix(&series).map(str::to_string))
}

#[test]
fn a_registry_away_for_a_minute_is_waited_out_mid_run_and_at_start() {
    let work = tempfile::tempdir().unwrap();
    let (mid_table, start_table) = (work.path().join("mid"), work.path().join("start"));
    deals_table(&mid_table, &["create", "--rows", "5"]);
    deals_table(&start_table, &["create", "--rows", "5"]);
    let kafka = format!("\"bootstrap.servers\" = \"{}\"", kafka_bootstrap());
    let serve = Serve::tenant("acme", &kafka);
    let module = serve.upload(
        "acme",
        &transform_component("misbehaving/behaviors-c"),
        "rows",
    );
    let config = |table: &Path, topic: &str, gate: &Gate| {
        let sink = avro_through(&gate.url(), "");
        pipeline_config(
            table,
            topic,
            None,
            Extra {
                sink: &sink,
                params: ROWS,
                ..Extra::default()
            },
        )
    };

    // Mid-run: the first version is delivered, then the gate shuts and the table gains
    // a column, whose new schema the pipeline must register.
    let mut mid_gate = Gate::open(Mode::Forward);
    let mid = unique_topic("outage-mid");
    serve.create("acme", &mid, &config(&mid_table, &mid, &mid_gate), &module);
    serve.wait_caught_up("acme", &mid, 0, Duration::from_secs(60));
    mid_gate.shut();
    let mid_shut = Instant::now();
    deals_table(&mid_table, &["region"]);

    // At start: the gate is shut before the pipeline's first registration.
    let mut start_gate = Gate::open(Mode::Forward);
    start_gate.shut();
    let start_shut = Instant::now();
    let start = unique_topic("outage-start");
    serve.create(
        "acme",
        &start,
        &config(&start_table, &start, &start_gate),
        &module,
    );

    for (name, gate) in [(&mid, &mid_gate), (&start, &start_gate)] {
        let status = serve.wait_for("acme", name, Duration::from_secs(30), |s| {
            !s["waiting"].is_null()
        });
        assert_eq!(status["state"], "running", "{status:#}");
        let waiting = &status["waiting"];
        assert_eq!(waiting["for"], "registry", "{waiting:#}");
        assert_eq!(waiting["url"], gate.url().as_str(), "{waiting:#}");
        let message = waiting["message"].as_str().unwrap();
        let opening = format!("Waiting for the schema registry at {} since ", gate.url());
        assert!(message.starts_with(&opening), "{message}");
        assert!(
            message.contains(
                "unless it answers, [sink.schema_registry] max_outage): the connection was refused"
            ),
            "{message}"
        );
        assert_eq!(
            waiting_gauge(&serve, name).as_deref(),
            Some("1"),
            "{name} waits"
        );
    }

    // Both stay running through their minute, waiting; then their gate opens.
    for (name, gate, shut) in [
        (&mid, &mut mid_gate, mid_shut),
        (&start, &mut start_gate, start_shut),
    ] {
        while shut.elapsed() < OUTAGE {
            for name in [&mid, &start] {
                let status = serve.status("acme", name);
                assert_eq!(status["state"], "running", "{status:#}");
            }
            let status = serve.status("acme", name);
            assert!(!status["waiting"].is_null(), "{status:#}");
            std::thread::sleep(Duration::from_secs(2));
        }
        gate.reopen();
    }

    let done = serve.wait_caught_up("acme", &mid, 2, Duration::from_secs(90));
    assert!(done["waiting"].is_null(), "{done:#}");
    let done = serve.wait_caught_up("acme", &start, 0, Duration::from_secs(90));
    assert!(done["waiting"].is_null(), "{done:#}");
    assert!(done["counters"]["registry_retries"].as_u64().unwrap() >= 3);
    for name in [&mid, &start] {
        assert_eq!(waiting_gauge(&serve, name).as_deref(), Some("0"));
    }
    assert!(
        serve
            .log()
            .contains("The schema registry answers again; the pipeline goes on."),
    );

    assert_eq!(decoded(&mid), expected(&mid_table), "mid-run, each once");
    assert_eq!(
        decoded(&start),
        expected(&start_table),
        "at start, each once"
    );
}

#[test]
fn a_registry_away_past_max_outage_stops_the_pipeline_and_a_rerun_delivers_everything_once() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "5"]);
    let mut gate = Gate::open(Mode::Forward);
    let topic = unique_topic("outage-bound");
    let sink = avro_through(&gate.url(), "max_outage = \"4s\"");
    let files = rows_pipeline(&table, &topic, &sink);
    run_to_latest(&files.config);

    // Shut past the bound while the table gains a column (a new schema).
    gate.shut();
    deals_table(&table, &["region"]);
    let output = run_expecting_failure(&files.config);
    let url = gate.url();
    assert!(
        output.contains(&format!("Pipeline {topic} stopped at table {} version 1 after waiting 4s for the schema registry, the longest [sink.schema_registry] max_outage allows. The last failure: The schema registry at {url} did not answer: the connection was refused (nothing listens at that address).", table.display())),
        "{output}"
    );
    assert!(
        output.contains("Nothing is lost: once the registry answers, start the pipeline again and it resumes at version 1 (or raise max_outage to wait longer)."),
        "{output}"
    );
    let retries: Vec<&str> = output
        .lines()
        .filter(|line| {
            line.contains("The schema registry gave no schema id; the pipeline waits for it")
        })
        .collect();
    assert!(retries.len() >= 2, "{output}");
    assert!(
        retries.iter().all(|line| !line.contains("stopped")),
        "a retry does not say the pipeline stopped: {retries:#?}"
    );

    gate.reopen();
    run_to_latest(&files.config);
    assert_eq!(
        decoded(&topic),
        expected(&table),
        "each once after the rerun"
    );
}

#[test]
fn a_registry_that_times_out_is_explained_in_words() {
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["create", "--rows", "2"]);
    let gate = Gate::open(Mode::Stall);
    let topic = unique_topic("outage-stall");
    let sink = avro_through(&gate.url(), "timeout = \"1s\"\nmax_outage = \"2s\"");
    let files = rows_pipeline(&table, &topic, &sink);
    let output = run_expecting_failure(&files.config);
    assert!(
        output.contains(&format!("The schema registry at {} did not answer: no complete answer within 1 s ([sink.schema_registry] timeout)", gate.url())),
        "{output}"
    );
    assert!(!output.contains("timeout: global"), "{output}");
}
