//! One version per batch ([`BatchOptions::one_version`](crate::BatchOptions::one_version)):
//! the first strong ETag an answer states for each object of the batch, which every other
//! answer for that object must state too.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::sdk::CanonicalPath;

/// The pinned tag of each object of one batch, by canonical path.
#[derive(Debug, Default)]
pub(crate) struct VersionPins {
    pinned: Mutex<HashMap<CanonicalPath, String>>,
}

impl VersionPins {
    /// The tag pinned for `object`, once an answer stated one.
    pub(crate) fn get(&self, object: &CanonicalPath) -> Option<String> {
        self.pinned.lock().get(object).cloned()
    }

    /// Accept an answer's strong `etag` for `object`: the first one seen pins the object;
    /// any other is refused with the pinned tag.
    pub(crate) fn settle(&self, object: &CanonicalPath, etag: &str) -> Result<(), String> {
        let mut pinned = self.pinned.lock();
        match pinned.get(object) {
            Some(tag) if tag == etag => Ok(()),
            Some(tag) => Err(tag.clone()),
            None => {
                pinned.insert(object.clone(), etag.to_string());
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_tag_seen_pins_each_object() {
        let pins = VersionPins::default();
        let a = CanonicalPath::new("http://h/a");
        let b = CanonicalPath::new("http://h/b");
        assert_eq!(pins.get(&a), None);
        assert_eq!(pins.settle(&a, "\"1\""), Ok(()));
        assert_eq!(pins.settle(&a, "\"1\""), Ok(()));
        assert_eq!(pins.settle(&a, "\"2\""), Err("\"1\"".to_string()));
        assert_eq!(pins.get(&a).as_deref(), Some("\"1\""));
        // Objects are pinned apart.
        assert_eq!(pins.settle(&b, "\"2\""), Ok(()));
        assert_eq!(pins.get(&b).as_deref(), Some("\"2\""));
    }
}
