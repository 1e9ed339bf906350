//! The embedded eBPF object holds exactly the maps, globals and programs that the daemon names:
//! maps and globals as `probe_common::object_names` declares them, programs as the families'
//! probe lists do. Both sides spell each name separately (aya names a map after its static),
//! so this is what makes a rename on one side only fail before anything is loaded.

use std::collections::BTreeSet;

use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};
use probe_common::object_names::{GLOBALS, MAPS};

use crate::families;
use crate::probes::OBJECT;

/// What the object defines, by kind.
#[derive(Default)]
struct Defined {
    maps: BTreeSet<String>,
    globals: BTreeSet<String>,
    programs: BTreeSet<String>,
}

fn defined(elf: &[u8]) -> Defined {
    let file = object::File::parse(elf).expect("the embedded eBPF object is an ELF file");
    let mut defined = Defined::default();
    for symbol in file.symbols() {
        let (Ok(name), Some(index)) = (symbol.name(), symbol.section_index()) else {
            continue;
        };
        let section = file
            .section_by_index(index)
            .expect("a symbol's section exists");
        let section_name = section.name().unwrap_or_default();
        match symbol.kind() {
            // Legacy map definitions in `maps`, BTF-defined ones (task storage) in `.maps`.
            SymbolKind::Data if section_name == "maps" || section_name == ".maps" => {
                defined.maps.insert(name.to_owned());
            }
            // Rust's own constants (string literals, tables) are `anon.*` symbols in .rodata;
            // the load-time globals are named `#[no_mangle]` statics there.
            SymbolKind::Data
                if matches!(
                    section.kind(),
                    SectionKind::ReadOnlyData | SectionKind::Data
                ) && !name.starts_with("anon.")
                    && name != "LICENSE" =>
            {
                defined.globals.insert(name.to_owned());
            }
            // Programs live in their own sections (`tracepoint/…`, `tp_btf/…`); `.text` holds
            // the compiler's memcpy and friends.
            SymbolKind::Text if section_name != ".text" => {
                defined.programs.insert(name.to_owned());
            }
            _ => {}
        }
    }
    defined
}

fn declared(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

fn family_programs() -> BTreeSet<String> {
    families::all()
        .iter()
        .flat_map(|f| {
            f.probes().iter().flat_map(|p| {
                std::iter::once(p.program)
                    .chain(p.fentry.map(|f| f.program))
                    .chain(p.fentry.and_then(|f| f.companion).map(|c| c.program))
                    .map(str::to_owned)
            })
        })
        .collect()
}

/// `what` names in the object and in the declarations, both ways.
fn assert_same(what: &str, in_object: &BTreeSet<String>, declared: &BTreeSet<String>) {
    let undeclared: Vec<_> = in_object.difference(declared).collect();
    let missing: Vec<_> = declared.difference(in_object).collect();
    assert!(
        undeclared.is_empty() && missing.is_empty(),
        "{what}: in the eBPF object but not declared: {undeclared:?}; declared but not in the \
         object: {missing:?}"
    );
}

#[test]
fn every_map_global_and_program_of_the_object_is_declared_and_nothing_else() {
    let object = defined(OBJECT);
    assert!(
        object.maps.len() > 10 && object.globals.len() > 10 && object.programs.len() > 30,
        "too little found in the object: {} maps, {} globals, {} programs",
        object.maps.len(),
        object.globals.len(),
        object.programs.len()
    );
    assert_same("maps", &object.maps, &declared(MAPS));
    assert_same("globals", &object.globals, &declared(GLOBALS));
    assert_same("programs", &object.programs, &family_programs());
}

#[test]
fn declarations_name_each_thing_once() {
    for (what, names) in [("maps", MAPS), ("globals", GLOBALS)] {
        assert_eq!(
            declared(names).len(),
            names.len(),
            "a {what} name is declared twice"
        );
    }
}
