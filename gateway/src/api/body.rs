//! The JSON body extractor of every route: [`Object`], which is
//! `web::Json` (the app's size limit and content-type rule, and its errors
//! mapped by `error::json_error`) plus one rule of its own: the body must
//! be a JSON **object**. serde would otherwise fill a struct from a JSON
//! array by position (`["hello"]` as `{content: "hello"}`), accepting
//! bodies no client meant to send.

use crate::error::ApiError;
use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest};
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
        let json = web::Json::<serde_json::Value>::from_request(req, payload);
        Box::pin(async move {
            let web::Json(value) = json.await?;
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
/// would be plain text), 400 `INVALID_JSON` for a body that could not be
/// read.
pub fn raw_body(body: Result<web::Bytes, actix_web::Error>) -> Result<web::Bytes, ApiError> {
    body.map_err(|e| match e.as_error::<actix_web::error::PayloadError>() {
        Some(actix_web::error::PayloadError::Overflow) => ApiError::new(
            ErrorCode::PayloadTooLarge,
            "the body is larger than this gateway accepts",
        ),
        _ => ApiError::new(ErrorCode::InvalidJson, format!("unreadable body: {e}")),
    })
}

/// A body that may be absent: empty (or only whitespace) is `None`;
/// anything else must be a JSON object decoding into `T` (400
/// `INVALID_JSON` otherwise), as [`Object`] requires.
pub fn optional_object<T: DeserializeOwned>(body: &[u8]) -> Result<Option<T>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let invalid = |e: serde_json::Error| {
        ApiError::new(ErrorCode::InvalidJson, format!("invalid json body: {e}"))
    };
    let value: serde_json::Value = serde_json::from_slice(body).map_err(invalid)?;
    if !value.is_object() {
        return Err(ApiError::new(
            ErrorCode::InvalidJson,
            "the body must be a JSON object",
        ));
    }
    serde_json::from_value(value).map(Some).map_err(invalid)
}
