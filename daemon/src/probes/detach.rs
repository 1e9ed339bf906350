//! Detaching every program at shutdown, on a few threads.
//!
//! Closing the last perf event of a classic tracepoint waits for RCU grace periods
//! (`perf_trace_event_unreg` → `tracepoint_synchronize_unregister`), tens of milliseconds each.
//! Dropping the object detaches its programs one after the other, about 1.2 s for 29 probes here;
//! detaching on a few threads lets the waits share grace periods, so shutdown stays well inside
//! systemd's stop timeout.
//!
//! Only a few: unregistering also patches kernel text (the tracepoint's static key, under
//! `text_mutex`, with an IPI to every CPU) and takes `event_mutex` and `tracepoints_mutex`, so
//! beyond a few threads the rest mostly queue on the same locks. With one thread per program
//! (36), a kernel soft-lockup warning in a detaching thread was seen once on a small, slow
//! machine (2 emulated CPUs). On the development kernel under load, 36 probes detach in
//! 0.3–0.6 s on 4 threads (0.05–1.2 s on 36).

use aya::{
    Ebpf,
    programs::{Program, ProgramError},
};

/// Threads that detach at once: enough to overlap the RCU grace-period waits.
pub const DETACH_THREADS: usize = 4;

/// Detaches and unloads every program of `ebpf`, then drops it (closing the maps).
pub fn detach_all(mut ebpf: Ebpf) {
    let mut shares: Vec<Vec<(&str, &mut Program)>> =
        (0..DETACH_THREADS).map(|_| Vec::new()).collect();
    for (i, program) in ebpf.programs_mut().enumerate() {
        shares[i % DETACH_THREADS].push(program);
    }
    std::thread::scope(|scope| {
        for share in shares.iter_mut().filter(|s| !s.is_empty()) {
            let spawned = std::thread::Builder::new()
                .name("wbscope-detach".into())
                .spawn_scoped(scope, || unload_each(share));
            if let Err(err) = spawned {
                // The closure was not run: these programs are unloaded by the drop below instead.
                tracing::debug!("detaching on this thread ({err})");
            }
        }
    });
    drop(shares);
    drop(ebpf);
}

fn unload_each(share: &mut [(&str, &mut Program)]) {
    for (name, program) in share.iter_mut() {
        unload(name, program);
    }
}

fn unload(name: &str, program: &mut Program) {
    let result: Result<(), ProgramError> = match program {
        Program::TracePoint(p) => p.unload(),
        Program::BtfTracePoint(p) => p.unload(),
        Program::RawTracePoint(p) => p.unload(),
        Program::FEntry(p) => p.unload(),
        Program::FExit(p) => p.unload(),
        // Other kinds are not used by wbscope; dropping the object unloads them.
        _ => Ok(()),
    };
    match result {
        // Skipped, disabled or failed probes were never loaded.
        Ok(()) | Err(ProgramError::NotLoaded) => {}
        Err(err) => tracing::warn!("detaching {name}: {err}"),
    }
}
