//! `vigil repl`: a [`crate::repl::Session`] fed lines from the terminal (rustyline: history kept in
//! the user's data directory, completion of commands and stream names) or, from a script
//! (`vigil repl spec < session`), as they come, with no prompt and an exit status that tells how
//! the run ended. The session itself (rows, commands, tiers, `:def`) is the library's.

use super::{Exit, error, load_spec, say};
use crate::monitor::{Spec, Tier};
use crate::repl::{Ended, Session};
use std::io::{self, BufRead, IsTerminal, Write};

/// Completion of commands and stream names at the terminal.
#[derive(rustyline::Helper, rustyline::Hinter, rustyline::Highlighter, rustyline::Validator)]
struct Complete {
    words: Vec<String>,
}

impl rustyline::completion::Completer for Complete {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let start = line[..pos]
            .rfind(|c: char| c.is_whitespace() || c == '=')
            .map_or(0, |i| i + 1);
        let word = &line[start..pos];
        let found = self
            .words
            .iter()
            .filter(|w| w.starts_with(word))
            .cloned()
            .collect();
        Ok((start, found))
    }
}

/// Where the terminal session keeps its history: the user's data directory.
fn history_file() -> Option<std::path::PathBuf> {
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".local/share"))
        })?;
    Some(base.join("vigil").join("repl_history"))
}

/// `vigil repl SPEC [--tier T]`.
pub(super) fn repl(spec_path: Option<&str>, tier: Tier) -> Exit {
    let spec = match spec_path.map(load_spec) {
        Some(Ok(s)) => s,
        Some(Err(exit)) => return exit,
        None => Spec::parse("<repl>", "").expect("the empty specification is valid"),
    };
    let mut session = Session::new(spec, tier);
    let terminal = io::stdin().is_terminal() && io::stdout().is_terminal();
    let result = if terminal {
        interactive(&mut session)
    } else {
        script(&mut session)
    };
    match result {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Exit::Success,
        Err(e) => {
            error(format_args!("{e}"));
            Exit::Failure
        }
        // A script's status says how the run ended.
        Ok(Ended::Stopped) => Exit::Runtime,
        Ok(Ended::Malformed) => Exit::Trace,
        Ok(Ended::Clean) => Exit::Success,
    }
}

/// Script mode: lines from standard input, no prompt.
fn script(session: &mut Session) -> io::Result<Ended> {
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let mut out = io::stdout().lock();
    let mut bytes = Vec::new();
    for i in 0.. {
        bytes.clear();
        if input.read_until(b'\n', &mut bytes)? == 0 {
            break;
        }
        let text = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        // A line that is not UTF-8 is reported and skipped; the session
        // goes on with the next line (it had ended, the rest dropped).
        let line = match std::str::from_utf8(text) {
            Ok(line) => line,
            Err(e) => {
                session.undecodable(i + 1, e.valid_up_to(), &mut out)?;
                continue;
            }
        };
        let go_on = session.line(line, i + 1, &mut out)?;
        out.flush()?;
        if !go_on {
            break;
        }
    }
    // (The input may have ended inside a definition: it is applied as it is.)
    session.finish(&mut out)
}

/// Terminal mode: rustyline, a prompt with the step, history, completion.
fn interactive(session: &mut Session) -> io::Result<Ended> {
    let mut editor: rustyline::Editor<Complete, rustyline::history::DefaultHistory> =
        rustyline::Editor::new().map_err(io::Error::other)?;
    editor.set_helper(Some(Complete {
        words: session.words(),
    }));
    let history = history_file();
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    say(format_args!("{}\n", session.banner()));
    let mut out = io::stdout();
    let mut n = 0;
    loop {
        match editor.readline(&session.prompt()) {
            Ok(line) => {
                n += 1;
                let _ = editor.add_history_entry(line.as_str());
                if !session.line(&line, n, &mut out)? {
                    break;
                }
                out.flush()?;
                // A definition may have added or dropped streams.
                if let Some(helper) = editor.helper_mut() {
                    helper.words = session.words();
                }
            }
            Err(rustyline::error::ReadlineError::Interrupted) => continue,
            Err(rustyline::error::ReadlineError::Eof) => break,
            Err(e) => return Err(io::Error::other(e)),
        }
    }
    if let Some(h) = &history {
        if let Some(dir) = h.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = editor.save_history(h);
    }
    session.finish(&mut out)
}
