//! REST routes: the agent API (protocol §11) and the admin API.

pub mod admin;
pub mod agent;
pub mod body;
pub mod connectors;
pub mod directory;
pub mod drafts;
pub mod files;
pub mod integral;
pub mod messages;
pub mod operator;
pub mod operator_bays;
pub mod operator_live;
pub mod operator_sessions;
pub mod operator_webhooks;
pub mod pairing;
pub mod polls;
pub mod summarizer;
pub mod summary;
pub mod typing;
pub mod views;
pub mod webhook;
