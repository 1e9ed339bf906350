//! What runs inside the guest (a bash script on the host's filesystem, which the guest sees
//! read-only) and reading its results back from the serial console, where each step is framed
//! by `@@VMTEST begin NAME` / `@@VMTEST end NAME rc=N` lines.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

use crate::cmd::Cmd;

/// Paths the guest script needs, all on the host's filesystem.
pub struct Plan<'a> {
    /// The unpacked kernel package (`modprobe -d`).
    pub kernel_root: &'a Path,
    /// The release daemon.
    pub wbscope: &'a Path,
    /// The release build of `--test kernel`.
    pub kernel_tests: &'a Path,
    /// The daemon crate's directory (cargo runs tests there).
    pub crate_dir: &'a Path,
    /// Exact test names to run, each in its own process.
    pub tests: &'a [String],
    /// Seconds one test may run before the guest dumps what is stuck and kills it.
    pub test_timeout: u64,
    /// The unpacked NFS server helpers (`nfs_helpers`), for the NFS tests.
    pub nfs_helpers: &'a Path,
}

/// The kernel tests' switch that accepts probes this kernel skips (they are reported in the
/// support table instead).
const ALLOW_SKIPPED: &str = "WBSCOPE_TEST_ALLOW_SKIPPED";

/// Modules the tests need beyond the root: loop devices, xfs, the I/O schedulers the block
/// tests switch to, the NFS server and NFSv4 client (loaded before `wbscope check`, so the NFS
/// probes' tracepoints exist). Built-in ones make modprobe succeed without loading anything.
const TEST_MODULES: &[&str] = &["loop", "xfs", "mq-deadline", "bfq", "nfsd", "nfsv4"];

/// The NFS tests' variable naming the helpers' root (daemon/tests/kernel/nfs/loopback.rs).
const NFS_HELPERS_ENV: &str = "WBSCOPE_NFS_HELPERS";

/// Seconds `wbscope check` may take (it loads and attaches every probe: about 10 s under TCG).
pub const CHECK_TIMEOUT: u64 = 180;

/// Shell functions of the guest script. `run_test NAME` runs one test in its own session with a
/// watchdog: past `$LIMIT` seconds it prints the guest's stuck tasks (state, kernel stack),
/// the loop devices' writeback state and the kernel's blocked-task dump, then kills the test's
/// whole session, so a hang ends as a failure with the evidence on the console.
const RUN_TEST: &str = r#"stuck() {
  echo "@@VMTEST timeout test $1 after ${LIMIT}s; stuck tasks:"
  for t in /proc/[0-9]*; do
    s=$(awk '/^State:/ {print $2}' "$t/status" 2>/dev/null)
    case "$s" in D|R) echo "--- pid ${t#/proc/} $(cat "$t/comm" 2>/dev/null) state $s"; cat "$t/stack" 2>/dev/null;; esac
  done
  ps -eo pid,ppid,stat,wchan:32,etime,args 2>/dev/null | grep -v ' \[' | tail -n 40
  for b in /sys/kernel/debug/bdi/7:*; do [ -e "$b/stats" ] && { echo "--- bdi ${b##*/}"; cat "$b/stats"; }; done
  echo w > /proc/sysrq-trigger; dmesg | tail -n 80
}
run_test() {
  echo "@@VMTEST begin test $1"
  setsid "$BIN" --ignored --exact --test-threads=1 --nocapture --color never "$1" 2>&1 &
  local pid=$!
  ( sleep "$LIMIT"; stuck "$1"; kill -KILL -- "-$pid" ) &
  local dog=$!
  wait "$pid"; local rc=$?
  kill "$dog" 2>/dev/null; wait "$dog" 2>/dev/null
  echo "@@VMTEST end test $1 rc=$rc"
}
"#;

/// Writes the executable guest script to `path`.
pub fn write_script(plan: &Plan, path: &Path) -> Result<()> {
    let q = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', r"'\''"));
    let mut s = String::from(
        "#!/bin/bash\n# Written by `cargo xtask vmtest`; runs inside the guest.\nset -u\n",
    );
    let _ = writeln!(s, "echo \"@@VMTEST kernel $(uname -r)\"");
    let _ = writeln!(
        s,
        "modprobe -d {} -a {} 2>&1 | sed 's/^/modprobe: /'",
        q(plan.kernel_root),
        TEST_MODULES.join(" ")
    );
    // The tests scrape the in-process daemon over loopback, which nothing else brings up.
    s.push_str("ip link set lo up || echo '@@VMTEST loopback not up'\n");
    // The scratch disk is the guest's TMPDIR, where the test fixtures put their loop images, so
    // they are written to a disk rather than guest memory. It is mounted under /run rather than
    // over /tmp, which must stay the host's: the checkout under test may live there.
    s.push_str(
        "mkdir -p /run/scratch && mount -t ext4 /dev/vda /run/scratch && chmod 1777 /run/scratch \
         && export TMPDIR=/run/scratch || echo '@@VMTEST scratch disk not mounted'\n",
    );
    // The init mounts a pure cgroup v2 hierarchy, where testkit throttles loop devices with
    // io.max; only a guest without it gets the cgroup v1 blkio controller testkit uses there.
    s.push_str(
        "[ \"$(stat -fc %T /sys/fs/cgroup)\" = cgroup2fs ] || { mount -t tmpfs cgroup /sys/fs/cgroup \
         && mkdir -p /sys/fs/cgroup/blkio && mount -t cgroup -o blkio blkio /sys/fs/cgroup/blkio \
         || echo '@@VMTEST no blkio cgroup'; }\n",
    );
    let _ = writeln!(s, "echo '@@VMTEST begin check'");
    let _ = writeln!(
        s,
        "timeout -k 10 {CHECK_TIMEOUT} {} check 2>&1",
        q(plan.wbscope)
    );
    let _ = writeln!(s, "echo \"@@VMTEST end check rc=$?\"");
    let _ = writeln!(s, "cd {} || exit 1", q(plan.crate_dir));
    let _ = writeln!(
        s,
        "export RUST_BACKTRACE=1 NO_COLOR=1 {ALLOW_SKIPPED}=1 {NFS_HELPERS_ENV}={} BIN={} LIMIT={}",
        q(plan.nfs_helpers),
        q(plan.kernel_tests),
        plan.test_timeout
    );
    s.push_str(RUN_TEST);
    s.push_str("SECONDS=0\n");
    for test in plan.tests {
        let _ = writeln!(s, "run_test '{}'", test.replace('\'', ""));
    }
    s.push_str("echo \"@@VMTEST tests finished in ${SECONDS}s\"\n");
    fs::write(path, s).with_context(|| format!("write {}", path.display()))?;
    Cmd::new("chmod").arg("755").arg(path).run()
}

/// A framed step's output and exit status (`None` when the end marker never came: the guest
/// crashed or timed out).
pub struct Section {
    pub text: String,
    pub rc: Option<i32>,
}

/// The `name` section of the console output, if it began.
pub fn section(console: &str, name: &str) -> Option<Section> {
    let begin = format!("@@VMTEST begin {name}");
    let end = format!("@@VMTEST end {name} rc=");
    let mut lines = console.lines().skip_while(|l| !l.ends_with(&begin));
    lines.next()?;
    let mut text = String::new();
    for line in lines {
        if let Some(pos) = line.find(&end) {
            let rc = line[pos + end.len()..].trim().parse().ok();
            text.push_str(&line[..pos]);
            return Some(Section { text, rc });
        }
        text.push_str(line);
        text.push('\n');
    }
    Some(Section { text, rc: None })
}

/// `N of M` from `wbscope check`'s closing line.
pub fn attached(check: &str) -> Option<(usize, usize)> {
    check.lines().find_map(|l| {
        let rest = l.trim().strip_suffix(" probes attach on this kernel")?;
        let (n, m) = rest.split_once(" of ")?;
        Some((n.parse().ok()?, m.parse().ok()?))
    })
}

/// The probe table's rows that did not attach: `(probe, status)`.
pub fn not_attached(check: &str) -> Vec<(String, String)> {
    check
        .lines()
        .filter_map(|l| {
            let pos = l.find("skipped: ").or_else(|| l.find("FAILED: "))?;
            let probe = l.split_whitespace().next()?.to_owned();
            Some((probe, l[pos..].trim().to_owned()))
        })
        .collect()
}

/// The lines above the probe table that say something is not available or is done another
/// way because the kernel lacks it (`not` or `no` in them): the caller keeps those the host does
/// not also print.
pub fn header_notes(check: &str) -> Vec<String> {
    check
        .lines()
        .take_while(|l| !l.starts_with("PROBE "))
        .filter(|l| l.contains(" not ") || l.contains(" no ") || l.contains("(no "))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONSOLE: &str = "[ 1.0] noise\n@@VMTEST begin check\nwbscope 0.1.0 on kernel 6.1\n\
        block: x (io_start_time_ns is not usable here)\n\
        sched_switch: from task_struct.state (no prev_state argument before 5.18)\n\
        PROBE  HOOK  STATUS\nwriteback_queue  tracepoint writeback/writeback_queue  attached\n\
        block_io_start  tp_btf block_io_start  skipped: no tracepoint block/block_io_start\n\
        \n35 of 36 probes attach on this kernel\n@@VMTEST end check rc=0\n\
        @@VMTEST begin test block::a\nrunning 1 test\nno newline@@VMTEST end test block::a rc=101\n";

    #[test]
    fn reads_framed_sections() {
        let check = section(CONSOLE, "check").unwrap();
        assert_eq!(check.rc, Some(0));
        assert_eq!(attached(&check.text), Some((35, 36)));
        assert_eq!(
            header_notes(&check.text),
            [
                "block: x (io_start_time_ns is not usable here)",
                "sched_switch: from task_struct.state (no prev_state argument before 5.18)"
            ]
        );
        assert_eq!(
            not_attached(&check.text),
            [(
                "block_io_start".to_owned(),
                "skipped: no tracepoint block/block_io_start".to_owned()
            )]
        );
        let test = section(CONSOLE, "test block::a").unwrap();
        assert_eq!(test.rc, Some(101));
        assert_eq!(test.text, "running 1 test\nno newline");
        assert!(section(CONSOLE, "absent").is_none());
        let cut = "@@VMTEST begin test x\nrunning\n";
        assert_eq!(section(cut, "test x").unwrap().rc, None);
    }
}
