//! The README's first reads: each `$ karu ...` line of its `console` block runs, in a home
//! holding the `hello.txt` the README describes, and prints exactly the lines under it (the
//! README shows a tab as spaces: each line is compared word by word).

mod support;

use support::karu;

#[test]
fn the_readme_first_reads_print_what_it_shows() {
    let readme = include_str!("../README.md");
    let block = readme
        .split_once("```console\n")
        .and_then(|(_, rest)| rest.split_once("```\n"))
        .map(|(block, _)| block)
        .expect("README.md has a console block");
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("hello.txt"), "hello, ranges\n").unwrap();

    let mut commands: Vec<(&str, String)> = Vec::new();
    for line in block.lines() {
        match line.strip_prefix("$ ") {
            Some(command) => commands.push((command, String::new())),
            None => {
                let (_, expected) = commands.last_mut().expect("a command comes first");
                expected.push_str(line);
                expected.push('\n');
            }
        }
    }
    assert_eq!(commands.len(), 3, "{block}");
    for (command, expected) in commands {
        let args: Vec<&str> = command.split_whitespace().collect();
        assert_eq!(args[0], "karu", "{command}");
        let out = karu(home.path(), &args[1..]);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{command}");
        let words = |text: &str| -> Vec<Vec<String>> {
            text.lines()
                .map(|line| line.split_whitespace().map(str::to_owned).collect())
                .collect()
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.ends_with('\n'), "{command}: {stdout:?}");
        assert_eq!(words(&stdout), words(&expected), "{command}");
    }
}
