//! Aligned tables for the demo: each column as wide as its widest cell, so long cells never
//! push the others out of line.

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// A table with a header row.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    columns: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(columns: &[(&'static str, Align)]) -> Table {
        Table {
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as lines, each ending in `\n`, indented by `indent`.
    pub(crate) fn render(&self, indent: &str) -> String {
        let mut widths: Vec<usize> = self
            .columns
            .iter()
            .map(|(n, _)| n.chars().count())
            .collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let header: Vec<String> = self.columns.iter().map(|(n, _)| n.to_string()).collect();
        let mut out = String::new();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::from(indent);
            for (i, ((_, align), width)) in self.columns.iter().zip(&widths).enumerate() {
                let cell = row.get(i).map(String::as_str).unwrap_or("");
                let pad = " ".repeat(width.saturating_sub(cell.chars().count()));
                if i > 0 {
                    line.push_str("  ");
                }
                match align {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&pad);
                    }
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(cell);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    pub(crate) fn print(&self, indent: &str) {
        print!("{}", self.render(indent));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_stay_aligned_whatever_the_cell_lengths() {
        let mut t = Table::new(&[("read", Align::Left), ("bytes", Align::Right)]);
        t.row(vec![
            "a rather long description of a read".into(),
            "1".into(),
        ]);
        t.row(vec!["short".into(), "4096".into()]);
        let text = t.render("");
        let ends: Vec<usize> = text.lines().map(|l| l.chars().count()).collect();
        assert_eq!(ends, vec![ends[0]; 3], "{text}");
    }
}
