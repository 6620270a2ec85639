//! Integer fields of request bodies that take any JSON number with no
//! fractional part: `12` and `12.0` alike.
//!
//! JSON Schema's `integer` (draft 2020-12 §6.1.1, used by the OpenAPI 3.1
//! document) is "any number with a zero fractional part", so `12.0` is a
//! valid `offset`; serde's integer types refuse it ("invalid type:
//! floating point"), and an encoder that writes every number as a double
//! (JavaScript's `JSON.stringify` never does, but many others do) would get
//! 400 INVALID_JSON for a body the document allows. Use with
//! `#[serde(deserialize_with = "integral::one")]` (or `option`, `vec`);
//! the field's own type still sets the range, and a number out of it is
//! refused as serde would.

use serde::de::{Deserialize, Deserializer, Error};

/// An integer as JSON Schema counts them; see the module docs.
pub struct Integral<T>(pub T);

impl<'de, T> Deserialize<'de> for Integral<T>
where
    T: TryFrom<u64> + TryFrom<i64>,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = serde_json::Number::deserialize(d)?;
        let out_of_range = || D::Error::custom(format!("integer {n} out of range"));
        if let Some(u) = n.as_u64() {
            return T::try_from(u).map(Integral).map_err(|_| out_of_range());
        }
        if let Some(i) = n.as_i64() {
            return T::try_from(i).map(Integral).map_err(|_| out_of_range());
        }
        // A float: integral, and within ±2^53 where every integer is exact.
        let f = n.as_f64().unwrap_or(f64::NAN);
        const EXACT: f64 = 9_007_199_254_740_992.0;
        if f.fract() != 0.0 || !f.is_finite() {
            return Err(D::Error::custom(format!("{n} is not an integer")));
        }
        if f.abs() > EXACT {
            return Err(out_of_range());
        }
        if f >= 0.0 {
            T::try_from(f as u64)
                .map(Integral)
                .map_err(|_| out_of_range())
        } else {
            T::try_from(f as i64)
                .map(Integral)
                .map_err(|_| out_of_range())
        }
    }
}

/// A required integer field.
pub fn one<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64> + TryFrom<i64>,
{
    Integral::deserialize(d).map(|Integral(v)| v)
}

/// An optional integer field (`null` or absent: `None`; pair with
/// `#[serde(default)]`).
pub fn option<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64> + TryFrom<i64>,
{
    Option::<Integral<T>>::deserialize(d).map(|v| v.map(|Integral(v)| v))
}

/// An array of integers.
pub fn vec<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64> + TryFrom<i64>,
{
    Vec::<Integral<T>>::deserialize(d).map(|v| v.into_iter().map(|Integral(v)| v).collect())
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Body {
        #[serde(deserialize_with = "super::one")]
        offset: u64,
        #[serde(default, deserialize_with = "super::option")]
        limit: Option<u32>,
        #[serde(default, deserialize_with = "super::vec")]
        indexes: Vec<i64>,
    }

    fn parse(v: serde_json::Value) -> Result<Body, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn integral_floats_are_integers() {
        let b = parse(json!({"offset": 12.0, "limit": 3.0, "indexes": [0.0, -2.0, 5]})).unwrap();
        assert_eq!(
            b,
            Body {
                offset: 12,
                limit: Some(3),
                indexes: vec![0, -2, 5]
            }
        );
        let b = parse(json!({"offset": 7, "limit": null})).unwrap();
        assert_eq!((b.offset, b.limit, b.indexes), (7, None, vec![]));
    }

    #[test]
    fn fractions_and_out_of_range_numbers_are_refused() {
        assert!(parse(json!({"offset": 1.5}))
            .unwrap_err()
            .contains("not an integer"));
        assert!(parse(json!({"offset": -1}))
            .unwrap_err()
            .contains("out of range"));
        assert!(parse(json!({"offset": -1.0}))
            .unwrap_err()
            .contains("out of range"));
        assert!(parse(json!({"offset": 0, "limit": 4294967296.0}))
            .unwrap_err()
            .contains("out of range"));
        assert!(parse(json!({"offset": 1e300}))
            .unwrap_err()
            .contains("out of range"));
        assert!(parse(json!({"offset": "1"})).is_err());
    }
}
