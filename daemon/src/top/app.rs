//! The interactive loop: refresh every interval, redraw, and handle keys in between; and the
//! plain loop for a stdout that is not a terminal.

use std::{
    io::Write as _,
    time::{Duration, Instant},
};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use super::{
    TopError,
    model::{self, SortKey, View},
    render::{self, Screen},
    source::{Snapshot, Source},
    text,
};

/// What the keys change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Controls {
    pub sort: SortKey,
    pub device: Option<String>,
    pub help: bool,
}

/// What a key asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Quit,
    Redraw,
    Nothing,
}

impl Controls {
    /// Applies one key; `devices` are the ones `d` cycles through (after "all").
    pub fn on_key(&mut self, code: KeyCode, ctrl: bool, devices: &[String]) -> Action {
        match code {
            KeyCode::Char('q') => Action::Quit,
            KeyCode::Char('c') if ctrl => Action::Quit,
            KeyCode::Esc if self.help => {
                self.help = false;
                Action::Redraw
            }
            KeyCode::Esc => Action::Quit,
            KeyCode::Char('s') => {
                self.sort = self.sort.next();
                Action::Redraw
            }
            KeyCode::Char('d') => {
                self.device = next_device(self.device.as_deref(), devices);
                Action::Redraw
            }
            KeyCode::Char('?') | KeyCode::Char('h') => {
                self.help = !self.help;
                Action::Redraw
            }
            _ => Action::Nothing,
        }
    }
}

/// all → first device → … → last device → all.
fn next_device(current: Option<&str>, devices: &[String]) -> Option<String> {
    match current {
        None => devices.first().cloned(),
        Some(cur) => devices
            .iter()
            .position(|d| d == cur)
            .and_then(|i| devices.get(i + 1))
            .cloned(),
    }
}

/// Two snapshots and the view between them.
#[derive(Default)]
struct Frames {
    prev: Option<Snapshot>,
    cur: Option<Snapshot>,
    error: Option<String>,
}

impl Frames {
    fn refresh(&mut self, source: &Source) {
        match source.fetch() {
            Ok(s) => {
                self.prev = self.cur.replace(s);
                self.error = None;
            }
            Err(e) => self.error = Some(crate::error_chain::error_chain(&e)),
        }
    }

    fn view(&self, c: &Controls) -> View {
        self.cur.as_ref().map_or_else(View::default, |cur| {
            model::build(self.prev.as_ref(), cur, c.device.as_deref(), c.sort)
        })
    }

    fn devices(&self) -> Vec<String> {
        self.cur
            .as_ref()
            .map(model::device_names)
            .unwrap_or_default()
    }
}

/// The terminal view until `q`.
pub fn interactive(source: &Source, interval: Duration, mut c: Controls) -> Result<(), TopError> {
    let mut terminal = ratatui::try_init().map_err(TopError::Terminal)?;
    let result = (|| {
        let mut frames = Frames::default();
        frames.refresh(source);
        let mut next = Instant::now() + interval;
        loop {
            let view = frames.view(&c);
            terminal
                .draw(|f| {
                    render::draw(
                        f,
                        &Screen {
                            view: &view,
                            source: &source.label,
                            sort: c.sort,
                            device: c.device.as_deref(),
                            help: c.help,
                            error: frames.error.as_deref(),
                        },
                    )
                })
                .map_err(TopError::Terminal)?;
            let wait = next.saturating_duration_since(Instant::now());
            if event::poll(wait).map_err(TopError::Terminal)? {
                if let Event::Key(key) = event::read().map_err(TopError::Terminal)?
                    && key.kind == KeyEventKind::Press
                {
                    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
                    if c.on_key(key.code, ctrl, &frames.devices()) == Action::Quit {
                        return Ok(());
                    }
                }
                continue;
            }
            frames.refresh(source);
            next = Instant::now() + interval;
        }
    })();
    ratatui::restore();
    result
}

/// A summary every interval, `iterations` times (forever without).
pub fn plain(
    source: &Source,
    interval: Duration,
    c: &Controls,
    iterations: Option<u64>,
) -> Result<(), TopError> {
    let mut frames = Frames::default();
    frames.refresh(source);
    let mut printed = 0;
    while iterations.is_none_or(|n| printed < n) {
        std::thread::sleep(interval);
        frames.refresh(source);
        if let Some(err) = &frames.error {
            eprintln!("wbscope top: {err}");
            continue;
        }
        let view = frames.view(c);
        let summary = text::summary(&view, &source.label, c.sort, c.device.as_deref());
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{summary}")
            .and_then(|()| out.flush())
            .is_err()
        {
            return Ok(()); // stdout closed (e.g. `| head`)
        }
        printed += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_change_controls() {
        let devices = vec!["loop3".to_owned(), "sda".to_owned()];
        let mut c = Controls::default();
        assert_eq!(
            c.on_key(KeyCode::Char('s'), false, &devices),
            Action::Redraw
        );
        assert_eq!(c.sort, SortKey::ThrottleTime);
        c.on_key(KeyCode::Char('d'), false, &devices);
        assert_eq!(c.device.as_deref(), Some("loop3"));
        c.on_key(KeyCode::Char('d'), false, &devices);
        assert_eq!(c.device.as_deref(), Some("sda"));
        c.on_key(KeyCode::Char('d'), false, &devices);
        assert_eq!(c.device, None);
        c.on_key(KeyCode::Char('?'), false, &devices);
        assert!(c.help);
        // Esc closes the help first; q always quits.
        assert_eq!(c.on_key(KeyCode::Esc, false, &devices), Action::Redraw);
        assert!(!c.help);
        assert_eq!(
            c.on_key(KeyCode::Char('x'), false, &devices),
            Action::Nothing
        );
        assert_eq!(c.on_key(KeyCode::Char('c'), true, &devices), Action::Quit);
        assert_eq!(c.on_key(KeyCode::Char('q'), false, &devices), Action::Quit);
    }

    #[test]
    fn device_filter_of_a_vanished_device_returns_to_all() {
        assert_eq!(next_device(Some("gone"), &["sda".into()]), None);
        assert_eq!(next_device(None, &[]), None);
    }
}
