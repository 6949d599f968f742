//! Kubernetes' IP and CIDR libraries: `ip(s)`, `isIP(s)`,
//! `ip.isCanonical(s)`, and on an address `family()`, `isUnspecified()`,
//! `isLoopback()`, `isLinkLocalMulticast()`, `isLinkLocalUnicast()`,
//! `isGlobalUnicast()`; `cidr(s)`, `isCIDR(s)`, and on a network
//! `containsIP(ip|string)`, `containsCIDR(cidr|string)`, `ip()`, `masked()`,
//! `prefixLength()`; `string(ip)` and `string(cidr)`. As in Kubernetes (Go's
//! `netip`): no zones, no IPv4-mapped IPv6 addresses, no leading zeros in an
//! IPv4 octet; a network keeps the address it was written with (`masked()`
//! clears the host bits).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ::cel::common::types::Type;
use ::cel::common::value::CowVal;
use ::cel::objects::Opaque;
use ::cel::{Env, ExecutionError};

use super::{
    Function, boolean, error, global, int, member, opaque, opaque_arg, string, string_arg,
    string_type,
};

const IP_TYPE: &str = "net.IP";
const CIDR_TYPE: &str = "net.CIDR";

fn ip_type() -> Type {
    Type::new_opaque_type(IP_TYPE)
}
fn cidr_type() -> Type {
    Type::new_opaque_type(CIDR_TYPE)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ip(IpAddr);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    address: IpAddr,
    bits: u8,
}

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        IP_TYPE
    }
}
impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        CIDR_TYPE
    }
}

fn parse_ip(text: &str) -> Result<IpAddr, String> {
    let address: IpAddr = text
        .parse()
        .map_err(|_| format!("IP Address {text:?} parse error during conversion from string"))?;
    if let IpAddr::V6(v6) = address
        && v6.to_ipv4_mapped().is_some()
    {
        return Err(format!("IPv4-mapped IPv6 address {text:?} is not allowed"));
    }
    Ok(address)
}

fn parse_cidr(text: &str) -> Result<Cidr, String> {
    let wrong = || format!("network address parse error during conversion from string: {text:?}");
    let (address, bits) = text.split_once('/').ok_or_else(wrong)?;
    let address = parse_ip(address)?;
    // Decimal, without a sign or leading zeros, as Go's netip reads it.
    if bits.is_empty()
        || !bits.chars().all(|c| c.is_ascii_digit())
        || (bits.len() > 1 && bits.starts_with('0'))
    {
        return Err(wrong());
    }
    let bits: u8 = bits.parse().map_err(|_| wrong())?;
    let max = if address.is_ipv4() { 32 } else { 128 };
    if bits > max {
        return Err(wrong());
    }
    Ok(Cidr { address, bits })
}

fn bits_of(address: IpAddr) -> u128 {
    match address {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

impl Cidr {
    fn width(&self) -> u32 {
        if self.address.is_ipv4() { 32 } else { 128 }
    }

    fn mask(&self) -> u128 {
        let host = self.width() - u32::from(self.bits);
        let all = if self.width() == 32 {
            u128::from(u32::MAX)
        } else {
            u128::MAX
        };
        all.checked_shl(host).unwrap_or(0) & all
    }

    fn masked(&self) -> Cidr {
        let network = bits_of(self.address) & self.mask();
        let address = match self.address {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(network as u32)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(network)),
        };
        Cidr {
            address,
            bits: self.bits,
        }
    }

    fn contains(&self, address: IpAddr) -> bool {
        address.is_ipv4() == self.address.is_ipv4()
            && bits_of(address) & self.mask() == bits_of(self.address) & self.mask()
    }

    fn contains_cidr(&self, other: &Cidr) -> bool {
        other.address.is_ipv4() == self.address.is_ipv4()
            && self.bits <= other.bits
            && self.contains(other.address)
    }
}

/// Declares both libraries.
pub fn register(env: &mut Env) {
    global(env, "ip", "string_to_ip", vec![string_type()], to_ip);
    global(env, "isIP", "is_ip", vec![string_type()], is_ip);
    global(
        env,
        "ip.isCanonical",
        "ip_is_canonical",
        vec![string_type()],
        is_canonical,
    );
    global(env, "string", "ip_to_string", vec![ip_type()], ip_to_string);
    let members: [(&str, Function); 6] = [
        ("family", family),
        ("isUnspecified", is_unspecified),
        ("isLoopback", is_loopback),
        ("isLinkLocalMulticast", is_link_local_multicast),
        ("isLinkLocalUnicast", is_link_local_unicast),
        ("isGlobalUnicast", is_global_unicast),
    ];
    for (name, op) in members {
        member(env, name, &format!("ip_{name}"), ip_type(), vec![], op);
    }
    global(env, "cidr", "string_to_cidr", vec![string_type()], to_cidr);
    global(env, "isCIDR", "is_cidr", vec![string_type()], is_cidr);
    global(
        env,
        "string",
        "cidr_to_string",
        vec![cidr_type()],
        cidr_to_string,
    );
    member(
        env,
        "containsIP",
        "cidr_contains_ip_ip",
        cidr_type(),
        vec![ip_type()],
        contains_ip,
    );
    member(
        env,
        "containsIP",
        "cidr_contains_ip_string",
        cidr_type(),
        vec![string_type()],
        contains_ip,
    );
    member(
        env,
        "containsCIDR",
        "cidr_contains_cidr",
        cidr_type(),
        vec![cidr_type()],
        contains_cidr,
    );
    member(
        env,
        "containsCIDR",
        "cidr_contains_cidr_string",
        cidr_type(),
        vec![string_type()],
        contains_cidr,
    );
    member(env, "ip", "cidr_ip", cidr_type(), vec![], cidr_ip);
    member(env, "masked", "cidr_masked", cidr_type(), vec![], masked);
    member(
        env,
        "prefixLength",
        "cidr_prefix_length",
        cidr_type(),
        vec![],
        prefix_length,
    );
}

fn to_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, 0, "ip")?;
    opaque(Ip(parse_ip(text).map_err(|e| error("ip", e))?))
}

fn is_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(parse_ip(string_arg(&args, 0, "isIP")?).is_ok())
}

fn is_canonical<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, 0, "ip.isCanonical")?;
    let address = parse_ip(text).map_err(|e| error("ip.isCanonical", e))?;
    boolean(address.to_string() == text)
}

fn this_ip(args: &[CowVal<'_, '_>], function: &str) -> Result<IpAddr, ExecutionError> {
    opaque_arg::<Ip>(args, 0, function).map(|ip| ip.0)
}

fn ip_to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    string(this_ip(&args, "string")?.to_string())
}

fn family<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    int(if this_ip(&args, "family")?.is_ipv4() {
        4
    } else {
        6
    })
}

fn is_unspecified<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(this_ip(&args, "isUnspecified")?.is_unspecified())
}

fn is_loopback<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(this_ip(&args, "isLoopback")?.is_loopback())
}

fn link_local_multicast(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => matches!(v4.octets(), [224, 0, 0, _]),
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    }
}

fn link_local_unicast(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

fn is_link_local_multicast<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(link_local_multicast(this_ip(
        &args,
        "isLinkLocalMulticast",
    )?))
}

fn is_link_local_unicast<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(link_local_unicast(this_ip(&args, "isLinkLocalUnicast")?))
}

/// Go's rule: not unspecified, not the IPv4 broadcast, not loopback,
/// multicast or link-local unicast (private ranges count as global).
fn is_global_unicast<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let address = this_ip(&args, "isGlobalUnicast")?;
    let broadcast = address == IpAddr::V4(Ipv4Addr::BROADCAST);
    boolean(
        !address.is_unspecified()
            && !broadcast
            && !address.is_loopback()
            && !address.is_multicast()
            && !link_local_unicast(address),
    )
}

fn to_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let text = string_arg(&args, 0, "cidr")?;
    opaque(parse_cidr(text).map_err(|e| error("cidr", e))?)
}

fn is_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    boolean(parse_cidr(string_arg(&args, 0, "isCIDR")?).is_ok())
}

fn this_cidr(args: &[CowVal<'_, '_>], function: &str) -> Result<Cidr, ExecutionError> {
    opaque_arg::<Cidr>(args, 0, function)
}

fn cidr_to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let cidr = this_cidr(&args, "string")?;
    string(format!("{}/{}", cidr.address, cidr.bits))
}

fn contains_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    const F: &str = "containsIP";
    let cidr = this_cidr(&args, F)?;
    let address = match string_arg(&args, 1, F) {
        Ok(text) => parse_ip(text).map_err(|e| error(F, e))?,
        Err(_) => opaque_arg::<Ip>(&args, 1, F)?.0,
    };
    boolean(cidr.contains(address))
}

fn contains_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    const F: &str = "containsCIDR";
    let cidr = this_cidr(&args, F)?;
    let other = match string_arg(&args, 1, F) {
        Ok(text) => parse_cidr(text).map_err(|e| error(F, e))?,
        Err(_) => opaque_arg::<Cidr>(&args, 1, F)?,
    };
    boolean(cidr.contains_cidr(&other))
}

fn cidr_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    opaque(Ip(this_cidr(&args, "ip")?.address))
}

fn masked<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    opaque(this_cidr(&args, "masked")?.masked())
}

fn prefix_length<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    int(i64::from(this_cidr(&args, "prefixLength")?.bits))
}

#[cfg(test)]
mod tests {
    use crate::testing::cel_libraries::{b, i, s, table};

    #[test]
    fn addresses_work_as_in_kubernetes() {
        table(&[
            ("isIP('127.0.0.1')", b(true)),
            ("isIP('::1')", b(true)),
            ("isIP('127.0.0.256')", b(false)),
            ("isIP(':::1')", b(false)),
            ("isIP('127.0.0.01')", b(false)),
            ("isIP('::ffff:1.2.3.4')", b(false)),
            ("isIP('fe80::1%eth0')", b(false)),
            ("ip('127.0.0.256')", None),
            ("ip.isCanonical('127.0.0.1')", b(true)),
            ("ip.isCanonical('2001:db8::abcd')", b(true)),
            ("ip.isCanonical('2001:DB8::ABCD')", b(false)),
            ("ip.isCanonical('2001:db8::0:0:0:abcd')", b(false)),
            ("ip('127.0.0.1').family()", i(4)),
            ("ip('::1').family() == 6", b(true)),
            ("ip('0.0.0.0').isUnspecified()", b(true)),
            ("ip('127.0.0.1').isUnspecified()", b(false)),
            ("ip('::').isUnspecified()", b(true)),
            ("ip('::1').isUnspecified()", b(false)),
            ("ip('127.0.0.1').isLoopback()", b(true)),
            ("ip('192.168.0.1').isLoopback()", b(false)),
            ("ip('::1').isLoopback()", b(true)),
            ("ip('2001:db8::abcd').isLoopback()", b(false)),
            ("ip('224.0.0.1').isLinkLocalMulticast()", b(true)),
            ("ip('224.0.1.1').isLinkLocalMulticast()", b(false)),
            ("ip('ff02::1').isLinkLocalMulticast()", b(true)),
            ("ip('fd00::1').isLinkLocalMulticast()", b(false)),
            ("ip('169.254.169.254').isLinkLocalUnicast()", b(true)),
            ("ip('192.168.0.1').isLinkLocalUnicast()", b(false)),
            ("ip('fe80::1').isLinkLocalUnicast()", b(true)),
            ("ip('fd80::1').isLinkLocalUnicast()", b(false)),
            ("ip('192.168.0.1').isGlobalUnicast()", b(true)),
            ("ip('255.255.255.255').isGlobalUnicast()", b(false)),
            ("ip('2001:db8::abcd').isGlobalUnicast()", b(true)),
            ("ip('ff00::1').isGlobalUnicast()", b(false)),
            ("string(ip('2001:db8:0:0::1'))", s("2001:db8::1")),
            ("ip('::1') == ip('0:0::1')", b(true)),
            ("ip('::1') == ip('::2')", b(false)),
            // The `ip.` namespace leaves a variable of that name alone.
            ("[{'x': 'a'}].map(ip, ip.x)[0]", s("a")),
            (
                "[{'isCanonical': 'a'}].exists(ip, ip.isCanonical == 'a')",
                b(true),
            ),
        ]);
    }

    #[test]
    fn networks_work_as_in_kubernetes() {
        table(&[
            ("isCIDR('192.168.0.0/16')", b(true)),
            ("isCIDR('::1/128')", b(true)),
            ("isCIDR('192.168.0.0/33')", b(false)),
            ("isCIDR('::1/129')", b(false)),
            ("isCIDR('192.168.0.0/016')", b(false)),
            ("isCIDR('::ffff:1.2.3.4/24')", b(false)),
            ("isCIDR('192.168.0.0')", b(false)),
            ("cidr('192.168.0.0/33')", None),
            (
                "cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))",
                b(true),
            ),
            (
                "cidr('192.168.0.0/24').containsIP(ip('192.168.1.1'))",
                b(false),
            ),
            ("cidr('192.168.0.0/24').containsIP('192.168.0.1')", b(true)),
            ("cidr('192.168.0.0/24').containsIP('192.168.1.1')", b(false)),
            ("cidr('192.168.0.0/24').containsIP('x')", None),
            ("cidr('0.0.0.0/0').containsIP('::1')", b(false)),
            ("cidr('::/0').containsIP('2001:db8::1')", b(true)),
            (
                "cidr('192.168.0.0/16').containsCIDR(cidr('192.168.10.0/24'))",
                b(true),
            ),
            (
                "cidr('192.168.1.0/24').containsCIDR(cidr('192.168.2.0/24'))",
                b(false),
            ),
            (
                "cidr('192.168.0.0/16').containsCIDR('192.168.10.0/24')",
                b(true),
            ),
            (
                "cidr('192.168.1.0/24').containsCIDR('192.168.2.0/24')",
                b(false),
            ),
            (
                "cidr('192.168.10.0/24').containsCIDR('192.168.0.0/16')",
                b(false),
            ),
            ("cidr('192.168.0.1/24').ip() == ip('192.168.0.1')", b(true)),
            ("cidr('192.168.0.1/24').ip().family()", i(4)),
            ("cidr('::1/128').ip() == ip('::1')", b(true)),
            ("cidr('::1/128').ip().family()", i(6)),
            (
                "cidr('192.168.0.0/24').masked() == cidr('192.168.0.0/24')",
                b(true),
            ),
            (
                "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')",
                b(true),
            ),
            (
                "cidr('192.168.0.1/24') == cidr('192.168.0.1/24').masked()",
                b(false),
            ),
            (
                "string(cidr('2001:db8::1/32').masked())",
                s("2001:db8::/32"),
            ),
            ("string(cidr('10.1.2.3/8'))", s("10.1.2.3/8")),
            ("cidr('192.168.0.0/16').prefixLength()", i(16)),
            ("cidr('::1/128').prefixLength()", i(128)),
            ("cidr('10.0.0.0/0').masked() == cidr('0.0.0.0/0')", b(true)),
        ]);
    }
}
