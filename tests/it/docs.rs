//! The examples of the README and of docs/ run as written, so the manual cannot drift from the
//! program: every `dsrv` block is a specification that checks, every `console` block's commands
//! print what the block shows, and the quick start's files are the ones the README shows. (The
//! README's `rust` block is a doctest: see `ReadmeDoctests` in src/lib.rs.)

use std::path::{Path, PathBuf};
use std::process::Command;

/// A fenced code block: its file, the line of its opening fence, its info string and text.
struct Block {
    file: String,
    line: usize,
    tag: String,
    text: String,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The README and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The fenced blocks of `page` (indented by the fence's indentation, which is removed).
fn blocks(page: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(page).expect("the page reads");
    let file = page
        .strip_prefix(root())
        .unwrap_or(page)
        .display()
        .to_string();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        if let Some(tag) = trimmed.strip_prefix("```") {
            let indent = lines[i].len() - trimmed.len();
            let end = (i + 1..lines.len())
                .find(|&j| lines[j].trim_start().starts_with("```"))
                .unwrap_or_else(|| panic!("{file}:{}: an unclosed code block", i + 1));
            let body: Vec<&str> = lines[i + 1..end]
                .iter()
                .map(|l| l.get(indent..).unwrap_or(""))
                .collect();
            out.push(Block {
                file: file.clone(),
                line: i + 1,
                tag: tag.trim().to_string(),
                text: body.join("\n") + "\n",
            });
            i = end + 1;
        } else {
            i += 1;
        }
    }
    out
}

fn all_blocks(tag: &str) -> Vec<Block> {
    pages()
        .iter()
        .flat_map(|p| blocks(p))
        .filter(|b| b.tag == tag)
        .collect()
}

#[test]
fn every_dsrv_block_checks() {
    let specs = all_blocks("dsrv");
    // The README's quick start, the fusion example, and the language reference's.
    assert!(specs.len() >= 5, "only {} dsrv blocks found", specs.len());
    let failures: Vec<String> = specs
        .iter()
        .filter_map(|b| {
            let name = format!("{}:{}", b.file, b.line);
            vigil::Spec::parse(&name, &b.text).err().map(|d| d.render())
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The commands of a `console` block with what each prints: lines starting `$ ` are commands,
/// the lines after each what it prints (its standard output, then its standard error).
fn commands(block: &Block) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in block.text.lines() {
        match line.strip_prefix("$ ") {
            Some(cmd) => out.push((cmd.to_string(), String::new())),
            None => {
                let (_, shown) = out.last_mut().unwrap_or_else(|| {
                    panic!("{}:{}: output before a command", block.file, block.line)
                });
                shown.push_str(line);
                shown.push('\n');
            }
        }
    }
    out
}

#[test]
fn every_console_block_prints_what_it_shows() {
    let vigil = Path::new(env!("CARGO_BIN_EXE_vigil"));
    let path = std::env::join_paths(
        std::iter::once(
            vigil
                .parent()
                .expect("the binary's directory")
                .to_path_buf(),
        )
        .chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )
    .expect("a PATH");
    let blocks = all_blocks("console");
    assert!(
        blocks.len() >= 6,
        "only {} console blocks found",
        blocks.len()
    );
    let mut failures = Vec::new();
    for block in &blocks {
        for (cmd, shown) in commands(block) {
            let out = Command::new("sh")
                .arg("-c")
                .arg(&cmd)
                .current_dir(root())
                .env("PATH", &path)
                .output()
                .expect("sh runs");
            let got = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            if got != shown {
                failures.push(format!(
                    "{}:{}: `{cmd}`\n--- shown\n{shown}--- printed\n{got}",
                    block.file, block.line
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every Rust block of docs/library.md appears verbatim between `// guide` and `// guide end`
/// in tests/it/library_guide.rs, which runs it.
#[test]
fn every_rust_block_of_the_library_guide_runs() {
    let guide =
        std::fs::read_to_string(root().join("tests/it/library_guide.rs")).expect("the file");
    // The guide's pieces there, without their indentation.
    let mut pieces = Vec::new();
    let mut piece: Option<Vec<&str>> = None;
    for line in guide.lines() {
        match line.trim() {
            "// guide" => piece = Some(Vec::new()),
            "// guide end" => pieces.push(dedent(&piece.take().expect("a piece begun"))),
            _ => {
                if let Some(p) = piece.as_mut() {
                    p.push(line);
                }
            }
        }
    }
    let blocks: Vec<Block> = blocks(&root().join("docs/library.md"))
        .into_iter()
        .filter(|b| b.tag == "rust")
        .collect();
    assert!(blocks.len() >= 8, "only {} rust blocks", blocks.len());
    let missing: Vec<String> = blocks
        .iter()
        .filter(|b| !pieces.contains(&dedent(&b.text.lines().collect::<Vec<_>>())))
        .map(|b| format!("{}:{}:\n{}", b.file, b.line, b.text))
        .collect();
    assert!(
        missing.is_empty(),
        "blocks not in tests/it/library_guide.rs:\n{}",
        missing.join("\n")
    );
}

/// `lines` without their common indentation, joined.
fn dedent(lines: &[&str]) -> String {
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let out: Vec<&str> = lines
        .iter()
        .map(|l| l.get(indent..).unwrap_or(""))
        .collect();
    out.join("\n")
}

/// The README shows the quick start's specification and trace; they must be the files its
/// commands read.
#[test]
fn the_quick_start_shows_its_files() {
    let readme = blocks(&root().join("README.md"));
    let shown = |tag: &str, first: &str| {
        readme
            .iter()
            .find(|b| b.tag == tag && b.text.starts_with(first))
            .unwrap_or_else(|| panic!("no {tag} block starting {first:?} in the README"))
            .text
            .clone()
    };
    let file = |name: &str| {
        std::fs::read_to_string(root().join("examples/quickstart").join(name)).expect("the file")
    };
    assert_eq!(
        shown("dsrv", "// The README's quick start"),
        file("temp.dsrv")
    );
    assert_eq!(shown("text", "temp\n"), file("readings.csv"));
}

/// The README stays short (issue 38: it was 2,350 lines); the rest is in docs/.
#[test]
fn the_readme_stays_short() {
    let lines = std::fs::read_to_string(root().join("README.md"))
        .expect("the README")
        .lines()
        .count();
    assert!(lines <= 300, "the README has {lines} lines");
}

/// Every relative link of the README and docs/ names a file that exists, and a `#section`
/// of a Markdown page a heading it has (GitHub's anchors: lowercase, punctuation dropped,
/// spaces as `-`, a repeated heading numbered `-1`, `-2`, …).
#[test]
fn every_link_resolves() {
    let mut failures = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("the page");
        let dir = page.parent().expect("a directory");
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            if target.starts_with("http") || target.contains(' ') {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            let file = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            if !file.exists() {
                failures.push(format!("{}: `{target}`: no such file", page.display()));
                continue;
            }
            if !anchor.is_empty() && !anchors(&file).iter().any(|a| a == anchor) {
                failures.push(format!("{}: `{target}`: no such section", page.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The anchors GitHub gives the headings of a Markdown page.
fn anchors(page: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(page).unwrap_or_default();
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let Some(heading) = line.strip_prefix('#').filter(|_| !fenced) else {
            continue;
        };
        let heading = heading.trim_start_matches('#').trim();
        let slug: String = heading
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let n = seen.iter().filter(|s| **s == slug).count();
        out.push(match n {
            0 => slug.clone(),
            n => format!("{slug}-{n}"),
        });
        seen.push(slug);
    }
    out
}
