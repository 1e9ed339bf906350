//! Errors as one line, for `check` output and logs: a leaf module, so that every layer can use it
//! without importing the layer that happened to define it first.

/// An error and its sources on one line, as operators read it in `check` output and logs.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
