//! The short form: `copy` entries that name Node labels and annotations to
//! put on the Pod. What users write ([`entry`]) is checked and compiled at
//! load ([`compile`]) into rules ([`rule`]), which pick the Node's keys and
//! write them into the Binding or Pod ([`apply`]).

pub mod apply;
pub mod compile;
pub mod entry;
pub mod rule;
