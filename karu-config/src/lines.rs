//! The line of every key of a TOML file, so that errors and `explain` can say where a value
//! was written.

use std::collections::HashMap;

use toml::de::{DeTable, DeValue};

/// The 1-based line of each key of one file, by its path of keys (`["planner", "max_gap"]`,
/// `["paths", "s3://b", "retry", "deadline"]`, with the prefix as written).
#[derive(Debug, Default)]
pub(crate) struct KeyLines(HashMap<Vec<String>, usize>);

impl KeyLines {
    /// The lines of the keys of `text`; empty when `text` is not valid TOML (its syntax error
    /// is reported separately).
    pub(crate) fn of(text: &str) -> Self {
        let mut lines = KeyLines::default();
        if let Ok(table) = DeTable::parse(text) {
            let starts = LineStarts::of(text);
            lines.walk(table.get_ref(), &mut Vec::new(), &starts);
        }
        lines
    }

    fn walk(&mut self, table: &DeTable<'_>, path: &mut Vec<String>, starts: &LineStarts) {
        for (key, value) in table {
            path.push(key.get_ref().to_string());
            self.0
                .entry(path.clone())
                .or_insert_with(|| starts.line(key.span().start));
            if let DeValue::Table(inner) = value.get_ref() {
                self.walk(inner, path, starts);
            }
            path.pop();
        }
    }

    /// The line of the key at `path`, or of the nearest table above it that is written in the
    /// file (a missing key is reported at its table).
    pub(crate) fn line(&self, path: &[&str]) -> Option<usize> {
        let mut path: Vec<String> = path.iter().map(|s| (*s).to_owned()).collect();
        while !path.is_empty() {
            if let Some(&line) = self.0.get(&path) {
                return Some(line);
            }
            path.pop();
        }
        None
    }
}

/// Byte offsets where lines begin.
struct LineStarts(Vec<usize>);

impl LineStarts {
    fn of(text: &str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineStarts(starts)
    }

    /// The 1-based line holding byte `offset`.
    fn line(&self, offset: usize) -> usize {
        self.0.partition_point(|&start| start <= offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_its_line() {
        let text = "io_threads = 4\n\
                    [planner]\n\
                    max_gap = \"1MiB\"\n\
                    \n\
                    [paths.\"s3://b\"]\n\
                    retry.deadline = \"5s\"\n\
                    [paths.\"s3://b\".s3]\n\
                    region = \"x\"\n\
                    [s3]\n\
                    headers = { a = \"1\" }\n";
        let lines = KeyLines::of(text);
        assert_eq!(lines.line(&["io_threads"]), Some(1));
        assert_eq!(lines.line(&["planner"]), Some(2));
        assert_eq!(lines.line(&["planner", "max_gap"]), Some(3));
        assert_eq!(
            lines.line(&["paths", "s3://b", "retry", "deadline"]),
            Some(6)
        );
        assert_eq!(lines.line(&["paths", "s3://b", "s3", "region"]), Some(8));
        assert_eq!(lines.line(&["s3", "headers", "a"]), Some(10));
        // A key the file does not write is placed at its table.
        assert_eq!(lines.line(&["planner", "max_span"]), Some(2));
        assert_eq!(lines.line(&["nowhere"]), None);
    }

    #[test]
    fn invalid_toml_has_no_lines() {
        assert_eq!(KeyLines::of("a = = 1").line(&["a"]), None);
    }
}
