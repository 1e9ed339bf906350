//! Which cgroups are exported by name: at most `max_named` of those the allow-list admits, the
//! most active first; every other cgroup is added up as `cgroup="other"`.
//!
//! A cgroup's class is decided once, when the daemon first sees it, and kept until it is
//! removed: a counter that moved between a named series and `other` would go down in one of
//! them. So "most active" ranks the cgroups first seen in the same scrape, and a slot freed by
//! a removed cgroup goes to the next new one.

use std::collections::HashMap;

use super::config::CgroupsConfig;

/// The label value of everything not exported by name.
pub const OTHER: &str = "other";

/// A cgroup's class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Class {
    Named(String),
    Other,
}

/// A cgroup seen for the first time: id, path, and how active it was (operations counted).
pub struct Fresh {
    pub id: u64,
    pub path: String,
    pub activity: u64,
}

/// The classes of the cgroups seen so far.
#[derive(Default)]
pub struct Naming {
    classes: HashMap<u64, Class>,
    named: usize,
}

impl Naming {
    /// The class of `id`, if it was classified.
    pub fn class(&self, id: u64) -> Option<&Class> {
        self.classes.get(&id)
    }

    /// Classifies cgroups seen for the first time, the most active first.
    pub fn admit(&mut self, config: &CgroupsConfig, mut fresh: Vec<Fresh>) {
        fresh.sort_by(|a, b| b.activity.cmp(&a.activity).then(a.path.cmp(&b.path)));
        for f in fresh {
            if self.classes.contains_key(&f.id) {
                continue;
            }
            let class = if self.named < config.max_named && config.allows(&f.path) {
                self.named += 1;
                Class::Named(f.path)
            } else {
                Class::Other
            };
            self.classes.insert(f.id, class);
        }
    }

    /// `id` no longer exists: a named cgroup frees its slot.
    pub fn forget(&mut self, id: u64) {
        if let Some(Class::Named(_)) = self.classes.remove(&id) {
            self.named -= 1;
        }
    }

    /// Cgroups exported by name.
    pub fn named(&self) -> usize {
        self.named
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(id: u64, path: &str, activity: u64) -> Fresh {
        Fresh {
            id,
            path: path.into(),
            activity,
        }
    }

    #[test]
    fn the_most_active_fill_the_cap_and_keep_their_class() {
        let config = CgroupsConfig {
            enabled: true,
            allow: vec!["/pods".into()],
            max_named: 2,
        };
        let mut n = Naming::default();
        n.admit(
            &config,
            vec![
                fresh(1, "/", 100),
                fresh(2, "/pods/a", 1),
                fresh(3, "/pods/b", 5),
                fresh(4, "/pods/c", 3),
            ],
        );
        assert_eq!(n.class(1), Some(&Class::Other), "not allowed");
        assert_eq!(n.class(3), Some(&Class::Named("/pods/b".into())));
        assert_eq!(n.class(4), Some(&Class::Named("/pods/c".into())));
        assert_eq!(n.class(2), Some(&Class::Other), "over the cap");
        // Seen again (more active now): the class stays.
        n.admit(&config, vec![fresh(2, "/pods/a", 1000)]);
        assert_eq!(n.class(2), Some(&Class::Other));
        // A removed named cgroup frees its slot for the next new one.
        n.forget(3);
        assert_eq!(n.named(), 1);
        n.admit(&config, vec![fresh(5, "/pods/d", 1)]);
        assert_eq!(n.class(5), Some(&Class::Named("/pods/d".into())));
        assert_eq!(n.named(), 2);
    }
}
