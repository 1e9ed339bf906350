//! Reading `wbscope check`'s probe table, for the tests that compare it with what loaded.

/// The probe names the table lists (its first column), but for the ones it reports as not
/// needed on this kernel: a probe another one stands in for is not one that has to attach.
pub fn probe_names(check_stdout: &str) -> Vec<String> {
    check_stdout
        .lines()
        .skip_while(|l| !l.starts_with("PROBE "))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| !l.contains("not needed: "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}
