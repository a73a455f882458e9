//! `karu config [ADDRESS]`: the effective configuration, value by value, with the layer and
//! path rule that supplied each, secrets redacted.

use karu::Client;
use serde_json::json;

use crate::outcome::{FAILED, OK, Stop, say};
use crate::output::Stdout;

/// Prints the configuration in effect for `address` (or the global one).
pub(crate) fn run(
    client: &Client,
    address: Option<&str>,
    json: bool,
    out: &mut Stdout,
) -> Result<u8, Stop> {
    let canonical = match address {
        None => String::new(),
        Some(address) => match client.locate(address) {
            Ok(locator) => locator.canonical().as_str().to_owned(),
            Err(error) => {
                say(&format!(
                    "karu: {address}: {}: {}",
                    error.status(),
                    error.message()
                ));
                return Ok(FAILED);
            }
        },
    };
    let snapshot = client.snapshot();
    let explanation = snapshot
        .explain(&canonical)
        .map_err(|e| Stop::Usage(e.to_string()))?;
    let layers = snapshot.layer_names();
    if json {
        let head = json!({
            "address": address,
            "canonical": address.map(|_| &explanation.canonical),
            "rules": explanation.rules,
            "layers": layers,
        });
        out.line(&head.to_string())?;
        for value in &explanation.values {
            let line = json!({
                "key": value.key,
                "value": value.value,
                "origin": value.place(),
                "source": value.source,
                "line": value.line,
                "rule": match &value.origin {
                    karu_config::Origin::PathRule { prefix, .. } => Some(prefix),
                    _ => None,
                },
            });
            out.line(&line.to_string())?;
        }
    } else {
        match address {
            Some(address) if address == explanation.canonical => {
                out.line(&format!("# karu configuration for {address}"))?;
            }
            Some(address) => out.line(&format!(
                "# karu configuration for {address} (canonical {})",
                explanation.canonical
            ))?,
            None => out.line("# karu configuration (global: no path rule applies)")?,
        }
        out.line(&format!(
            "# layers read, lowest first: {}",
            layers.join(", ")
        ))?;
        if address.is_some() {
            let rules = if explanation.rules.is_empty() {
                "none".to_owned()
            } else {
                explanation
                    .rules
                    .iter()
                    .map(|rule| format!("{rule:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            out.line(&format!("# path rules that apply, weakest first: {rules}"))?;
        }
        let width = explanation
            .values
            .iter()
            .map(|v| v.key.len() + v.value.len() + 3)
            .max()
            .unwrap_or(0);
        for value in &explanation.values {
            let assignment = format!("{} = {}", value.key, value.value);
            out.line(&format!("{assignment:width$}  # {}", value.place()))?;
        }
    }
    out.flush()?;
    Ok(OK)
}
