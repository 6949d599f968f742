//! Reading an expression's text before it is parsed: what is inside quotes,
//! for the nesting bound checked before parsing and for positions in load-time
//! messages. Facts about what an expression does come from its tree ([`crate::cel::syntax::ast`]).

/// Tells, character by character, what of a CEL text is inside a quoted
/// literal: a string (`'...'`, `"..."`, with backslash escapes) or a
/// backquoted field name.
#[derive(Default)]
pub struct Quoted {
    quote: Option<char>,
    escaped: bool,
}

impl Quoted {
    /// Whether `c`, the next character, is part of a quoted literal, its
    /// quotes included.
    pub fn next(&mut self, c: char) -> bool {
        match self.quote {
            Some(_) if self.escaped => self.escaped = false,
            Some(_) if c == '\\' => self.escaped = true,
            Some(q) if c == q => self.quote = None,
            Some(_) => {}
            None if matches!(c, '"' | '\'' | '`') => self.quote = Some(c),
            None => return false,
        }
        true
    }
}
