//! A table in S3 (a local moto server) streams like a local one; the credentials come
//! from the environment and never appear in the log.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice_tests::{
    Consumed, Extra, PipelineFiles, consume_all, deals_table, kafka_bootstrap, run_to_latest,
    sluice_binary, transform_component, unique_topic,
};

const SECRET: &str = "moto-secret-key-not-in-logs";

/// A moto S3 server on a free loopback port, stopped on drop.
struct S3 {
    process: Child,
    endpoint: String,
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

fn start_s3() -> S3 {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let process = Command::new("python3")
        .args([
            "-m",
            "moto.server",
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("moto starts (scripts/setup.sh installs it)");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "moto did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    S3 {
        process,
        endpoint: format!("http://127.0.0.1:{port}"),
    }
}

/// Copies a local table into `s3://<bucket>/deals` with boto3.
fn upload(endpoint: &str, bucket: &str, table: &Path) {
    let script = format!(
        r#"
import boto3, os
s3 = boto3.client("s3", endpoint_url="{endpoint}", region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="{SECRET}")
s3.create_bucket(Bucket="{bucket}")
root = "{table}"
for folder, _, files in os.walk(root):
    for name in files:
        path = os.path.join(folder, name)
        s3.upload_file(path, "{bucket}", "deals/" + os.path.relpath(path, root))
"#,
        table = table.display()
    );
    let status = Command::new("python3")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(status.success(), "uploading the table failed");
}

#[test]
fn a_table_in_s3_streams_like_a_local_one() {
    let s3 = start_s3();
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("deals");
    deals_table(&table, &["scenario"]);
    upload(&s3.endpoint, "lake", &table);

    let topic = unique_topic("s3");
    let source = format!(
        "[source.storage_options]\naws_endpoint = \"{}\"\naws_allow_http = \"true\"\naws_region = \"us-east-1\"",
        s3.endpoint
    );
    let files = PipelineFiles::new(
        Path::new("s3://lake/deals"),
        &transform_component("gold-deals"),
        &topic,
        &kafka_bootstrap(),
        Extra {
            source: &source,
            ..Extra::default()
        },
    );
    let run = Command::new(sluice_binary())
        .args(["run", "--stop-at-latest", "--config"])
        .arg(&files.config)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(!stderr.contains(SECRET), "the secret was logged");

    let reference = unique_topic("s3-local");
    let local = PipelineFiles::new(
        &table,
        &transform_component("gold-deals"),
        &reference,
        &kafka_bootstrap(),
        Extra::default(),
    );
    run_to_latest(&local.config);
    let lines =
        |topic: &str| -> Vec<String> { consume_all(topic).iter().map(Consumed::line).collect() };
    assert_eq!(lines(&topic), lines(&reference));
    assert_eq!(lines(&topic).len(), 36);
}
