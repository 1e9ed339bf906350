//! Running external commands. Every command that changes something is printed before it runs, and
//! a failure names the command, so a CI log shows exactly what to re-run by hand.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};

use anyhow::{Context, Result, anyhow, bail};

use crate::test_failures::FailedTests;

/// A command plus what is needed to show it the way a shell user would type it.
pub struct Cmd {
    inner: Command,
    program: String,
    args: Vec<String>,
    /// Environment assignments shown in front of the command (only the ones a reader needs).
    shown_env: Vec<(String, String)>,
    dir: Option<PathBuf>,
    /// `run` reads the child's stdout as libtest output and names the failed tests on failure.
    report_failed_tests: bool,
}

impl Cmd {
    /// A command for `program`, with `~/.cargo/bin` added to the child's `PATH` when missing, since
    /// rustup, cargo and bpf-linker live there and CI shells do not always have it.
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        let program = program.as_ref();
        let mut inner = Command::new(program);
        if let Some(path) = path_with_cargo_bin() {
            // Setting PATH on the Command also makes std resolve `program` through it.
            inner.env("PATH", path);
        }
        Self {
            inner,
            program: program.to_string_lossy().into_owned(),
            args: Vec::new(),
            shown_env: Vec::new(),
            dir: None,
            report_failed_tests: false,
        }
    }

    /// `cargo` of `toolchain` (`rustup run <toolchain> cargo`) on the workspace at `root`.
    ///
    /// Always through `rustup run`: xtask itself was started by whatever stable `cargo xtask`
    /// found, and rustup hands that choice down in `RUSTUP_TOOLCHAIN` (and may put that
    /// toolchain's bin directory first on `PATH`), so a plain `cargo` here would be that stable
    /// again, too old for the workspace.
    ///
    /// `CARGO_TARGET_DIR` is dropped so the tiers build into the workspace's own `target/`, where
    /// `run` and the smoke tier look for the binary, even when xtask itself was built elsewhere.
    pub fn workspace_cargo(root: &Path, toolchain: &str) -> Self {
        let mut cmd = Cmd::new("rustup").args(["run", toolchain, "cargo"]);
        cmd.inner
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("CARGO_BUILD_TARGET_DIR");
        cmd.current_dir(root)
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        let arg = arg.as_ref();
        self.inner.arg(arg);
        self.args.push(arg.to_string_lossy().into_owned());
        self
    }

    /// Appends several arguments.
    pub fn args<I, S>(self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        args.into_iter().fold(self, Cmd::arg)
    }

    /// Sets an environment variable for the child and shows it in the printed command.
    pub fn env(mut self, key: &str, value: impl AsRef<OsStr>) -> Self {
        let value = value.as_ref();
        self.inner.env(key, value);
        self.shown_env
            .push((key.to_owned(), value.to_string_lossy().into_owned()));
        self
    }

    /// Runs the child in `dir` (shown as a `cd dir &&` prefix).
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.inner.current_dir(dir.as_ref());
        self.dir = Some(dir.as_ref().to_owned());
        self
    }

    /// For a `cargo test` command: `run` passes its stdout through while reading it, and a
    /// failure names the failed tests and their panic messages.
    pub fn reporting_failed_tests(mut self) -> Self {
        self.report_failed_tests = true;
        self
    }

    /// Prints the command, runs it with the terminal's stdio and fails unless it exits 0.
    pub fn run(self) -> Result<()> {
        let shown = self.to_string();
        if self.report_failed_tests {
            let (status, failed) = self.run_reading_tests()?;
            if status.success() {
                return Ok(());
            }
            if !failed.is_empty() {
                bail!("command failed ({}): {shown}\n{failed}", describe(status));
            }
            bail!("command failed ({}): {shown}", describe(status))
        }
        let status = self.status()?;
        if status.success() {
            Ok(())
        } else {
            bail!("command failed ({}): {shown}", describe(status))
        }
    }

    /// Runs the child with its stdout piped through to ours unchanged (byte for byte, as it
    /// comes, so partial lines such as `test x ... ` appear at once) and parsed line by line.
    fn run_reading_tests(mut self) -> Result<(ExitStatus, FailedTests)> {
        println!("$ {self}");
        let mut child = self
            .inner
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("could not start command: {self}"))?;
        let mut failed = FailedTests::default();
        if let Some(from) = child.stdout.take() {
            pass_through(from, &mut std::io::stdout(), &mut failed)
                .with_context(|| format!("reading the output of {self}"))?;
        }
        failed.finish();
        let status = child
            .wait()
            .with_context(|| format!("waiting for command: {self}"))?;
        Ok((status, failed))
    }

    /// Prints the command, runs it with the terminal's stdio and returns how it ended.
    pub fn status(mut self) -> Result<ExitStatus> {
        println!("$ {self}");
        self.inner
            .status()
            .with_context(|| format!("could not start command: {self}"))
    }

    /// Prints the command, runs it with stdout captured (stderr goes to the terminal) and returns
    /// stdout; fails unless it exits 0.
    pub fn capture(mut self) -> Result<String> {
        println!("$ {self}");
        let shown = self.to_string();
        let out = self
            .inner
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("could not start command: {shown}"))?;
        if !out.status.success() {
            bail!("command failed ({}): {shown}", describe(out.status));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs the command silently, capturing its output; for quick presence checks, which are not
    /// printed because they change nothing. Fails only if the program cannot be started.
    pub fn probe(mut self) -> Result<Output> {
        self.inner
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("could not start `{}`", self.program))
    }

    /// Prints the command and replaces this process with it, so the child gets the terminal,
    /// Ctrl-C and our exit code directly. Returns only if the exec failed.
    pub fn exec(mut self) -> anyhow::Error {
        println!("$ {self}");
        let err = self.inner.exec();
        anyhow!("could not exec {self}: {err}")
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(dir) = &self.dir {
            write!(f, "cd {} && ", quote(&dir.to_string_lossy()))?;
        }
        for (key, value) in &self.shown_env {
            write!(f, "{key}={} ", quote(value))?;
        }
        write!(f, "{}", quote(&self.program))?;
        for arg in &self.args {
            write!(f, " {}", quote(arg))?;
        }
        Ok(())
    }
}

/// Copies `from` to `to` as it comes (a write error on `to`, such as a closed pipe, does not stop
/// the copy: the run it reports on must go on) and feeds each line to `failed`.
fn pass_through(
    mut from: impl Read,
    to: &mut impl Write,
    failed: &mut FailedTests,
) -> std::io::Result<()> {
    let mut line = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = match from.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let _ = to.write_all(&chunk[..n]).and_then(|()| to.flush());
        for &byte in &chunk[..n] {
            if byte == b'\n' {
                failed.feed(&String::from_utf8_lossy(&line));
                line.clear();
            } else {
                line.push(byte);
            }
        }
    }
    if !line.is_empty() {
        failed.feed(&String::from_utf8_lossy(&line));
    }
    Ok(())
}

/// Runs every command even when an earlier one fails (lint-style: report all problems at once),
/// then fails naming each command that failed.
pub fn run_all(cmds: impl IntoIterator<Item = Cmd>) -> Result<()> {
    let failures: Vec<String> = cmds
        .into_iter()
        .filter_map(|cmd| cmd.run().err())
        .map(|e| format!("{e:#}"))
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        bail!("{}", failures.join("; "))
    }
}

/// "exit status 1" or "killed by signal 9", for error messages.
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

/// Where `cargo install` puts binaries: `$CARGO_HOME/bin`, else `~/.cargo/bin`.
pub fn cargo_bin_dir() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("CARGO_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(home).join("bin"));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| PathBuf::from(home).join(".cargo/bin"))
}

/// The current `PATH` with the cargo bin dir appended, or `None` when it is already there.
/// Appended rather than prepended so that nothing the user put first is shadowed.
fn path_with_cargo_bin() -> Option<OsString> {
    let bin = cargo_bin_dir()?;
    let current = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&current).collect();
    if dirs.contains(&bin) {
        return None;
    }
    dirs.push(bin);
    std::env::join_paths(dirs).ok()
}

/// Quotes `s` for a POSIX shell when it contains anything beyond a safe set of characters.
fn quote(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_env_dir_and_quoted_args() {
        let cmd = Cmd::new("dpkg-query")
            .current_dir("/tmp")
            .env("A", "b c")
            .args(["-W", "-f=${Status}", "it's"]);
        assert_eq!(
            cmd.to_string(),
            r"cd /tmp && A='b c' dpkg-query -W '-f=${Status}' 'it'\''s'"
        );
    }

    #[test]
    fn run_all_keeps_going_and_names_every_failure() {
        let err = run_all([
            Cmd::new("false").arg("1"),
            Cmd::new("true"),
            Cmd::new("false").arg("2"),
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("false 1") && err.contains("false 2"), "{err}");
        assert!(run_all([Cmd::new("true")]).is_ok());
    }

    #[test]
    fn test_output_passes_through_unchanged_and_names_the_failures() {
        let output = "running 1 test\ntest t::x ... FAILED\n\nfailures:\n    t::x\n\ntail";
        let mut copy = Vec::new();
        let mut failed = FailedTests::default();
        pass_through(output.as_bytes(), &mut copy, &mut failed).unwrap();
        failed.finish();
        assert_eq!(copy, output.as_bytes());
        assert_eq!(failed.to_string(), "1 failed test:\n    t::x");
    }

    #[test]
    fn failure_names_the_command() {
        let err = Cmd::new("false").arg("--flag").run().unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("false --flag"), "{msg}");
        assert!(msg.contains("exit status 1"), "{msg}");
    }
}
