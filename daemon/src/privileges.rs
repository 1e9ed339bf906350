//! Checking, before touching the kernel, that the process may load and attach BPF programs, so the
//! operator gets "missing CAP_BPF" instead of an EPERM from deep inside the loader.

/// Capability bit numbers from include/uapi/linux/capability.h (UAPI, stable).
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// A privilege the process lacks.
#[derive(Debug, thiserror::Error)]
#[error(
    "insufficient privileges: missing {missing}. wbscope loads eBPF programs and attaches them to \
     tracepoints, which needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); run it as root or \
     grant those capabilities"
)]
pub struct PrivilegeError {
    pub missing: String,
}

/// The effective capability set of this process, from /proc/self/status.
fn effective_caps() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_cap_eff(&status)
}

fn parse_cap_eff(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}

/// Which of the needed capabilities `caps` lacks, as text; `None` if it has enough.
fn missing_in(caps: u64) -> Option<String> {
    let has = |bit: u32| caps & (1u64 << bit) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return None;
    }
    let mut missing = Vec::new();
    if !has(CAP_BPF) {
        missing.push("CAP_BPF");
    }
    if !has(CAP_PERFMON) {
        missing.push("CAP_PERFMON");
    }
    Some(format!("{} (or CAP_SYS_ADMIN)", missing.join(" and ")))
}

/// Fails with a message naming each missing capability.
pub fn require_bpf_privileges() -> Result<(), PrivilegeError> {
    match effective_caps() {
        Some(caps) => match missing_in(caps) {
            Some(missing) => Err(PrivilegeError { missing }),
            None => Ok(()),
        },
        // Without /proc we cannot tell; let the loader report what the kernel says.
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cap_eff() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert_eq!(parse_cap_eff(status), Some(0x1ff_ffff_ffff));
    }

    #[test]
    fn names_what_is_missing() {
        assert_eq!(
            missing_in(0).as_deref(),
            Some("CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)")
        );
        assert_eq!(missing_in(1 << CAP_SYS_ADMIN), None);
        assert_eq!(missing_in((1 << CAP_BPF) | (1 << CAP_PERFMON)), None);
        assert_eq!(
            missing_in(1 << CAP_BPF).as_deref(),
            Some("CAP_PERFMON (or CAP_SYS_ADMIN)")
        );
    }
}
