//! Runtime values of DSRV streams and the three-way state of a stream at a step.

use crate::error::Fault;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A Map's entries: string keys, kept sorted (the Trustworthiness
/// Checker's maps print in key order).
pub type MapEntries = BTreeMap<Arc<str>, Value>;

/// A function value: a lambda closed over the streams it reads at the step
/// it was made, possibly with arguments already bound (`partial`).
///
/// The trait keeps `Value` below the language: the canonical tier's
/// closures (`canonical::func`) implement it, and so does the reference
/// evaluator's, independently.
pub trait Function: fmt::Debug + Send + Sync {
    /// How many arguments a call takes.
    fn arity(&self) -> usize;
    /// Applies the function to `args` (exactly `arity()` of them), as a
    /// container builtin does (`List.map`): the streams it captured as they
    /// were at the step.
    fn call(&self, args: &[Value]) -> Result<Sample, Fault>;
    /// Applies the function at a call site (`f(a)`), which holds the
    /// streams it captured, as an operator holds its operands (the
    /// Trustworthiness Checker's persistent call-site executor).
    fn call_at_site(&self, args: &[Value]) -> Result<Sample, Fault> {
        self.call(args)
    }
    /// Binds the first arguments (`partial(f, a…)`); `args` is not longer
    /// than `arity()`.
    fn bind(self: Arc<Self>, args: Vec<Value>) -> Arc<dyn Function>;
    /// Its source text, as a printed function value shows it.
    fn source(&self) -> String;
}

/// The elements of a list value: a persistent vector (`imbl::Vector`, an
/// RRB tree of chunks) behind one pointer. Cloning copies nothing, and
/// appending one element to a list makes a new list sharing all but the
/// last chunk with the old one, which stays as it was: a stream that
/// accumulates (`l = List.append(default(l[1], List()), x)`) costs
/// amortised O(1) per step, where copying the whole list at every step was
/// quadratic over a run. The one pointer keeps `Value` small.
#[derive(Clone, Default)]
pub struct List(Arc<imbl::Vector<Value>>);

impl List {
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the list has no elements.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The elements, first to last.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Value> + ExactSizeIterator + '_ {
        self.0.iter()
    }

    /// The element at `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<&Value> {
        self.0.get(index)
    }

    /// The first element, if there is one.
    pub fn first(&self) -> Option<&Value> {
        self.0.front()
    }

    /// The elements, copied into a vector.
    pub fn to_vec(&self) -> Vec<Value> {
        self.0.iter().cloned().collect()
    }

    /// This list with `v` after its last element (this one is unchanged).
    pub fn appended(&self, v: Value) -> List {
        let mut items = (*self.0).clone();
        items.push_back(v);
        List(Arc::new(items))
    }

    /// This list's elements, then `other`'s.
    pub fn concat(&self, other: &List) -> List {
        let mut items = (*self.0).clone();
        items.append((*other.0).clone());
        List(Arc::new(items))
    }

    /// This list without its first element (empty stays empty).
    pub fn tail(&self) -> List {
        List(Arc::new(self.0.skip(1.min(self.0.len()))))
    }
}

/// As a slice indexes: the element at `index`, which must exist.
impl std::ops::Index<usize> for List {
    type Output = Value;

    fn index(&self, index: usize) -> &Value {
        &self.0[index]
    }
}

impl From<Vec<Value>> for List {
    fn from(items: Vec<Value>) -> List {
        List(Arc::new(items.into_iter().collect()))
    }
}

impl FromIterator<Value> for List {
    fn from_iter<I: IntoIterator<Item = Value>>(items: I) -> List {
        List(Arc::new(items.into_iter().collect()))
    }
}

/// Element by element, by `Value`'s equality.
impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b))
    }
}

impl fmt::Debug for List {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// How deeply containers (lists, tuples, maps) may nest in a value that
/// enters a monitor: from any trace reader (JSON lines, CSV cells, MQTT,
/// Redis), a row built in memory (`row::conform`), a replay log or a
/// snapshot. `[[1]]` nests 2 deep, a scalar 0. Every reader checks it before
/// it builds the value, so no reader recurses deeper than this, and what
/// the recorder writes (values that passed it) is always read back. It is
/// the bound on a specification's expressions (`lang::MAX_NESTING`), so a
/// literal `[[…]]` that parses also evaluates; every recursion over a value
/// (printing, comparing, dropping, encoding) stays a few hundred frames.
pub const MAX_VALUE_NESTING: usize = 256;

/// A present value carried by a stream at one step.
#[derive(Clone, Debug)]
pub enum Value {
    /// A 64-bit signed integer; arithmetic overflow is a runtime error.
    Int(i64),
    /// A 64-bit IEEE float.
    Float(f64),
    /// A Boolean.
    Bool(bool),
    /// A string, shared (cloning a `Value` never copies its text).
    Str(Arc<str>),
    /// The unit value `()`.
    Unit,
    /// A list (shared: cloning never copies the elements, and a list made
    /// from another by `List.append` shares its elements; see [`List`]).
    List(List),
    /// A tuple.
    Tuple(Arc<[Value]>),
    /// A map from strings to values, in key order.
    Map(Arc<MapEntries>),
    /// A function (a closure).
    Func(Arc<dyn Function>),
    /// NoVal or ⊥ as an element of a list: only `List.map` makes one, of
    /// a function whose result is NoVal or ⊥ for an element (the
    /// Trustworthiness Checker keeps them in the list, and prints them).
    /// Taking the element out gives the marker's sample back.
    Marker(Marker),
}

/// The two markers a list may hold (see `Value::Marker`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Marker {
    NoVal,
    Deferred,
}

impl Value {
    /// Whether containers nest more than `limit` deep in this value
    /// (`[[1]]` nests 2 deep). The walk stops at the limit, so it recurses
    /// at most `limit + 1` calls deep whatever the value.
    pub(crate) fn nests_deeper_than(&self, limit: usize) -> bool {
        // `limit - 1` is evaluated only when `limit > 0` (the `||` short-circuits).
        let deeper = |v: &Value| v.nests_deeper_than(limit - 1);
        match self {
            Value::List(items) => limit == 0 || items.iter().any(deeper),
            Value::Tuple(items) => limit == 0 || items.iter().any(deeper),
            Value::Map(m) => limit == 0 || m.values().any(deeper),
            _ => false,
        }
    }

    /// Structural equality with no numeric coercion (`Int(1) != Float(1.0)`).
    /// Floats compare by IEEE `==`, so `NaN != NaN`, exactly as the
    /// Trustworthiness Checker does.
    pub fn structural_eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Float(a), Value::Float(b)) => a == b,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::Unit, Value::Unit) => true,
            (Value::List(a), Value::List(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.structural_eq(y))
            }
            (Value::Tuple(a), Value::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.structural_eq(y))
            }
            (Value::Map(a), Value::Map(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b.iter())
                        .all(|((ka, va), (kb, vb))| ka == kb && va.structural_eq(vb))
            }
            (Value::Marker(a), Value::Marker(b)) => a == b,
            // Functions are equal only to themselves.
            (Value::Func(a), Value::Func(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Whether this is a scalar (Int, Float, Bool), a string or unit: a value
    /// with no parts.
    pub fn is_plain(&self) -> bool {
        !matches!(
            self,
            Value::List(_) | Value::Tuple(_) | Value::Map(_) | Value::Func(_) | Value::Marker(_)
        )
    }

    /// A list of `items`.
    pub fn list(items: Vec<Value>) -> Value {
        Value::List(items.into())
    }

    /// A tuple of `items`.
    pub fn tuple(items: Vec<Value>) -> Value {
        Value::Tuple(items.into())
    }

    /// The value's variant as a small number, in the order of `Value`'s
    /// variants (both markers one kind): what a row check indexes its table
    /// of accepted kinds with (`RowSchema::check`), and the order of keys of
    /// different types (`scale::key_cmp`).
    #[inline]
    pub(crate) fn kind(&self) -> u8 {
        match self {
            Value::Int(_) => 0,
            Value::Float(_) => 1,
            Value::Bool(_) => 2,
            Value::Str(_) => 3,
            Value::Unit => 4,
            Value::List(_) => 5,
            Value::Tuple(_) => 6,
            Value::Map(_) => 7,
            Value::Func(_) => 8,
            Value::Marker(_) => 9,
        }
    }

    /// The name of the value's runtime type, as used in diagnostics.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Int(_) => "Int",
            Value::Float(_) => "Float",
            Value::Bool(_) => "Bool",
            Value::Str(_) => "Str",
            Value::Unit => "Unit",
            Value::List(_) => "List",
            Value::Tuple(_) => "Tuple",
            Value::Map(_) => "Map",
            Value::Func(_) => "Fn",
            Value::Marker(Marker::NoVal) => "NoVal",
            Value::Marker(Marker::Deferred) => "Deferred",
        }
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Int(i)
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Value {
        Value::Float(x)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.into())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s.into())
    }
}

impl From<Arc<str>> for Value {
    fn from(s: Arc<str>) -> Value {
        Value::Str(s)
    }
}

/// Bitwise equality: the relation the tiers must agree on (`NaN` equals a
/// `NaN` with the same bits, `0.0` differs from `-0.0`), element by element
/// inside containers.
impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits(),
            (Value::List(a), Value::List(b)) => a == b,
            (Value::Tuple(a), Value::Tuple(b)) => a == b,
            (Value::Map(a), Value::Map(b)) => a == b,
            // Two runs (two tiers) make two closures of one lambda: they
            // agree when they print alike.
            (Value::Func(a), Value::Func(b)) => Arc::ptr_eq(a, b) || a.source() == b.source(),
            _ => self.structural_eq(other),
        }
    }
}

/// The Trustworthiness Checker's rendering: `Int(3)`, `Float(2.0)`,
/// `Bool(true)`, `Str("a")`, `Unit`, `List([Int(1), Int(2)])`,
/// `Tuple([Int(1), Int(5)])`, `Map({"a": Int(1)})`. Floats use Rust's `{:?}`
/// form.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn items<'v>(
            f: &mut fmt::Formatter<'_>,
            items: impl Iterator<Item = &'v Value>,
        ) -> fmt::Result {
            for (k, v) in items.enumerate() {
                if k > 0 {
                    f.write_str(", ")?;
                }
                v.fmt(f)?;
            }
            Ok(())
        }
        match self {
            Value::Int(i) => write!(f, "Int({i})"),
            Value::Float(x) => write!(f, "Float({x:?})"),
            Value::Bool(b) => write!(f, "Bool({b})"),
            Value::Str(s) => write!(f, "Str({:?})", &**s),
            Value::Unit => write!(f, "Unit"),
            Value::List(v) => {
                f.write_str("List([")?;
                items(f, v.iter())?;
                f.write_str("])")
            }
            Value::Tuple(v) => {
                f.write_str("Tuple([")?;
                items(f, v.iter())?;
                f.write_str("])")
            }
            Value::Map(m) => {
                f.write_str("Map({")?;
                for (k, (key, v)) in m.iter().enumerate() {
                    if k > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{:?}: {v}", &**key)?;
                }
                f.write_str("})")
            }
            Value::Func(func) => {
                // A bound function (`partial`) is callable as a value in the
                // Trustworthiness Checker's flags.
                let source = func.source();
                let p = source.starts_with("partial(");
                write!(
                    f,
                    "Function(RuntimeFunction {{ display: {source:?}, callable: {p}, value_callable: {p}, \
                     value_factory: true, call_site_stateful: false, language_payload: false }})"
                )
            }
            Value::Marker(m) => write!(f, "{}", Sample::from(*m)),
        }
    }
}

/// One key of a keyed monitor: a value of its key input, naming one run.
///
/// Keys compare and hash by their bits, as the tiers compare values: a Float
/// key `NaN` is one key (per NaN payload), and `0.0` and `-0.0` are two. An
/// Int and a Float are two keys even when they are numerically equal
/// (`Int(1)` is not `Float(1.0)`), as `==` in the language has it.
///
/// It displays as the command line's key column does: an Int, Float, Bool or
/// Unit as its literal (`7`, `2.5`, `true`, `()`), and a Str as its text
/// when that is a plain word (letters, digits and `_ - . : / @`, not empty),
/// else as a JSON string (`"two words"`), so a displayed key never reads as
/// another.
#[derive(Clone, Debug)]
pub struct Key(Value);

impl Key {
    /// The key of a value (`Key::new("host-a")`, `Key::new(7)`).
    pub fn new(value: impl Into<Value>) -> Key {
        Key(value.into())
    }

    /// The key input's value.
    pub fn value(&self) -> &Value {
        &self.0
    }

    /// Makes this the key of `v`, in place when both are scalars of one
    /// kind (a keyed monitor names each row's key this way: moving a whole
    /// `Value` per row cost more than the rest of its bookkeeping).
    pub(crate) fn assign(&mut self, v: &Value) {
        match (&mut self.0, v) {
            (Value::Int(a), Value::Int(b)) => *a = *b,
            (Value::Float(a), Value::Float(b)) => *a = *b,
            (Value::Bool(a), Value::Bool(b)) => *a = *b,
            (a, b) => *a = b.clone(),
        }
    }
}

impl From<Value> for Key {
    fn from(v: Value) -> Key {
        Key(v)
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        // Bitwise, as `Value`'s own equality.
        self.0 == other.0
    }
}

impl Eq for Key {}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        Key::hash_value_into(&self.0, state);
    }
}

impl Key {
    /// Hashes `value` as its key would be hashed (by its bits), without
    /// making the key.
    pub(crate) fn hash_value_into<H: std::hash::Hasher>(value: &Value, state: &mut H) {
        use std::hash::Hash as _;
        match value {
            Value::Int(i) => (0u8, *i).hash(state),
            Value::Float(x) => (1u8, x.to_bits()).hash(state),
            Value::Bool(b) => (2u8, *b).hash(state),
            Value::Str(s) => (3u8, &**s).hash(state),
            Value::Unit => 4u8.hash(state),
            Value::List(v) => {
                (5u8, false, v.len()).hash(state);
                for x in v.iter() {
                    Key::hash_value_into(x, state);
                }
            }
            Value::Tuple(v) => {
                (5u8, true, v.len()).hash(state);
                for x in v.iter() {
                    Key::hash_value_into(x, state);
                }
            }
            Value::Map(m) => {
                (6u8, m.len()).hash(state);
                for (k, x) in m.iter() {
                    (**k).hash(state);
                    Key::hash_value_into(x, state);
                }
            }
            Value::Func(func) => (7u8, Arc::as_ptr(func) as *const () as usize).hash(state),
            Value::Marker(m) => (8u8, *m).hash(state),
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x:?}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Unit => f.write_str("()"),
            // A key input is never a container (the keyed builder refuses
            // one); shown in the value's own rendering should one arrive.
            v @ (Value::List(_)
            | Value::Tuple(_)
            | Value::Map(_)
            | Value::Func(_)
            | Value::Marker(_)) => {
                write!(f, "{v}")
            }
            Value::Str(s) => {
                let plain = !s.is_empty()
                    && s.chars().all(|c| {
                        c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '/' | '@')
                    })
                    // A Str that reads as another type's literal is quoted.
                    && s.parse::<f64>().is_err()
                    && !matches!(&**s, "true" | "false");
                if plain {
                    f.write_str(s)
                } else {
                    // serde_json writes any string as a valid JSON string.
                    let quoted = serde_json::to_string(&**s).map_err(|_| fmt::Error)?;
                    f.write_str(&quoted)
                }
            }
        }
    }
}

/// What a stream holds at one step (docs/language.md, "Values at a step"): a value, no event
/// (`NoVal`: an absent input), or not enough history (`Deferred`, ⊥).
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Sample {
    /// No event at this step (an absent input, and what depends on it).
    #[default]
    NoVal,
    /// ⊥: the value does not exist yet (an offset reaching before step 0).
    Deferred,
    /// A present value.
    Value(Value),
}

impl Sample {
    /// Whether this is `NoVal`.
    pub fn is_noval(&self) -> bool {
        matches!(self, Sample::NoVal)
    }

    /// The present value, if there is one.
    pub fn value(&self) -> Option<&Value> {
        match self {
            Sample::Value(v) => Some(v),
            _ => None,
        }
    }
}

impl From<Marker> for Sample {
    fn from(m: Marker) -> Sample {
        match m {
            Marker::NoVal => Sample::NoVal,
            Marker::Deferred => Sample::Deferred,
        }
    }
}

impl Value {
    /// The sample of a list's element: its value, or the marker's sample.
    pub fn into_sample(self) -> Sample {
        match self {
            Value::Marker(m) => m.into(),
            v => Sample::Value(v),
        }
    }
}

impl From<Value> for Sample {
    fn from(v: Value) -> Sample {
        Sample::Value(v)
    }
}

/// Text rendering of a printed sample: the value, or `Deferred` for ⊥.
/// `NoVal` is never printed by the writers; it renders as `NoVal` for
/// debugging only.
impl fmt::Display for Sample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sample::NoVal => write!(f, "NoVal"),
            Sample::Deferred => write!(f, "Deferred"),
            Sample::Value(v) => v.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_the_trustworthiness_checker() {
        assert_eq!(Value::Float(1e16).to_string(), "Float(1e16)");
        assert_eq!(Value::Float(3e15).to_string(), "Float(3000000000000000.0)");
        assert_eq!(Value::Float(f64::NAN).to_string(), "Float(NaN)");
        assert_eq!(Value::Str("a\"b".into()).to_string(), "Str(\"a\\\"b\")");
        assert_eq!(Sample::Deferred.to_string(), "Deferred");
    }

    #[test]
    fn keys_compare_by_bits_and_display_unambiguously() {
        use std::collections::HashSet;
        let keys: HashSet<Key> = [
            Key::new(1),
            Key::new(1.0),
            Key::new(0.0),
            Key::new(-0.0),
            Key::new(f64::NAN),
            Key::new(f64::NAN),
            Key::new("1"),
        ]
        .into_iter()
        .collect();
        assert_eq!(keys.len(), 6);
        let shown: Vec<String> = ["host-a", "two words", "", "1", "true", "a\"b", "héllo"]
            .iter()
            .map(|s| Key::new(*s).to_string())
            .collect();
        assert_eq!(
            shown,
            [
                "host-a",
                "\"two words\"",
                "\"\"",
                "\"1\"",
                "\"true\"",
                "\"a\\\"b\"",
                "héllo"
            ]
        );
        assert_eq!(Key::new(7).to_string(), "7");
        assert_eq!(Key::new(2.0).to_string(), "2.0");
        assert_eq!(Key::from(Value::Unit).to_string(), "()");
    }

    #[test]
    fn structural_equality_does_not_coerce() {
        assert!(!Value::Int(1).structural_eq(&Value::Float(1.0)));
        assert!(!Value::Float(f64::NAN).structural_eq(&Value::Float(f64::NAN)));
        assert_eq!(Value::Float(f64::NAN), Value::Float(f64::NAN));
    }
}
