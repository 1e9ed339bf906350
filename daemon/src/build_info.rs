//! What this binary is: its version and the source revision it was built from (set by
//! `build.rs` from git, or from `WBSCOPE_REVISION` for builds outside a checkout).

/// The crate version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit the binary was built from (12 hex digits), or `unknown`.
pub const REVISION: &str = env!("WBSCOPE_REVISION");

/// `--version`'s text: version and revision.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision ",
    env!("WBSCOPE_REVISION"),
    ")"
);
