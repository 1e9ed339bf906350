//! `wbscope bench-floor`: an empty program on every hook the daemon would attach to, for the
//! benchmark.
//!
//! A BPF program's cost per event has a part no program can remove: the kernel's dispatch, the
//! run-time statistics the benchmark turns on, and, for classic tracepoints, the trace record the
//! kernel builds before the program runs. Attaching an empty program to the same hooks, in the
//! same run, measures that floor, so the benchmark can tell wbscope's own work from the host's
//! fixed cost per hook.

use aya::{Btf as AyaBtf, Ebpf};

use super::{
    catalog::Hook,
    loader::{AttachError, AyaBtfResult, attach_program, plan_one},
};
use crate::{error_chain::error_chain, families, kernel::KernelInfo};

/// The empty programs (`probe-ebpf/src/bin/floor.rs`), embedded like the probes.
static FLOOR_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/wbscope-floor"));

/// Why the floor could not be set up at all.
#[derive(Debug, thiserror::Error)]
pub enum FloorError {
    #[error(transparent)]
    Tracefs(#[from] crate::kernel::tracefs::TracefsError),
}

/// The attached floor programs (detached when dropped) and what happened per hook.
pub struct Floor {
    /// One object per hook: run-time statistics are per program, and a loaded program has one
    /// attach target.
    _objects: Vec<Ebpf>,
    /// The hook as `wbscope check` names it, and the id of its floor program or why none runs
    /// there.
    pub hooks: Vec<(String, Result<u32, AttachError>)>,
}

impl Floor {
    /// Number of hooks with a floor program attached.
    pub fn attached(&self) -> usize {
        self.hooks.iter().filter(|(_, r)| r.is_ok()).count()
    }
}

/// Attaches an empty program to the hook of every probe the daemon would attach on this kernel
/// (not disabled, hook and layout present), once per hook.
pub fn attach_floor(disabled: &[String]) -> Result<Floor, FloorError> {
    let kernel = KernelInfo::discover()?;
    let mut families = families::all();
    for family in &mut families {
        family.resolve(&kernel);
    }
    let aya_btf = AyaBtf::from_sys_fs().map_err(|e| AttachError::NoAyaBtf(error_chain(&e)));
    let mut seen = Vec::new();
    let mut floor = Floor {
        _objects: Vec::new(),
        hooks: Vec::new(),
    };
    for family in &families {
        for spec in family.probes() {
            // The loader's own rules: not disabled, neither the hook nor the layout missing.
            let Ok(btf_event) = plan_one(spec, family.as_ref(), &kernel, disabled) else {
                continue;
            };
            if seen.contains(&spec.hook) {
                continue;
            }
            seen.push(spec.hook);
            let name = spec.hook_name();
            match attach_one(spec.hook, btf_event, &aya_btf) {
                Ok((ebpf, id)) => {
                    floor._objects.push(ebpf);
                    floor.hooks.push((name, Ok(id)));
                }
                Err(why) => floor.hooks.push((name, Err(why))),
            }
        }
    }
    Ok(floor)
}

/// Loads a copy of the floor object and attaches its empty program for `hook` there; returns the
/// object (which keeps it attached) and the program's id.
fn attach_one(
    hook: Hook,
    btf_event: Option<&str>,
    aya_btf: &AyaBtfResult,
) -> Result<(Ebpf, u32), AttachError> {
    let mut ebpf = Ebpf::load(FLOOR_OBJECT).map_err(|e| AttachError::Refused(error_chain(&e)))?;
    let name = match hook {
        Hook::Tracepoint { .. } => "floor_tracepoint",
        Hook::BtfTracepoint { .. } => "floor_btf",
    };
    attach_program(&mut ebpf, name, hook, btf_event, aya_btf)?;
    let id = ebpf
        .program(name)
        .ok_or_else(|| AttachError::MissingProgram(name.to_owned()))?
        .info()
        .map_err(|e| AttachError::Refused(error_chain(&e)))?
        .id();
    Ok((ebpf, id))
}
