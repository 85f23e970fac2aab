//! The controllers a [`crate::ControllerManager`] can run, one module each.

pub mod garbage_collector;
pub mod namespace;
pub mod validating_admission_policy_status;

use crate::ControllerDescriptor;

/// Every controller the manager knows, in start order (`--controllers` selects among them).
pub fn known() -> Vec<ControllerDescriptor> {
    vec![
        namespace::descriptor(),
        garbage_collector::descriptor(),
        validating_admission_policy_status::descriptor(),
    ]
}
