//! A trigger message's placeholders: `{EXPR}` or `{EXPR:FORMAT}`, and how a value is written.
//!
//! `FORMAT` is a small, documented subset of Rust's and Python's format specs, then the text of
//! an absent value:
//!
//! ```text
//! FORMAT := [ALIGN] [WIDTH] ["." PRECISION] ["%"] ["!" ABSENT]
//! ALIGN  := "<" | ">" | "^"
//! ```
//!
//! - `.N` writes a number with N decimals (an Int as well: `{n:.1}` is `3.0`);
//! - `%` writes a number times 100, then `%` (`{ratio:.1%}` is `12.5%`);
//! - `WIDTH` pads to that many characters (numbers to the right, text to the left, unless an
//!   `ALIGN` says `<` left, `>` right or `^` centred);
//! - `!TEXT` is what a value that is not there writes: NoVal (`-` without it) and ⊥ (`Deferred`
//!   without it), as `{x[1]:!n/a}`.
//!
//! A placeholder's expression ends at its first `}` (so it holds no map literal) and is split
//! from its format at the last `:` whose remainder is a valid format.

use crate::value::{Sample, Value};

/// How a placeholder writes its value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Format {
    align: Option<Align>,
    width: usize,
    precision: Option<usize>,
    percent: bool,
    absent: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Align {
    Left,
    Right,
    Centre,
}

/// The longest width or precision a format may ask for (a message is one line of an alert).
const MAX_DIGITS: usize = 100;

impl Format {
    /// Parses `FORMAT` (what follows the placeholder's `:`), or says why it is not one.
    pub fn parse(spec: &str) -> Result<Format, String> {
        let (spec, absent) = match spec.split_once('!') {
            Some((s, a)) => (s, Some(a.to_string())),
            None => (spec, None),
        };
        let mut rest = spec;
        let align = match rest.chars().next() {
            Some('<') => Some(Align::Left),
            Some('>') => Some(Align::Right),
            Some('^') => Some(Align::Centre),
            _ => None,
        };
        if align.is_some() {
            rest = &rest[1..];
        }
        let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
        let n = digits(rest);
        let number = |text: &str| -> Result<usize, String> {
            match text.parse::<usize>() {
                Ok(v) if v <= MAX_DIGITS => Ok(v),
                _ => Err(format!("`{text}` is more than {MAX_DIGITS}")),
            }
        };
        let width = match n {
            0 => 0,
            _ => number(&rest[..n])?,
        };
        rest = &rest[n..];
        let precision = match rest.strip_prefix('.') {
            Some(after) => {
                let n = digits(after);
                if n == 0 {
                    return Err("`.` must be followed by the number of decimals".into());
                }
                rest = &after[n..];
                Some(number(&after[..n])?)
            }
            None => None,
        };
        let percent = match rest.strip_prefix('%') {
            Some(after) => {
                rest = after;
                true
            }
            None => false,
        };
        if !rest.is_empty() {
            return Err(format!(
                "`{rest}` is not part of a format (`[<>^][WIDTH][.DECIMALS][%][!ABSENT]`)"
            ));
        }
        Ok(Format {
            align,
            width,
            precision,
            percent,
            absent,
        })
    }

    /// Splits a placeholder's text into its expression and its format: at the last `:` whose
    /// remainder is a valid format (a `:` inside the expression stays there).
    pub fn split(placeholder: &str) -> (&str, Format) {
        let mut at = placeholder.len();
        while let Some(i) = placeholder[..at].rfind(':') {
            if let Ok(f) = Format::parse(&placeholder[i + 1..]) {
                return (&placeholder[..i], f);
            }
            at = i;
        }
        (placeholder, Format::default())
    }

    /// Writes `sample` as this format says (the plain form without one: `31.5`, `web-1`,
    /// `true`, `()`; `-` for NoVal, `Deferred` for ⊥).
    pub fn write(&self, sample: &Sample, out: &mut String) {
        let number = match sample {
            Sample::Value(Value::Int(i)) => Some(*i as f64),
            Sample::Value(Value::Float(x)) => Some(*x),
            _ => None,
        };
        let text = match (sample, number) {
            (Sample::NoVal | Sample::Deferred, _) if self.absent.is_some() => {
                self.absent.clone().unwrap_or_default()
            }
            (_, Some(x)) if self.percent => match self.precision {
                Some(p) => format!("{:.p$}%", x * 100.0),
                None => format!("{}%", x * 100.0),
            },
            (_, Some(x)) if self.precision.is_some() => {
                let p = self.precision.unwrap_or(0);
                format!("{x:.p$}")
            }
            _ => plain(sample),
        };
        let pad = self.width.saturating_sub(text.chars().count());
        let align = self.align.unwrap_or(match number {
            Some(_) => Align::Right,
            None => Align::Left,
        });
        let (before, after) = match align {
            Align::Left => (0, pad),
            Align::Right => (pad, 0),
            Align::Centre => (pad / 2, pad - pad / 2),
        };
        out.extend(std::iter::repeat_n(' ', before));
        out.push_str(&text);
        out.extend(std::iter::repeat_n(' ', after));
    }
}

/// A sample in a trigger message's plain form.
pub fn plain(sample: &Sample) -> String {
    match sample {
        Sample::NoVal => "-".to_string(),
        Sample::Deferred => "Deferred".to_string(),
        Sample::Value(Value::Int(i)) => i.to_string(),
        Sample::Value(Value::Float(x)) => format!("{x:?}"),
        Sample::Value(Value::Bool(b)) => b.to_string(),
        Sample::Value(Value::Str(s)) => s.to_string(),
        Sample::Value(Value::Unit) => "()".to_string(),
        Sample::Value(v) => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(spec: &str, s: Sample) -> String {
        let mut out = String::new();
        Format::parse(spec).unwrap().write(&s, &mut out);
        out
    }

    #[test]
    fn formats_write_numbers_text_and_absence() {
        let f = |x: f64| Sample::Value(Value::Float(x));
        assert_eq!(shown("", f(289.82500000000005)), "289.82500000000005");
        assert_eq!(shown(".1", f(289.82500000000005)), "289.8");
        assert_eq!(shown(".1%", f(0.125)), "12.5%");
        assert_eq!(shown("%", f(0.5)), "50%");
        assert_eq!(shown(">5", Sample::Value(Value::Int(42))), "   42");
        assert_eq!(shown("5", Sample::Value(Value::Int(42))), "   42");
        assert_eq!(shown("<5.1", Sample::Value(Value::Int(42))), "42.0 ");
        assert_eq!(shown("^6", Sample::Value(Value::Str("ab".into()))), "  ab  ");
        assert_eq!(shown("5", Sample::Value(Value::Str("ab".into()))), "ab   ");
        assert_eq!(shown(".2", Sample::NoVal), "-");
        assert_eq!(shown(".2!n/a", Sample::NoVal), "n/a");
        assert_eq!(shown("!", Sample::NoVal), "");
        assert_eq!(shown(".3", Sample::Deferred), "Deferred");
        assert_eq!(shown(".3!none", Sample::Deferred), "none");
        assert_eq!(shown(".1", Sample::Value(Value::Bool(true))), "true");
    }

    #[test]
    fn a_placeholder_splits_at_the_last_colon_that_starts_a_format() {
        assert_eq!(Format::split("x"), ("x", Format::default()));
        assert_eq!(Format::split("x:.1").0, "x");
        assert_eq!(Format::split("a / b:.1%").0, "a / b");
        // A colon that does not start a format belongs to the expression.
        assert_eq!(Format::split("x: y").0, "x: y");
        assert_eq!(Format::split("x:!none").1.absent.as_deref(), Some("none"));
        for bad in [".", ".x", "5.", "x", "1000", ".101"] {
            assert!(Format::parse(bad).is_err(), "{bad}");
        }
    }
}
