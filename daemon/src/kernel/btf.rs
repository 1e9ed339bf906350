//! Minimal reader for the raw BTF format exposed by the kernel at `/sys/kernel/btf/vmlinux`.
//!
//! Only what the daemon needs is modelled: struct/union member offsets and sizes, and enum
//! values, so that probes can be adapted to the running kernel's layout without a full
//! libbpf-style BTF implementation. The layout is described in the kernel's
//! `Documentation/bpf/btf.rst`; the blob is in host byte order (little-endian here).

use std::path::{Path, PathBuf};

const BTF_MAGIC: u16 = 0xeb9f;
const HEADER_LEN: usize = 24;
/// Bound on typedef/modifier chains and anonymous-member nesting, so a corrupt blob with a
/// reference cycle produces an error instead of a stack overflow or an endless loop.
const MAX_DEPTH: usize = 64;

/// Errors produced while reading or querying BTF.
#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    /// The BTF file could not be read.
    #[error("cannot read BTF from {path}: {cause}")]
    Io {
        /// File that failed to read.
        path: PathBuf,
        /// Underlying I/O error.
        cause: std::io::Error,
    },
    /// The blob is structurally invalid (bad magic, out-of-bounds section, truncated type...).
    #[error("malformed BTF: {reason}")]
    Malformed {
        /// What was wrong.
        reason: String,
    },
    /// No type of the expected kind has this name.
    #[error("BTF has no {kind} named `{name}`")]
    TypeNotFound {
        /// Requested type name.
        name: String,
        /// Kind that was looked for ("struct/union", "enum").
        kind: &'static str,
    },
    /// The struct/union exists but has no member with this name.
    #[error("`{type_name}` has no member `{member}`")]
    MemberNotFound {
        /// Struct or union searched.
        type_name: String,
        /// Requested member.
        member: String,
    },
    /// The member is a bitfield or does not start on a byte boundary.
    #[error("`{type_name}.{member}` is not byte addressable (bit offset {bit_offset}, bitfield)")]
    NotByteAddressable {
        /// Struct or union searched.
        type_name: String,
        /// Requested member.
        member: String,
        /// Bit offset of the member from the start of `type_name`.
        bit_offset: u32,
    },
    /// The member was expected to be a bitfield and is a whole integer (or another type).
    #[error("`{type_name}.{member}` is not a bitfield")]
    NotABitfield {
        /// Struct or union searched.
        type_name: String,
        /// Requested member.
        member: String,
    },
    /// The member's type has no size (void, function, forward declaration...).
    #[error("`{type_name}.{member}` has an unsized type (BTF id {type_id})")]
    Unsized {
        /// Struct or union searched.
        type_name: String,
        /// Requested member.
        member: String,
        /// BTF id of the offending type.
        type_id: u32,
    },
    /// No enum, named or anonymous, has an enumerator with this name.
    #[error("BTF has no enumerator `{variant}`")]
    EnumeratorNotFound {
        /// Requested enumerator.
        variant: String,
    },
    /// The tracepoint's `btf_trace_<event>` prototype has no parameter pointing to this struct.
    #[error("tp_btf {event} has no `struct {struct_name} *` argument")]
    NoSuchArgument {
        /// Tracepoint name.
        event: String,
        /// Struct the argument should point to.
        struct_name: String,
    },
    /// The enum exists but has no enumerator with this name.
    #[error("enum `{enum_name}` has no variant `{variant}`")]
    VariantNotFound {
        /// Enum searched.
        enum_name: String,
        /// Requested enumerator.
        variant: String,
    },
}

fn malformed(reason: impl Into<String>) -> BtfError {
    BtfError::Malformed {
        reason: reason.into(),
    }
}

/// A struct/union member; `bit_offset` is from the start of the enclosing type.
#[derive(Debug, Clone, Copy)]
struct Member {
    name_off: u32,
    type_id: u32,
    bit_offset: u32,
    /// Non-zero only for bitfields declared through the struct's kind_flag encoding.
    bitfield_size: u32,
}

/// The parts of each BTF kind that queries need; other kinds are only skipped over.
#[derive(Debug)]
enum Kind {
    Int {
        nr_bits: u32,
        bit_off: u32,
    },
    Ptr,
    Array {
        elem: u32,
        nelems: u32,
    },
    Composite(Vec<Member>),
    Enum(Vec<(u32, i64)>),
    Fwd,
    /// TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG: `size_or_type` is the referenced id.
    Ref,
    Float,
    /// FUNC_PROTO: the parameter type ids (for tp_btf prototypes).
    FuncProto(Vec<u32>),
    /// FUNC, VAR, DATASEC, DECL_TAG: never the type of a struct member we size.
    Other,
}

#[derive(Debug)]
struct Type {
    name_off: u32,
    size_or_type: u32,
    kind: Kind,
}

/// Parsed BTF: the type table (index = type id - 1) plus the string section.
#[derive(Debug)]
pub struct Btf {
    types: Vec<Type>,
    strings: Vec<u8>,
    /// Ids of the named types, sorted by name (ids of one name in ascending order), searched by
    /// bisection. A `HashMap<String, Vec<u32>>` cost two allocations per name, ~10 MB for
    /// vmlinux's ~100k names, at the daemon's start-up peak.
    by_name: Vec<u32>,
}

/// Little-endian cursor that reports truncation instead of panicking.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn u32(&mut self) -> Result<u32, BtfError> {
        let bytes = self
            .pos
            .checked_add(4)
            .and_then(|end| self.buf.get(self.pos..end))
            .and_then(|s| <[u8; 4]>::try_from(s).ok())
            .ok_or_else(|| malformed(format!("data truncated at byte {}", self.pos)))?;
        self.pos += 4;
        Ok(u32::from_le_bytes(bytes))
    }

    fn skip(&mut self, records: u32, record_len: usize) -> Result<(), BtfError> {
        for _ in 0..records as usize * record_len / 4 {
            self.u32()?;
        }
        Ok(())
    }
}

fn section(bytes: &[u8], base: usize, off: u32, len: u32) -> Result<&[u8], BtfError> {
    let start = base.checked_add(off as usize);
    let end = start.and_then(|s| s.checked_add(len as usize));
    start
        .zip(end)
        .and_then(|(s, e)| bytes.get(s..e))
        .ok_or_else(|| {
            malformed(format!(
                "section {off}+{len} exceeds blob of {}",
                bytes.len()
            ))
        })
}

impl Btf {
    /// Reads and parses a BTF blob (normally /sys/kernel/btf/vmlinux).
    pub fn from_file(path: &Path) -> Result<Btf, BtfError> {
        let bytes = std::fs::read(path).map_err(|cause| BtfError::Io {
            path: path.to_owned(),
            cause,
        })?;
        Btf::parse(&bytes)
    }

    /// Parses a raw BTF blob (header, type section, string section).
    pub fn parse(bytes: &[u8]) -> Result<Btf, BtfError> {
        let mut hdr = Reader { buf: bytes, pos: 0 };
        let first = hdr.u32()?;
        let magic = (first & 0xffff) as u16;
        if magic != BTF_MAGIC {
            return Err(malformed(format!("bad magic {magic:#06x}")));
        }
        if (first >> 16) & 0xff != 1 {
            return Err(malformed(format!(
                "unsupported version {}",
                (first >> 16) & 0xff
            )));
        }
        let hdr_len = hdr.u32()? as usize;
        if hdr_len < HEADER_LEN {
            return Err(malformed(format!("header length {hdr_len} too small")));
        }
        let (type_off, type_len, str_off, str_len) =
            (hdr.u32()?, hdr.u32()?, hdr.u32()?, hdr.u32()?);
        let type_sec = section(bytes, hdr_len, type_off, type_len)?;
        let strings = section(bytes, hdr_len, str_off, str_len)?.to_vec();

        let mut btf = Btf {
            types: Vec::new(),
            strings,
            by_name: Vec::new(),
        };
        let mut rd = Reader {
            buf: type_sec,
            pos: 0,
        };
        while rd.pos < type_sec.len() {
            let ty = read_type(&mut rd)?;
            let id = btf.types.len() as u32 + 1;
            // Validates the name once, so `name_bytes` may skip the checks later.
            if !btf.str_at(ty.name_off)?.is_empty() {
                btf.by_name.push(id);
            }
            btf.types.push(ty);
        }
        // Stable: ids of one name stay in ascending order, as lookups expect.
        let mut by_name = std::mem::take(&mut btf.by_name);
        by_name.sort_by(|&a, &b| btf.name_bytes(a).cmp(btf.name_bytes(b)));
        btf.by_name = by_name;
        Ok(btf)
    }

    /// Byte offset of `member` inside the struct or union named `type_name`. Members of anonymous
    /// struct/union members are searched recursively (e.g. `struct file`'s fields inside unnamed unions),
    /// adding the offsets. Errors: type not found, member not found, member is a bitfield or not byte aligned.
    pub fn member_offset(&self, type_name: &str, member: &str) -> Result<u32, BtfError> {
        let (bit_offset, _) = self.byte_member(type_name, member)?;
        Ok(bit_offset / 8)
    }

    /// The bit offset from the start of `type_name` and the width in bits of the bitfield
    /// `member` (either BTF encoding: the struct's kind_flag, or an INT type with its own bit
    /// offset and size). A member that is not a bitfield is an error, so that a kernel that turns
    /// one into a plain integer is noticed.
    pub fn bitfield(&self, type_name: &str, member: &str) -> Result<(u32, u32), BtfError> {
        let (bit_offset, m) = self.find_member(type_name, member)?;
        if m.bitfield_size != 0 {
            return Ok((bit_offset, m.bitfield_size));
        }
        match self.int_bitfield(&m)? {
            Some((bit_off, nr_bits)) => Ok((bit_offset + bit_off, nr_bits)),
            None => Err(BtfError::NotABitfield {
                type_name: type_name.to_owned(),
                member: member.to_owned(),
            }),
        }
    }

    /// Size in bytes of that member's type (resolving typedef/const/volatile/etc.; arrays = elem size * n; pointers = 8).
    /// Bitfield members are rejected like in [`Btf::member_offset`].
    pub fn member_size(&self, type_name: &str, member: &str) -> Result<u32, BtfError> {
        let (_, m) = self.byte_member(type_name, member)?;
        self.type_size(m.type_id, 0)?
            .ok_or_else(|| BtfError::Unsized {
                type_name: type_name.to_owned(),
                member: member.to_owned(),
                type_id: m.type_id,
            })
    }

    /// Value of enumerator `variant` in the enum named `enum_name` (ENUM or ENUM64).
    pub fn enum_value(&self, enum_name: &str, variant: &str) -> Result<i64, BtfError> {
        self.enum_variants(enum_name)?
            .into_iter()
            .find_map(|(name, value)| (name == variant).then_some(value))
            .ok_or_else(|| BtfError::VariantNotFound {
                enum_name: enum_name.to_owned(),
                variant: variant.to_owned(),
            })
    }

    /// All enumerators of the named enum, in declaration order.
    pub fn enum_variants(&self, enum_name: &str) -> Result<Vec<(String, i64)>, BtfError> {
        // Prefer the definition with enumerators over an empty forward-declared one.
        let variants = self
            .ids(enum_name)
            .filter_map(|id| match &self.get(id)?.kind {
                Kind::Enum(v) => Some(v),
                _ => None,
            })
            .max_by_key(|v| !v.is_empty())
            .ok_or_else(|| BtfError::TypeNotFound {
                name: enum_name.to_owned(),
                kind: "enum",
            })?;
        variants
            .iter()
            .map(|&(off, value)| Ok((self.str_at(off)?.to_owned(), value)))
            .collect()
    }

    /// Value of the enumerator `variant` in whichever enum declares it, named or anonymous (some
    /// kernel constants, e.g. `QUEUE_FLAG_*`, live in anonymous enums).
    pub fn enumerator_value(&self, variant: &str) -> Result<i64, BtfError> {
        for ty in &self.types {
            if let Kind::Enum(values) = &ty.kind {
                for &(off, value) in values {
                    if self.str_at(off)? == variant {
                        return Ok(value);
                    }
                }
            }
        }
        Err(BtfError::EnumeratorNotFound {
            variant: variant.to_owned(),
        })
    }

    /// Index (from 0, after the hidden `void *` context) of the first argument of tp_btf `event`
    /// that is a pointer to `struct struct_name`, from the `btf_trace_<event>` typedef. This is
    /// how probes follow prototype changes such as `block_rq_issue(q, rq)` becoming
    /// `block_rq_issue(rq)` in 5.11.
    pub fn tp_btf_arg_index(&self, event: &str, struct_name: &str) -> Result<u32, BtfError> {
        let typedef = format!("btf_trace_{event}");
        let not_found = || BtfError::NoSuchArgument {
            event: event.to_owned(),
            struct_name: struct_name.to_owned(),
        };
        let id = self
            .ids(&typedef)
            .next()
            .ok_or_else(|| BtfError::TypeNotFound {
                name: typedef.clone(),
                kind: "typedef",
            })?;
        let params = self.func_proto_params(id)?.ok_or_else(not_found)?;
        for (index, param) in params.iter().skip(1).enumerate() {
            let Some(Type {
                kind: Kind::Ptr,
                size_or_type: target,
                ..
            }) = self.get(self.resolve(*param)?)
            else {
                continue;
            };
            let Some(pointee) = self.get(self.resolve(*target)?) else {
                continue;
            };
            if matches!(pointee.kind, Kind::Composite(_))
                && self.str_at(pointee.name_off)? == struct_name
            {
                return u32::try_from(index).map_err(|_| not_found());
            }
        }
        Err(not_found())
    }

    /// The parameter type ids of the function prototype that type `id` (a `btf_trace_<event>`
    /// typedef) points to, the hidden `void *` context first; `None` if it is not a pointer to a
    /// function prototype.
    fn func_proto_params(&self, id: u32) -> Result<Option<&[u32]>, BtfError> {
        let Some(Type {
            kind: Kind::Ptr,
            size_or_type: proto,
            ..
        }) = self.get(self.resolve(id)?)
        else {
            return Ok(None);
        };
        Ok(match self.get(self.resolve(*proto)?) {
            Some(Type {
                kind: Kind::FuncProto(params),
                ..
            }) => Some(params),
            _ => None,
        })
    }

    /// Number of arguments of tp_btf `event` (after the hidden `void *` context), from the
    /// `btf_trace_<event>` typedef: how probes that read a scalar argument by position check
    /// that the prototype is the one they were written for.
    pub fn tp_btf_arg_count(&self, event: &str) -> Result<u32, BtfError> {
        let typedef = format!("btf_trace_{event}");
        let not_found = || BtfError::TypeNotFound {
            name: typedef.clone(),
            kind: "typedef of a function prototype pointer",
        };
        let id = self.ids(&typedef).next().ok_or_else(not_found)?;
        let params = self.func_proto_params(id)?.ok_or_else(not_found)?;
        u32::try_from(params.len().saturating_sub(1)).map_err(|_| not_found())
    }

    /// True if a type of any kind with this name exists (e.g. "btf_trace_block_rq_issue" typedef).
    pub fn has_type(&self, name: &str) -> bool {
        self.ids(name).next().is_some()
    }

    /// Ids of the types named `name`, in ascending order.
    fn ids(&self, name: &str) -> impl Iterator<Item = u32> + '_ {
        let name = name.as_bytes();
        let start = self
            .by_name
            .partition_point(|&id| self.name_bytes(id) < name);
        let end = self
            .by_name
            .partition_point(|&id| self.name_bytes(id) <= name);
        self.by_name
            .get(start..end)
            .unwrap_or_default()
            .iter()
            .copied()
    }

    /// The name of type `id` as bytes, empty when unknown (names were checked by `parse`).
    fn name_bytes(&self, id: u32) -> &[u8] {
        let Some(ty) = self.get(id) else { return &[] };
        let tail = self.strings.get(ty.name_off as usize..).unwrap_or_default();
        let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
        tail.get(..end).unwrap_or_default()
    }

    fn get(&self, id: u32) -> Option<&Type> {
        self.types.get((id as usize).checked_sub(1)?)
    }

    fn str_at(&self, off: u32) -> Result<&str, BtfError> {
        let bad = || malformed(format!("bad string offset {off}"));
        let tail = self.strings.get(off as usize..).ok_or_else(bad)?;
        let end = tail.iter().position(|&b| b == 0).ok_or_else(bad)?;
        std::str::from_utf8(tail.get(..end).ok_or_else(bad)?).map_err(|_| bad())
    }

    /// Follows typedefs and qualifiers to the underlying type id (0 = void).
    fn resolve(&self, mut id: u32) -> Result<u32, BtfError> {
        for _ in 0..MAX_DEPTH {
            match self.get(id) {
                Some(Type {
                    kind: Kind::Ref,
                    size_or_type,
                    ..
                }) => id = *size_or_type,
                _ => return Ok(id),
            }
        }
        Err(malformed(format!(
            "reference chain too deep at type id {id}"
        )))
    }

    /// Id of the struct/union named `name`; vmlinux also holds FWD and zero-sized duplicates,
    /// so a sized definition wins, and a typedef to a struct is accepted as a fallback.
    fn composite_id(&self, name: &str) -> Result<u32, BtfError> {
        let is_composite =
            |id: u32| matches!(self.get(id), Some(t) if matches!(t.kind, Kind::Composite(_)));
        let mut best = None;
        for id in self.ids(name) {
            let target = self.resolve(id)?;
            let sized = |id: u32| self.get(id).is_some_and(|t| t.size_or_type > 0);
            let better = match best {
                None => true,
                Some(prev) => !sized(prev) && sized(target),
            };
            if is_composite(target) && better {
                best = Some(target);
            }
        }
        best.ok_or_else(|| BtfError::TypeNotFound {
            name: name.to_owned(),
            kind: "struct/union",
        })
    }

    /// Finds `member` and checks it is byte addressable; returns its total bit offset.
    fn byte_member(&self, type_name: &str, member: &str) -> Result<(u32, Member), BtfError> {
        let (bit_offset, m) = self.find_member(type_name, member)?;
        if m.bitfield_size != 0 || self.int_bitfield(&m)?.is_some() || bit_offset % 8 != 0 {
            return Err(BtfError::NotByteAddressable {
                type_name: type_name.to_owned(),
                member: member.to_owned(),
                bit_offset,
            });
        }
        Ok((bit_offset, m))
    }

    /// `member` of the struct or union `type_name` (searching anonymous members) and its total
    /// bit offset.
    fn find_member(&self, type_name: &str, member: &str) -> Result<(u32, Member), BtfError> {
        let id = self.composite_id(type_name)?;
        self.search(id, member, 0)?
            .ok_or_else(|| BtfError::MemberNotFound {
                type_name: type_name.to_owned(),
                member: member.to_owned(),
            })
    }

    /// `(bit offset, bits)` when `m` is a bitfield encoded in its INT type (without the
    /// struct's kind_flag, the INT itself carries `nr_bits`/`bit_off`), else `None`.
    fn int_bitfield(&self, m: &Member) -> Result<Option<(u32, u32)>, BtfError> {
        Ok(match self.get(self.resolve(m.type_id)?) {
            Some(Type {
                kind: Kind::Int { nr_bits, bit_off },
                size_or_type,
                ..
            }) if *bit_off != 0 || u64::from(*nr_bits) != u64::from(*size_or_type) * 8 => {
                Some((*bit_off, *nr_bits))
            }
            _ => None,
        })
    }

    /// Depth-first search through `id`'s members, descending into anonymous members.
    fn search(&self, id: u32, name: &str, depth: usize) -> Result<Option<(u32, Member)>, BtfError> {
        if depth > MAX_DEPTH {
            return Err(malformed(format!(
                "anonymous members nested too deep at type id {id}"
            )));
        }
        let Some(Type {
            kind: Kind::Composite(members),
            ..
        }) = self.get(id)
        else {
            return Ok(None);
        };
        for m in members {
            let member_name = self.str_at(m.name_off)?;
            if member_name == name {
                return Ok(Some((m.bit_offset, *m)));
            }
            if member_name.is_empty()
                && let Some((off, found)) =
                    self.search(self.resolve(m.type_id)?, name, depth + 1)?
            {
                let total = m
                    .bit_offset
                    .checked_add(off)
                    .ok_or_else(|| malformed("member offset overflow"))?;
                return Ok(Some((total, found)));
            }
        }
        Ok(None)
    }

    /// Size in bytes of type `id`, or None if it has no size (void, functions, FWD).
    fn type_size(&self, id: u32, depth: usize) -> Result<Option<u32>, BtfError> {
        if depth > MAX_DEPTH {
            return Err(malformed(format!("type nesting too deep at type id {id}")));
        }
        let Some(ty) = self.get(self.resolve(id)?) else {
            return Ok(None);
        };
        Ok(match ty.kind {
            Kind::Int { .. } | Kind::Composite(_) | Kind::Enum(_) | Kind::Float => {
                Some(ty.size_or_type)
            }
            // The daemon only runs on 64-bit kernels.
            Kind::Ptr => Some(8),
            Kind::Array { elem, nelems } => match self.type_size(elem, depth + 1)? {
                Some(size) => Some(
                    size.checked_mul(nelems)
                        .ok_or_else(|| malformed("array size overflow"))?,
                ),
                None => None,
            },
            Kind::Fwd | Kind::Ref | Kind::FuncProto(_) | Kind::Other => None,
        })
    }
}

/// Reads one type record, including its kind-specific trailing data.
fn read_type(rd: &mut Reader<'_>) -> Result<Type, BtfError> {
    let name_off = rd.u32()?;
    let info = rd.u32()?;
    let size_or_type = rd.u32()?;
    let vlen = info & 0xffff;
    let kind_flag = info >> 31 == 1;
    let kind = match (info >> 24) & 0x1f {
        1 => {
            let enc = rd.u32()?;
            Kind::Int {
                nr_bits: enc & 0xff,
                bit_off: (enc >> 16) & 0xff,
            }
        }
        2 => Kind::Ptr,
        3 => {
            let elem = rd.u32()?;
            let _index_type = rd.u32()?;
            Kind::Array {
                elem,
                nelems: rd.u32()?,
            }
        }
        4 | 5 => Kind::Composite(
            (0..vlen)
                .map(|_| {
                    let (name_off, type_id, offset) = (rd.u32()?, rd.u32()?, rd.u32()?);
                    // With kind_flag, offset packs bitfield size (high 8) and bit offset (low 24).
                    let (bit_offset, bitfield_size) = if kind_flag {
                        (offset & 0x00ff_ffff, offset >> 24)
                    } else {
                        (offset, 0)
                    };
                    Ok(Member {
                        name_off,
                        type_id,
                        bit_offset,
                        bitfield_size,
                    })
                })
                .collect::<Result<_, BtfError>>()?,
        ),
        6 => Kind::Enum(
            (0..vlen)
                .map(|_| {
                    let (name_off, raw) = (rd.u32()?, rd.u32()?);
                    // kind_flag marks a signed enum; otherwise the 32-bit value is unsigned.
                    let value = if kind_flag {
                        i64::from(raw as i32)
                    } else {
                        i64::from(raw)
                    };
                    Ok((name_off, value))
                })
                .collect::<Result<_, BtfError>>()?,
        ),
        7 => Kind::Fwd,
        8..=11 | 18 => Kind::Ref,
        12 => Kind::Other,
        13 => Kind::FuncProto(
            (0..vlen)
                .map(|_| {
                    let _name_off = rd.u32()?;
                    rd.u32()
                })
                .collect::<Result<_, BtfError>>()?,
        ),
        14 | 17 => {
            rd.skip(1, 4)?;
            Kind::Other
        }
        15 => {
            rd.skip(vlen, 12)?;
            Kind::Other
        }
        16 => Kind::Float,
        19 => Kind::Enum(
            (0..vlen)
                .map(|_| {
                    let (name_off, lo, hi) = (rd.u32()?, rd.u32()?, rd.u32()?);
                    // Unsigned values above i64::MAX wrap; no kernel enum we query is that large.
                    Ok((name_off, ((u64::from(hi) << 32) | u64::from(lo)) as i64))
                })
                .collect::<Result<_, BtfError>>()?,
        ),
        other => {
            return Err(malformed(format!(
                "unknown BTF kind {other} at byte {}",
                rd.pos
            )));
        }
    };
    Ok(Type {
        name_off,
        size_or_type,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Assembles a BTF blob: header + type records + string section.
    #[derive(Default)]
    struct Builder {
        types: Vec<u8>,
        strings: Vec<u8>,
        next_id: u32,
    }

    impl Builder {
        fn new() -> Self {
            Builder {
                types: Vec::new(),
                strings: vec![0],
                next_id: 1,
            }
        }
        fn s(&mut self, name: &str) -> u32 {
            if name.is_empty() {
                return 0;
            }
            let off = self.strings.len() as u32;
            self.strings.extend_from_slice(name.as_bytes());
            self.strings.push(0);
            off
        }
        fn words(&mut self, words: &[u32]) {
            for w in words {
                self.types.extend_from_slice(&w.to_le_bytes());
            }
        }
        /// Emits a type header and returns the new type id.
        fn ty(&mut self, name: &str, kind: u32, kflag: bool, vlen: u32, size_or_type: u32) -> u32 {
            let name_off = self.s(name);
            let info = (u32::from(kflag) << 31) | (kind << 24) | vlen;
            self.words(&[name_off, info, size_or_type]);
            self.next_id += 1;
            self.next_id - 1
        }
        fn member(&mut self, name: &str, type_id: u32, offset: u32) {
            let off = self.s(name);
            self.words(&[off, type_id, offset]);
        }
        fn build(&self) -> Vec<u8> {
            let mut out = Vec::new();
            out.extend_from_slice(&BTF_MAGIC.to_le_bytes());
            out.extend_from_slice(&[1, 0]);
            let tl = self.types.len() as u32;
            for w in [HEADER_LEN as u32, 0, tl, tl, self.strings.len() as u32] {
                out.extend_from_slice(&w.to_le_bytes());
            }
            out.extend_from_slice(&self.types);
            out.extend_from_slice(&self.strings);
            out
        }
    }

    /// A small blob exercising every kind; the unused kinds sit before the queried ones so a
    /// wrong trailing-data size would derail every later lookup.
    fn sample() -> Vec<u8> {
        let mut b = Builder::new();
        let int = b.ty("int", 1, false, 0, 4);
        b.words(&[(1 << 24) | 32]);
        let u8t = b.ty("unsigned char", 1, false, 0, 1);
        b.words(&[8]);
        let u3 = b.ty("u3", 1, false, 0, 4);
        b.words(&[3]);
        // Skipped kinds: FUNC_PROTO(2 params), FUNC, VAR, DATASEC(1), FLOAT, DECL_TAG, TYPE_TAG,
        // VOLATILE, RESTRICT.
        let proto = b.ty("", 13, false, 2, int);
        b.words(&[0, int, 0, int]);
        b.ty("func", 12, false, 0, proto);
        let var = b.ty("var", 14, false, 0, int);
        b.words(&[1]);
        b.ty(".data", 15, false, 1, 4);
        b.words(&[var, 0, 4]);
        b.ty("double", 16, false, 0, 8);
        b.ty("tag", 17, false, 0, int);
        b.words(&[u32::MAX]);
        b.ty("ttag", 18, false, 0, int);
        b.ty("", 9, false, 0, int);
        b.ty("", 11, false, 0, int);
        // A forward declaration of `outer` first, so lookup must prefer the sized struct.
        b.ty("outer", 7, false, 0, 0);
        let anon_s = b.ty("", 4, false, 2, 8);
        b.member("x", int, 0);
        b.member("y", int, 32);
        let anon_u = b.ty("", 5, false, 2, 8);
        b.member("u_int", int, 0);
        b.member("", anon_s, 0);
        let ptr = b.ty("", 2, false, 0, int);
        let cptr = b.ty("", 10, false, 0, ptr);
        let arr = b.ty("", 3, false, 0, 0);
        b.words(&[u8t, int, 16]);
        let outer = b.ty("outer", 4, true, 7, 56);
        b.member("a", int, 0);
        b.member("", anon_u, 64);
        b.member("flags", int, (3 << 24) | 128);
        b.member("ptr", ptr, 192);
        b.member("buf", arr, 256);
        b.member("cptr", cptr, 384);
        b.member("odd", u8t, 420);
        b.ty("outer_t", 8, false, 0, outer);
        let legacy = b.ty("legacy", 4, false, 1, 4);
        b.member("bits", u3, 0);
        let _ = legacy;
        b.ty("color", 6, true, 3, 4);
        for (n, v) in [("RED", 0u32), ("GREEN", 5), ("NEG", (-1i32) as u32)] {
            let off = b.s(n);
            b.words(&[off, v]);
        }
        b.ty("ucolor", 6, false, 1, 4);
        let off = b.s("BIG");
        b.words(&[off, u32::MAX]);
        b.ty("big", 19, false, 1, 8);
        let off = b.s("HUGE");
        b.words(&[off, 2, 1]);
        b.build()
    }

    #[test]
    fn synthetic_offsets_and_sizes() -> Result<(), BtfError> {
        let btf = Btf::parse(&sample())?;
        assert_eq!(btf.member_offset("outer", "a")?, 0);
        assert_eq!(btf.member_offset("outer", "u_int")?, 8);
        assert_eq!(btf.member_offset("outer", "x")?, 8);
        assert_eq!(btf.member_offset("outer", "y")?, 12);
        assert_eq!(btf.member_offset("outer", "ptr")?, 24);
        assert_eq!(btf.member_offset("outer", "buf")?, 32);
        assert_eq!(btf.member_offset("outer_t", "cptr")?, 48);
        assert_eq!(btf.member_size("outer", "a")?, 4);
        assert_eq!(btf.member_size("outer", "y")?, 4);
        assert_eq!(btf.member_size("outer", "ptr")?, 8);
        assert_eq!(btf.member_size("outer", "buf")?, 16);
        assert_eq!(btf.member_size("outer", "cptr")?, 8);
        Ok(())
    }

    #[test]
    fn synthetic_errors() -> Result<(), BtfError> {
        let btf = Btf::parse(&sample())?;
        assert!(matches!(
            btf.member_offset("outer", "flags"),
            Err(BtfError::NotByteAddressable {
                bit_offset: 128,
                ..
            })
        ));
        assert!(matches!(
            btf.member_size("outer", "flags"),
            Err(BtfError::NotByteAddressable { .. })
        ));
        assert!(matches!(
            btf.member_offset("outer", "odd"),
            Err(BtfError::NotByteAddressable {
                bit_offset: 420,
                ..
            })
        ));
        assert!(matches!(
            btf.member_offset("legacy", "bits"),
            Err(BtfError::NotByteAddressable { .. })
        ));
        let err = btf.member_offset("outer", "nope").err();
        assert!(matches!(&err, Some(BtfError::MemberNotFound { .. })));
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("`outer` has no member `nope`")
        );
        assert!(matches!(
            btf.member_offset("missing", "a"),
            Err(BtfError::TypeNotFound { .. })
        ));
        assert!(matches!(
            btf.member_offset("color", "a"),
            Err(BtfError::TypeNotFound { .. })
        ));
        assert!(matches!(
            btf.enum_value("color", "BLUE"),
            Err(BtfError::VariantNotFound { .. })
        ));
        assert!(matches!(
            btf.enum_value("outer", "RED"),
            Err(BtfError::TypeNotFound { .. })
        ));
        Ok(())
    }

    #[test]
    fn synthetic_enums_and_names() -> Result<(), BtfError> {
        let btf = Btf::parse(&sample())?;
        assert_eq!(btf.enum_value("color", "GREEN")?, 5);
        assert_eq!(btf.enum_value("color", "NEG")?, -1);
        assert_eq!(btf.enum_value("ucolor", "BIG")?, i64::from(u32::MAX));
        assert_eq!(btf.enum_value("big", "HUGE")?, 0x1_0000_0002);
        let names: Vec<_> = btf
            .enum_variants("color")?
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["RED", "GREEN", "NEG"]);
        assert!(btf.has_type("outer_t") && btf.has_type("double") && btf.has_type("ttag"));
        assert!(!btf.has_type("nope") && !btf.has_type(""));
        Ok(())
    }

    #[test]
    fn truncated_and_garbage_input_is_an_error() {
        let blob = sample();
        for len in 0..blob.len() {
            // Every proper prefix cuts the string or type section short.
            assert!(Btf::parse(&blob[..len]).is_err(), "prefix {len} parsed");
        }
        assert!(Btf::parse(b"garbage garbage garbage garbage").is_err());
        // Flip each byte: parsing and querying may succeed or fail, but must not panic.
        for i in 0..blob.len() {
            let mut bad = blob.clone();
            bad[i] ^= 0xff;
            if let Ok(btf) = Btf::parse(&bad) {
                let _ = btf.member_offset("outer", "y");
                let _ = btf.member_size("outer", "buf");
                let _ = btf.enum_variants("color");
            }
        }
    }

    #[test]
    fn reference_cycle_is_an_error() -> Result<(), BtfError> {
        let mut b = Builder::new();
        b.ty("loop_t", 8, false, 0, 1);
        let s = b.ty("s", 4, false, 1, 4);
        b.member("m", 1, 0);
        b.ty("self_anon", 4, false, 1, 4);
        b.member("", s + 1, 0);
        let btf = Btf::parse(&b.build())?;
        assert!(matches!(
            btf.member_size("s", "m"),
            Err(BtfError::Malformed { .. })
        ));
        assert!(matches!(
            btf.member_offset("self_anon", "zz"),
            Err(BtfError::Malformed { .. })
        ));
        Ok(())
    }

    const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

    fn kernel_btf() -> Option<Btf> {
        let start = std::time::Instant::now();
        match Btf::from_file(Path::new(VMLINUX)) {
            Ok(btf) => {
                eprintln!(
                    "parsed {VMLINUX}: {} types in {:?}",
                    btf.types.len(),
                    start.elapsed()
                );
                Some(btf)
            }
            Err(BtfError::Io { .. }) => {
                eprintln!("skipping: {VMLINUX} not readable");
                None
            }
            Err(e) => panic!("{VMLINUX} failed to parse: {e}"),
        }
    }

    #[test]
    fn kernel_struct_layout() -> Result<(), BtfError> {
        let Some(btf) = kernel_btf() else {
            return Ok(());
        };
        for (ty, member, size) in [
            ("task_struct", "files", 8),
            ("files_struct", "fdt", 8),
            ("fdtable", "max_fds", 4),
            ("fdtable", "fd", 8),
            ("file", "f_inode", 8),
            ("inode", "i_mode", 2),
            ("inode", "i_rdev", 4),
            ("inode", "i_sb", 8),
            ("super_block", "s_dev", 4),
        ] {
            let offset = btf.member_offset(ty, member)?;
            eprintln!("{ty}.{member}: offset {offset}");
            assert_eq!(btf.member_size(ty, member)?, size, "{ty}.{member}");
        }
        // `f_path` lives in an anonymous union of `struct file` on recent kernels.
        assert_eq!(btf.member_size("file", "f_path")?, 16);
        eprintln!(
            "file.f_path: offset {}",
            btf.member_offset("file", "f_path")?
        );
        assert!(btf.has_type("btf_trace_block_rq_issue"));
        assert!(btf.enum_value("req_flag_bits", "__REQ_SYNC").is_ok());
        // `in_iowait` is a one-bit field among the task's flag bits (the writeback waits read
        // it), after `in_execve` in every kernel's layout.
        let (iowait, bits) = btf.bitfield("task_struct", "in_iowait")?;
        let (execve, _) = btf.bitfield("task_struct", "in_execve")?;
        assert_eq!(bits, 1);
        assert!(
            iowait > execve,
            "in_iowait at bit {iowait}, in_execve at {execve}"
        );
        assert!(matches!(
            btf.bitfield("task_struct", "nvcsw"),
            Err(BtfError::NotABitfield { .. })
        ));
        assert!(matches!(
            btf.member_offset("task_struct", "in_iowait"),
            Err(BtfError::NotByteAddressable { .. })
        ));
        Ok(())
    }

    /// Extracts `{ N, "name" }` pairs from the writeback_start print fmt (a deliberately crude
    /// parser: the real one lives in tracefs.rs, which this module must not depend on).
    fn wb_reason_table() -> Option<Vec<(i64, String)>> {
        let path = "/sys/kernel/tracing/events/writeback/writeback_start/format";
        let text = std::fs::read_to_string(path).ok()?;
        let (_, table) = text.split_once("__print_symbolic(REC->reason,")?;
        let table = table.split_once(')')?.0;
        let pairs = table
            .split('{')
            .skip(1)
            .filter_map(|e| {
                let (v, n) = e.split_once(',')?;
                Some((v.trim().parse().ok()?, n.split('"').nth(1)?.to_owned()))
            })
            .collect();
        Some(pairs)
    }

    #[test]
    fn kernel_wb_reason_matches_tracefs() -> Result<(), BtfError> {
        let Some(btf) = kernel_btf() else {
            return Ok(());
        };
        assert_eq!(btf.enum_value("wb_reason", "WB_REASON_SYNC")?, 2);
        let Some(table) = wb_reason_table() else {
            eprintln!("skipping cross-check: writeback_start format not readable");
            return Ok(());
        };
        assert!(table.len() >= 8, "{table:?}");
        for (value, name) in table {
            let variant = format!("WB_REASON_{}", name.to_uppercase());
            assert_eq!(btf.enum_value("wb_reason", &variant)?, value, "{variant}");
        }
        Ok(())
    }

    /// tp_btf prototypes: the `struct request *` argument is found whether or not a
    /// `struct request_queue *` precedes it (the 5.11 change), and anonymous enumerators resolve.
    #[test]
    fn tp_btf_argument_index_and_anonymous_enumerators() -> Result<(), BtfError> {
        let mut b = Builder::new();
        let void_ptr = b.ty("", 2, false, 0, 0);
        let rq = b.ty("request", 4, false, 0, 8);
        let q = b.ty("request_queue", 4, false, 0, 8);
        let rq_ptr = b.ty("", 2, false, 0, rq);
        let q_ptr = b.ty("", 2, false, 0, q);
        let new_proto = b.ty("", 13, false, 2, 0);
        b.words(&[0, void_ptr, 0, rq_ptr]);
        let old_proto = b.ty("", 13, false, 3, 0);
        b.words(&[0, void_ptr, 0, q_ptr, 0, rq_ptr]);
        let new_fn = b.ty("", 2, false, 0, new_proto);
        let old_fn = b.ty("", 2, false, 0, old_proto);
        b.ty("btf_trace_new", 8, false, 0, new_fn);
        b.ty("btf_trace_old", 8, false, 0, old_fn);
        b.ty("", 6, false, 2, 4);
        for (n, v) in [("QUEUE_FLAG_DYING", 0u32), ("QUEUE_FLAG_STATS", 7)] {
            let off = b.s(n);
            b.words(&[off, v]);
        }
        let btf = Btf::parse(&b.build())?;
        assert_eq!(btf.tp_btf_arg_index("new", "request")?, 0);
        assert_eq!(btf.tp_btf_arg_index("old", "request")?, 1);
        assert_eq!(btf.tp_btf_arg_index("old", "request_queue")?, 0);
        assert!(matches!(
            btf.tp_btf_arg_index("new", "bio"),
            Err(BtfError::NoSuchArgument { .. })
        ));
        assert!(btf.tp_btf_arg_index("missing", "request").is_err());
        assert_eq!(btf.tp_btf_arg_count("new")?, 1);
        assert_eq!(btf.tp_btf_arg_count("old")?, 2);
        assert!(btf.tp_btf_arg_count("missing").is_err());
        assert_eq!(btf.enumerator_value("QUEUE_FLAG_STATS")?, 7);
        assert!(btf.enumerator_value("QUEUE_FLAG_NOPE").is_err());
        Ok(())
    }
}
