//! Pointwise operations on present values: checked Int arithmetic, Int/Float mixing, ordering, math.
//!
//! These are the single definition of what each operator computes on values;
//! the canonical interpreter and the reference evaluator both call them, and
//! the faster tiers must reproduce them bit for bit.

use crate::error::{ErrorKind, Fault};
use crate::lang::ast::{BinOp, Builtin, UnOp};
use crate::value::Value;
use std::cmp::Ordering;

/// The default bound on the length of a string a specification computes
/// (16 MiB). A longer `++` result is a runtime error, not an exhausted memory.
pub const DEFAULT_MAX_STRING_BYTES: usize = 16 << 20;

/// The rule on containers a specification builds: the parts put into one
/// (`parts`) may nest at most one level less than
/// [`MAX_VALUE_NESTING`](crate::value::MAX_VALUE_NESTING), so that every
/// value a run holds, prints, records or snapshots is as bounded as one a
/// reader takes (a stream `l = List(default(l[1], List()))` would otherwise
/// nest one level deeper each step, until printing it overflowed the
/// stack). `op` names the construction. Shared by the canonical tier and
/// the reference evaluator.
pub fn contain<'a>(
    op: &'static str,
    parts: impl IntoIterator<Item = &'a Value>,
) -> Result<(), Fault> {
    let below = crate::value::MAX_VALUE_NESTING - 1;
    if parts.into_iter().any(|v| v.nests_deeper_than(below)) {
        return Err(Fault {
            kind: ErrorKind::ValueTooDeep,
            op,
            detail: Some(format!(
                "containers would nest more than {} deep",
                crate::value::MAX_VALUE_NESTING
            )),
        });
    }
    Ok(())
}

pub fn op_name(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "addition",
        BinOp::Sub => "subtraction",
        BinOp::Mul => "multiplication",
        BinOp::Div => "division",
        BinOp::Rem => "remainder",
        BinOp::Eq => "equality",
        BinOp::Ne => "inequality",
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => "comparison",
        BinOp::And => "conjunction",
        BinOp::Or => "disjunction",
        BinOp::Implies => "implication",
        BinOp::Concat => "concatenation",
    }
}

fn invalid(op: &'static str, operands: &[&Value]) -> Fault {
    let shown: Vec<String> = operands.iter().map(|v| v.to_string()).collect();
    Fault {
        kind: ErrorKind::InvalidOperand,
        op,
        detail: Some(shown.join(" and ")),
    }
}

/// Checked i64 arithmetic exactly as Rust's `checked_*`: `/` truncates
/// toward zero, `%` takes the dividend's sign, `i64::MIN / -1` and
/// `i64::MIN % -1` overflow.
pub fn int_arith(op: BinOp, a: i64, b: i64) -> Result<i64, Fault> {
    let name = op_name(op);
    if matches!(op, BinOp::Div | BinOp::Rem) && b == 0 {
        return Err(Fault::new(ErrorKind::DivisionByZero, name));
    }
    let r = match op {
        BinOp::Add => a.checked_add(b),
        BinOp::Sub => a.checked_sub(b),
        BinOp::Mul => a.checked_mul(b),
        BinOp::Div => a.checked_div(b),
        BinOp::Rem => a.checked_rem(b),
        _ => unreachable!("not an arithmetic operator"),
    };
    r.ok_or_else(|| Fault::new(ErrorKind::IntegerOverflow, name))
}

pub fn float_arith(op: BinOp, a: f64, b: f64) -> f64 {
    match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => a / b,
        BinOp::Rem => a % b,
        _ => unreachable!("not an arithmetic operator"),
    }
}

/// Ordering of two values: Int/Int, Int/Float mixed (the Int converted),
/// Float/Float (IEEE: `None` when a NaN is involved), Bool, Str (bytewise).
fn order(op: BinOp, a: &Value, b: &Value) -> Result<Option<Ordering>, Fault> {
    Ok(match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Int(x), Value::Float(y)) => (*x as f64).partial_cmp(y),
        (Value::Float(x), Value::Int(y)) => x.partial_cmp(&(*y as f64)),
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Str(x), Value::Str(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        _ => return Err(invalid(op_name(op), &[a, b])),
    })
}

/// `a op b` with the default string bound.
#[cfg(any(test, feature = "testing"))]
pub fn binary(op: BinOp, a: &Value, b: &Value) -> Result<Value, Fault> {
    binary_bounded(op, a, b, DEFAULT_MAX_STRING_BYTES)
}

/// `a op b`, where a string result may have at most `max_string_bytes` bytes.
pub fn binary_bounded(
    op: BinOp,
    a: &Value,
    b: &Value,
    max_string_bytes: usize,
) -> Result<Value, Fault> {
    use Value::*;
    match op {
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => match (a, b) {
            (Int(x), Int(y)) => int_arith(op, *x, *y).map(Int),
            (Int(x), Float(y)) => Ok(Float(float_arith(op, *x as f64, *y))),
            (Float(x), Int(y)) => Ok(Float(float_arith(op, *x, *y as f64))),
            (Float(x), Float(y)) => Ok(Float(float_arith(op, *x, *y))),
            _ => Err(invalid(op_name(op), &[a, b])),
        },
        BinOp::Eq => Ok(Bool(a.structural_eq(b))),
        BinOp::Ne => Ok(Bool(!a.structural_eq(b))),
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
            let o = order(op, a, b)?;
            Ok(Bool(match op {
                BinOp::Lt => o == Some(Ordering::Less),
                BinOp::Le => matches!(o, Some(Ordering::Less | Ordering::Equal)),
                BinOp::Gt => o == Some(Ordering::Greater),
                _ => matches!(o, Some(Ordering::Greater | Ordering::Equal)),
            }))
        }
        BinOp::And | BinOp::Or | BinOp::Implies => match (a, b) {
            (Bool(x), Bool(y)) => Ok(Bool(match op {
                BinOp::And => *x && *y,
                BinOp::Or => *x || *y,
                _ => !*x || *y,
            })),
            _ => Err(invalid(op_name(op), &[a, b])),
        },
        BinOp::Concat => match (a, b) {
            (Str(x), Str(y)) => {
                let len = x.len().saturating_add(y.len());
                if len > max_string_bytes {
                    return Err(Fault {
                        kind: ErrorKind::StringTooLong,
                        op: "concatenation",
                        detail: Some(format!(
                            "the result would have {len} bytes, over the limit of {max_string_bytes}"
                        )),
                    });
                }
                let mut s = String::with_capacity(len);
                s.push_str(x);
                s.push_str(y);
                Ok(Str(s.into()))
            }
            _ => Err(invalid("concatenation", &[a, b])),
        },
    }
}

pub fn unary(op: UnOp, a: &Value) -> Result<Value, Fault> {
    match (op, a) {
        (UnOp::Neg, Value::Int(x)) => x
            .checked_neg()
            .map(Value::Int)
            .ok_or(Fault::new(ErrorKind::IntegerOverflow, "negation")),
        (UnOp::Neg, Value::Float(x)) => Ok(Value::Float(-x)),
        (UnOp::Not, Value::Bool(b)) => Ok(Value::Bool(!b)),
        (UnOp::Neg, _) => Err(invalid("negation", &[a])),
        (UnOp::Not, _) => Err(invalid("negation", &[a])),
    }
}

/// The pure math builtins (`sin cos tan abs sqrt floor ceil min max`).
pub fn math(f: Builtin, args: &[&Value]) -> Result<Value, Fault> {
    use Value::*;
    let name = f.name();
    match (f, args) {
        (Builtin::Sin, [Float(x)]) => Ok(Float(x.sin())),
        (Builtin::Cos, [Float(x)]) => Ok(Float(x.cos())),
        (Builtin::Tan, [Float(x)]) => Ok(Float(x.tan())),
        (Builtin::Abs, [Int(x)]) => x
            .checked_abs()
            .map(Int)
            .ok_or(Fault::new(ErrorKind::IntegerOverflow, "abs")),
        (Builtin::Abs, [Float(x)]) => Ok(Float(x.abs())),
        (Builtin::Sqrt, [Int(x)]) => Ok(Float((*x as f64).sqrt())),
        (Builtin::Sqrt, [Float(x)]) => Ok(Float(x.sqrt())),
        (Builtin::Floor | Builtin::Ceil, [Int(x)]) => Ok(Int(*x)),
        (Builtin::Floor, [Float(x)]) => Ok(Float(x.floor())),
        (Builtin::Ceil, [Float(x)]) => Ok(Float(x.ceil())),
        (Builtin::Min | Builtin::Max, [a, b]) => {
            let min = f == Builtin::Min;
            match (a, b) {
                (Int(x), Int(y)) => Ok(Int(if min { *x.min(y) } else { *x.max(y) })),
                (Int(_) | Float(_), Int(_) | Float(_)) => {
                    let (x, y) = (as_f64(a), as_f64(b));
                    Ok(Float(if min { x.min(y) } else { x.max(y) }))
                }
                _ => Err(invalid(name, args)),
            }
        }
        _ => Err(invalid(name, args)),
    }
}

fn as_f64(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        _ => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_int_arithmetic() {
        assert_eq!(int_arith(BinOp::Div, -7, 2), Ok(-3));
        assert_eq!(int_arith(BinOp::Rem, -7, 2), Ok(-1));
        assert_eq!(int_arith(BinOp::Rem, 7, -2), Ok(1));
        let e = int_arith(BinOp::Div, i64::MIN, -1).unwrap_err();
        assert_eq!((e.kind, e.op), (ErrorKind::IntegerOverflow, "division"));
        let e = int_arith(BinOp::Rem, 1, 0).unwrap_err();
        assert_eq!((e.kind, e.op), (ErrorKind::DivisionByZero, "remainder"));
        assert!(int_arith(BinOp::Add, i64::MAX, 1).is_err());
    }

    #[test]
    fn mixing_and_ordering() {
        assert_eq!(
            binary(BinOp::Add, &Value::Int(1), &Value::Float(0.5)),
            Ok(Value::Float(1.5))
        );
        assert_eq!(
            binary(BinOp::Eq, &Value::Int(1), &Value::Float(1.0)),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            binary(BinOp::Lt, &Value::Int(1), &Value::Float(1.5)),
            Ok(Value::Bool(true))
        );
        let nan = Value::Float(f64::NAN);
        assert_eq!(
            binary(BinOp::Ge, &nan, &Value::Float(1.0)),
            Ok(Value::Bool(false))
        );
        assert_eq!(binary(BinOp::Ne, &nan, &nan), Ok(Value::Bool(true)));
        let e = binary(BinOp::Lt, &Value::Int(1), &Value::Bool(true)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidOperand);
        assert_eq!(e.detail.as_deref(), Some("Int(1) and Bool(true)"));
    }

    #[test]
    fn math_builtins() {
        assert_eq!(
            math(Builtin::Abs, &[&Value::Int(i64::MIN)])
                .unwrap_err()
                .kind,
            ErrorKind::IntegerOverflow
        );
        assert_eq!(
            math(Builtin::Sin, &[&Value::Int(1)]).unwrap_err().kind,
            ErrorKind::InvalidOperand
        );
        assert_eq!(
            math(Builtin::Max, &[&Value::Int(1), &Value::Float(0.5)]),
            Ok(Value::Float(1.0))
        );
        assert_eq!(math(Builtin::Floor, &[&Value::Int(3)]), Ok(Value::Int(3)));
    }
}
