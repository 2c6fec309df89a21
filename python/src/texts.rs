//! Python strings of the static texts decisions name: a provider library's
//! reason codes (`oap.allowed`) reach the host borrowed, as the library's
//! static text, so the string made for one is kept and handed out again.

use std::borrow::Cow;
use std::cell::RefCell;

use pyo3::prelude::*;
use pyo3::sync::GILProtected;
use pyo3::types::PyString;

/// How many static texts one provider keeps (its codes; past that, strings
/// are made per call, as for any other text).
const KEPT: usize = 32;

/// The Python strings made for static texts, by the text's address and
/// length (a static text never moves, and the host never unloads a
/// library).
pub(crate) struct StaticTexts(GILProtected<RefCell<Vec<Kept>>>);

/// A static text's address and length, and its string.
type Kept = (usize, usize, Py<PyString>);

impl StaticTexts {
    /// None kept yet.
    pub(crate) fn new() -> Self {
        StaticTexts(GILProtected::new(RefCell::new(Vec::new())))
    }

    /// `text` as a Python string: the one made before when it is static
    /// text seen before.
    #[allow(clippy::ptr_arg)] // Whether the text is borrowed is the point.
    pub(crate) fn get<'py>(&self, py: Python<'py>, text: &Cow<'static, str>) -> Bound<'py, PyString> {
        let Cow::Borrowed(text) = text else { return PyString::new(py, text) };
        let key = (text.as_ptr() as usize, text.len());
        let mut kept = self.0.get(py).borrow_mut();
        if let Some((.., string)) = kept.iter().find(|(address, len, _)| (*address, *len) == key) {
            return string.bind(py).clone();
        }
        let string = PyString::new(py, text);
        if kept.len() < KEPT {
            kept.push((key.0, key.1, string.clone().unbind()));
        }
        string
    }
}
