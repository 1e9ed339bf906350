//! Locating tracefs and parsing tracepoint `format` files.
//!
//! Tracepoint record layouts change between kernels (fields added, widened, reordered), so the
//! daemon reads offsets and sizes from `events/<system>/<event>/format` at startup instead of
//! hard-coding them.

use std::path::{Path, PathBuf};

/// Where tracefs normally lives; also where it is mounted when nothing is found.
const DEFAULT_ROOT: &str = "/sys/kernel/tracing";
/// Legacy location, auto-mounted by the kernel when debugfs is mounted.
const DEBUGFS_ROOT: &str = "/sys/kernel/debug/tracing";
const MOUNTINFO: &str = "/proc/self/mountinfo";

/// Errors produced while locating tracefs or reading event formats.
#[derive(Debug, thiserror::Error)]
pub enum TracefsError {
    /// No tracefs was mounted and mounting one failed.
    #[error(
        "no tracefs found at {DEFAULT_ROOT}, {DEBUGFS_ROOT} or in {MOUNTINFO}, and mounting tracefs \
         at {path} failed: {cause} (mounting requires root or CAP_SYS_ADMIN; alternatively run \
         `mount -t tracefs nodev {path}` beforehand)"
    )]
    Mount {
        /// Mount point that was tried.
        path: PathBuf,
        /// Error from mount(2) or from checking the mounted filesystem.
        cause: std::io::Error,
    },
    /// A tracefs file could not be read.
    #[error("cannot read {path}: {cause} (tracefs files usually require root)")]
    Io {
        /// File that failed to read.
        path: PathBuf,
        /// Underlying I/O error.
        cause: std::io::Error,
    },
    /// There is no tracefs (see [`Tracefs::locate_or_degrade`]).
    #[error("{path}: tracefs is not available")]
    Unavailable {
        /// The format file that was wanted.
        path: PathBuf,
    },
    /// A system or event name that would escape the events directory.
    #[error("invalid tracepoint name `{system}/{event}`")]
    InvalidName {
        /// Requested subsystem.
        system: String,
        /// Requested event.
        event: String,
    },
    /// Format text given to [`EventFormat::parse`] is malformed.
    #[error("malformed event format (line {line}): {reason}")]
    Parse {
        /// 1-based line number (0 when the problem is a missing line).
        line: usize,
        /// What was wrong.
        reason: String,
    },
    /// A format file read from tracefs is malformed.
    #[error("malformed event format {path} (line {line}): {reason}")]
    InvalidFormat {
        /// Format file.
        path: PathBuf,
        /// 1-based line number (0 when the problem is a missing line).
        line: usize,
        /// What was wrong.
        reason: String,
    },
    /// The event has no field with this name (kernel too old or too new for a probe).
    #[error("tracepoint `{event}` has no field `{field}`")]
    MissingField {
        /// Event name.
        event: String,
        /// Requested field.
        field: String,
    },
}

/// A tracefs mount point, or why there is none (then classic tracepoints are skipped, each
/// with that reason, and BTF tracepoints still attach: they need no tracefs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracefs {
    root: PathBuf,
    unavailable: Option<String>,
}

impl Tracefs {
    /// Finds a mounted tracefs (/sys/kernel/tracing, or /sys/kernel/debug/tracing, or any tracefs mount listed in /proc/self/mountinfo); if none, mounts tracefs at /sys/kernel/tracing with mount(2) (needs CAP_SYS_ADMIN) and returns it. Error says what failed and what privilege is needed.
    pub fn locate_or_mount() -> Result<Tracefs, TracefsError> {
        // An unreadable mountinfo only loses the fallback candidates; mounting is still worth trying.
        let mounts = std::fs::read_to_string(MOUNTINFO)
            .map(|t| tracefs_mounts(&t))
            .unwrap_or_default();
        let candidates = [PathBuf::from(DEFAULT_ROOT), PathBuf::from(DEBUGFS_ROOT)];
        if let Some(root) = candidates.into_iter().chain(mounts).find(|p| is_tracefs(p)) {
            return Ok(Tracefs::at(root));
        }
        let root = PathBuf::from(DEFAULT_ROOT);
        mount_tracefs(&root).map_err(|cause| TracefsError::Mount {
            path: root.clone(),
            cause,
        })?;
        Ok(Tracefs::at(root))
    }

    /// [`Tracefs::locate_or_mount`], or a tracefs that is unavailable for the reason it failed.
    pub fn locate_or_degrade() -> Tracefs {
        Tracefs::locate_or_mount().unwrap_or_else(|err| Tracefs {
            root: PathBuf::from(DEFAULT_ROOT),
            unavailable: Some(err.to_string()),
        })
    }

    /// Uses an explicit root (tests, or a custom location).
    pub fn at(root: impl Into<PathBuf>) -> Tracefs {
        Tracefs {
            root: root.into(),
            unavailable: None,
        }
    }

    /// Why there is no tracefs, if there is none.
    pub fn unavailable(&self) -> Option<&str> {
        self.unavailable.as_deref()
    }

    /// The tracefs root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True if events/<system>/<event>/format exists.
    pub fn event_exists(&self, system: &str, event: &str) -> bool {
        self.unavailable.is_none() && self.format_path(system, event).is_ok_and(|p| p.is_file())
    }

    /// Reads and parses events/<system>/<event>/format.
    pub fn event_format(&self, system: &str, event: &str) -> Result<EventFormat, TracefsError> {
        let path = self.format_path(system, event)?;
        if self.unavailable.is_some() {
            // The reason was logged once at start; repeating it per probe says nothing new.
            return Err(TracefsError::Unavailable { path });
        }
        let text = std::fs::read_to_string(&path).map_err(|cause| TracefsError::Io {
            path: path.clone(),
            cause,
        })?;
        parse_format(&text).map_err(|(line, reason)| TracefsError::InvalidFormat {
            path,
            line,
            reason,
        })
    }

    fn format_path(&self, system: &str, event: &str) -> Result<PathBuf, TracefsError> {
        // Names come from probe definitions, but reject anything that could leave events/.
        let valid = |s: &str| !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\0']);
        if !valid(system) || !valid(event) {
            return Err(TracefsError::InvalidName {
                system: system.to_owned(),
                event: event.to_owned(),
            });
        }
        Ok(self
            .root
            .join("events")
            .join(system)
            .join(event)
            .join("format"))
    }
}

/// A mounted tracefs always has an `events` directory; an unmounted mount point is empty.
fn is_tracefs(root: &Path) -> bool {
    root.join("events").is_dir()
}

fn mount_tracefs(root: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let target = std::ffi::CString::new(root.as_os_str().as_bytes())?;
    // SAFETY: all pointers are valid NUL-terminated strings that outlive the call; tracefs
    // takes no mount data, so passing NULL for it is allowed.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if !is_tracefs(root) {
        return Err(std::io::Error::other(
            "mounted tracefs has no events directory",
        ));
    }
    Ok(())
}

/// Mount points of all tracefs entries in /proc/self/mountinfo text.
fn tracefs_mounts(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| {
            // "<id> <parent> <dev> <root> <mount point> <opts> [optional...] - <fstype> ..."
            let (left, right) = line.split_once(" - ")?;
            let fstype = right.split_whitespace().next()?;
            let mount_point = left.split_whitespace().nth(4)?;
            (fstype == "tracefs").then(|| PathBuf::from(unescape_octal(mount_point)))
        })
        .collect()
}

/// Undoes mountinfo's `\ooo` escaping of spaces, tabs, newlines and backslashes.
fn unescape_octal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some((head, tail)) = rest.split_once('\\') {
        out.push_str(head);
        let code = tail.get(..3).and_then(|d| u8::from_str_radix(d, 8).ok());
        match code {
            Some(byte) => {
                out.push(char::from(byte));
                rest = tail.get(3..).unwrap_or_default();
            }
            None => {
                out.push('\\');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A parsed tracepoint `format` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    /// Event name (`name:` line).
    pub name: String,
    /// Event id (`ID:` line), as used by perf_event_open.
    pub id: u32,
    /// Record fields in file order, common_* fields included.
    pub fields: Vec<FormatField>,
    /// The `print fmt:` line, without the prefix (empty if absent).
    pub print_fmt: String,
}

/// One `field:` line of a format file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatField {
    /// C declaration as written, e.g. `char name[32]` or `__data_loc char[] cmd`.
    pub declaration: String,
    /// Field name with any array suffix stripped, e.g. `name`.
    pub name: String,
    /// Byte offset in the raw record.
    pub offset: u32,
    /// Size in bytes (for `__data_loc`, the size of the 32-bit offset/length word).
    pub size: u32,
    /// Whether the kernel reports the type as signed.
    pub signed: bool,
}

impl EventFormat {
    /// Parses the text of a format file.
    pub fn parse(text: &str) -> Result<EventFormat, TracefsError> {
        parse_format(text).map_err(|(line, reason)| TracefsError::Parse { line, reason })
    }

    /// The field with this name, if present.
    pub fn field(&self, name: &str) -> Option<&FormatField> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Like `field` but an error naming the event and field when missing.
    pub fn require(&self, name: &str) -> Result<&FormatField, TracefsError> {
        self.field(name).ok_or_else(|| TracefsError::MissingField {
            event: self.name.clone(),
            field: name.to_owned(),
        })
    }

    /// The `__print_symbolic(REC-><field>, { v, "name" }, ...)` table for `field` in print_fmt, as (value, name) pairs. Values may be decimal, hex (0x..), or negative. Returns None if the field has no symbolic table.
    /// Also None if a value is not a plain integer literal (e.g. an unevaluated enum name).
    pub fn symbolic_table(&self, field: &str) -> Option<Vec<(i64, String)>> {
        let wanted = format!("REC->{field}");
        let mut rest = self.print_fmt.as_str();
        while let Some((_, after)) = rest.split_once("__print_symbolic(") {
            rest = after;
            let (arg, entries) = after.split_once(',')?;
            if strip_parens(arg.trim()) == wanted {
                return parse_symbolic_entries(entries);
            }
        }
        None
    }
}

/// Parses `{ v, "name" }, ... )` up to the closing parenthesis of `__print_symbolic`.
fn parse_symbolic_entries(mut s: &str) -> Option<Vec<(i64, String)>> {
    let mut table = Vec::new();
    loop {
        s = s.trim_start();
        if s.starts_with(')') {
            return Some(table);
        }
        let (value, after) = s.strip_prefix('{')?.split_once(',')?;
        // Symbol names are plain identifiers in practice, so no escaped quotes to handle.
        let (name, after) = after.trim_start().strip_prefix('"')?.split_once('"')?;
        let after = after.trim_start().strip_prefix('}')?.trim_start();
        table.push((parse_int(value)?, name.to_owned()));
        s = after.strip_prefix(',').unwrap_or(after);
    }
}

fn strip_parens(mut s: &str) -> &str {
    while let Some(inner) = s.strip_prefix('(').and_then(|i| i.strip_suffix(')')) {
        s = inner.trim();
    }
    s
}

/// Parses a C integer literal: optional sign, decimal or 0x hex, optional U/L suffixes.
fn parse_int(s: &str) -> Option<i64> {
    let s = strip_parens(s.trim());
    let (negative, s) = s
        .strip_prefix('-')
        .map_or((false, s), |rest| (true, rest.trim_start()));
    let s = s.trim_end_matches(['u', 'U', 'l', 'L']);
    let magnitude = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        // Hex masks may use all 64 bits; reinterpret them as i64 like the kernel's unsigned long.
        Some(hex) => u64::from_str_radix(hex, 16).ok()? as i64,
        None => s.parse::<u64>().ok()? as i64,
    };
    Some(if negative {
        magnitude.wrapping_neg()
    } else {
        magnitude
    })
}

/// Parses format text; errors are (1-based line, reason) so callers can attach a path.
fn parse_format(text: &str) -> Result<EventFormat, (usize, String)> {
    let (mut name, mut id, mut fields, mut print_fmt) = (None, None, Vec::new(), String::new());
    for (idx, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let err = |reason: String| (idx + 1, reason);
        if let Some(v) = line.strip_prefix("name:") {
            name = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("ID:") {
            id = Some(
                v.trim()
                    .parse::<u32>()
                    .map_err(|e| err(format!("bad ID `{}`: {e}", v.trim())))?,
            );
        } else if let Some(v) = line.strip_prefix("print fmt:") {
            print_fmt = v.trim().to_owned();
        } else if line.starts_with("field:") {
            fields.push(parse_field(line).map_err(|e| err(e.to_string()))?);
        }
        // Other lines ("format:", blanks) carry no data; unknown ones are tolerated so a
        // future kernel adding a line does not break the daemon.
    }
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or((0, "missing `name:` line".to_owned()))?;
    let id = id.ok_or((0, "missing `ID:` line".to_owned()))?;
    if fields.is_empty() {
        return Err((0, "no `field:` lines".to_owned()));
    }
    Ok(EventFormat {
        name,
        id,
        fields,
        print_fmt,
    })
}

/// What is wrong with one `field:` line of a format file.
#[derive(Debug, thiserror::Error)]
enum FieldError {
    #[error("expected key:value, got `{0}`")]
    NotKeyValue(String),
    #[error("bad {key} `{value}`: {cause}")]
    BadNumber {
        key: String,
        value: String,
        cause: std::num::ParseIntError,
    },
    #[error("missing field declaration")]
    NoDeclaration,
    #[error("no field name in `{0}`")]
    NoName(String),
    #[error("field `{declaration}` has no {what}")]
    Missing {
        declaration: String,
        what: &'static str,
    },
}

/// Parses `field:<decl>;\toffset:N;\tsize:N;\tsigned:N;`.
fn parse_field(line: &str) -> Result<FormatField, FieldError> {
    let (mut declaration, mut offset, mut size, mut signed) = (None, None, None, false);
    for part in line.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once(':')
            .ok_or_else(|| FieldError::NotKeyValue(part.to_owned()))?;
        let number = || {
            value
                .trim()
                .parse::<u32>()
                .map_err(|cause| FieldError::BadNumber {
                    key: key.to_owned(),
                    value: value.to_owned(),
                    cause,
                })
        };
        match key.trim() {
            "field" => declaration = Some(value.trim().to_owned()),
            "offset" => offset = Some(number()?),
            "size" => size = Some(number()?),
            "signed" => signed = number()? != 0,
            _ => {} // Tolerate attributes added by future kernels.
        }
    }
    let declaration = declaration.ok_or(FieldError::NoDeclaration)?;
    let name = field_name(&declaration).ok_or_else(|| FieldError::NoName(declaration.clone()))?;
    let missing = |what| FieldError::Missing {
        declaration: declaration.clone(),
        what,
    };
    Ok(FormatField {
        name,
        offset: offset.ok_or_else(|| missing("offset"))?,
        size: size.ok_or_else(|| missing("size"))?,
        declaration,
        signed,
    })
}

/// The identifier declared by `decl`: `char name[32]` -> `name`, `__data_loc char[] cmd` -> `cmd`,
/// `const char * ptr` -> `ptr`.
fn field_name(decl: &str) -> Option<String> {
    let mut decl = decl.trim_end();
    // Strip every array dimension: `u8 data[2][3]` -> `u8 data`.
    while let Some(head) = decl.strip_suffix(']') {
        decl = head.rsplit_once('[')?.0.trim_end();
    }
    let name = decl.rsplit([' ', '\t', '*']).next()?;
    let is_ident = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    is_ident.then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRITEBACK_START: &str = "name: writeback_start
ID: 995
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char name[32];\toffset:8;\tsize:32;\tsigned:0;
\tfield:long nr_pages;\toffset:40;\tsize:8;\tsigned:1;
\tfield:dev_t sb_dev;\toffset:48;\tsize:4;\tsigned:0;
\tfield:int sync_mode;\toffset:52;\tsize:4;\tsigned:1;
\tfield:int for_kupdate;\toffset:56;\tsize:4;\tsigned:1;
\tfield:int range_cyclic;\toffset:60;\tsize:4;\tsigned:1;
\tfield:int for_background;\toffset:64;\tsize:4;\tsigned:1;
\tfield:int reason;\toffset:68;\tsize:4;\tsigned:1;
\tfield:ino_t cgroup_ino;\toffset:72;\tsize:8;\tsigned:0;

print fmt: \"bdi %s: sb_dev %d:%d nr_pages=%ld sync_mode=%d kupdate=%d range_cyclic=%d background=%d reason=%s cgroup_ino=%lu\", REC->name, ((unsigned int) ((REC->sb_dev) >> 20)), ((unsigned int) ((REC->sb_dev) & ((1U << 20) - 1))), REC->nr_pages, REC->sync_mode, REC->for_kupdate, REC->range_cyclic, REC->for_background, __print_symbolic(REC->reason, { 0, \"background\" }, { 1, \"vmscan\" }, { 2, \"sync\" }, { 3, \"periodic\" }, { 4, \"laptop_timer\" }, { 5, \"fs_free_space\" }, { 6, \"forker_thread\" }, { 7, \"foreign_flush\" }), (unsigned long)REC->cgroup_ino
";

    const EXEC: &str = "name: sched_process_exec
ID: 312
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;
\tfield:const char * ptr;\toffset:64;\tsize:8;\tsigned:0;

print fmt: \"filename=%s pid=%d\", __get_str(filename), REC->pid
";

    fn pairs(items: &[(i64, &str)]) -> Vec<(i64, String)> {
        items.iter().map(|&(v, n)| (v, n.to_owned())).collect()
    }

    #[test]
    fn parses_writeback_start() -> Result<(), TracefsError> {
        let f = EventFormat::parse(WRITEBACK_START)?;
        assert_eq!(
            (f.name.as_str(), f.id, f.fields.len()),
            ("writeback_start", 995, 13)
        );
        let name = f.require("name")?;
        assert_eq!(
            (
                name.declaration.as_str(),
                name.offset,
                name.size,
                name.signed
            ),
            ("char name[32]", 8, 32, false)
        );
        let nr = f.require("nr_pages")?;
        assert_eq!((nr.offset, nr.size, nr.signed), (40, 8, true));
        assert_eq!(f.require("common_pid")?.size, 4);
        assert!(f.require("common_pid")?.signed);
        assert_eq!(
            f.require("common_type")?.declaration,
            "unsigned short common_type"
        );
        assert_eq!(f.require("cgroup_ino")?.size, 8);
        assert!(f.print_fmt.starts_with("\"bdi %s") && f.print_fmt.ends_with("REC->cgroup_ino"));
        let err = f.require("nope").err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("tracepoint `writeback_start` has no field `nope`")
        );
        Ok(())
    }

    #[test]
    fn symbolic_tables() -> Result<(), TracefsError> {
        let f = EventFormat::parse(WRITEBACK_START)?;
        let expected = [
            (0, "background"),
            (1, "vmscan"),
            (2, "sync"),
            (3, "periodic"),
            (4, "laptop_timer"),
            (5, "fs_free_space"),
            (6, "forker_thread"),
            (7, "foreign_flush"),
        ];
        assert_eq!(f.symbolic_table("reason"), Some(pairs(&expected)));
        assert_eq!(f.symbolic_table("sync_mode"), None);
        assert_eq!(f.symbolic_table("reaso"), None);
        let mut g = f.clone();
        g.print_fmt = "\"%s %s\", __print_symbolic(REC->a, { 1, \"x\" }), \
                       __print_symbolic((REC->b), { 0x10, \"hex\" }, { -3, \"neg\" }, { 0xffffffffffffffffUL, \"all\" })"
            .to_owned();
        assert_eq!(g.symbolic_table("a"), Some(pairs(&[(1, "x")])));
        assert_eq!(
            g.symbolic_table("b"),
            Some(pairs(&[(16, "hex"), (-3, "neg"), (-1, "all")]))
        );
        g.print_fmt = "\"%s\", __print_symbolic(REC->a, { WB_REASON_SYNC, \"sync\" })".to_owned();
        assert_eq!(g.symbolic_table("a"), None);
        g.print_fmt = "\"%s\", __print_symbolic(REC->a, { 1, \"x\" ".to_owned();
        assert_eq!(g.symbolic_table("a"), None);
        Ok(())
    }

    #[test]
    fn parses_data_loc_arrays_and_pointers() -> Result<(), TracefsError> {
        let f = EventFormat::parse(EXEC)?;
        let names: Vec<_> = f.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["common_type", "filename", "pid", "args", "ptr"]);
        assert_eq!(
            f.require("filename")?.declaration,
            "__data_loc char[] filename"
        );
        assert_eq!(f.require("filename")?.size, 4);
        assert_eq!(f.require("args")?.size, 48);
        Ok(())
    }

    #[test]
    fn older_kernel_cgroup_ino_size() -> Result<(), TracefsError> {
        let old = WRITEBACK_START.replace(
            "ino_t cgroup_ino;\toffset:72;\tsize:8",
            "unsigned int cgroup_ino;\toffset:72;\tsize:4",
        );
        let f = EventFormat::parse(&old)?;
        assert_eq!(f.require("cgroup_ino")?.size, 4);
        assert_eq!(
            f.require("cgroup_ino")?.declaration,
            "unsigned int cgroup_ino"
        );
        Ok(())
    }

    #[test]
    fn malformed_text_is_an_error() {
        let bad = [
            "",
            "garbage\nmore garbage",
            "name: x\nformat:\n\tfield:int a;\toffset:0;\tsize:4;\tsigned:1;\n",
            "name: x\nID: abc\nformat:\n\tfield:int a;\toffset:0;\tsize:4;\tsigned:1;\n",
            "name: x\nID: 1\nformat:\n",
            "name: x\nID: 1\nformat:\n\tfield:int a;\toffset:zero;\tsize:4;\tsigned:1;\n",
            "name: x\nID: 1\nformat:\n\tfield:int a;\toffset:0;\tsigned:1;\n",
            "name: x\nID: 1\nformat:\n\tfield:int a[;\toffset:0;\tsize:4;\tsigned:1;\n",
            "name: x\nID: 1\nformat:\n\tfield:;\toffset:0;\tsize:4;\n",
            "name: x\nID: 1\nformat:\n\tfield:int a;\toffset 0;\tsize:4;\n",
        ];
        for text in bad {
            assert!(EventFormat::parse(text).is_err(), "accepted {text:?}");
        }
        let err = EventFormat::parse(bad[5])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("line 4") && err.contains("offset"), "{err}");
        // Every truncation must parse or fail cleanly, never panic.
        for (i, _) in WRITEBACK_START.char_indices() {
            if let Ok(f) = EventFormat::parse(&WRITEBACK_START[..i]) {
                let _ = f.symbolic_table("reason");
            }
        }
    }

    #[test]
    fn field_names() {
        assert_eq!(field_name("char name[32]").as_deref(), Some("name"));
        assert_eq!(field_name("__data_loc char[] cmd").as_deref(), Some("cmd"));
        assert_eq!(field_name("unsigned long flags").as_deref(), Some("flags"));
        assert_eq!(field_name("void *ptr").as_deref(), Some("ptr"));
        assert_eq!(field_name("int a[2][3]").as_deref(), Some("a"));
        assert_eq!(field_name("int a]"), None);
        assert_eq!(field_name(""), None);
    }

    #[test]
    fn mountinfo_parsing() {
        let text = "22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n\
                    40 22 0:12 / /sys/kernel/tracing rw,nosuid shared:9 - tracefs tracefs rw\n\
                    41 22 0:12 / /mnt/my\\040trace rw - tracefs nodev rw\n\
                    broken line\n";
        let mounts = tracefs_mounts(text);
        assert_eq!(
            mounts,
            [
                PathBuf::from("/sys/kernel/tracing"),
                PathBuf::from("/mnt/my trace")
            ]
        );
        assert_eq!(unescape_octal("a\\134b\\0"), "a\\b\\0");
    }

    /// A throwaway fake tracefs tree, removed on drop.
    struct FakeRoot(PathBuf);

    impl Drop for FakeRoot {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn reads_events_from_a_root() -> Result<(), Box<dyn std::error::Error>> {
        let root =
            FakeRoot(std::env::temp_dir().join(format!("wbscope-tracefs-{}", std::process::id())));
        let dir = root.0.join("events/writeback/writeback_start");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("format"), WRITEBACK_START)?;
        std::fs::create_dir_all(root.0.join("events/bad/ev"))?;
        std::fs::write(root.0.join("events/bad/ev/format"), "nonsense")?;
        let tfs = Tracefs::at(&root.0);
        assert_eq!(tfs.root(), root.0);
        assert!(tfs.event_exists("writeback", "writeback_start"));
        assert!(!tfs.event_exists("writeback", "nope"));
        assert!(!tfs.event_exists("..", "writeback_start"));
        assert_eq!(tfs.event_format("writeback", "writeback_start")?.id, 995);
        assert!(matches!(
            tfs.event_format("writeback", "nope"),
            Err(TracefsError::Io { .. })
        ));
        assert!(matches!(
            tfs.event_format("bad", "ev"),
            Err(TracefsError::InvalidFormat { .. })
        ));
        assert!(matches!(
            tfs.event_format("a/b", "c"),
            Err(TracefsError::InvalidName { .. })
        ));
        Ok(())
    }

    /// The running kernel's tracefs, or None (with a note) when it is not readable here.
    fn kernel_tracefs() -> Option<Tracefs> {
        let tfs = Tracefs::at(DEFAULT_ROOT);
        if std::fs::read_dir(tfs.root().join("events")).is_err() {
            eprintln!("skipping: {DEFAULT_ROOT}/events not readable");
            return None;
        }
        Some(tfs)
    }

    #[test]
    fn kernel_locate() -> Result<(), TracefsError> {
        if kernel_tracefs().is_none() {
            return Ok(());
        }
        let tfs = Tracefs::locate_or_mount()?;
        assert!(
            tfs.event_exists("writeback", "writeback_start"),
            "{:?}",
            tfs.root()
        );
        Ok(())
    }

    #[test]
    fn kernel_every_format_parses() -> Result<(), Box<dyn std::error::Error>> {
        let Some(tfs) = kernel_tracefs() else {
            return Ok(());
        };
        let mut count = 0;
        for system in std::fs::read_dir(tfs.root().join("events"))? {
            let system = system?.path();
            for event in std::fs::read_dir(&system).into_iter().flatten() {
                let format = event?.path().join("format");
                if let Ok(text) = std::fs::read_to_string(&format) {
                    EventFormat::parse(&text).map_err(|e| format!("{}: {e}", format.display()))?;
                    count += 1;
                }
            }
        }
        eprintln!("parsed {count} event formats");
        Ok(())
    }

    #[test]
    fn kernel_writeback_start() -> Result<(), TracefsError> {
        let Some(tfs) = kernel_tracefs() else {
            return Ok(());
        };
        let f = tfs.event_format("writeback", "writeback_start")?;
        assert_eq!(f.require("nr_pages")?.size, 8);
        f.require("sync_mode")?;
        f.require("reason")?;
        let table = f.symbolic_table("reason").unwrap_or_default();
        assert!(table.contains(&(2, "sync".to_owned())), "{table:?}");
        assert!(table.contains(&(0, "background".to_owned())), "{table:?}");
        let fsync = tfs.event_format("syscalls", "sys_enter_fsync")?;
        assert!(fsync.require("fd")?.size >= 4);
        Ok(())
    }
}
