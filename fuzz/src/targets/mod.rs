//! The fuzz targets, one module (and one corpus directory) each. Each
//! module's doc lists the properties it checks.

mod card;
mod cursor;
mod frame_guard;
mod mentions;
mod names;
mod poll;
mod roster;
mod route;
mod webhook_url;
mod ws_frame;
