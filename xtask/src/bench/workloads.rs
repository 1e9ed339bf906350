//! The measured workloads: fio 4 KiB random writes with an fsync after each (Debian's fio), and
//! a buffered write of a large file followed by `sync(2)`.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// Size of each `write(2)` of the buffered workload.
const CHUNK: usize = 1 << 20;

/// Which workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// fio randwrite bs=4k fsync=1, psync engine, one job, time-based.
    Fio,
    /// Write `buffered_mib` MiB in 1 MiB `write(2)` calls, then `sync(2)`.
    Buffered,
}

impl Workload {
    /// Both workloads, in report order.
    pub const ALL: [Workload; 2] = [Workload::Fio, Workload::Buffered];

    /// Stable short name (row keys, file names).
    pub fn key(self) -> &'static str {
        match self {
            Workload::Fio => "fio",
            Workload::Buffered => "buffered",
        }
    }

    /// What one "operation" of this workload is, for per-op figures.
    pub fn op_unit(self) -> &'static str {
        match self {
            Workload::Fio => "write+fsync",
            Workload::Buffered => "MiB written",
        }
    }
}

/// Sizes and durations of the workloads.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    pub fio_secs: u64,
    pub fio_file_mib: u64,
    pub buffered_mib: u64,
}

/// What one run measured.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// Operations done (writes+fsyncs, or MiB written).
    pub ops: f64,
    /// Operations per second (IOPS, or MiB/s of write + sync).
    pub throughput: f64,
    /// fio: fsync latency p99 in ns; buffered: the `sync(2)` duration in ns.
    pub flush_ns: f64,
    /// Wall-clock time of the run, in seconds.
    pub secs: f64,
}

/// Runs `workload` in `dir` (a directory on the benchmark filesystem); fio's JSON goes to `log`.
pub fn run(workload: Workload, dir: &Path, sizes: Sizes, log: &Path) -> Result<Outcome> {
    match workload {
        Workload::Fio => run_fio(dir, sizes, log),
        Workload::Buffered => run_buffered(dir, sizes.buffered_mib),
    }
}

/// Makes what a run needs outside the measured window: fio's file is laid out once, so no run
/// pays for (or counts BPF events of) the layout; the buffered file is removed and its
/// filesystem synced, so each run starts with nothing dirty.
pub fn prepare(workload: Workload, dir: &Path, sizes: Sizes) -> Result<()> {
    match workload {
        Workload::Fio => {
            // The file is written in full once, before the first measured run. fio would
            // otherwise fallocate it, and 4 KiB writes into unwritten extents cost an extent
            // conversion (more journal and block I/O per fsync) until most blocks are written:
            // whichever tool ran first would pay for it.
            let file = dir.join(FIO_FILE);
            let full = fs::metadata(&file).is_ok_and(|m| m.len() >= sizes.fio_file_mib << 20);
            if !full {
                let status = Command::new("fio")
                    .args(["--name=bench", "--rw=write", "--bs=1m", "--ioengine=psync"])
                    .args(["--fallocate=none", "--end_fsync=1", "--thread"])
                    .arg(format!("--directory={}", dir.display()))
                    .arg(format!("--size={}m", sizes.fio_file_mib))
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .context("running fio (installed by cargo xtask setup)")?;
                if !status.success() {
                    bail!("fio writing its file in full failed with {status}");
                }
            }
        }
        Workload::Buffered => {
            let path = buffered_path(dir);
            if path.exists() {
                fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
            }
            testkit::workload::syncfs(dir)?;
        }
    }
    Ok(())
}

/// fio for at most `secs` seconds in the background (daemon-cost and soak load), output
/// discarded; stops when dropped.
pub struct BackgroundFio(Child);

impl BackgroundFio {
    /// Starts it.
    pub fn spawn(dir: &Path, sizes: Sizes, secs: u64) -> Result<BackgroundFio> {
        let child = fio_command(dir, sizes, secs)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting fio (installed by cargo xtask setup)")?;
        Ok(BackgroundFio(child))
    }
}

impl Drop for BackgroundFio {
    /// SIGINT (fio stops its job and exits), then SIGKILL after 10 s. `--thread` keeps the job
    /// in this process, so no job process outlives a kill and keeps the filesystem busy.
    fn drop(&mut self) {
        if let Ok(pid) = libc::pid_t::try_from(self.0.id()) {
            // SAFETY: kill(2) on our own unreaped child with a valid signal number.
            unsafe { libc::kill(pid, libc::SIGINT) };
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The file fio's `bench` job (one job) reads and writes in its directory.
const FIO_FILE: &str = "bench";

fn fio_command(dir: &Path, sizes: Sizes, secs: u64) -> Command {
    let mut cmd = Command::new("fio");
    cmd.arg("--name=bench")
        .arg(format!("--directory={}", dir.display()))
        .args(["--rw=randwrite", "--bs=4k", "--fsync=1", "--ioengine=psync"])
        .arg(format!("--size={}m", sizes.fio_file_mib))
        .arg(format!("--runtime={secs}"))
        .args([
            "--time_based",
            "--randrepeat=0",
            "--thread",
            "--output-format=json",
        ]);
    cmd
}

fn run_fio(dir: &Path, sizes: Sizes, log: &Path) -> Result<Outcome> {
    let start = Instant::now();
    let out = fio_command(dir, sizes, sizes.fio_secs)
        .arg(format!("--output={}", log.display()))
        .stderr(Stdio::piped())
        .output()
        .context("running fio (installed by cargo xtask setup)")?;
    let secs = start.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!(
            "fio failed with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let json = fs::read(log).with_context(|| format!("reading {}", log.display()))?;
    let mut outcome = parse_fio(&json).with_context(|| format!("parsing {}", log.display()))?;
    outcome.secs = secs;
    Ok(outcome)
}

#[derive(Deserialize)]
struct FioJson {
    jobs: Vec<FioJob>,
}

#[derive(Deserialize)]
struct FioJob {
    write: FioDir,
    sync: FioSync,
}

#[derive(Deserialize)]
struct FioDir {
    total_ios: u64,
    iops: f64,
}

#[derive(Deserialize)]
struct FioSync {
    lat_ns: FioLat,
}

#[derive(Deserialize)]
struct FioLat {
    #[serde(default)]
    percentile: std::collections::BTreeMap<String, f64>,
}

/// IOPS, ops and fsync p99 from fio's JSON (`jobs[0].sync.lat_ns.percentile["99.000000"]`).
fn parse_fio(json: &[u8]) -> Result<Outcome> {
    let parsed: FioJson = serde_json::from_slice(json)?;
    let job = parsed.jobs.first().context("no job in fio output")?;
    let p99 = job
        .sync
        .lat_ns
        .percentile
        .get("99.000000")
        .copied()
        .context("no fsync p99 in fio output (was fsync=1 honoured?)")?;
    Ok(Outcome {
        ops: job.write.total_ios as f64,
        throughput: job.write.iops,
        flush_ns: p99,
        secs: 0.0,
    })
}

fn buffered_path(dir: &Path) -> PathBuf {
    dir.join("buffered.dat")
}

/// Writes `mib` MiB to a fresh file in 1 MiB writes, then `sync(2)`; throughput counts both.
fn run_buffered(dir: &Path, mib: u64) -> Result<Outcome> {
    let path = buffered_path(dir);
    // Non-zero, varied bytes, made once: generating data per write would add CPU noise.
    let chunk: Vec<u8> = (0..CHUNK).map(|i| (i % 251) as u8 | 1).collect();
    let start = Instant::now();
    let mut file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    for _ in 0..mib {
        file.write_all(&chunk)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    drop(file);
    let sync = testkit::workload::sync_all();
    let secs = start.elapsed().as_secs_f64();
    Ok(Outcome {
        ops: mib as f64,
        throughput: mib as f64 / secs,
        flush_ns: sync.as_nanos() as f64,
        secs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fio_json() {
        let json = br#"{"fio version":"fio-3.33","jobs":[{"jobname":"bench",
            "write":{"total_ios":1144,"iops":570.5,"bw_bytes":2337069},
            "sync":{"total_ios":1144,"lat_ns":{"min":1,"percentile":{"50.000000":226304,"99.000000":5799936}}}}]}"#;
        let o = parse_fio(json).unwrap();
        assert_eq!(o.ops, 1144.0);
        assert_eq!(o.throughput, 570.5);
        assert_eq!(o.flush_ns, 5_799_936.0);
        assert!(parse_fio(br#"{"jobs":[]}"#).is_err());
    }

    #[test]
    fn buffered_run_writes_and_syncs() {
        let dir = std::env::temp_dir().join(format!("xtask-bench-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let o = run_buffered(&dir, 2).unwrap();
        assert_eq!(o.ops, 2.0);
        assert_eq!(fs::metadata(buffered_path(&dir)).unwrap().len(), 2 << 20);
        prepare(
            Workload::Buffered,
            &dir,
            Sizes {
                fio_secs: 1,
                fio_file_mib: 1,
                buffered_mib: 1,
            },
        )
        .unwrap();
        assert!(!buffered_path(&dir).exists());
        fs::remove_dir_all(&dir).unwrap();
    }
}
