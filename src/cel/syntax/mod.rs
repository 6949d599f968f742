//! Expressions as trees: the tree helpers and the parsers' bounds (`ast`),
//! text read before parsing (`source_text`), the subset parser, and the
//! pieces the macro rewrites build with (`macro_builder`,
//! `extension_macros`). Nothing here knows a library or a policy.

pub mod ast;
pub(crate) mod extension_macros;
pub(crate) mod macro_builder;
pub(crate) mod source_text;
pub(crate) mod subset_parser;
