//! Detaching every program at shutdown, in parallel.
//!
//! Closing the last perf event of a classic tracepoint waits for RCU grace periods
//! (`perf_trace_event_unreg` → `tracepoint_synchronize_unregister`), tens of milliseconds each.
//! Dropping the object detaches its programs one after the other, about 1.2 s for 29 probes here;
//! detaching each program on its own thread lets the waits share grace periods, so shutdown stays
//! well inside systemd's stop timeout.

use aya::{
    Ebpf,
    programs::{Program, ProgramError},
};

/// Detaches and unloads every program of `ebpf`, then drops it (closing the maps).
pub fn detach_all(mut ebpf: Ebpf) {
    std::thread::scope(|scope| {
        for (name, program) in ebpf.programs_mut() {
            let spawned = std::thread::Builder::new()
                .name("wbscope-detach".into())
                .spawn_scoped(scope, || unload(name, program));
            if let Err(err) = spawned {
                // The closure was not run: the program is unloaded by the drop below instead.
                tracing::debug!("detaching {name} on this thread ({err})");
            }
        }
    });
    drop(ebpf);
}

fn unload(name: &str, program: &mut Program) {
    let result: Result<(), ProgramError> = match program {
        Program::TracePoint(p) => p.unload(),
        Program::BtfTracePoint(p) => p.unload(),
        Program::RawTracePoint(p) => p.unload(),
        // Other kinds are not used by wbscope; dropping the object unloads them.
        _ => Ok(()),
    };
    if let Err(err) = result {
        tracing::warn!("detaching {name}: {err}");
    }
}
