//! What a batch costs in money: the requests the server saw and the bytes it sent, priced
//! with each object store's list prices (`karu::config::Prices`, the table the priced trade
//! weighs gaps with; its defaults and their date are in `xtask/bench/README.md`).

use karu::config::{PriceList, Prices};

use crate::report::{Align, Table, count};

/// One batch to bill: who took it, and what the server saw.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    /// The method, with its phase where the table has more than one (`Karu, steady`).
    pub(crate) label: String,
    pub(crate) requests: u64,
    pub(crate) bytes_sent: u64,
}

/// The providers billed, as the table's columns name them, with their price lists.
fn providers(prices: &Prices) -> [(&'static str, &PriceList); 3] {
    [
        ("S3", &prices.s3),
        ("GCS", &prices.gcs),
        ("Azure", &prices.azure),
    ]
}

/// An amount of nanodollars as dollars, to the millionth (`$0.001134`), or in whole cents
/// from a dollar up.
pub(crate) fn dollars(nanos: u128) -> String {
    if nanos >= 1_000_000_000 {
        let cents = (nanos + 5_000_000) / 10_000_000;
        format!("${}.{:02}", count((cents / 100) as u64), cents % 100)
    } else {
        let micros = (nanos + 500) / 1000;
        format!("${}.{:06}", micros / 1_000_000, micros % 1_000_000)
    }
}

/// One provider's cell: the batch's bill and how much of it the requests are
/// (`$0.001134 (32 % requests)`).
fn cell(prices: &PriceList, line: &Line) -> String {
    let total = prices.cost(line.requests, line.bytes_sent);
    let requests = prices.cost(line.requests, 0);
    if total == 0 {
        return dollars(0);
    }
    let share = (requests * 100 + total / 2) / total;
    format!("{} ({share} % requests)", dollars(total))
}

/// Prints the bill of each of `lines` at the default list prices: one column per provider.
pub(crate) fn print(title: &str, lines: &[Line]) {
    if lines.is_empty() {
        return;
    }
    let prices = Prices::default();
    let mut columns = vec![
        ("method", Align::Left),
        ("requests", Align::Right),
        ("bytes out", Align::Right),
    ];
    let names = providers(&prices).map(|(name, _)| name);
    columns.extend(names.iter().map(|name| (*name, Align::Right)));
    let mut table = Table::new(&columns);
    for line in lines {
        let mut cells = vec![
            format!("  {}", line.label),
            count(line.requests),
            count(line.bytes_sent),
        ];
        cells.extend(providers(&prices).iter().map(|(_, list)| cell(list, line)));
        table.row(cells);
    }
    println!(
        "  {title}: the batch's requests and bytes at list prices, read from outside the \
         store's region ({})",
        price_note(&prices)
    );
    table.print();
}

/// `all`'s bill: every remote workload's steady batch (the cold one where a method has no
/// steady batch), method by method.
pub(crate) fn print_record(rows: &[crate::all::Row]) {
    let mut lines = Vec::new();
    for row in rows {
        if row.workload.starts_with("local") {
            continue;
        }
        let steady = rows.iter().any(|r| {
            r.phase == "steady"
                && r.workload == row.workload
                && r.scenario == row.scenario
                && r.method == row.method
        });
        if row.phase == "steady" || !steady {
            lines.push(Line {
                label: format!(
                    "{} · {} · {}: {}",
                    row.workload, row.scenario, row.phase, row.method
                ),
                requests: row.requests,
                bytes_sent: row.bytes_sent,
            });
        }
    }
    println!("######## bill (list prices; xtask/bench/README.md) ########");
    print("each workload's batch", &lines);
}

/// The prices used, as one line: `S3 $0.0004 / 1,000 GETs + $0.09 / GiB; …`.
pub(crate) fn price_note(prices: &Prices) -> String {
    providers(prices)
        .iter()
        .map(|(name, list)| {
            format!(
                "{name} {} / 1,000 GETs + {} / GiB",
                list.requests_per_1000, list.egress_per_gib
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_as_dollars() {
        assert_eq!(dollars(0), "$0.000000");
        assert_eq!(dollars(400), "$0.000000");
        assert_eq!(dollars(400_000), "$0.000400");
        assert_eq!(dollars(1_134_499), "$0.001134");
        assert_eq!(dollars(999_999_999), "$1.000000");
        assert_eq!(dollars(1_000_000_000), "$1.00");
        assert_eq!(dollars(1_234_567_890_123), "$1,234.57");
    }

    #[test]
    fn a_batch_is_billed_its_requests_and_its_bytes() {
        let prices = Prices::default();
        // `scattered` as Karu plans it: 896 requests, 2.25 × 4,096,000 bytes.
        let line = Line {
            label: "Karu".into(),
            requests: 896,
            bytes_sent: 9_216_000,
        };
        // S3: 896 × $0.0000004 = $0.0003584; 9,216,000 B × $0.09 / GiB = $0.000772.
        assert_eq!(prices.s3.cost(896, 0), 358_400);
        assert_eq!(prices.s3.cost(0, 9_216_000), 772_476);
        assert_eq!(cell(&prices.s3, &line), "$0.001131 (32 % requests)");
        // One request per read, nothing over-fetched: 1,000 requests, 4,096,000 bytes.
        let exact = Line {
            label: "plain".into(),
            requests: 1000,
            bytes_sent: 4_096_000,
        };
        assert_eq!(cell(&prices.s3, &exact), "$0.000743 (54 % requests)");
        let free = Line {
            label: "none".into(),
            requests: 0,
            bytes_sent: 0,
        };
        assert_eq!(cell(&prices.gcs, &free), "$0.000000");
        assert!(price_note(&prices).starts_with("S3 $0.0004 / 1,000 GETs + $0.09 / GiB; GCS"));
    }
}
