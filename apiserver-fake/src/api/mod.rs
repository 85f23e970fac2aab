//! What a server answers once a request reached it: the API tables (catalog), discovery, OpenAPI, the REST
//! handlers of resources, and their encodings and errors.

pub mod catalog;
pub mod discovery;
pub(crate) mod metrics;
pub(crate) mod not_found;
pub mod openapi;
pub mod rest;
pub mod serviceaccount;
pub mod status;
pub(crate) mod version_info;
pub(crate) mod whoami;
pub mod yaml;

/// The group every authenticated user belongs to (upstream's `user.AllAuthenticated`): authentication
/// adds it, and so do TokenReview and impersonation.
pub(crate) const AUTHENTICATED_GROUP: &str = "system:authenticated";
