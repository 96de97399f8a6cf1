//! What a selecting packed function ([`SelectFn`](super::SelectFn)) returns: a part of its
//! arguments, by reference, for the interpreter to write only when the destination does not
//! hold it already.

use super::Value;
use crate::shape::Shape;

/// A part of a selecting function's arguments, lent: a value (an argument itself, an element
/// of a tuple) or a tensor's shape, which a tensor holds as a [`Shape`], not as a value.
#[derive(Clone, Copy, Debug)]
pub enum Selected<'a> {
    /// A value of the arguments.
    Value(&'a Value),
    /// The shape of a tensor of the arguments (`vm.builtin.shape_of`).
    Shape(&'a Shape),
}

impl Selected<'_> {
    /// True when `held` is this very object already (see [`Value::same_object`]), so that
    /// writing it over `held` would change nothing: the interpreter then skips the write and
    /// its reference counting.
    #[inline(always)]
    pub fn is_held_by(self, held: &Value) -> bool {
        match self {
            Selected::Value(v) => v.same_object(held),
            Selected::Shape(s) => matches!(held, Value::Shape(h) if h.ptr_eq(s)),
        }
    }

    /// The selected part as a value of its own (a reference-count increment, as a clone of
    /// the value is).
    #[inline]
    pub fn to_value(self) -> Value {
        match self {
            Selected::Value(v) => v.clone(),
            Selected::Shape(s) => Value::Shape(s.clone()),
        }
    }
}

impl<'a> From<&'a Value> for Selected<'a> {
    fn from(v: &'a Value) -> Self {
        Selected::Value(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;

    #[test]
    fn a_selected_shape_is_held_by_the_same_shape_object_only() {
        let t = Tensor::from_vec([2, 3], vec![0f32; 6]).unwrap();
        let lent = Selected::Shape(t.shape());
        let same = lent.to_value();
        assert!(lent.is_held_by(&same), "its own value holds it");
        assert!(same.as_shape().unwrap().ptr_eq(t.shape()), "no copy of the dims");
        let equal = Value::Shape(Shape::from(&[2, 3][..]));
        assert!(!lent.is_held_by(&equal), "an equal shape is another object");
        assert!(!lent.is_held_by(&Value::Tensor(t.clone())));
        let v = Value::Int(3);
        let lent: Selected<'_> = (&v).into();
        assert!(lent.is_held_by(&Value::Int(3)) && !lent.is_held_by(&Value::Int(4)));
        assert_eq!(lent.to_value().as_int().unwrap(), 3);
    }
}
