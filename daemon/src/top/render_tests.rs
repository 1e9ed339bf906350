use ratatui::{Terminal, backend::TestBackend};

use super::*;
use crate::{
    families::stall_events::event::Stall,
    top::model::{DeviceRow, ProcessRow},
};

fn screen_text(view: &View, help: bool, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|f| {
            draw(
                f,
                &Screen {
                    view,
                    source: "daemon at 127.0.0.1:19617",
                    sort: SortKey::SyncTime,
                    device: None,
                    help,
                    error: None,
                },
            )
        })
        .unwrap();
    let buffer = terminal.backend().buffer();
    let mut text = String::new();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            text.push_str(buffer[(x, y)].symbol());
        }
        text.push('\n');
    }
    text
}

fn view() -> View {
    View {
        interval_s: Some(1.0),
        devices: vec![DeviceRow {
            device: "loop3".into(),
            dirty_bytes: Some(4096.0),
            writeback_bytes: Some(0.0),
            write_bps: Some(2.0 * 1024.0 * 1024.0),
            bdi_bps: None,
            sync_calls_per_s: Some(3.0),
            sync_p50: Some(0.012),
            sync_p99: Some(0.5),
        }],
        processes: vec![ProcessRow {
            tgid: 4242,
            comm: "fsync-loop".into(),
            sync_ms_per_s: 900.0,
            throttle_ms_per_s: 0.0,
            sync_calls_per_s: 3.0,
            sync_total_s: 12.0,
            throttle_total_s: 0.0,
            cgroup: "/system.slice/db.service".into(),
        }],
        stalls: vec![Stall {
            time: "2026-07-01T12:00:03.123456Z".into(),
            kind: "fsync".into(),
            device: "loop3".into(),
            pid: 4242,
            tgid: 4242,
            comm: "fsync-loop".into(),
            inode: 12,
            duration_ns: 3_000_000_000,
            ..Stall::default()
        }],
        ..View::default()
    }
}

#[test]
fn frame_shows_devices_processes_and_stalls() {
    let text = screen_text(&view(), false, 200, 40);
    let line = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} not on screen:\n{text}"))
            .to_owned()
    };
    assert!(line("wbscope top").contains("last 1.0 s"));
    let dev = line("│loop3");
    for cell in ["4.0 KiB", "2.0 MiB/s", "12.0ms", "500.0ms"] {
        assert!(dev.contains(cell), "{cell} missing from {dev}");
    }
    let proc = line("4242    fsync-loop");
    assert!(proc.contains("900"), "{proc}");
    // The last column is cut to its width.
    assert!(proc.contains("/system.slice/db"), "{proc}");
    assert!(line("12:00:03.123").contains("3.00s"));
    assert!(text.contains("Flusher work") && text.contains("Block latency"));
    assert!(!text.contains("Keys"));
}

#[test]
fn help_overlay_lists_the_keys() {
    let text = screen_text(&view(), true, 120, 30);
    assert!(text.contains("Keys"), "{text}");
    assert!(text.contains("q  quit"), "{text}");
    assert!(text.contains("d  cycle the device filter"), "{text}");
}

#[test]
fn tiny_terminal_does_not_panic() {
    let _ = screen_text(&view(), true, 10, 3);
}
