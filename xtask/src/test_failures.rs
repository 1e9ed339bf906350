//! The failed tests of a `cargo test` run, read from libtest's output as it streams by, so a
//! failing tier names them in the summary at the end of a long log (CI logs are often read from
//! their tail only).

use std::fmt;

/// Longest panic message kept per test, in characters.
const MESSAGE_CHARS: usize = 300;

/// What libtest printed about failures, collected line by line.
#[derive(Default)]
pub struct FailedTests {
    /// Names from the closing `failures:` list, in its order.
    names: Vec<String>,
    /// `(test, "file:line:col: message")` for each panic seen on stdout (captured output is
    /// replayed there; with `--nocapture` panics go to stderr and only the name is known).
    panics: Vec<(String, String)>,
    state: State,
}

#[derive(Default)]
enum State {
    #[default]
    Outside,
    /// After `failures:`: indented names up to a blank line.
    NameList,
    /// After `thread '<test>' panicked at <location>:`: the message up to a blank or `note:` line.
    Panic {
        test: String,
        location: String,
        message: String,
    },
}

impl FailedTests {
    /// Feeds one line of the test run's stdout (without its newline).
    pub fn feed(&mut self, line: &str) {
        match std::mem::take(&mut self.state) {
            State::NameList => {
                if let Some(name) = line.strip_prefix("    ").filter(|n| is_test_name(n)) {
                    self.names.push(name.to_owned());
                    self.state = State::NameList;
                    return;
                }
            }
            State::Panic {
                test,
                location,
                mut message,
            } => {
                if !line.is_empty() && !line.starts_with("note:") && message.len() < MESSAGE_CHARS {
                    if !message.is_empty() {
                        message.push(' ');
                    }
                    message.push_str(line.trim());
                    self.state = State::Panic {
                        test,
                        location,
                        message,
                    };
                    return;
                }
                self.panics.push((test, join(&location, &message)));
            }
            State::Outside => {}
        }
        if line == "failures:" {
            self.state = State::NameList;
        } else if let Some((test, location)) = panic_header(line) {
            self.state = State::Panic {
                test,
                location,
                message: String::new(),
            };
        }
    }

    /// Ends the stream: a panic message cut off by the end of output is kept.
    pub fn finish(&mut self) {
        if let State::Panic {
            test,
            location,
            message,
        } = std::mem::take(&mut self.state)
        {
            self.panics.push((test, join(&location, &message)));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

impl fmt::Display for FailedTests {
    /// One line per failed test: its name, then where and why it panicked when that is known.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.names.len();
        write!(f, "{n} failed test{}:", if n == 1 { "" } else { "s" })?;
        for name in &self.names {
            write!(f, "\n    {name}")?;
            if let Some((_, why)) = self.panics.iter().find(|(t, _)| t == name) {
                write!(f, " — {why}")?;
            }
        }
        Ok(())
    }
}

/// `thread 'a::b' panicked at src/x.rs:1:2:` → `("a::b", "src/x.rs:1:2")`.
fn panic_header(line: &str) -> Option<(String, String)> {
    let rest = line.strip_prefix("thread '")?;
    let (test, rest) = rest.split_once("' panicked at ")?;
    let location = rest.trim_end_matches(':');
    Some((test.to_owned(), location.to_owned()))
}

/// libtest prints names of the form `path::to::test` (spaces only in doc-test names, which the
/// privileged tiers do not run).
fn is_test_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(char::is_whitespace)
}

fn join(location: &str, message: &str) -> String {
    let message: String = message.chars().take(MESSAGE_CHARS).collect();
    if message.is_empty() {
        location.to_owned()
    } else {
        format!("{location}: {message}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(output: &str) -> FailedTests {
        let mut failed = FailedTests::default();
        output.lines().for_each(|l| failed.feed(l));
        failed.finish();
        failed
    }

    #[test]
    fn names_each_failed_test_with_its_panic() {
        let failed = read(
            "running 3 tests\n\
             test a::passes ... ok\n\
             test a::breaks ... FAILED\n\
             test b::also ... FAILED\n\
             \n\
             failures:\n\
             \n\
             ---- a::breaks stdout ----\n\
             some output\n\
             \n\
             thread 'a::breaks' panicked at daemon/tests/kernel/a.rs:12:5:\n\
             assertion `left == right` failed: bytes by source\n  left: 1\n right: 2\n\
             note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n\
             \n\
             \n\
             failures:\n\
             \x20   a::breaks\n\
             \x20   b::also\n\
             \n\
             test result: FAILED. 1 passed; 2 failed; 0 ignored\n",
        );
        assert_eq!(
            failed.to_string(),
            "2 failed tests:\n    a::breaks — daemon/tests/kernel/a.rs:12:5: assertion `left == right` \
             failed: bytes by source left: 1 right: 2\n    b::also"
        );
    }

    #[test]
    fn a_passing_run_has_none() {
        let failed = read("running 1 test\ntest a ... ok\n\ntest result: ok. 1 passed\n");
        assert!(failed.is_empty());
    }

    #[test]
    fn a_panic_cut_off_by_the_end_of_output_is_kept() {
        let failed = read("failures:\n    t\n\nthread 't' panicked at x.rs:1:1:\nboom");
        assert_eq!(failed.to_string(), "1 failed test:\n    t — x.rs:1:1: boom");
    }
}
