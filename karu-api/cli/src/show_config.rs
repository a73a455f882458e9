//! `karu config [ADDRESS]`: the effective configuration, value by value, with the layer and
//! path rule that supplied each, secrets redacted.

use karu::Client;
use karu::config::Settings;
use serde_json::json;

use crate::locate;
use crate::outcome::{OK, Stop};
use crate::output::Stdout;

/// Prints the configuration in effect for `address` (or the global one).
pub(crate) fn run(
    client: &Client,
    address: Option<&str>,
    window: Option<&str>,
    json: bool,
    out: &mut Stdout,
) -> Result<u8, Stop> {
    let canonical = match address {
        None => String::new(),
        Some(address) => locate(client, address, window)?
            .canonical()
            .as_str()
            .to_owned(),
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
                    karu::config::Origin::PathRule { prefix, .. } => Some(prefix),
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

/// Prints every key Karu and the providers of this build read: the settings (with their
/// `KARU_*` variable, and whether a path rule may set them) and each provider section's
/// documented keys, with aliases, the provider's own environment variables and meaning.
pub(crate) fn keys(client: &Client, json: bool, out: &mut Stdout) -> Result<u8, Stop> {
    let mut rows: Vec<Row> = setting_keys()
        .into_iter()
        .map(|key| {
            let global = Settings::GLOBAL_ONLY
                .iter()
                .any(|g| key == *g || key.starts_with(&format!("{g}.")));
            let mut environment = vec![format!("KARU_{}", key.to_uppercase().replace('.', "__"))];
            if key == "http.ca_file" {
                environment.insert(0, "KARU_CA_FILE".to_owned());
            }
            Row {
                section: None,
                key,
                aliases: Vec::new(),
                environment,
                meaning: if global {
                    "global: a path rule may not set it".to_owned()
                } else {
                    String::new()
                },
            }
        })
        .collect();
    for section in client.registry().config_sections() {
        let name = section.name();
        let keys = section.keys();
        let mut documented: Vec<&str> = Vec::new();
        for key in &keys {
            documented.push(key.name);
            documented.extend(key.aliases.iter().copied());
            let mut environment = vec![format!(
                "KARU_{}__{}",
                name.to_uppercase(),
                key.name.to_uppercase()
            )];
            let text = key.environment_text.replace('`', "");
            if !text.is_empty() {
                environment.push(text);
            }
            rows.push(Row {
                section: Some(name.to_owned()),
                key: format!("{name}.{}", key.name),
                aliases: key.aliases.iter().map(|a| format!("{name}.{a}")).collect(),
                environment,
                meaning: key.meaning.replace('`', ""),
            });
        }
        // Keys the provider reads but does not document still exist.
        for field in section.fields() {
            if !documented.contains(field) {
                rows.push(Row {
                    section: Some(name.to_owned()),
                    key: format!("{name}.{field}"),
                    aliases: Vec::new(),
                    environment: vec![format!(
                        "KARU_{}__{}",
                        name.to_uppercase(),
                        field.to_uppercase()
                    )],
                    meaning: UNDOCUMENTED.to_owned(),
                });
            }
        }
    }
    if json {
        for row in &rows {
            let line = json!({
                "key": row.key,
                "section": row.section,
                "aliases": row.aliases,
                "environment": row.environment,
                "meaning": row.meaning,
            });
            out.line(&line.to_string())?;
        }
    } else {
        out.line(
            "# Every key, as [table] key = value in a config file, --set KEY=VALUE, or the \
             variables listed",
        )?;
        out.line("# (a provider reads its own variables only where no layer sets the key).")?;
        let mut section = None;
        for row in &rows {
            if row.section != section {
                section = row.section.clone();
                if let Some(name) = &section {
                    out.line("")?;
                    out.line(&format!("# [{name}]"))?;
                }
            }
            let mut line = row.key.clone();
            if !row.aliases.is_empty() {
                line.push_str(&format!(" (also {})", row.aliases.join(", ")));
            }
            line.push_str(&format!(
                "\n    environment: {}",
                row.environment.join(", ")
            ));
            if !row.meaning.is_empty() {
                line.push_str(&format!("\n    {}", row.meaning));
            }
            out.line(&line)?;
        }
    }
    out.flush()?;
    Ok(OK)
}

/// What `--keys` says of a key a provider reads but does not document.
pub(crate) const UNDOCUMENTED: &str = "(not documented by its provider)";

/// One key of `karu config --keys`.
struct Row {
    section: Option<String>,
    key: String,
    aliases: Vec<String>,
    environment: Vec<String>,
    meaning: String,
}

/// The dotted keys of every setting, in order.
fn setting_keys() -> Vec<String> {
    fn leaves(prefix: &str, value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, inner) in map {
                    let dotted = if prefix.is_empty() {
                        key.clone()
                    } else {
                        format!("{prefix}.{key}")
                    };
                    leaves(&dotted, inner, out);
                }
            }
            _ => out.push(prefix.to_owned()),
        }
    }
    let mut keys = Vec::new();
    if let Ok(value) = serde_json::to_value(Settings::default()) {
        leaves("", &value, &mut keys);
    }
    keys.sort();
    keys
}
