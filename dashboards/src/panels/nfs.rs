//! NFS client writeback: WRITE RPCs by requested stability (UNSTABLE vs FILE_SYNC / DATA_SYNC)
//! and by the sync mode that issued them, COMMITs, RPC latency, errors, and fsync latency on the
//! same mounts (an NFS mount's `device` is its superblock's `MAJ:MIN` in both).

use crate::model::{Panel, Query, Row};
use crate::scope::Scope;

const WRITES: &str = "wbscope_nfs_write_requests_total";
const WRITE_LATENCY: &str = "wbscope_nfs_write_duration_seconds";
const COMMIT_LATENCY: &str = "wbscope_nfs_commit_duration_seconds";

/// The "NFS" row, the same in every dashboard.
pub fn row(s: Scope) -> Row {
    Row::new(
        "NFS",
        vec![
            writes_by_stability(s),
            fsync_on_nfs(s),
            write_bytes_by_sync_mode(s),
            write_latency(s),
            commits(s),
            errors(s),
        ],
    )
}

/// WRITE RPCs per second by mount and stability.
pub fn writes_by_stability(s: Scope) -> Panel {
    Panel::series(
        "NFS WRITEs by stability",
        "reqps",
        "WRITE RPCs per second by mount (device MAJ:MIN and server) and the stability the client \
         asked for. unstable WRITEs let the server cache the data until one COMMIT makes it \
         durable; file_sync WRITEs make the server write every request to stable storage before \
         it replies. An fsync after scattered small writes that shows as many file_sync WRITEs \
         and no COMMIT is the slow case: every page is a synchronous write on the server.",
        vec![Query::new(
            s.rate_by(WRITES, "device, server, stable"),
            s.legend("{{device}} {{server}} {{stable}}"),
        )],
    )
}

/// fsync / fdatasync p99 on the devices that are NFS mounts.
pub fn fsync_on_nfs(s: Scope) -> Panel {
    let on = s.keep("device");
    let quantile = |q: f64| {
        format!(
            "histogram_quantile({q}, sum by ({}, le) (rate(wbscope_sync_call_duration_seconds_bucket\
             {{{},syscall=~\"fsync|fdatasync\"}}[{}]))) and on ({on}) group by ({on}) ({WRITES}{{{}}})",
            s.keep("device, syscall"),
            s.device(),
            crate::scope::RATE,
            s.device()
        )
    };
    Panel::series(
        "fsync latency p50 / p99 on NFS mounts",
        "s",
        "Median and 99th percentile of fsync and fdatasync on NFS mounts (the devices that send \
         NFS WRITEs), beside the WRITEs they cause. fsync waits for its WRITEs and, for unstable \
         ones, the COMMIT: when its p99 rises with file_sync WRITEs, the server's synchronous \
         writes are the wait.",
        vec![
            Query::new(quantile(0.5), s.legend("{{device}} {{syscall}} p50")),
            Query::new(quantile(0.99), s.legend("{{device}} {{syscall}} p99")),
        ],
    )
}

/// WRITE bytes per second by stability and sync mode.
pub fn write_bytes_by_sync_mode(s: Scope) -> Panel {
    Panel::series(
        "NFS WRITE bytes by stability and sync mode",
        "Bps",
        "Bytes the WRITE RPCs carried per second, by stability and by the writeback sync mode of \
         the pass that issued them: all for fsync, sync, close and other data-integrity \
         writeback, none for background writeback. file_sync bytes under sync_mode=all are \
         fsync-driven synchronous server writes.",
        vec![Query::new(
            s.rate_by("wbscope_nfs_write_bytes_total", "device, stable, sync_mode"),
            s.legend("{{device}} {{stable}} sync_mode={{sync_mode}}"),
        )],
    )
}

/// WRITE RPC p99 by stability.
pub fn write_latency(s: Scope) -> Panel {
    Panel::series(
        "NFS WRITE latency p50 / p99 by stability",
        "s",
        "Time from setting a WRITE RPC up to handling its reply, by stability. file_sync WRITEs \
         include the server's write to stable storage, unstable ones do not (their COMMIT does), \
         so a large gap between the two is what FILE_SYNC costs on this server.",
        vec![
            Query::new(
                s.quantile(0.5, WRITE_LATENCY, "device, stable"),
                s.legend("{{device}} {{stable}} p50"),
            ),
            Query::new(
                s.quantile(0.99, WRITE_LATENCY, "device, stable"),
                s.legend("{{device}} {{stable}} p99"),
            ),
        ],
    )
}

/// COMMITs per second and their p99.
pub fn commits(s: Scope) -> Panel {
    Panel::series(
        "NFS COMMITs per second and p99 latency",
        "short",
        "COMMIT RPCs per second (left) and the 99th percentile of their latency in seconds, \
         by mount. Each COMMIT makes a file's unstable WRITEs durable; many COMMITs per WRITE \
         mean fsyncs of small amounts of data.",
        vec![
            Query::new(
                s.rate_by("wbscope_nfs_commits_total", "device, server"),
                s.legend("{{device}} {{server}} commits/s"),
            ),
            Query::new(
                s.quantile(0.99, COMMIT_LATENCY, "device, server"),
                s.legend("{{device}} {{server}} p99 s"),
            ),
        ],
    )
}

/// Failed WRITEs and COMMITs.
pub fn errors(s: Scope) -> Panel {
    Panel::series(
        "NFS WRITE and COMMIT errors",
        "ops",
        "WRITE and COMMIT RPCs per second that completed with an error status (for example a \
         full or read-only export, or a server that went away on a soft mount). The client \
         retries or reports them to the next fsync or close.",
        vec![
            Query::new(
                s.rate_by("wbscope_nfs_write_errors_total", "device, stable"),
                s.legend("{{device}} WRITE {{stable}}"),
            ),
            Query::new(
                s.rate_by("wbscope_nfs_commit_errors_total", "device"),
                s.legend("{{device}} COMMIT"),
            ),
        ],
    )
}
