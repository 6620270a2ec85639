//! The JSON body extractor of every route: [`Object`], which is
//! `web::Json` (the app's size limit and content-type rule, and its errors
//! mapped by `error::json_error`) plus one rule of its own: the body must
//! be a JSON **object**. serde would otherwise fill a struct from a JSON
//! array by position (`["hello"]` as `{content: "hello"}`), accepting
//! bodies no client meant to send. A key given twice in one object is
//! refused too (RFC 8259 §4 leaves its meaning open: serde_json would keep
//! the last, another parser in the path the first).

use crate::error::{broken_body, ApiError};
use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpMessage, HttpRequest};
use futures_util::future::LocalBoxFuture;
use serde::de::DeserializeOwned;
use switchboard_protocol::error::ErrorCode;

/// A request body that is a JSON object decoding into `T`; anything else
/// is 400 `INVALID_JSON` (413 / 415 as `web::Json` answers them).
#[derive(Debug)]
pub struct Object<T>(pub T);

impl<T> Object<T> {
    /// The decoded body.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for Object<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: DeserializeOwned + 'static> FromRequest for Object<T> {
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let json = web::Json::<Unique>::from_request(req, payload);
        Box::pin(async move {
            let web::Json(Unique(value)) = json.await?;
            if !value.is_object() {
                return Err(ApiError::new(
                    ErrorCode::InvalidJson,
                    "the body must be a JSON object",
                )
                .into());
            }
            serde_json::from_value(value).map(Object).map_err(|e| {
                ApiError::new(ErrorCode::InvalidJson, format!("invalid json body: {e}")).into()
            })
        })
    }
}

/// The raw body of a route that reads it itself (an optional body), with
/// the extractor's failure as the JSON error every route answers: 413
/// `PAYLOAD_TOO_LARGE` past `limits.max_body_bytes` (actix's own answer
/// would be plain text), 400 `MALFORMED_REQUEST` for a body whose HTTP
/// framing is broken ([`broken_body`]), 400 `INVALID_JSON` for one that
/// could not be read otherwise.
pub fn raw_body(body: Result<web::Bytes, actix_web::Error>) -> Result<web::Bytes, ApiError> {
    body.map_err(|e| {
        let payload = e.as_error::<actix_web::error::PayloadError>();
        if let Some(actix_web::error::PayloadError::Overflow) = payload {
            return ApiError::new(
                ErrorCode::PayloadTooLarge,
                "the body is larger than this gateway accepts",
            );
        }
        payload.and_then(broken_body).unwrap_or_else(|| {
            ApiError::new(ErrorCode::InvalidJson, format!("unreadable body: {e}"))
        })
    })
}

/// A body that may be absent: empty (or only whitespace) is `None`;
/// anything else must be sent as JSON (`application/json` or a `+json`
/// type, as `web::Json` requires: 415 `UNSUPPORTED_MEDIA_TYPE` otherwise)
/// and be a JSON object decoding into `T` (400 `INVALID_JSON` otherwise),
/// as [`Object`] requires.
pub fn optional_object<T: DeserializeOwned>(
    req: &HttpRequest,
    body: &[u8],
) -> Result<Option<T>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let is_json = matches!(
        req.mime_type(),
        Ok(Some(m)) if m.subtype() == actix_web::mime::JSON || m.suffix() == Some(actix_web::mime::JSON)
    );
    if !is_json {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "a body must be sent as application/json",
        ));
    }
    let invalid = |e: serde_json::Error| {
        ApiError::new(ErrorCode::InvalidJson, format!("invalid json body: {e}"))
    };
    let Unique(value) = serde_json::from_slice(body).map_err(invalid)?;
    if !value.is_object() {
        return Err(ApiError::new(
            ErrorCode::InvalidJson,
            "the body must be a JSON object",
        ));
    }
    serde_json::from_value(value).map(Some).map_err(invalid)
}

/// A JSON value in which no object holds a key twice (at any depth);
/// decoding one that does fails with "duplicate key".
struct Unique(serde_json::Value);

impl<'de> serde::Deserialize<'de> for Unique {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, Into::into))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Unique(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(items.into())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!(
                    "duplicate key `{key}`"
                )));
            }
            let Unique(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(out.into())
    }
}

#[cfg(test)]
mod tests {
    use super::Unique;

    #[test]
    fn a_key_given_twice_is_refused_at_any_depth() {
        let parse = |s: &str| serde_json::from_str::<Unique>(s).map(|u| u.0);
        assert_eq!(
            parse(r#"{"a":1,"b":[{"c":true}],"d":"x","e":null,"f":1.5}"#).unwrap(),
            serde_json::json!({"a":1,"b":[{"c":true}],"d":"x","e":null,"f":1.5})
        );
        let err = parse(r#"{"content":"a","content":"b"}"#).unwrap_err();
        assert!(err.to_string().contains("duplicate key `content`"), "{err}");
        assert!(parse(r#"{"m":{"k":1,"k":2}}"#).is_err());
        assert!(parse(r#"[{"k":1},{"k":2}]"#).is_ok());
    }
}
