//! Loading the eBPF object with the resolved layout globals and attaching each probe.
//!
//! Each probe is attached on its own: one that cannot work on this kernel is skipped (missing
//! event or layout) or reported as failed (verifier or attach error), never fatal for the others.

use aya::{Ebpf, EbpfLoader, programs::TracePoint};
use probe_common::layout::globals;

use super::catalog::{CATALOG, Family, ProbeSpec};
use crate::kernel::{layout::KernelLayout, tracefs::Tracefs};

/// Why the eBPF object as a whole could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("loading the eBPF object (maps and globals) failed")]
    Object(#[from] aya::EbpfError),
}

/// What happened to one probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttachStatus {
    Attached,
    /// Turned off by the `disabled_probes` configuration key.
    Disabled,
    /// Cannot work on this kernel (missing tracepoint or layout); the text says why.
    Skipped(String),
    /// The kernel refused it (verifier, attach); the text is the kernel's answer.
    Failed(String),
}

impl AttachStatus {
    pub fn is_attached(&self) -> bool {
        matches!(self, AttachStatus::Attached)
    }
}

/// A probe and its status.
#[derive(Clone, Debug)]
pub struct ProbeReport {
    pub spec: ProbeSpec,
    pub status: AttachStatus,
}

/// The loaded object (its links stay attached while it lives) and the per-probe reports.
pub struct LoadedProbes {
    pub ebpf: Ebpf,
    pub reports: Vec<ProbeReport>,
}

impl LoadedProbes {
    /// Number of attached probes.
    pub fn attached(&self) -> usize {
        self.reports
            .iter()
            .filter(|r| r.status.is_attached())
            .count()
    }
}

/// Loads the object with `layout` as globals and attaches every enabled probe.
pub fn load_and_attach(
    object: &[u8],
    layout: &KernelLayout,
    tracefs: &Tracefs,
    ignore_tgid: u32,
    disabled: &[String],
) -> Result<LoadedProbes, LoadError> {
    let mut loader = EbpfLoader::new();
    if let Ok(f) = &layout.wb_work {
        loader.override_global(globals::WB_WORK_FMT, f, true);
    }
    if let Ok(f) = &layout.fsync_enter {
        loader.override_global(globals::FSYNC_ENTER_FMT, f, true);
    }
    if let Ok(f) = &layout.fdatasync_enter {
        loader.override_global(globals::FDATASYNC_ENTER_FMT, f, true);
    }
    if let Ok(l) = &layout.fd_dev {
        loader.override_global(globals::FD_DEV_LAYOUT, l, true);
    }
    loader.override_global(globals::IGNORE_TGID, &ignore_tgid, true);
    let mut ebpf = loader.load(object)?;

    let reports = CATALOG
        .iter()
        .map(|spec| ProbeReport {
            spec: *spec,
            status: attach_one(&mut ebpf, spec, layout, tracefs, disabled),
        })
        .collect();
    Ok(LoadedProbes { ebpf, reports })
}

/// Why `spec` cannot work with this layout, if it cannot.
fn layout_gap(spec: &ProbeSpec, layout: &KernelLayout) -> Option<String> {
    let gap = match spec.family {
        Family::WritebackWork => layout.wb_work.as_ref().err(),
        Family::FsyncEnter => layout.fsync_enter.as_ref().err(),
        Family::FdatasyncEnter => layout.fdatasync_enter.as_ref().err(),
        Family::WritebackPassEnd | Family::SyscallExit => None,
    };
    gap.cloned()
}

fn attach_one(
    ebpf: &mut Ebpf,
    spec: &ProbeSpec,
    layout: &KernelLayout,
    tracefs: &Tracefs,
    disabled: &[String],
) -> AttachStatus {
    if disabled.iter().any(|d| d == spec.program) {
        return AttachStatus::Disabled;
    }
    if !tracefs.event_exists(spec.category, spec.event) {
        return AttachStatus::Skipped(format!(
            "tracepoint {}/{} does not exist on this kernel",
            spec.category, spec.event
        ));
    }
    if let Some(why) = layout_gap(spec, layout) {
        return AttachStatus::Skipped(why);
    }
    match try_attach(ebpf, spec) {
        Ok(()) => AttachStatus::Attached,
        Err(why) => AttachStatus::Failed(why),
    }
}

fn try_attach(ebpf: &mut Ebpf, spec: &ProbeSpec) -> Result<(), String> {
    let program = ebpf
        .program_mut(spec.program)
        .ok_or_else(|| format!("program {} is missing from the eBPF object", spec.program))?;
    let tracepoint: &mut TracePoint = program.try_into().map_err(|e| error_chain(&e))?;
    tracepoint.load().map_err(|e| error_chain(&e))?;
    tracepoint
        .attach(spec.category, spec.event)
        .map_err(|e| error_chain(&e))?;
    Ok(())
}

/// An error and its sources on one line, as operators read it in `check` output and logs.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
