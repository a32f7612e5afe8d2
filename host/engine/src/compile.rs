//! Compiling untrusted modules in a child process.
//!
//! Cranelift cannot be interrupted, and its time and memory can grow faster than a
//! module's size (wasmtime's maintainers do not count that as a security bug; see
//! `docs/architecture.md`). So a module is compiled by a worker process: the binary
//! started again with a hidden subcommand, which limits its own address space, compiles
//! with the engine's settings and writes the serialized module to a file. The parent
//! watches its memory and its clock, kills it past either, and loads only what a worker
//! wrote into the parent's private directory. Any crash, kill or malformed answer fails
//! the load.

use std::io::Read as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sha2::Digest as _;

/// Exit status of a worker that compiled nothing because wasmtime refused the module;
/// its standard error holds wasmtime's reason.
const EXIT_INVALID: i32 = 2;

/// The worker's scheduling priority (niceness): below the host's own threads.
const COMPILE_NICENESS: libc::c_int = 10;

/// A compile's deadline is CPU time, so a busy host (where the worker, at a lower
/// priority, waits for the cores) does not refuse a module it would compile when quiet;
/// the wall clock stops it at this many times its deadline.
const WALL_CLOCK_FACTOR: u32 = 4;

/// How often the parent looks at a running worker.
const WATCH_INTERVAL: Duration = Duration::from_millis(10);

/// Most bytes of a worker's standard error kept for a message.
const STDERR_KEPT: u64 = 4096;

/// How a binary re-enters itself to compile a module in a child process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileWorker {
    /// The program to start (usually the running binary).
    pub program: PathBuf,
    /// Arguments before the worker's own (the hidden subcommand's name).
    pub args: Vec<String>,
}

static REGISTERED: OnceLock<CompileWorker> = OnceLock::new();

/// Makes every engine created afterwards in this process compile modules in `worker`
/// processes. A binary that handles [`run_compile_worker`] calls this once at start;
/// engines of a process that never does (tests, benchmarks of trusted modules)
/// compile in process.
pub fn isolate_compiles(worker: CompileWorker) {
    let _ = REGISTERED.set(worker);
}

/// The worker registered with [`isolate_compiles`].
pub(crate) fn registered_worker() -> Option<CompileWorker> {
    REGISTERED.get().cloned()
}

/// What compiling one module may use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileBudget {
    /// Most memory the compile may use, in bytes.
    pub memory_bytes: usize,
    /// Most CPU time the compile may use (all its threads together); it is stopped at
    /// four times this on the wall clock too.
    pub deadline: Duration,
}

impl Default for CompileBudget {
    fn default() -> CompileBudget {
        CompileBudget {
            memory_bytes: 1024 * 1024 * 1024,
            deadline: Duration::from_secs(120),
        }
    }
}

/// What a worker is asked to do; [`WorkerRequest::args`] and the binary's subcommand
/// carry it across.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerRequest {
    /// The module's bytes.
    pub input: PathBuf,
    /// Where the serialized module goes.
    pub output: PathBuf,
    /// SHA-256 of the input, in hex: the worker compiles nothing else.
    pub digest: String,
    /// The address space the compile may add to the worker's own, in bytes.
    pub memory_bytes: usize,
    /// Whether the engine meters fuel (it changes the generated code).
    pub fuel_metering: bool,
}

impl WorkerRequest {
    /// The worker's arguments, after the subcommand's name.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec![
            "--input".to_string(),
            self.input.display().to_string(),
            "--output".to_string(),
            self.output.display().to_string(),
            "--digest".to_string(),
            self.digest.clone(),
            "--memory-bytes".to_string(),
            self.memory_bytes.to_string(),
        ];
        if self.fuel_metering {
            args.push("--fuel-metering".to_string());
        }
        args
    }
}

/// Why a worker's compile produced no module.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CompileFailure {
    /// wasmtime refused the module; its reason.
    Invalid(String),
    /// The compile needed more memory than its budget; the peak seen, in bytes.
    Memory(usize),
    /// The compile used more CPU time than its deadline.
    Deadline,
    /// The compile did not finish within [`WALL_CLOCK_FACTOR`] times its deadline on
    /// the wall clock, though within it in CPU time: the host is too busy; how long it
    /// waited.
    Busy(Duration),
    /// The host is shutting down.
    Cancelled,
    /// The worker could not be started or ended without an answer.
    Crashed(String),
}

/// What a finished compile used.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CompileUsage {
    pub(crate) elapsed: Duration,
    pub(crate) peak_bytes: usize,
}

/// Compiles `bytes` (whose SHA-256 is `digest`) in a worker process within `budget`,
/// on at most `threads` threads, returning the serialized component.
pub(crate) fn compile_isolated(
    worker: &CompileWorker,
    bytes: &[u8],
    digest: &str,
    budget: &CompileBudget,
    threads: usize,
    fuel_metering: bool,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Vec<u8>, CompileUsage), CompileFailure> {
    let crashed = |what: &str, e: std::io::Error| CompileFailure::Crashed(format!("{what}: {e}"));
    let dir = tempfile::Builder::new()
        .prefix("sluice-compile-")
        .tempdir()
        .map_err(|e| crashed("cannot create its directory", e))?;
    let request = WorkerRequest {
        input: dir.path().join("module.wasm"),
        output: dir.path().join("module.cwasm"),
        digest: digest.to_string(),
        memory_bytes: budget.memory_bytes,
        fuel_metering,
    };
    std::fs::write(&request.input, bytes).map_err(|e| crashed("cannot write its input", e))?;
    let stderr_path = dir.path().join("stderr");
    let stderr = std::fs::File::create(&stderr_path)
        .map_err(|e| crashed("cannot create its error file", e))?;
    let cpu_seconds = cpu_seconds_for(budget.deadline);
    let mut command = Command::new(&worker.program);
    command
        .args(&worker.args)
        .args(request.args())
        .env_clear()
        // wasmtime compiles functions in parallel on rayon's pool: a worker takes its
        // share of the cores, so compiles running beside it keep theirs.
        .env("RAYON_NUM_THREADS", threads.max(1).to_string())
        // Each thread's malloc arena reserves 64 MiB of address space, counted by the
        // worker's address-space limit though hardly used.
        .env("MALLOC_ARENA_MAX", "2")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    // SAFETY: between fork and exec only async-signal-safe calls are made (prctl,
    // setrlimit, setpriority), on values computed before the fork.
    unsafe {
        command.pre_exec(move || {
            // The worker dies with the thread that started it, so a host that is killed
            // leaves no compile behind.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            set_limit(libc::RLIMIT_CORE, 0);
            // A second clock, in the kernel, should the parent stop watching.
            set_limits(libc::RLIMIT_CPU, cpu_seconds, cpu_seconds + 5);
            // Pipelines that are running come before a module that may never run.
            libc::setpriority(libc::PRIO_PROCESS, 0, COMPILE_NICENESS);
            Ok(())
        });
    }
    let started = Instant::now();
    let child = command
        .spawn()
        .map_err(|e| crashed(&format!("cannot start {}", worker.program.display()), e))?;
    let pid = child.id() as libc::pid_t;
    let (status, peak_bytes) = loop {
        if let Some(ended) = reap(pid) {
            break ended;
        }
        let stop = if cancelled() {
            Some(CompileFailure::Cancelled)
        } else if cpu_time(pid).is_some_and(|cpu| cpu > budget.deadline) {
            Some(CompileFailure::Deadline)
        } else if started.elapsed() > budget.deadline.saturating_mul(WALL_CLOCK_FACTOR) {
            Some(CompileFailure::Busy(started.elapsed()))
        } else {
            resident_bytes(pid)
                .filter(|rss| *rss > budget.memory_bytes)
                .map(CompileFailure::Memory)
        };
        if let Some(failure) = stop {
            // SAFETY: the child is not reaped yet, so the pid is still ours.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            wait_for(pid);
            return Err(failure);
        }
        std::thread::sleep(WATCH_INTERVAL);
    };
    let usage = CompileUsage {
        elapsed: started.elapsed(),
        peak_bytes,
    };
    let error_text = || read_start(&stderr_path);
    if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            0 => {
                let compiled = std::fs::read(&request.output)
                    .map_err(|e| crashed("ended without writing the compiled module", e))?;
                return Ok((compiled, usage));
            }
            EXIT_INVALID => return Err(CompileFailure::Invalid(error_text())),
            _ => {}
        }
    }
    let text = error_text();
    // A worker past its address-space limit aborts when an allocation fails.
    if text.contains("memory allocation of") || peak_bytes > budget.memory_bytes {
        return Err(CompileFailure::Memory(peak_bytes.max(budget.memory_bytes)));
    }
    if libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGXCPU {
        return Err(CompileFailure::Deadline);
    }
    Err(CompileFailure::Crashed(format!(
        "the compile worker ended with {}{}",
        describe_status(status),
        if text.is_empty() {
            String::new()
        } else {
            format!(": {text}")
        }
    )))
}

/// CPU seconds a worker may use before the kernel stops it: the deadline, rounded up,
/// and a margin; the parent, watching the same clock, normally stops it first.
fn cpu_seconds_for(deadline: Duration) -> u64 {
    deadline.as_secs().saturating_add(2)
}

fn set_limit(resource: libc::__rlimit_resource_t, value: u64) {
    set_limits(resource, value, value);
}

/// Sets a soft and a hard limit: past the soft CPU limit the kernel sends SIGXCPU,
/// which names the cause, where the hard one sends SIGKILL.
fn set_limits(resource: libc::__rlimit_resource_t, soft: u64, hard: u64) {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads the struct and changes only this process's limits.
    unsafe { libc::setrlimit(resource, &limit) };
}

/// The worker's exit status and peak resident memory, once it has ended.
fn reap(pid: libc::pid_t) -> Option<(i32, usize)> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child; status and usage are valid for writes.
    let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
    (reaped == pid).then(|| (status, (usage.ru_maxrss.max(0) as usize) * 1024))
}

/// Waits for a killed worker, so it leaves no zombie.
fn wait_for(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: pid is our child, killed; status is valid for writes.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

/// The CPU time a running worker has used (all its threads), from `/proc`.
fn cpu_time(pid: libc::pid_t) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; the fields after it are plain numbers.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_millis(ticks * 1000 / per_second))
}

/// A running worker's resident memory, from `/proc`.
fn resident_bytes(pid: libc::pid_t) -> Option<usize> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    Some(pages * page)
}

fn describe_status(status: i32) -> String {
    if libc::WIFSIGNALED(status) {
        format!("signal {}", libc::WTERMSIG(status))
    } else {
        format!("exit status {}", libc::WEXITSTATUS(status))
    }
}

/// The start of the worker's standard error (wasmtime's reason comes first).
fn read_start(path: &Path) -> String {
    let mut bytes = Vec::new();
    if let Ok(file) = std::fs::File::open(path) {
        let _ = file.take(STDERR_KEPT).read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).trim().to_string()
}

/// The worker's side: limits its own address space to what it uses now plus the
/// request's budget, checks the input against its digest, compiles it with the
/// engine's settings and writes the serialized module. Returns the process's exit
/// status; the binary prints `Err`'s text to standard error.
pub fn run_compile_worker(request: &WorkerRequest) -> (i32, Option<String>) {
    let baseline = own_address_space().unwrap_or(512 * 1024 * 1024);
    set_limit(
        libc::RLIMIT_AS,
        (baseline.saturating_add(request.memory_bytes)) as u64,
    );
    match compile_to_file(request) {
        Ok(()) => (0, None),
        Err(WorkerError::Invalid(reason)) => (EXIT_INVALID, Some(reason)),
        Err(WorkerError::Io(reason)) => (1, Some(reason)),
    }
}

enum WorkerError {
    Invalid(String),
    Io(String),
}

fn compile_to_file(request: &WorkerRequest) -> Result<(), WorkerError> {
    let bytes = std::fs::read(&request.input)
        .map_err(|e| WorkerError::Io(format!("cannot read {}: {e}", request.input.display())))?;
    let digest = module_digest(&bytes);
    if digest != request.digest {
        return Err(WorkerError::Io(format!(
            "the input's digest is {digest}, not {}",
            request.digest
        )));
    }
    let compiled = compile_serialized(&bytes, request.fuel_metering)
        .map_err(|e| WorkerError::Invalid(format!("{e:#}")))?;
    std::fs::write(&request.output, compiled)
        .map_err(|e| WorkerError::Io(format!("cannot write {}: {e}", request.output.display())))
}

/// The wasmtime settings every engine of Sluice and its compile workers share: a module
/// compiled in a worker loads only into an engine with the same code generation.
pub(crate) fn wasmtime_config(fuel_metering: bool) -> wasmtime::Config {
    let mut wasm = wasmtime::Config::new();
    wasm.wasm_component_model(true)
        .epoch_interruption(true)
        .consume_fuel(fuel_metering);
    wasm
}

/// Compiles a component as an engine with these settings would, serialized.
pub(crate) fn compile_serialized(bytes: &[u8], fuel_metering: bool) -> wasmtime::Result<Vec<u8>> {
    let engine = wasmtime::Engine::new(&wasmtime_config(fuel_metering))?;
    engine.precompile_component(bytes)
}

/// The process's address space in bytes (`VmSize`).
fn own_address_space() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmSize:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// SHA-256 of a module's bytes, in lower-case hex: how modules are named by content.
pub fn module_digest(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker that never answers, standing in for a compile that never ends.
    fn sleeping_worker() -> CompileWorker {
        CompileWorker {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "/bin/sleep 30".into(), "sh".into()],
        }
    }

    /// A deadline a test's worker passes at once.
    fn short() -> CompileBudget {
        CompileBudget {
            memory_bytes: 1 << 30,
            deadline: Duration::from_millis(300),
        }
    }

    #[test]
    fn the_requests_arguments_name_every_field() {
        let request = WorkerRequest {
            input: "/tmp/in.wasm".into(),
            output: "/tmp/out.cwasm".into(),
            digest: "ab".into(),
            memory_bytes: 5,
            fuel_metering: true,
        };
        assert_eq!(
            request.args().join(" "),
            "--input /tmp/in.wasm --output /tmp/out.cwasm --digest ab --memory-bytes 5 --fuel-metering"
        );
    }

    #[test]
    fn a_worker_refuses_bytes_that_are_not_the_digests() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("m.wasm");
        std::fs::write(&input, b"\0asm").unwrap();
        let request = WorkerRequest {
            input,
            output: dir.path().join("m.cwasm"),
            digest: "00".into(),
            memory_bytes: 1,
            fuel_metering: false,
        };
        assert!(
            matches!(compile_to_file(&request), Err(WorkerError::Io(m)) if m.contains("digest"))
        );
        assert!(!request.output.exists());
    }

    #[test]
    fn a_missing_program_is_a_crash_with_its_name() {
        let worker = CompileWorker {
            program: "/nonexistent/sluice".into(),
            args: vec![],
        };
        let failure = compile_isolated(
            &worker,
            b"\0asm",
            "00",
            &CompileBudget::default(),
            1,
            false,
            &|| false,
        )
        .unwrap_err();
        assert!(
            matches!(&failure, CompileFailure::Crashed(m) if m.contains("/nonexistent/sluice")),
            "{failure:?}"
        );
    }

    #[test]
    fn a_worker_past_its_deadline_is_killed() {
        // A loop that never ends stands in for a compile that uses the cores forever.
        let worker = CompileWorker {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "while :; do :; done".into(), "sh".into()],
        };
        let started = Instant::now();
        let failure =
            compile_isolated(&worker, b"\0asm", "00", &short(), 1, false, &|| false).unwrap_err();
        assert_eq!(failure, CompileFailure::Deadline);
        assert!(started.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn a_worker_waiting_past_the_wall_clock_is_stopped_as_busy() {
        let failure = compile_isolated(
            &sleeping_worker(),
            b"\0asm",
            "00",
            &short(),
            1,
            false,
            &|| false,
        )
        .unwrap_err();
        assert!(matches!(failure, CompileFailure::Busy(_)), "{failure:?}");
    }

    #[test]
    fn a_worker_past_its_memory_is_killed() {
        // A program that fills memory stands in for a compile that does.
        let worker = CompileWorker {
            program: "/usr/bin/python3".into(),
            args: vec![
                "-c".into(),
                "import time; b = b'x' * (200 * 1024 * 1024); time.sleep(30)".into(),
            ],
        };
        let budget = CompileBudget {
            memory_bytes: 64 * 1024 * 1024,
            deadline: Duration::from_secs(20),
        };
        let failure =
            compile_isolated(&worker, b"\0asm", "00", &budget, 1, false, &|| false).unwrap_err();
        assert!(matches!(failure, CompileFailure::Memory(_)), "{failure:?}");
    }

    #[test]
    fn cancelling_kills_the_worker() {
        let worker = sleeping_worker();
        let failure = compile_isolated(
            &worker,
            b"\0asm",
            "00",
            &CompileBudget::default(),
            1,
            false,
            &|| true,
        )
        .unwrap_err();
        assert_eq!(failure, CompileFailure::Cancelled);
    }
}
