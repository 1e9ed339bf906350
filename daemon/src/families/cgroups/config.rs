//! The `[cgroups]` table of the configuration file.

use serde::Deserialize;

use crate::invalid_value::InvalidValue;

/// Default cap on cgroups exported by name; the rest are `cgroup="other"`.
pub const DEFAULT_MAX_NAMED: usize = 32;
/// The largest cap accepted: each named cgroup adds up to 22 series (9 sync calls × 2, plus
/// 2 × 2 for throttling and waits, counting only those that occurred).
pub const MAX_NAMED_LIMIT: usize = 1000;

/// The `[cgroups]` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCgroups {
    /// Export per-cgroup sync-call, throttling and writeback-wait totals (default `false`;
    /// needs cgroup v2 with the memory and io controllers).
    enabled: Option<bool>,
    /// Cgroup path prefixes (as in /proc/PID/cgroup, e.g. `"/kubepods.slice"`) whose cgroups
    /// may be exported by name; `[]` (default) = any cgroup.
    allow: Option<Vec<String>>,
    /// At most this many cgroups are exported by name, the most active first; the rest are
    /// added up as `cgroup="other"` (default 32, 1..=1000).
    max_named: Option<usize>,
}

/// Validated per-cgroup settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupsConfig {
    pub enabled: bool,
    pub allow: Vec<String>,
    pub max_named: usize,
}

impl Default for CgroupsConfig {
    fn default() -> Self {
        CgroupsConfig {
            enabled: false,
            allow: Vec::new(),
            max_named: DEFAULT_MAX_NAMED,
        }
    }
}

impl CgroupsConfig {
    /// Whether `path` may be exported by name.
    pub fn allows(&self, path: &str) -> bool {
        self.allow.is_empty() || self.allow.iter().any(|prefix| is_under(path, prefix))
    }
}

/// `path` is `prefix` or below it (`/a` covers `/a/b`, not `/ab`).
fn is_under(path: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    prefix.is_empty()
        || path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

impl RawCgroups {
    /// Validates the table, filling in defaults.
    pub fn validate(self) -> Result<CgroupsConfig, InvalidValue> {
        let d = CgroupsConfig::default();
        let max_named = self.max_named.unwrap_or(d.max_named);
        if !(1..=MAX_NAMED_LIMIT).contains(&max_named) {
            return Err(InvalidValue {
                key: "cgroups.max_named",
                message: format!(
                    "{max_named} is not allowed: the cap on named cgroups is 1 to \
                     {MAX_NAMED_LIMIT} (everything beyond it is cgroup=\"other\")"
                ),
            });
        }
        let allow = self.allow.unwrap_or_default();
        if let Some(bad) = allow.iter().find(|p| !p.starts_with('/')) {
            return Err(InvalidValue {
                key: "cgroups.allow",
                message: format!(
                    "\"{bad}\" is not allowed: prefixes are absolute cgroup paths as in \
                     /proc/PID/cgroup, starting with / (e.g. \"/kubepods.slice\")"
                ),
            });
        }
        Ok(CgroupsConfig {
            enabled: self.enabled.unwrap_or(d.enabled),
            allow,
            max_named,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CgroupsConfig, InvalidValue> {
        toml::from_str::<RawCgroups>(text).unwrap().validate()
    }

    #[test]
    fn off_by_default_and_overrides_are_read() {
        assert_eq!(parse("").unwrap(), CgroupsConfig::default());
        assert!(!CgroupsConfig::default().enabled);
        let c = parse("enabled = true\nallow = [\"/pods\"]\nmax_named = 3").unwrap();
        assert!(c.enabled);
        assert_eq!(c.allow, vec!["/pods".to_owned()]);
        assert_eq!(c.max_named, 3);
    }

    #[test]
    fn bad_values_name_key_value_and_what_is_allowed() {
        let err = parse("max_named = 0").unwrap_err().to_string();
        assert!(err.contains("`cgroups.max_named`") && err.contains("0 is not allowed"));
        assert!(err.contains("1 to 1000"), "{err}");
        let err = parse("allow = [\"pods\"]").unwrap_err().to_string();
        assert!(
            err.contains("`cgroups.allow`") && err.contains("\"pods\""),
            "{err}"
        );
        assert!(err.contains("starting with /"), "{err}");
    }

    #[test]
    fn prefixes_match_whole_path_components() {
        let c = CgroupsConfig {
            allow: vec!["/a/".into()],
            ..CgroupsConfig::default()
        };
        assert!(c.allows("/a") && c.allows("/a/b"));
        assert!(!c.allows("/ab") && !c.allows("/"));
        assert!(CgroupsConfig::default().allows("/anything"));
        let root = CgroupsConfig {
            allow: vec!["/".into()],
            ..CgroupsConfig::default()
        };
        assert!(root.allows("/") && root.allows("/x"));
    }
}
