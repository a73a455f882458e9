//! Prints Karu's per-read timings and the `metrics` it publishes.
//!
//! ```text
//! cargo run -p karu --features metrics --example metrics -- [ADDRESS]
//! ```
//!
//! ADDRESS is any address Karu reads (a path, an `https://` URL, `s3://...`); without one, the
//! example writes a 4 MiB file in the temporary directory and reads that. It reads 64
//! scattered ranges of 4 KiB, prints each completion's timing, then every metric a small
//! recorder (installed here; use a real exporter in an application) was given.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use karu::{Client, Read};
use metrics::{
    Counter, CounterFn, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};

/// A recorder that keeps each counter's value and each histogram's samples, by key.
#[derive(Default)]
struct Collect {
    values: Arc<Mutex<BTreeMap<String, Vec<f64>>>>,
}

/// One metric's handle: adds to (counter) or appends to (histogram) its entry.
struct Entry {
    key: String,
    values: Arc<Mutex<BTreeMap<String, Vec<f64>>>>,
}

impl Entry {
    fn update(&self, f: impl FnOnce(&mut Vec<f64>)) {
        if let Ok(mut all) = self.values.lock() {
            f(all.entry(self.key.clone()).or_default());
        }
    }
}

impl CounterFn for Entry {
    fn increment(&self, value: u64) {
        self.update(|v| match v.first_mut() {
            Some(total) => *total += value as f64,
            None => v.push(value as f64),
        });
    }

    fn absolute(&self, value: u64) {
        self.update(|v| *v = vec![value as f64]);
    }
}

impl HistogramFn for Entry {
    fn record(&self, value: f64) {
        self.update(|v| v.push(value));
    }
}

impl Collect {
    fn entry(&self, key: &Key) -> Arc<Entry> {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let name = if labels.is_empty() {
            key.name().to_string()
        } else {
            format!("{}{{{}}}", key.name(), labels.join(","))
        };
        Arc::new(Entry {
            key: name,
            values: Arc::clone(&self.values),
        })
    }
}

impl Recorder for Collect {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.entry(key))
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.entry(key))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let recorder = Collect::default();
    let values = Arc::clone(&recorder.values);
    metrics::set_global_recorder(recorder).map_err(|e| e.to_string())?;

    let address = match std::env::args().nth(1) {
        Some(address) => address,
        None => {
            let path = std::env::temp_dir().join("karu-metrics-example.bin");
            let data: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
            std::fs::write(&path, data)?;
            path.display().to_string()
        }
    };
    let client = Client::new()?;
    let locator = client.locate(&address)?;
    let size = client
        .stat(&locator)?
        .size
        .filter(|&size| size > 0)
        .ok_or("the object is empty, or the store does not state its size")?;
    let length = 4096.min(size).max(1);
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let reads = (0..64).map(|_| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        Read::new(&locator, rng % (size - length + 1), length)
    });
    let batch = client.submit(reads);
    println!("read  status  bytes  first byte ms  done ms  attempts  transfer  transfer bytes");
    for c in batch.wait() {
        let t = c.timing();
        println!(
            "{:>4}  {:<6}  {:>5}  {:>13}  {:>7.2}  {:>8}  {:>8}  {:>14}",
            c.index(),
            c.status().name(),
            c.bytes_received(),
            t.first_byte()
                .map(|d| format!("{:.2}", d.as_secs_f64() * 1e3))
                .unwrap_or_else(|| "-".into()),
            t.done().as_secs_f64() * 1e3,
            t.attempts(),
            t.transfer()
                .map(|id| id.to_string())
                .unwrap_or_else(|| "-".into()),
            t.transfer_bytes(),
        );
    }
    println!("batch: {:?}", batch.stats());
    client.publish_metrics("example");

    println!();
    println!("metrics published:");
    let values = values.lock().map_err(|_| "poisoned")?;
    for (key, v) in values.iter() {
        if key.starts_with(karu::metrics::READ_SECONDS)
            || key.starts_with(karu::metrics::FIRST_BYTE_SECONDS)
            || key.starts_with(karu::metrics::TRANSFER_ATTEMPTS)
        {
            let mut sorted = v.clone();
            sorted.sort_by(f64::total_cmp);
            let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q) as usize];
            println!(
                "  {key}: {} samples, p50 {:.4}, p99 {:.4}, max {:.4}",
                sorted.len(),
                at(0.5),
                at(0.99),
                at(1.0)
            );
        } else {
            println!("  {key}: {}", v.first().copied().unwrap_or_default());
        }
    }
    Ok(())
}
