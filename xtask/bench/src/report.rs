//! Printing: aligned tables and human-readable numbers.

/// Human-readable bytes (binary units).
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// An integer with thousands separators: `1,000`.
pub(crate) fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// A table printed with each column as wide as its widest cell.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    columns: Vec<(String, Align)>,
    rows: Vec<Row>,
}

#[derive(Debug, Clone)]
enum Row {
    Cells(Vec<String>),
    /// A line of its own (a phase heading), printed as is.
    Heading(String),
}

impl Table {
    pub(crate) fn new(columns: &[(&str, Align)]) -> Table {
        Table {
            columns: columns
                .iter()
                .map(|(name, align)| (name.to_string(), *align))
                .collect(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(Row::Cells(cells));
    }

    pub(crate) fn heading(&mut self, text: impl Into<String>) {
        self.rows.push(Row::Heading(text.into()));
    }

    pub(crate) fn print(&self) {
        let mut widths: Vec<usize> = self
            .columns
            .iter()
            .map(|(n, _)| n.chars().count())
            .collect();
        for row in &self.rows {
            if let Row::Cells(cells) = row {
                for (w, cell) in widths.iter_mut().zip(cells) {
                    *w = (*w).max(cell.chars().count());
                }
            }
        }
        let line = |cells: &[String]| {
            let mut out = String::new();
            for (i, ((_, align), width)) in self.columns.iter().zip(&widths).enumerate() {
                let cell = cells.get(i).map(String::as_str).unwrap_or("");
                let pad = width.saturating_sub(cell.chars().count());
                if i > 0 {
                    out.push_str("  ");
                }
                match align {
                    Align::Left => {
                        out.push_str(cell);
                        out.extend(std::iter::repeat_n(' ', pad));
                    }
                    Align::Right => {
                        out.extend(std::iter::repeat_n(' ', pad));
                        out.push_str(cell);
                    }
                }
            }
            println!("{}", out.trim_end());
        };
        let names: Vec<String> = self.columns.iter().map(|(n, _)| n.clone()).collect();
        line(&names);
        for row in &self.rows {
            match row {
                Row::Cells(cells) => line(cells),
                Row::Heading(text) => println!("{text}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_bytes() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_000), "1,000");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(4 << 20), "4.0 MiB");
    }
}
