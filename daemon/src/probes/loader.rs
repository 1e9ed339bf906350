//! Loading the eBPF object with every family's load-time globals and attaching each probe.
//!
//! Each probe is attached on its own: one that cannot work on this kernel is skipped (missing
//! hook or layout) or reported as failed (verifier or attach error), never fatal for the others.

use aya::{
    Btf as AyaBtf, Ebpf, EbpfLoader,
    programs::{BtfTracePoint, FEntry, FExit, TracePoint},
};
use probe_common::kernel::{CurrentTask, FdDevLayout, globals};

use super::catalog::{Fentry, Hook, HookChoice, ProbeSpec};
pub use crate::error_chain::error_chain;
use crate::kernel::LayoutError;
use crate::{
    families::Family,
    kernel::{KernelInfo, layout::fd_dev_layout, task_access},
};

/// Why the kernel (or aya) did not take one program; the message is what `check` prints.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("program {0} is missing from the eBPF object")]
    MissingProgram(String),
    /// aya's own parse of kernel BTF, which tp_btf programs attach through, failed.
    #[error("kernel BTF for aya: {0}")]
    NoAyaBtf(String),
    /// The verifier's or the attach call's answer, with its sources on one line.
    #[error("{0}")]
    Refused(String),
}

impl AttachError {
    fn refused(e: &dyn std::error::Error) -> AttachError {
        AttachError::Refused(error_chain(e))
    }
}

/// aya's parse of kernel BTF, or why there is none.
pub type AyaBtfResult = Result<AyaBtf, AttachError>;

/// Why the eBPF object as a whole could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("loading the eBPF object (maps and globals) failed")]
    Object(#[from] aya::EbpfError),
    #[error(transparent)]
    TaskStorage(#[from] super::task_storage::RewriteError),
}

/// What happened to one probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttachStatus {
    Attached,
    /// Turned off by the `probes.disable` configuration key.
    Disabled,
    /// Cannot work on this kernel (missing hook or layout); the text says why.
    Skipped(String),
    /// Not needed on this kernel: another probe of its family does its work here (the text
    /// names it and says why), e.g. the writeback waits' two ends, one per kind of kernel.
    Replaced(String),
    /// The kernel refused it (verifier, attach); the text is the kernel's answer.
    Failed(String),
}

impl AttachStatus {
    pub fn is_attached(&self) -> bool {
        matches!(self, AttachStatus::Attached)
    }
}

/// A probe, the family it belongs to, and its status.
#[derive(Clone, Debug)]
pub struct ProbeReport {
    pub family: &'static str,
    pub spec: ProbeSpec,
    /// The hook as this kernel names it (`wbscope check` prints it): for a tp_btf known by an
    /// older name too, the one this kernel's BTF has; for a probe with an fentry alternative,
    /// the hook it got (`fentry __x64_sys_fsync` or its tracepoint).
    pub hook: String,
    pub status: AttachStatus,
    /// For a probe with an fentry alternative that is on its tracepoint: why its fentry or fexit
    /// program is not used (the kernel's answer, a missing function, or the configuration).
    pub fentry_not_used: Option<String>,
}

impl ProbeReport {
    /// Whether the probe runs on fentry/fexit.
    pub fn on_fentry(&self) -> bool {
        self.status.is_attached() && self.spec.fentry.is_some() && self.fentry_not_used.is_none()
    }

    /// Whether the probe is an attached `syscalls:` tracepoint, whose cost falls on every
    /// system call of the host.
    pub fn taxes_syscalls(&self) -> bool {
        self.status.is_attached()
            && !self.on_fentry()
            && matches!(
                self.spec.hook,
                Hook::Tracepoint {
                    category: "syscalls",
                    ..
                }
            )
    }
}

/// Which probes to attach and how (`[probes]` configuration).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// `probes.disable`: probe or family names not to attach.
    pub disabled: Vec<String>,
    /// `probes.sync_call_hook`: fentry/fexit or tracepoints for the probes that have both.
    pub sync_call_hook: HookChoice,
}

/// The loaded object (its links stay attached while it lives) and the per-probe reports.
pub struct LoadedProbes {
    pub ebpf: Ebpf,
    pub reports: Vec<ProbeReport>,
    /// The fd → device layout shared by the sync-call probes, or why it is unavailable; its
    /// inode part is `KernelInfo::inode_dev`.
    pub fd_dev: Result<FdDevLayout, LayoutError>,
    /// How the probes reach the current task on this kernel.
    pub current_task: CurrentTask,
    /// Maps sized from the host at load: (name, max entries).
    pub map_sizes: Vec<(&'static str, u32)>,
}

impl LoadedProbes {
    /// Number of attached probes.
    pub fn attached(&self) -> usize {
        self.reports
            .iter()
            .filter(|r| r.status.is_attached())
            .count()
    }

    /// Number of probes that apply on this kernel: all but those another probe stands in for
    /// (`Replaced`), which are no probe this kernel lacks.
    pub fn applicable(&self) -> usize {
        self.reports
            .iter()
            .filter(|r| !matches!(r.status, AttachStatus::Replaced(_)))
            .count()
    }
}

/// What to try for one probe, decided while our BTF parse is still there.
struct Plan<'a> {
    family: &'a dyn Family,
    spec: &'a ProbeSpec,
    /// Its primary hook as this kernel names it.
    hook: String,
    /// [`plan_one`]'s verdict on the primary hook.
    primary: Result<Option<&'static str>, AttachStatus>,
    /// Its fentry program and the function(s) to attach it to, or why not (`None`: no fentry
    /// alternative, or the configuration wants tracepoints).
    fentry: Option<Result<PlannedFentry, FentryUnavailable>>,
}

/// An fentry alternative and the functions this kernel has for it.
#[derive(Clone, Copy, Debug)]
struct PlannedFentry {
    fentry: Fentry,
    function: &'static str,
    /// The companion program and its function, where the alternative has a companion.
    companion: Option<(&'static str, &'static str)>,
}

impl PlannedFentry {
    /// The hook as `check` prints it: `fexit folio_wait_bit`, or with a companion `fexit
    /// folio_wait_bit and folio_wait_bit_killable`.
    fn hook(&self) -> String {
        match self.companion {
            None => format!("{} {}", self.fentry.kind(), self.function),
            Some((_, other)) => format!("{} {} and {other}", self.fentry.kind(), self.function),
        }
    }
}

/// Loads the object with every family's globals and attaches every enabled probe.
///
/// Our BTF parse is released (`kernel.btf` becomes `Err(LayoutError::BtfReleased)`) once every probe's
/// hook is resolved and before aya parses kernel BTF for itself: each parse of vmlinux BTF
/// takes 10-20 MB at its peak, and holding both at once set the daemon's start-up peak RSS.
pub fn load_and_attach(
    object: &[u8],
    families: &[Box<dyn Family>],
    kernel: &mut KernelInfo,
    ignore_tgid: u32,
    selection: &Selection,
) -> Result<LoadedProbes, LoadError> {
    let disabled = selection.disabled.as_slice();
    let fd_dev = kernel
        .inode_dev()
        .and_then(|inode| fd_dev_layout(kernel.btf()?, inode));
    let current_task = kernel
        .btf
        .as_ref()
        .map(task_access::current_task)
        .unwrap_or_default();
    // Every decision that needs our BTF or tracefs, before the BTF goes.
    let plans: Vec<Plan<'_>> = families
        .iter()
        .flat_map(|f| f.probes().iter().map(move |spec| (f.as_ref(), spec)))
        .map(|(family, spec)| {
            let primary = plan_one(spec, family, kernel, disabled);
            let fentry = match (&primary, spec.fentry, selection.sync_call_hook) {
                (Err(AttachStatus::Disabled), _, _) | (_, None, _) => None,
                (_, Some(_), HookChoice::Tracepoint) => None,
                (_, Some(fentry), _) => Some(plan_fentry(spec, fentry, family, kernel)),
            };
            Plan {
                family,
                spec,
                hook: resolved_hook(spec, kernel),
                primary,
                fentry,
            }
        })
        .collect();
    kernel.btf = Err(LayoutError::BtfReleased);

    // aya needs its own parse of kernel BTF to resolve tp_btf attach targets. Parsed once and
    // lent to the loader too, which would otherwise parse it again for any CO-RE relocation.
    let needs_btf = plans.iter().any(|plan| {
        matches!(plan.fentry, Some(Ok(_)))
            || (plan.primary.is_ok() && matches!(plan.spec.hook, Hook::BtfTracepoint { .. }))
    });
    let aya_btf = if needs_btf {
        AyaBtf::from_sys_fs().map_err(|e| AttachError::NoAyaBtf(error_chain(&e)))
    } else {
        Err(AttachError::NoAyaBtf(
            "not parsed: no tp_btf probe to attach".to_owned(),
        ))
    };
    let mut loader = EbpfLoader::new();
    // aya has no user-space type for task storage maps; only the programs use them.
    loader.allow_unsupported_maps();
    if let Ok(btf) = &aya_btf {
        loader.btf(btf);
    }
    // The inode part serves the families that start from an inode (writeback waits and
    // submissions) even where the fd table part does not resolve.
    let fd_dev_global = match (&fd_dev, &kernel.inode_dev) {
        (Ok(layout), _) => Some(*layout),
        (Err(_), Ok(inode)) => Some(FdDevLayout {
            inode: *inode,
            ..FdDevLayout::default()
        }),
        (Err(_), Err(_)) => None,
    };
    if let Some(layout) = &fd_dev_global {
        loader.override_global(globals::FD_DEV_LAYOUT, layout, true);
    }
    loader.override_global(globals::IGNORE_TGID, &ignore_tgid, true);
    loader.override_global(globals::CURRENT_TASK, &current_task, true);
    for family in families {
        family.set_globals(&mut loader);
    }
    let map_sizes = super::map_sizes::apply(&mut loader);
    // Per-thread state: task storage, or thread-id hashes where tracing programs lack it. Each
    // side's unused maps get one entry.
    let object = if current_task.task_storage != 0 {
        for map in FALLBACK_HASHES {
            loader.map_max_entries(map, 1);
        }
        std::borrow::Cow::Borrowed(object)
    } else {
        for map in super::task_storage::MAPS {
            loader.map_max_entries(map, 1);
        }
        super::task_storage::as_hashes(object)?
    };
    let mut ebpf = loader.load(&object)?;
    for family in families {
        for problem in family.prepare_maps(&mut ebpf) {
            tracing::warn!("{}: {problem}", family.name());
        }
    }

    let reports = plans
        .into_iter()
        .map(|plan| attach_planned(&mut ebpf, plan, selection.sync_call_hook, &aya_btf))
        .collect();
    Ok(LoadedProbes {
        ebpf,
        reports,
        fd_dev,
        current_task,
        map_sizes,
    })
}

/// The thread-id-keyed hashes that hold per-thread state where task storage is unavailable.
const FALLBACK_HASHES: [&str; 5] = [
    probe_common::kernel::maps::SYNC_INFLIGHT,
    probe_common::writeback_wait::maps::FOLIO_WAITS,
    probe_common::submissions::maps::FLUSHER_INODE,
    probe_common::submissions::maps::PASSES,
    probe_common::writeback::maps::FLUSHER_ITEMS,
];

/// Why the hook itself is missing on this kernel, if it is.
fn hook_gap(spec: &ProbeSpec, kernel: &KernelInfo) -> Option<String> {
    match spec.hook {
        Hook::Tracepoint { category, event } => match kernel.tracefs.unavailable() {
            Some(_) => Some(format!(
                "tracepoint {category}/{event} needs tracefs, which is not available"
            )),
            None => (!kernel.tracefs.event_exists(category, event))
                .then(|| format!("tracepoint {category}/{event} does not exist on this kernel")),
        },
        Hook::BtfTracepoint { event, older } => match &kernel.btf {
            Err(why) => Some(format!("tp_btf: {why}")),
            Ok(btf) => btf_event(btf, event, older).is_none().then(|| match older {
                Some(older) => {
                    format!("neither tp_btf {event} nor {older} exists on this kernel")
                }
                None => format!("tp_btf {event} does not exist on this kernel"),
            }),
        },
    }
}

/// The hook's name on this kernel; both names of a tp_btf when BTF has neither.
fn resolved_hook(spec: &ProbeSpec, kernel: &KernelInfo) -> String {
    let found = match (spec.hook, &kernel.btf) {
        (Hook::BtfTracepoint { event, older }, Ok(btf)) => btf_event(btf, event, older),
        _ => None,
    };
    match found {
        Some(event) => format!("tp_btf {event}"),
        None => spec.hook_name(),
    }
}

/// The name under which this kernel's BTF has the event (`btf_trace_<name>`): `event`, else
/// `older`.
fn btf_event(
    btf: &crate::kernel::btf::Btf,
    event: &'static str,
    older: Option<&'static str>,
) -> Option<&'static str> {
    std::iter::once(event)
        .chain(older)
        .find(|name| btf.has_type(&format!("btf_trace_{name}")))
}

/// Whether `spec` is to be attached: `Ok` with the tp_btf event name this kernel has (`None`
/// for classic tracepoints), or the final status (disabled, skipped).
pub(super) fn plan_one(
    spec: &ProbeSpec,
    family: &dyn Family,
    kernel: &KernelInfo,
    disabled: &[String],
) -> Result<Option<&'static str>, AttachStatus> {
    if disabled
        .iter()
        .any(|d| d == spec.program || d == family.name())
    {
        return Err(AttachStatus::Disabled);
    }
    if let Some(why) = family.replaced(spec) {
        return Err(AttachStatus::Replaced(why));
    }
    if let Some(why) = hook_gap(spec, kernel).or_else(|| family.gap(spec)) {
        return Err(AttachStatus::Skipped(why));
    }
    // hook_gap found it, so the kernel has BTF and one of the names.
    Ok(match (spec.hook, &kernel.btf) {
        (Hook::BtfTracepoint { event, older }, Ok(btf)) => btf_event(btf, event, older),
        _ => None,
    })
}

/// Attaches one planned probe: on fentry first where it has that plan, on its primary hook
/// otherwise or (unless the configuration insists on fentry) when the kernel refuses fentry.
fn attach_planned(
    ebpf: &mut Ebpf,
    plan: Plan<'_>,
    choice: HookChoice,
    aya_btf: &AyaBtfResult,
) -> ProbeReport {
    let mut report = ProbeReport {
        family: plan.family.name(),
        spec: *plan.spec,
        hook: plan.hook,
        status: AttachStatus::Disabled,
        fentry_not_used: None,
    };
    let not_used = match plan.fentry {
        None => (plan.spec.fentry.is_some() && choice == HookChoice::Tracepoint)
            .then(|| "probes.sync_call_hook = \"tracepoint\"".to_owned()),
        Some(Ok(planned)) => {
            let hook = planned.hook();
            match attach_fentry_planned(ebpf, &planned, aya_btf) {
                Ok(()) => {
                    report.hook = hook;
                    report.status = AttachStatus::Attached;
                    return report;
                }
                Err(why) if choice == HookChoice::Fentry => {
                    report.hook = hook;
                    report.status = AttachStatus::Failed(why.to_string());
                    return report;
                }
                Err(why) => Some(why.to_string()),
            }
        }
        Some(Err(why)) if choice == HookChoice::Fentry => {
            report.status = AttachStatus::Skipped(why.to_string());
            return report;
        }
        Some(Err(why)) => Some(why.to_string()),
    };
    report.fentry_not_used = not_used;
    report.status = match plan.primary {
        Err(status) => status,
        Ok(event) => match try_attach(ebpf, plan.spec, event, aya_btf) {
            Ok(()) => AttachStatus::Attached,
            Err(why) => AttachStatus::Failed(why.to_string()),
        },
    };
    report
}

/// Why a probe's fentry/fexit alternative is not even tried on this kernel.
#[derive(Debug, thiserror::Error)]
pub enum FentryUnavailable {
    /// No kernel BTF to find the function in.
    #[error("{0}")]
    NoBtf(String),
    #[error("no {0} in kernel BTF")]
    NoFunction(String),
    /// The family cannot resolve what the program reads (e.g. a register offset).
    #[error("{0}")]
    FamilyGap(String),
}

/// The function `fentry` attaches to on this kernel (the first of its functions BTF has), and
/// its companion's, or why it cannot.
fn plan_fentry(
    spec: &ProbeSpec,
    fentry: Fentry,
    family: &dyn Family,
    kernel: &KernelInfo,
) -> Result<PlannedFentry, FentryUnavailable> {
    let btf = kernel
        .btf
        .as_ref()
        .map_err(|e| FentryUnavailable::NoBtf(e.to_string()))?;
    let first_present = |functions: &'static [&'static str]| {
        functions
            .iter()
            .copied()
            .find(|f| btf.has_type(f))
            .ok_or_else(|| FentryUnavailable::NoFunction(functions.join(" or ")))
    };
    let function = first_present(fentry.functions)?;
    let companion = match fentry.companion {
        Some(c) => Some((c.program, first_present(c.functions)?)),
        None => None,
    };
    if let Some(why) = family.fentry_gap(spec) {
        return Err(FentryUnavailable::FamilyGap(why));
    }
    Ok(PlannedFentry {
        fentry,
        function,
        companion,
    })
}

/// Attaches a planned alternative: its companion first, then its program; if the program is
/// refused, the companion is detached again, so the alternative is all or nothing.
fn attach_fentry_planned(
    ebpf: &mut Ebpf,
    planned: &PlannedFentry,
    aya_btf: &AyaBtfResult,
) -> Result<(), AttachError> {
    let exit = planned.fentry.exit;
    if let Some((program, function)) = planned.companion {
        attach_fentry(ebpf, program, exit, function, aya_btf)?;
    }
    let result = attach_fentry(
        ebpf,
        planned.fentry.program,
        exit,
        planned.function,
        aya_btf,
    );
    if result.is_err()
        && let Some((program, _)) = planned.companion
    {
        unload_program(ebpf, program, exit);
    }
    result
}

/// Unloads program `name` again (its links go with it); a failure leaves it attached, which is
/// logged, since the caller falls back to another hook regardless.
fn unload_program(ebpf: &mut Ebpf, name: &str, exit: bool) {
    let Some(program) = ebpf.program_mut(name) else {
        return;
    };
    let unloaded = if exit {
        <&mut FExit>::try_from(program).and_then(|p| p.unload())
    } else {
        <&mut FEntry>::try_from(program).and_then(|p| p.unload())
    };
    if let Err(e) = unloaded {
        tracing::warn!(
            "unloading {name} after its partner was refused: {}",
            error_chain(&e)
        );
    }
}

/// Loads program `name` (fexit if `exit`, else fentry) and attaches it to kernel function
/// `function`.
fn attach_fentry(
    ebpf: &mut Ebpf,
    name: &str,
    exit: bool,
    function: &str,
    aya_btf: &AyaBtfResult,
) -> Result<(), AttachError> {
    let refused = |e: &dyn std::error::Error| AttachError::refused(e);
    let btf = match aya_btf {
        Ok(btf) => btf,
        Err(why) => return Err(AttachError::NoAyaBtf(why.to_string())),
    };
    let program = ebpf
        .program_mut(name)
        .ok_or_else(|| AttachError::MissingProgram(name.to_owned()))?;
    if exit {
        let p: &mut FExit = program.try_into().map_err(|e| refused(&e))?;
        p.load(function, btf).map_err(|e| refused(&e))?;
        p.attach().map_err(|e| refused(&e))?;
    } else {
        let p: &mut FEntry = program.try_into().map_err(|e| refused(&e))?;
        p.load(function, btf).map_err(|e| refused(&e))?;
        p.attach().map_err(|e| refused(&e))?;
    }
    Ok(())
}

/// Loads and attaches `spec`; `btf_event` is the tp_btf event name this kernel has.
fn try_attach(
    ebpf: &mut Ebpf,
    spec: &ProbeSpec,
    btf_event: Option<&str>,
    aya_btf: &AyaBtfResult,
) -> Result<(), AttachError> {
    attach_program(ebpf, spec.program, spec.hook, btf_event, aya_btf)
}

/// Loads program `name` of `ebpf` and attaches it to `hook`; `btf_event` is the tp_btf event
/// name this kernel has (from [`plan_one`]).
pub(super) fn attach_program(
    ebpf: &mut Ebpf,
    name: &str,
    hook: Hook,
    btf_event: Option<&str>,
    aya_btf: &AyaBtfResult,
) -> Result<(), AttachError> {
    let refused = |e: &dyn std::error::Error| AttachError::refused(e);
    let program = ebpf
        .program_mut(name)
        .ok_or_else(|| AttachError::MissingProgram(name.to_owned()))?;
    match hook {
        Hook::Tracepoint { category, event } => {
            let tp: &mut TracePoint = program.try_into().map_err(|e| refused(&e))?;
            tp.load().map_err(|e| refused(&e))?;
            tp.attach(category, event).map_err(|e| refused(&e))?;
        }
        Hook::BtfTracepoint { event, .. } => {
            let event = btf_event.unwrap_or(event);
            let btf = match aya_btf {
                Ok(btf) => btf,
                Err(why) => return Err(AttachError::NoAyaBtf(why.to_string())),
            };
            let tp: &mut BtfTracePoint = program.try_into().map_err(|e| refused(&e))?;
            tp.load(event, btf).map_err(|e| refused(&e))?;
            tp.attach().map_err(|e| refused(&e))?;
        }
    }
    Ok(())
}
