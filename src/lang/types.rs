//! DSRV types as written in declarations and inferred by the checker.

use std::fmt;

/// A DSRV type. `Any` is the type of an unannotated input and of anything
/// whose type cannot be known statically.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// 64-bit signed integers.
    Int,
    /// 64-bit IEEE floats.
    Float,
    /// Booleans.
    Bool,
    /// Strings.
    Str,
    /// The unit type, whose one value is `()`.
    Unit,
    /// An input declared without a type: it takes any value.
    Any,
    /// Lists (`List<T>`; the element type is not tracked: a list may hold
    /// values of any type, as in the Trustworthiness Checker).
    List,
    /// Tuples (`(T, U)`).
    Tuple,
    /// Maps from strings to values (`Map<T>`, and `Struct<…>`, whose values
    /// are maps).
    Map,
    /// Functions (`(T -> U)`).
    Fn,
}

impl Type {
    /// Parses a type name as written in a declaration.
    pub fn from_name(name: &str) -> Option<Type> {
        Some(match name {
            "Int" => Type::Int,
            "Float" => Type::Float,
            "Bool" => Type::Bool,
            "Str" => Type::Str,
            "Unit" => Type::Unit,
            "Any" => Type::Any,
            "List" => Type::List,
            "Map" | "Struct" => Type::Map,
            "Tuple" => Type::Tuple,
            _ => return None,
        })
    }

    /// Whether values of the type are numbers (`Int` or `Float`).
    pub fn is_numeric(self) -> bool {
        matches!(self, Type::Int | Type::Float)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Type::Int => "Int",
            Type::Float => "Float",
            Type::Bool => "Bool",
            Type::Str => "Str",
            Type::Unit => "Unit",
            Type::Any => "Any",
            Type::List => "List",
            Type::Tuple => "Tuple",
            Type::Map => "Map",
            Type::Fn => "Fn",
        };
        f.write_str(name)
    }
}
