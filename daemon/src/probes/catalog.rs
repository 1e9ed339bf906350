//! What a probe is: an eBPF program in the object and the hook it attaches to. Each family
//! (`crate::families`) lists its own probes.

/// The kernel hook a program attaches to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    /// A classic tracepoint (`/sys/kernel/tracing/events/<category>/<event>`); record fields are
    /// read at offsets from the event's format file.
    Tracepoint {
        category: &'static str,
        event: &'static str,
    },
    /// A BTF-typed tracepoint (`tp_btf/<event>`): typed arguments, no record copy; needs kernel
    /// BTF and the `btf_trace_<event>` typedef. `older` names the same event on kernels that
    /// called it something else (same first argument); the loader uses whichever the kernel's BTF
    /// has.
    BtfTracepoint {
        event: &'static str,
        older: Option<&'static str>,
    },
}

/// One eBPF program and its hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeSpec {
    /// Program (function) name in the eBPF object; also the `probe` label value.
    pub program: &'static str,
    pub hook: Hook,
}

impl ProbeSpec {
    /// A probe on a classic tracepoint.
    pub const fn tracepoint(
        program: &'static str,
        category: &'static str,
        event: &'static str,
    ) -> ProbeSpec {
        ProbeSpec {
            program,
            hook: Hook::Tracepoint { category, event },
        }
    }

    /// A probe on a BTF-typed tracepoint.
    pub const fn btf_tracepoint(program: &'static str, event: &'static str) -> ProbeSpec {
        ProbeSpec {
            program,
            hook: Hook::BtfTracepoint { event, older: None },
        }
    }

    /// A probe on a BTF-typed tracepoint that older kernels name `older`.
    pub const fn btf_tracepoint_or(
        program: &'static str,
        event: &'static str,
        older: &'static str,
    ) -> ProbeSpec {
        ProbeSpec {
            program,
            hook: Hook::BtfTracepoint {
                event,
                older: Some(older),
            },
        }
    }

    /// The hook with every name it may have (the loader reports the one the kernel has).
    pub fn hook_name(&self) -> String {
        match self.hook {
            Hook::Tracepoint { category, event } => format!("tracepoint {category}/{event}"),
            Hook::BtfTracepoint { event, older: None } => format!("tp_btf {event}"),
            Hook::BtfTracepoint {
                event,
                older: Some(older),
            } => format!("tp_btf {event} (or {older})"),
        }
    }
}
