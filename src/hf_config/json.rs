//! Reading typed fields of a JSON object, with the field's path in every error.

use std::format;
use std::string::String;
use std::vec::Vec;

use serde_json::{Map, Value};

use super::ConfigError;

/// One JSON object and the prefix its field names get in errors (`""` or `"rope_scaling."`).
#[derive(Clone, Copy)]
pub(super) struct Obj<'a> {
    pub(super) map: &'a Map<String, Value>,
    pub(super) prefix: &'a str,
}

impl<'a> Obj<'a> {
    pub(super) fn name(&self, key: &str) -> String {
        format!("{}{}", self.prefix, key)
    }

    pub(super) fn malformed(&self, key: &str, expected: &'static str) -> ConfigError {
        ConfigError::Malformed { field: self.name(key), expected }
    }

    /// The value of `key`; `null` counts as absent.
    pub(super) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub(super) fn f64(&self, key: &str) -> Result<Option<f64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| self.malformed(key, "a number")),
        }
    }

    /// A non-negative integer; an integral float (`4096.0`) is accepted.
    pub(super) fn u64(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        let Some(v) = self.get(key) else { return Ok(None) };
        if let Some(n) = v.as_u64() {
            return Ok(Some(n));
        }
        match v.as_f64() {
            // Integral and exactly representable (at most 2^53).
            Some(x) if (0.0..=9_007_199_254_740_992.0).contains(&x) && x == libm::trunc(x) => {
                Ok(Some(x as u64))
            }
            _ => Err(self.malformed(key, "a non-negative integer")),
        }
    }

    /// An integer > 0 that fits in `usize`.
    pub(super) fn positive(&self, key: &str) -> Result<Option<usize>, ConfigError> {
        match self.u64(key) {
            Ok(Some(n)) if n > 0 => {
                usize::try_from(n).map(Some).map_err(|_| self.malformed(key, "an integer > 0"))
            }
            Ok(Some(_)) | Err(_) => Err(self.malformed(key, "an integer > 0")),
            Ok(None) => Ok(None),
        }
    }

    pub(super) fn bool(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_bool().map(Some).ok_or_else(|| self.malformed(key, "true or false")),
        }
    }

    pub(super) fn str(&self, key: &str) -> Result<Option<&'a str>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_str().map(Some).ok_or_else(|| self.malformed(key, "a string")),
        }
    }

    pub(super) fn f64_array(&self, key: &str) -> Result<Option<Vec<f64>>, ConfigError> {
        let Some(v) = self.get(key) else { return Ok(None) };
        let arr = v.as_array().ok_or_else(|| self.malformed(key, "an array of numbers"))?;
        arr.iter()
            .map(|x| x.as_f64().ok_or_else(|| self.malformed(key, "an array of numbers")))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    pub(super) fn require<T>(&self, key: &str, v: Option<T>) -> Result<T, ConfigError> {
        v.ok_or_else(|| ConfigError::Missing { field: self.name(key) })
    }

    /// The first of `keys` present, with the key.
    pub(super) fn first_positive(
        &self,
        keys: &[&'static str],
    ) -> Result<Option<(usize, &'static str)>, ConfigError> {
        for &k in keys {
            if let Some(v) = self.positive(k)? {
                return Ok(Some((v, k)));
            }
        }
        Ok(None)
    }
    /// An array of non-negative integers that fit in `usize`.
    pub(super) fn usize_array(
        &self,
        key: &str,
        expected: &'static str,
    ) -> Result<Option<Vec<usize>>, ConfigError> {
        let Some(v) = self.get(key) else { return Ok(None) };
        let arr = v.as_array().ok_or_else(|| self.malformed(key, expected))?;
        arr.iter()
            .map(|x| {
                x.as_u64().and_then(|n| usize::try_from(n).ok()).ok_or_else(|| self.malformed(key, expected))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// The object at `key` (`null` or absent: `None`).
    pub(super) fn object(&self, key: &str) -> Result<Option<&'a Map<String, Value>>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_object().map(Some).ok_or_else(|| self.malformed(key, "an object or null")),
        }
    }
}
