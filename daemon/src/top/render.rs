//! Drawing one frame with ratatui: header, device table, flusher work and block latency side by
//! side, processes and the latest stalls side by side, and the help overlay.

use ratatui::{
    Frame,
    layout::{Constraint, Layout, Rect},
    style::{Modifier, Style},
    text::Line,
    widgets::{Block, Clear, Paragraph, Row, Table},
};

use super::{
    model::{SortKey, View},
    sections::{self, Section},
};

/// What the frame shows besides the data.
pub struct Screen<'a> {
    pub view: &'a View,
    pub source: &'a str,
    pub sort: SortKey,
    pub device: Option<&'a str>,
    pub help: bool,
    /// The last fetch error, shown in the footer while the previous data stays on screen.
    pub error: Option<&'a str>,
}

/// The keys, for the help overlay and the footer.
pub const HELP: &[&str] = &[
    "q  quit",
    "s  cycle the process sort (sync time, throttle time, sync calls)",
    "d  cycle the device filter (all, then each device seen)",
    "?  show or hide this help",
    "",
    "Rates and p50/p99 cover the last refresh interval. Processes are",
    "not per device: the kernel keeps one total per process.",
];

fn table(s: &Section) -> Table<'_> {
    let header = Row::new(s.header.iter().copied())
        .style(Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED));
    let rows = s
        .rows
        .iter()
        .map(|r| Row::new(r.iter().map(String::as_str)));
    let widths = s.widths.iter().map(|w| Constraint::Length(*w));
    Table::new(rows, widths)
        .header(header)
        .block(Block::bordered().title(s.title.as_str()))
}

/// Rows a table of `rows` lines needs with borders and header.
fn height(rows: usize, min: u16) -> u16 {
    u16::try_from(rows)
        .unwrap_or(u16::MAX)
        .saturating_add(3)
        .max(min)
}

/// Draws the frame.
pub fn draw(frame: &mut Frame<'_>, s: &Screen<'_>) {
    let v = s.view;
    let [head, devices, middle, bottom, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(height(v.devices.len(), 4).min(14)),
        Constraint::Length(height(v.flusher.len().max(v.latency.len()), 4).min(12)),
        Constraint::Min(5),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let interval = v.interval_s.map_or_else(
        || "waiting for a second sample".into(),
        |i| format!("last {i:.1} s"),
    );
    let title = format!(
        " wbscope top | {} | {interval} | device: {} | sort: {} | ? help",
        s.source,
        s.device.unwrap_or("all"),
        s.sort.label()
    );
    frame.render_widget(
        Paragraph::new(title).style(Style::new().add_modifier(Modifier::BOLD)),
        head,
    );
    let (dev, fl, lat, procs, stalls) = (
        sections::devices(v),
        sections::flusher(v),
        sections::latency(v),
        sections::processes(v, s.sort),
        sections::stalls(v),
    );
    frame.render_widget(table(&dev), devices);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(middle);
    frame.render_widget(table(&fl), left);
    frame.render_widget(table(&lat), right);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(bottom);
    frame.render_widget(table(&procs), left);
    frame.render_widget(table(&stalls), right);
    let footer = match (s.error, v.notes.first()) {
        (Some(err), _) => format!(" error: {err}"),
        (None, Some(note)) => format!(" note: {note}"),
        (None, None) => " q quit  s sort  d device  ? help".into(),
    };
    frame.render_widget(Paragraph::new(footer), foot);
    if s.help {
        help(frame);
    }
}

fn help(frame: &mut Frame<'_>) {
    let area = frame.area();
    let width = 72.min(area.width);
    let height = (HELP.len() as u16 + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    frame.render_widget(Clear, popup);
    let lines: Vec<Line<'_>> = HELP.iter().map(|l| Line::from(*l)).collect();
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" Keys ")),
        popup,
    );
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
