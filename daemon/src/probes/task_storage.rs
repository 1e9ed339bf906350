//! Task storage maps on kernels whose tracing programs cannot use them.
//!
//! The object declares its per-thread state maps as BTF map definitions of type
//! `BPF_MAP_TYPE_TASK_STORAGE` (`probe-ebpf/src/kernel/task_storage.rs`). Tracing programs may use task
//! storage since 5.13; before, the kernel refuses to create such a map for us, which would fail
//! the whole object. There the programs take their thread-id-keyed hash paths (a frozen global,
//! `CurrentTask::task_storage`), and the definitions are rewritten here into one-entry hashes
//! that nothing uses, so that the object loads unchanged otherwise.
//!
//! In a BTF map definition the map type is the element count of the array that the `type`
//! member points to; the rewrite changes that count in the object's `.BTF` section, for the
//! variables of the `.maps` section only.

use std::borrow::Cow;

/// `BPF_MAP_TYPE_HASH` and `BPF_MAP_TYPE_TASK_STORAGE` (include/uapi/linux/bpf.h).
const MAP_TYPE_HASH: u32 = 1;
const MAP_TYPE_TASK_STORAGE: u32 = 29;

/// The task storage maps of the object, for their fallback size.
pub const MAPS: [&str; 5] = probe_common::object_names::TASK_STORAGE_MAPS;

/// Why the object could not be rewritten.
#[derive(Debug, thiserror::Error)]
#[error("rewriting the task storage maps of the eBPF object: {0}")]
pub struct RewriteError(&'static str);

/// BTF kinds (include/uapi/linux/btf.h) this walk needs by name.
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;

/// `object` with every task storage map definition of `.maps` turned into a hash; unchanged
/// (borrowed) when it has none.
pub fn as_hashes(object: &[u8]) -> Result<Cow<'_, [u8]>, RewriteError> {
    let (start, len) = btf_section(object)?;
    let btf = object
        .get(start..start + len)
        .ok_or(RewriteError(".BTF lies outside the file"))?;
    let patches = task_storage_counts(btf)?;
    if patches.is_empty() {
        return Ok(Cow::Borrowed(object));
    }
    let mut out = object.to_vec();
    for at in patches {
        out[start + at..start + at + 4].copy_from_slice(&MAP_TYPE_HASH.to_le_bytes());
    }
    Ok(Cow::Owned(out))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?)).ok()
}

/// Offset and size of the `.BTF` section of a little-endian ELF64 file.
fn btf_section(elf: &[u8]) -> Result<(usize, usize), RewriteError> {
    const BAD: RewriteError = RewriteError("not a little-endian ELF64 file");
    if elf.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Err(BAD);
    }
    let shoff = u64_at(elf, 0x28).ok_or(BAD)?;
    let shentsize = usize::from(u16_at(elf, 0x3a).ok_or(BAD)?);
    let shnum = usize::from(u16_at(elf, 0x3c).ok_or(BAD)?);
    let shstrndx = usize::from(u16_at(elf, 0x3e).ok_or(BAD)?);
    let header = |i: usize| shoff + i * shentsize;
    let names = u64_at(elf, header(shstrndx) + 24).ok_or(BAD)?;
    for i in 0..shnum {
        let h = header(i);
        let name = names + u32_at(elf, h).ok_or(BAD)? as usize;
        if elf.get(name..name + 5) == Some(b".BTF\0".as_slice()) {
            return Ok((
                u64_at(elf, h + 24).ok_or(BAD)?,
                u64_at(elf, h + 32).ok_or(BAD)?,
            ));
        }
    }
    Err(RewriteError("no .BTF section"))
}

/// One BTF type: its kind, vlen, `size_or_type`, and where its trailing data starts.
#[derive(Clone, Copy)]
struct Type {
    name: u32,
    kind: u32,
    vlen: usize,
    size_or_type: u32,
    extra: usize,
}

/// Offsets, within `btf`, of the element counts of the `type` arrays of the `.maps` variables
/// that say `BPF_MAP_TYPE_TASK_STORAGE`.
fn task_storage_counts(btf: &[u8]) -> Result<Vec<usize>, RewriteError> {
    const BAD: RewriteError = RewriteError("malformed .BTF");
    if u16_at(btf, 0) != Some(0xeb9f) {
        return Err(BAD);
    }
    let hdr_len = u32_at(btf, 4).ok_or(BAD)? as usize;
    let types_at = hdr_len + u32_at(btf, 8).ok_or(BAD)? as usize;
    let types_len = u32_at(btf, 12).ok_or(BAD)? as usize;
    let strings_at = hdr_len + u32_at(btf, 16).ok_or(BAD)? as usize;
    let name = |off: u32| -> &[u8] {
        let s = btf.get(strings_at + off as usize..).unwrap_or_default();
        &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())]
    };
    // Type id i is types[i - 1].
    let mut types = Vec::new();
    let mut at = types_at;
    while at < types_at + types_len {
        let info = u32_at(btf, at + 4).ok_or(BAD)?;
        let t = Type {
            name: u32_at(btf, at).ok_or(BAD)?,
            kind: (info >> 24) & 0x1f,
            vlen: (info & 0xffff) as usize,
            size_or_type: u32_at(btf, at + 8).ok_or(BAD)?,
            extra: at + 12,
        };
        let extra = match t.kind {
            1 | 14 | 17 => 4,
            3 => 12,
            4 | 5 | 15 | 19 => 12 * t.vlen,
            6 | 13 => 8 * t.vlen,
            0 | 2 | 7..=12 | 16 | 18 => 0,
            _ => return Err(RewriteError("unknown BTF kind")),
        };
        types.push(t);
        at = t.extra + extra;
    }
    let ty = |id: u32| types.get((id as usize).wrapping_sub(1)).copied();
    let mut counts = Vec::new();
    for sec in types
        .iter()
        .filter(|t| t.kind == KIND_DATASEC && name(t.name) == b".maps")
    {
        for v in 0..sec.vlen {
            let var = ty(u32_at(btf, sec.extra + 12 * v).ok_or(BAD)?).ok_or(BAD)?;
            if var.kind != KIND_VAR {
                continue;
            }
            let mut def = ty(var.size_or_type).ok_or(BAD)?;
            while matches!(def.kind, KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST) {
                def = ty(def.size_or_type).ok_or(BAD)?;
            }
            if def.kind != KIND_STRUCT {
                continue;
            }
            for m in 0..def.vlen {
                let member = def.extra + 12 * m;
                if name(u32_at(btf, member).ok_or(BAD)?) != b"type" {
                    continue;
                }
                let ptr = ty(u32_at(btf, member + 4).ok_or(BAD)?).ok_or(BAD)?;
                let array = (ptr.kind == KIND_PTR)
                    .then(|| ty(ptr.size_or_type))
                    .flatten()
                    .filter(|a| a.kind == KIND_ARRAY);
                if let Some(a) = array
                    && u32_at(btf, a.extra + 8) == Some(MAP_TYPE_TASK_STORAGE)
                {
                    counts.push(a.extra + 8);
                }
            }
        }
    }
    counts.sort_unstable();
    counts.dedup();
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real object: every task storage map becomes a hash, and nothing else changes.
    #[test]
    fn rewrites_only_the_task_storage_definitions() {
        let object = crate::probes::OBJECT;
        let (start, len) = btf_section(object).unwrap();
        let btf = &object[start..start + len];
        let counts = task_storage_counts(btf).unwrap();
        assert!(!counts.is_empty(), "the object declares task storage maps");
        let rewritten = as_hashes(object).unwrap();
        let changed: Vec<usize> = object
            .iter()
            .zip(rewritten.iter())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(i, _)| i)
            .collect();
        assert!(!changed.is_empty());
        assert!(
            changed.iter().all(|i| counts
                .iter()
                .any(|c| (start + c..start + c + 4).contains(i))),
            "{changed:?}"
        );
        let again = &rewritten[start..start + len];
        assert!(task_storage_counts(again).unwrap().is_empty());
    }

    #[test]
    fn refuses_what_is_not_elf() {
        assert!(as_hashes(b"not an object").is_err());
    }
}
