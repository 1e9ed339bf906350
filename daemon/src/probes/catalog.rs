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

/// A program that does a probe's work on a kernel function's entry or exit (fentry/fexit)
/// instead of its tracepoint: preferred where the kernel accepts fentry, because a `syscalls:`
/// tracepoint taxes every system call of the host and an fentry program only its function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fentry {
    /// Program name in the eBPF object.
    pub program: &'static str,
    /// fexit (at the function's return) rather than fentry.
    pub exit: bool,
    /// The functions the program fits, in order of preference: the first one kernel BTF has
    /// is used.
    pub functions: &'static [&'static str],
    /// A second program of the same kind that the alternative needs too (on another function):
    /// the alternative is used only if both attach.
    pub companion: Option<FentryCompanion>,
}

/// The second program of a two-function fentry/fexit alternative (see [`Fentry::companion`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FentryCompanion {
    /// Program name in the eBPF object.
    pub program: &'static str,
    /// As [`Fentry::functions`].
    pub functions: &'static [&'static str],
}

impl Fentry {
    /// `fentry` or `fexit`.
    pub fn kind(&self) -> &'static str {
        if self.exit { "fexit" } else { "fentry" }
    }
}

/// Which hook the probes with an fentry alternative use (`[probes] sync_call_hook`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HookChoice {
    /// fentry/fexit where the kernel accepts them, the tracepoint otherwise (per probe).
    #[default]
    Auto,
    /// fentry/fexit only: a probe the kernel refuses them for is not attached at all.
    Fentry,
    /// The tracepoints only.
    Tracepoint,
}

impl HookChoice {
    /// The configuration values, in the order the documentation lists them.
    pub const VALUES: [&'static str; 3] = ["auto", "fentry", "tracepoint"];

    /// The choice a configuration value names.
    pub fn parse(value: &str) -> Option<HookChoice> {
        match value {
            "auto" => Some(HookChoice::Auto),
            "fentry" => Some(HookChoice::Fentry),
            "tracepoint" => Some(HookChoice::Tracepoint),
            _ => None,
        }
    }

    /// The configuration value naming this choice.
    pub fn as_str(self) -> &'static str {
        match self {
            HookChoice::Auto => "auto",
            HookChoice::Fentry => "fentry",
            HookChoice::Tracepoint => "tracepoint",
        }
    }
}

/// One eBPF program and its hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeSpec {
    /// Program (function) name in the eBPF object; also the `probe` label value, whichever of
    /// its hooks is used.
    pub program: &'static str,
    pub hook: Hook,
    /// The same probe on fentry/fexit, tried first where the configuration allows.
    pub fentry: Option<Fentry>,
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
            fentry: None,
        }
    }

    /// The same probe, done by `program` on fentry (`exit`: fexit) of the first of `functions`
    /// the kernel has, where the kernel accepts fentry.
    pub const fn with_fentry(
        self,
        program: &'static str,
        exit: bool,
        functions: &'static [&'static str],
    ) -> ProbeSpec {
        ProbeSpec {
            fentry: Some(Fentry {
                program,
                exit,
                functions,
                companion: None,
            }),
            ..self
        }
    }

    /// This probe's fentry alternative, if it has one, with `companion` added.
    const fn with_companion(self, companion: FentryCompanion) -> ProbeSpec {
        let fentry = match self.fentry {
            Some(f) => Some(Fentry {
                companion: Some(companion),
                ..f
            }),
            None => None,
        };
        ProbeSpec { fentry, ..self }
    }

    /// The same as [`ProbeSpec::with_fentry`] with a companion program of the same kind on the
    /// first of `companion_functions` the kernel has: the alternative needs both.
    pub const fn with_fentry_pair(
        self,
        program: &'static str,
        exit: bool,
        functions: &'static [&'static str],
        companion: FentryCompanion,
    ) -> ProbeSpec {
        self.with_fentry(program, exit, functions)
            .with_companion(companion)
    }

    /// A probe on a BTF-typed tracepoint.
    pub const fn btf_tracepoint(program: &'static str, event: &'static str) -> ProbeSpec {
        ProbeSpec {
            program,
            hook: Hook::BtfTracepoint { event, older: None },
            fentry: None,
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
            fentry: None,
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
