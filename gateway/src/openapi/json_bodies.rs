//! The 415 every JSON body route answers, documented in one place.
//!
//! actix-web's JSON extractor refuses a body whose `Content-Type` is not
//! `application/json` (or `…+json`) before the handler runs, and
//! [`crate::error::json_error`] answers it 415 UNSUPPORTED_MEDIA_TYPE with
//! the JSON error body. That holds for every route whose body is required
//! (`api::body::Object`), so the document states it for each such operation
//! here rather than in every `#[utoipa::path]`.
//!
//! Routes whose body may be absent (`api::body::optional_object`: an empty
//! body is no body) read the bytes themselves and apply the same rule to a
//! body that is there: 415 too. utoipa writes their `Option<T>` body as `oneOf: [null, T]`, but a JSON
//! `null` body is 400 INVALID_JSON there like any non-object: the schema
//! becomes `T`, with `required: false` saying the body may be left out.

use utoipa::openapi::schema::{Schema, SchemaType, Type};
use utoipa::openapi::{Content, Ref, RefOr, Required, Response};
use utoipa::Modify;

/// What the 415 says.
pub(super) const UNSUPPORTED: &str =
    "UNSUPPORTED_MEDIA_TYPE: a body was sent with a Content-Type other than application/json";

/// Adds the 415 refusal to every operation with a JSON request body, and
/// drops `null` from optional bodies' schemas.
pub(super) struct JsonBodies;

impl Modify for JsonBodies {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.patch,
                &mut item.delete,
            ];
            for op in operations.into_iter().flatten() {
                let Some(body) = op.request_body.as_mut() else {
                    continue;
                };
                let Some(json) = body.content.get_mut("application/json") else {
                    continue;
                };
                if body.required != Some(Required::True) {
                    if let Some(schema) = json.schema.take() {
                        json.schema = Some(without_null(schema));
                    }
                }
                op.responses
                    .responses
                    .entry("415".into())
                    .or_insert_with(|| {
                        let mut refusal = Response::new(UNSUPPORTED);
                        refusal.content.insert(
                            "application/json".into(),
                            Content::new(Some(Ref::from_schema_name("ErrorBody"))),
                        );
                        RefOr::T(refusal)
                    });
            }
        }
    }
}

/// `T` for a `oneOf: [null, T]`; any other schema as it is.
fn without_null(schema: RefOr<Schema>) -> RefOr<Schema> {
    let RefOr::T(Schema::OneOf(one_of)) = &schema else {
        return schema;
    };
    let is_null = |s: &RefOr<Schema>| matches!(s, RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::Type(Type::Null));
    let rest: Vec<_> = one_of.items.iter().filter(|s| !is_null(s)).collect();
    match rest.as_slice() {
        [only] if rest.len() < one_of.items.len() => (*only).clone(),
        _ => schema,
    }
}
