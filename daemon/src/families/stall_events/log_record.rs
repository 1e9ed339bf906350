//! Stall events as log records (`[stalls] log_events`): one record per event, target
//! `wbscope::stall`, message `stall`, with the fields of docs/stall-records.md. In logfmt and
//! JSON log formats every field is a key of its own, so journald → Loki / Elasticsearch
//! pipelines can search stalls without parsing the message.

use super::{context::verdict::dominant, event::Stall};

/// The record's fields, in schema order (docs/stall-records.md). Values are strings, as the
/// log formats print them.
pub fn fields(s: &Stall) -> Vec<(&'static str, String)> {
    let mut f = vec![
        ("schema", "1".to_owned()),
        ("time", s.time.clone()),
        ("kind", s.kind.clone()),
        ("device", s.device.clone()),
        ("pid", s.pid.to_string()),
        ("tgid", s.tgid.to_string()),
        ("comm", s.comm.clone()),
        ("cgroup", s.cgroup.clone()),
        ("inode", s.inode.to_string()),
        ("duration_ns", s.duration_ns.to_string()),
        ("writeback_wait_ns", s.writeback_wait_ns.to_string()),
        ("throttle_ns", s.throttle_ns.to_string()),
        ("journal_ns", s.journal_ns.to_string()),
        ("flush_ns", s.flush_ns.to_string()),
        ("cause", s.cause.clone()),
        ("verdict", s.verdict.clone()),
    ];
    if let Some(ctx) = &s.context {
        f.push(("device_written_bytes", ctx.device_written_bytes.to_string()));
        if let Some((text, top)) = dominant(ctx) {
            f.push(("dominant_source", text));
            f.push(("dominant_share", format!("{:.3}", top.share)));
        }
        f.push(("context", serde_json::to_string(ctx).unwrap_or_default()));
    }
    f
}

/// Writes `s` as one log record at info level.
pub fn emit(s: &Stall) {
    let f = fields(s);
    let get = |k: &str| {
        f.iter()
            .find(|(name, _)| *name == k)
            .map_or("", |(_, v)| v.as_str())
    };
    tracing::info!(
        target: "wbscope::stall",
        schema = get("schema"),
        time = get("time"),
        kind = get("kind"),
        device = get("device"),
        pid = get("pid"),
        tgid = get("tgid"),
        comm = get("comm"),
        cgroup = get("cgroup"),
        inode = get("inode"),
        duration_ns = get("duration_ns"),
        writeback_wait_ns = get("writeback_wait_ns"),
        throttle_ns = get("throttle_ns"),
        journal_ns = get("journal_ns"),
        flush_ns = get("flush_ns"),
        cause = get("cause"),
        verdict = get("verdict"),
        device_written_bytes = get("device_written_bytes"),
        dominant_source = get("dominant_source"),
        dominant_share = get("dominant_share"),
        context = get("context"),
        "stall"
    );
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::families::stall_events::context::{SourceShare, StallContext};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut b) = self.0.lock() {
                b.extend_from_slice(buf);
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The JSON log line of a stall is one object whose keys are the schema's, with the
    /// verdict, the cause and the context's dominant source.
    #[test]
    fn json_record_carries_the_schema() {
        let mut stall = Stall {
            time: "2026-07-01T12:00:03.123456Z".into(),
            kind: "fsync".into(),
            device: "loop5".into(),
            pid: 4242,
            tgid: 4242,
            comm: "dd".into(),
            inode: 12,
            duration_ns: 6_200_000_000,
            writeback_wait_ns: 5_900_000_000,
            context: Some(StallContext {
                device_written_bytes: 1 << 30,
                sources: vec![SourceShare {
                    source: "flusher".into(),
                    sync_mode: "none".into(),
                    reason: "sync".into(),
                    bytes: 1 << 30,
                    share: 1.0,
                }],
                ..StallContext::default()
            }),
            ..Stall::default()
        };
        stall.cause = crate::families::stall_events::context::verdict::cause(&stall)
            .0
            .label()
            .into();
        stall.verdict = crate::families::stall_events::context::verdict::verdict(
            &stall,
            stall.context.as_ref(),
        );
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .event_format(crate::logging::structured::Structured::Json)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || emit(&stall));
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        let record: serde_json::Value = serde_json::from_str(lines[0]).expect("one JSON object");
        assert_eq!(record["msg"], "stall");
        assert_eq!(record["kind"], "fsync");
        assert_eq!(record["tgid"], "4242");
        assert_eq!(record["cause"], "writeback_wait");
        assert_eq!(record["dominant_source"], "flusher work none:sync");
        assert_eq!(record["device_written_bytes"], (1u64 << 30).to_string());
        assert_eq!(
            record["verdict"],
            "fsync 6.2s loop5 dd[4242]: 5.9s waiting on writeback; device wrote 1.0 GiB \
             meanwhile, 100% for flusher work none:sync"
        );
        let ctx: StallContext =
            serde_json::from_str(record["context"].as_str().expect("a string")).expect("context");
        assert_eq!(ctx, stall.context.clone().unwrap());
        for (key, _) in fields(&stall) {
            assert!(record.get(key).is_some(), "{key} missing from {record}");
        }
    }
}
