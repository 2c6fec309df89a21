//! Building DeerFlow's decision objects fast: a plain dataclass is filled
//! in directly (`object.__new__`, then each field set, in field order),
//! which is what its generated `__init__` does, without running Python.
//! Any other class is called, as before. The one `unsafe` call here is
//! `object`'s `tp_new`, called directly (what `object.__new__(cls)` does
//! without building an argument tuple).
//!
//! "Plain" is checked once, when the provider is built: the class is a
//! dataclass whose fields are exactly the ones given, in that order, with
//! the `__init__` that `dataclasses` generates, no `__post_init__`, no
//! `__setattr__` of its own (so not frozen), the `__new__` and metaclass
//! of `object` and `type`;
//! and an instance built both ways compares equal, with equal instance
//! dicts.

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};

/// How instances of one decision class are built.
pub(crate) enum Class {
    /// A plain dataclass: `object.__new__(cls)`, then its fields.
    Filled { cls: Py<PyType>, object_new: ffi::newfunc, fields: Vec<Py<PyString>> },
    /// Anything else: `cls(*values)`.
    Called(Py<PyAny>),
}

impl Class {
    /// How to build `cls`, whose constructor takes `fields` positionally;
    /// `sample` are values for a trial instance built both ways.
    pub(crate) fn new(
        py: Python<'_>,
        cls: Py<PyAny>,
        fields: &[&str],
        sample: &Bound<'_, PyTuple>,
    ) -> PyResult<Self> {
        match Self::filled(py, &cls, fields)? {
            Some(filled) if filled.agrees_with_call(py, &cls, sample)? => Ok(filled),
            _ => Ok(Class::Called(cls)),
        }
    }

    /// The filled form of `cls`, when it is a plain dataclass of `fields`.
    fn filled(py: Python<'_>, cls: &Py<PyAny>, fields: &[&str]) -> PyResult<Option<Self>> {
        let cls = cls.bind(py);
        let Ok(ty) = cls.downcast::<PyType>() else { return Ok(None) };
        let object = py.get_type::<pyo3::types::PyAny>();
        let type_type = py.get_type::<PyType>();
        if !ty.get_type().is(&type_type) {
            return Ok(None);
        }
        let Ok(declared) = ty.getattr(intern!(py, "__dataclass_fields__")) else { return Ok(None) };
        let Ok(declared) = declared.downcast_into::<PyDict>() else { return Ok(None) };
        let names: Vec<String> = declared.keys().iter().map(|k| k.extract()).collect::<PyResult<_>>()?;
        if names != fields {
            return Ok(None);
        }
        if ty.hasattr(intern!(py, "__post_init__"))? {
            return Ok(None);
        }
        if !ty.getattr(intern!(py, "__new__"))?.is(&object.getattr(intern!(py, "__new__"))?) {
            return Ok(None);
        }
        // A frozen dataclass's own `__setattr__` refuses what its `__init__`
        // sets by `object.__setattr__`: called instead.
        if !ty.getattr(intern!(py, "__setattr__"))?.is(&object.getattr(intern!(py, "__setattr__"))?) {
            return Ok(None);
        }
        // The generated `__init__` is compiled from text (`exec`), so its
        // code object names no file.
        let init = ty.getattr(intern!(py, "__init__"))?;
        let generated = init
            .getattr(intern!(py, "__code__"))
            .and_then(|code| code.getattr(intern!(py, "co_filename")))
            .is_ok_and(|file| file.extract::<String>().is_ok_and(|f| f == "<string>"));
        if !generated {
            return Ok(None);
        }
        // SAFETY: `PyBaseObject_Type` is `object`, a static type that lives
        // as long as the interpreter; `PyType_GetSlot` accepts any type
        // (3.10+, the module's minimum) and returns its `tp_new`, which for
        // `object` is never NULL, as a `void *` to that function.
        #[allow(unsafe_code)]
        let object_new = unsafe {
            let slot = ffi::PyType_GetSlot(std::ptr::addr_of_mut!(ffi::PyBaseObject_Type), ffi::Py_tp_new);
            if slot.is_null() {
                return Ok(None);
            }
            std::mem::transmute::<*mut std::ffi::c_void, ffi::newfunc>(slot)
        };
        Ok(Some(Class::Filled {
            cls: ty.clone().unbind(),
            object_new,
            fields: fields.iter().map(|f| PyString::intern(py, f).unbind()).collect(),
        }))
    }

    /// Whether an instance filled from `sample` equals the one the class
    /// builds (and has the same instance dict).
    fn agrees_with_call(
        &self,
        py: Python<'_>,
        cls: &Py<PyAny>,
        sample: &Bound<'_, PyTuple>,
    ) -> PyResult<bool> {
        let called = cls.bind(py).call1(sample.clone())?;
        let filled = match self.build(py, sample.iter()) {
            Ok(filled) => filled,
            Err(_) => return Ok(false),
        };
        let dict = intern!(py, "__dict__");
        Ok(filled.eq(&called)? && filled.getattr(dict)?.eq(called.getattr(dict)?)?)
    }

    /// An instance with `values` (one per field, in order).
    pub(crate) fn build<'py, I>(&self, py: Python<'py>, values: I) -> PyResult<Bound<'py, PyAny>>
    where
        I: IntoIterator<Item = Bound<'py, PyAny>>,
        I::IntoIter: ExactSizeIterator,
    {
        match self {
            Class::Filled { cls, object_new, fields } => {
                // Attribute by attribute, in field order, as the generated
                // `__init__` does (CPython then keeps them without a dict).
                let args = PyTuple::empty(py);
                // SAFETY: `object_new` is `object`'s `tp_new`, and `cls` is a
                // type whose `__new__` is `object.__new__` (checked when this
                // was built), so this runs what `object.__new__(cls)` runs
                // after its own argument checks; the GIL is held, `args` is
                // a tuple and NULL keywords are allowed. It returns a new
                // reference, or NULL with the exception set.
                #[allow(unsafe_code)]
                let instance = unsafe {
                    let raw = object_new(cls.as_ptr().cast(), args.as_ptr(), std::ptr::null_mut());
                    Bound::from_owned_ptr_or_err(py, raw)?
                };
                for (field, value) in fields.iter().zip(values) {
                    instance.setattr(field.bind(py), value)?;
                }
                Ok(instance)
            }
            Class::Called(cls) => cls.bind(py).call1(PyTuple::new(py, values)?),
        }
    }

    /// Whether instances are filled in rather than built by a call.
    pub(crate) fn is_filled(&self) -> bool {
        matches!(self, Class::Filled { .. })
    }
}
