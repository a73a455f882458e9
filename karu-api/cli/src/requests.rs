//! The reads of one `karu read`: ranges given as arguments and read from `--ranges-from`, with
//! the addresses they name.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader};

use crate::numbers::{self, Range};
use crate::outcome::Stop;

/// One read to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Request {
    /// Index into [`Requests::addresses`].
    pub(crate) address: usize,
    /// The range as written: placed in the object once its size is known, if it needs it.
    pub(crate) range: Range,
}

/// Every read of a batch, in the order given; the read's place is its tag.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Requests {
    /// Distinct addresses, in order of first use.
    pub(crate) addresses: Vec<String>,
    pub(crate) reads: Vec<Request>,
    index: HashMap<String, usize>,
}

impl Requests {
    /// The ranges given as arguments, then those of `--ranges-from`.
    pub(crate) fn gather(
        address: Option<&str>,
        ranges: &[String],
        ranges_from: Option<&str>,
    ) -> Result<Requests, Stop> {
        let mut requests = Requests::default();
        if !ranges.is_empty() {
            let Some(address) = address else {
                return Err(Stop::Usage("ranges need an ADDRESS".into()));
            };
            let at = requests.address(address);
            for range in ranges {
                let range = numbers::range(range).map_err(Stop::Usage)?;
                requests.reads.push(Request { address: at, range });
            }
        }
        match ranges_from {
            Some("-") => requests.lines(io::stdin().lock(), "standard input", address)?,
            Some(path) => {
                let file = File::open(path)
                    .map_err(|e| Stop::Usage(format!("--ranges-from {path}: {e}")))?;
                requests.lines(BufReader::new(file), path, address)?;
            }
            None => {}
        }
        if requests.reads.is_empty() {
            return Err(Stop::Usage(match ranges_from {
                Some(from) => format!("--ranges-from {from}: no ranges"),
                None => "no ranges: give OFFSET:LENGTH arguments or --ranges-from FILE".into(),
            }));
        }
        Ok(requests)
    }

    /// The index of `address`, added if new.
    fn address(&mut self, address: &str) -> usize {
        if let Some(&at) = self.index.get(address) {
            return at;
        }
        let at = self.addresses.len();
        self.addresses.push(address.to_owned());
        self.index.insert(address.to_owned(), at);
        at
    }

    /// Reads `RANGE` and `ADDRESS RANGE` lines (a range as [`numbers::range`] reads it);
    /// `name` is how errors name the source.
    fn lines(
        &mut self,
        reader: impl BufRead,
        name: &str,
        default: Option<&str>,
    ) -> Result<(), Stop> {
        for (number, line) in reader.split(b'\n').enumerate() {
            let at = number + 1;
            let line = line.map_err(|e| Stop::Usage(format!("{name}: {e}")))?;
            let line = String::from_utf8(line)
                .map_err(|_| Stop::Usage(format!("{name}:{at}: not UTF-8 text")))?;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (address, range) = match line.rsplit_once(char::is_whitespace) {
                Some((address, range)) => (address.trim_end(), range),
                None => match default {
                    Some(address) => (address, line),
                    None => {
                        return Err(Stop::Usage(format!(
                            "{name}:{at}: no ADDRESS: write `ADDRESS OFFSET:LENGTH`, or give \
                             the ADDRESS as an argument"
                        )));
                    }
                },
            };
            let range =
                numbers::range(range).map_err(|e| Stop::Usage(format!("{name}:{at}: {e}")))?;
            let address = self.address(address);
            self.reads.push(Request { address, range });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_text(text: &str, default: Option<&str>) -> Result<Requests, String> {
        let mut requests = Requests::default();
        match requests.lines(text.as_bytes(), "list.txt", default) {
            Ok(()) => Ok(requests),
            Err(Stop::Usage(message)) => Err(message),
            Err(other) => Err(format!("{other:?}")),
        }
    }

    #[test]
    fn lines_name_ranges_and_addresses() {
        let requests = from_text(
            "# a comment\n0:4\n\n/data/a b.bin 0x10:1KiB\r\ns3://b/k\t8:8\n/data/a b.bin 1:1\n\
             s3://b/k 9:end\n-2K\n",
            Some("/default"),
        )
        .unwrap();
        assert_eq!(
            requests.addresses,
            ["/default", "/data/a b.bin", "s3://b/k"]
        );
        let span = |offset, length| Range::Span { offset, length };
        let reads: Vec<(usize, Range)> = requests
            .reads
            .iter()
            .map(|r| (r.address, r.range))
            .collect();
        assert_eq!(
            reads,
            [
                (0, span(0, 4)),
                (1, span(16, 1024)),
                (2, span(8, 8)),
                (1, span(1, 1)),
                (2, Range::ToEnd { offset: 9 }),
                (0, Range::Suffix { length: 2048 }),
            ]
        );
    }

    #[test]
    fn malformed_lines_name_their_line() {
        assert_eq!(
            from_text("0:4\n4-8\n", Some("/x")).unwrap_err(),
            "list.txt:2: range \"4-8\": expected OFFSET:LENGTH, OFFSET:end (to the end) or \
             -LENGTH (the last bytes)"
        );
        assert!(
            from_text("0:4\n", None)
                .unwrap_err()
                .starts_with("list.txt:1: no ADDRESS")
        );
        let mut requests = Requests::default();
        let error = requests.lines(&b"\xff:1\n"[..], "list.txt", Some("/x"));
        assert!(matches!(error, Err(Stop::Usage(m)) if m == "list.txt:1: not UTF-8 text"));
    }
}
