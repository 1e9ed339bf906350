//! Empty library target: it lets the daemon declare `probe-ebpf` as a build dependency, so cargo
//! rebuilds the daemon when the probes change. The programs are in the `wbscope-probes` binary.
#![no_std]
