//! Named opaque objects: values the VM only passes around (a builtin's state, such as a KV
//! cache) that can still say what they are. [`Value::Object`] holds any `Any`; one made by
//! [`Value::named`] holds a [`Named`], whose [`NamedObject::describe`] is what the value prints
//! as (so Python's `repr` of it, and the tracer's text, show the object's state without any
//! layer knowing its type).

use crate::value::Value;
use std::any::Any;
use std::sync::Arc;

/// An object a builtin hands out as a value, with a name and a description.
pub trait NamedObject: Any + Send + Sync {
    /// The object's type, e.g. `relax.vm.PagedAttentionKVCache` (TVM's type key where TVM has one).
    fn type_key(&self) -> &str;
    /// A one-line summary of the object's state, for `repr` and error messages.
    fn describe(&self) -> String;
    /// The object as `Any`, for the builtins that own its type to downcast it.
    fn as_any(&self) -> &dyn Any;
}

/// What [`Value::Object`] holds for a named object.
pub struct Named(pub Arc<dyn NamedObject>);

impl Value {
    /// A value holding `obj`, which prints as its description.
    pub fn named(obj: Arc<dyn NamedObject>) -> Value {
        Value::Object(Arc::new(Box::new(Named(obj))))
    }

    /// The named object this value holds, if it holds one.
    pub fn as_named(&self) -> Option<&Arc<dyn NamedObject>> {
        match self {
            Value::Object(o) => o.downcast_ref::<Named>().map(|n| &n.0),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counter(u32);
    impl NamedObject for Counter {
        fn type_key(&self) -> &str {
            "test.Counter"
        }
        fn describe(&self) -> String {
            format!("Counter({})", self.0)
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    #[test]
    fn named_objects_print_their_description_and_downcast() {
        let v = Value::named(Arc::new(Counter(7)));
        assert_eq!(v.to_string(), "<test.Counter Counter(7)>");
        let n = v.as_named().unwrap();
        assert_eq!(n.type_key(), "test.Counter");
        assert_eq!(n.as_any().downcast_ref::<Counter>().unwrap().0, 7);
        assert_eq!(v.describe(), "object test.Counter");
        assert!(Value::Int(1).as_named().is_none());
        let plain = Value::Object(Arc::new(Box::new(5u8)));
        assert!(plain.as_named().is_none());
        assert_eq!(plain.to_string(), "<object>");
    }
}
