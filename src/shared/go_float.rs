//! Floats written as Go's `strconv.FormatFloat(f, 'g', -1, bits)` writes them.

/// `%g` with the shortest digits, from Rust's `{:e}` text of the same float
/// (`1.2345e5`, `-0e0`: Rust's shortest digits for its width are Go's):
/// exponent form when the exponent is below -4 or at least 6, with at least
/// two exponent digits; plain decimal otherwise.
pub fn shortest_g(scientific: &str) -> String {
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if mantissa.starts_with('-') { "-" } else { "" };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exponent) {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{sign}{first}{fraction}e{exponent_sign}{:02}",
            exponent.unsigned_abs()
        );
    }
    // Plain decimal: the point `exponent + 1` digits in.
    let point = exponent + 1;
    let text = match usize::try_from(point).ok().filter(|point| *point > 0) {
        Some(point) if digits.len() <= point => {
            format!("{digits}{}", "0".repeat(point - digits.len()))
        }
        Some(point) => {
            let (whole, fraction) = digits.split_at(point);
            format!("{whole}.{fraction}")
        }
        None => format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize)),
    };
    format!("{sign}{text}")
}
