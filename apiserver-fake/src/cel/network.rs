//! Kubernetes' `ip()` and `cidr()` values (`k8s.io/apiserver/pkg/cel/library/ip.go`, `cidr.go`), as opaque
//! CEL values of the types `net.IP` and `net.IPPrefix`, with upstream's methods:
//!
//! - `ip(s)`; `<IP>.family()`, `.isUnspecified()`, `.isLoopback()`, `.isLinkLocalMulticast()`,
//!   `.isLinkLocalUnicast()`, `.isGlobalUnicast()` (Go's `netip.Addr` predicates); `ip.isCanonical(s)`;
//! - `cidr(s)`; `<CIDR>.containsIP(IP or string)`, `.containsCIDR(CIDR or string)`, `.ip()`, `.masked()`,
//!   `.prefixLength()`;
//! - equality of two values of one type; `string(<IP>)` / `string(<CIDR>)` are not offered (the crate's
//!   `string` conversion cannot be extended to opaque values).
//!
//! Parsing is upstream's (Go's `netip`: no leading zeros, no zone, no IPv4-mapped IPv6), shared with
//! `isIP`/`isCIDR` ([`super::library`]). A string that does not parse is an error with upstream's wording
//! (`IP Address "x" parse error during conversion from string: …`), Go's own `ParseAddr` detail excepted.

use std::net::IpAddr;
use std::sync::Arc;

use cel::common::types::{STRING_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::objects::Opaque;
use cel::{Env, ExecutionError, Value};

/// The runtime type name of `ip()` values.
const IP_TYPE: &str = "net.IP";
/// The runtime type name of `cidr()` values.
const CIDR_TYPE: &str = "net.IPPrefix";

/// An `ip()` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ip(IpAddr);

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        IP_TYPE
    }
}

/// A `cidr()` value: the address as written and the prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cidr {
    address: IpAddr,
    bits: u8,
}

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        CIDR_TYPE
    }
}

/// An address as upstream's `parseIPAddr` accepts it: Go's `netip.ParseAddr` (whose IPv4 form has no
/// leading zeros, as Rust's), no zone, not IPv4-mapped IPv6.
pub(crate) fn parse_ip(text: &str) -> Option<IpAddr> {
    let address: IpAddr = text.parse().ok()?;
    match address {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => None,
        _ => Some(address),
    }
}

/// `netip.ParsePrefix`: an address, `/`, and a decimal prefix length without leading zeros within the
/// address's size.
pub(crate) fn parse_cidr(text: &str) -> Option<(IpAddr, u8)> {
    let (address, bits) = text.split_once('/')?;
    let address = parse_ip(address)?;
    let digits = !bits.is_empty() && bits.bytes().all(|b| b.is_ascii_digit());
    let no_leading_zero = bits == "0" || !bits.starts_with('0');
    let max = if address.is_ipv4() { 32 } else { 128 };
    let bits = bits.parse::<u8>().ok().filter(|b| *b <= max)?;
    (digits && no_leading_zero).then_some((address, bits))
}

/// The address as a number and its width in bits.
fn number(address: IpAddr) -> (u128, u8) {
    match address {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

fn from_number(value: u128, like: IpAddr) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::from(u32::try_from(value).unwrap_or(0))),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::from(value)),
    }
}

/// `address` with every bit after the first `bits` cleared.
fn masked(address: IpAddr, bits: u8) -> IpAddr {
    let (value, width) = number(address);
    let host_bits = u32::from(width - bits.min(width));
    let mask = if host_bits >= 128 {
        0
    } else {
        u128::MAX << host_bits
    };
    from_number(value & mask, address)
}

fn contains(cidr: &Cidr, address: IpAddr) -> bool {
    address.is_ipv4() == cidr.address.is_ipv4()
        && masked(address, cidr.bits) == masked(cidr.address, cidr.bits)
}

fn is_link_local_unicast(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// Go's `netip.Addr.IsGlobalUnicast`.
fn is_global_unicast(address: IpAddr) -> bool {
    let broadcast = address == IpAddr::V4(std::net::Ipv4Addr::BROADCAST);
    !broadcast
        && !address.is_unspecified()
        && !address.is_loopback()
        && !address.is_multicast()
        && !is_link_local_unicast(address)
}

fn is_link_local_multicast(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    }
}

fn value(args: &[CowVal<'_, '_>], index: usize) -> Result<Value, ExecutionError> {
    args.get(index)
        .map(|a| Value::try_from(a.as_ref()))
        .transpose()?
        .ok_or_else(ExecutionError::missing_argument_or_target)
}

fn owned<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::Owned(Box::<dyn Val>::try_from(value)?))
}

fn ip_of(value: &Value, function: &str) -> Result<IpAddr, ExecutionError> {
    match value {
        Value::Opaque(opaque) => opaque
            .downcast_ref::<Ip>()
            .map(|ip| ip.0)
            .ok_or_else(|| ExecutionError::function_error(function, "expected an IP")),
        Value::String(text) => parse_ip(text).ok_or_else(|| ip_parse_error(function, text)),
        _ => Err(ExecutionError::function_error(function, "expected an IP")),
    }
}

fn cidr_of(value: &Value, function: &str) -> Result<Cidr, ExecutionError> {
    match value {
        Value::Opaque(opaque) => opaque
            .downcast_ref::<Cidr>()
            .copied()
            .ok_or_else(|| ExecutionError::function_error(function, "expected a CIDR")),
        Value::String(text) => parse_cidr(text)
            .map(|(address, bits)| Cidr { address, bits })
            .ok_or_else(|| cidr_parse_error(function, text)),
        _ => Err(ExecutionError::function_error(function, "expected a CIDR")),
    }
}

fn ip_parse_error(function: &str, text: &str) -> ExecutionError {
    ExecutionError::function_error(
        function,
        format!(
            "IP Address {text:?} parse error during conversion from string: ParseAddr({text:?}): unable to parse IP"
        ),
    )
}

fn cidr_parse_error(function: &str, text: &str) -> ExecutionError {
    ExecutionError::function_error(
        function,
        format!(
            "network address parse error during conversion from string: netip.ParsePrefix({text:?}): invalid prefix"
        ),
    )
}

fn ip_value(address: IpAddr) -> Value {
    Value::Opaque(Arc::new(Ip(address)))
}

fn to_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match value(&args, 0)? {
        Value::String(text) => owned(ip_value(
            parse_ip(&text).ok_or_else(|| ip_parse_error("ip", &text))?,
        )),
        _ => Err(ExecutionError::function_error("ip", "expected a string")),
    }
}

fn to_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match value(&args, 0)? {
        text @ Value::String(_) => owned(Value::Opaque(Arc::new(cidr_of(&text, "cidr")?))),
        _ => Err(ExecutionError::function_error("cidr", "expected a string")),
    }
}

/// `ip.isCanonical(s)`: whether `s` is the address as Go prints it.
fn is_canonical<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    match value(&args, 0)? {
        Value::String(text) => {
            let address = parse_ip(&text).ok_or_else(|| ip_parse_error("ip.isCanonical", &text))?;
            owned(Value::Bool(address.to_string() == *text))
        }
        _ => Err(ExecutionError::function_error(
            "ip.isCanonical",
            "expected a string",
        )),
    }
}

/// An `IP` method: `f` of the target address.
fn ip_method<'b, 'v>(
    args: &[CowVal<'b, 'v>],
    name: &str,
    f: impl Fn(IpAddr) -> Value,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(f(ip_of(&value(args, 0)?, name)?))
}

fn family<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    ip_method(&args, "family", |a| Value::Int(if a.is_ipv4() { 4 } else { 6 }))
}

fn is_unspecified<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    ip_method(&args, "isUnspecified", |a| Value::Bool(a.is_unspecified()))
}

fn is_loopback<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    ip_method(&args, "isLoopback", |a| Value::Bool(a.is_loopback()))
}

fn link_local_multicast<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    ip_method(&args, "isLinkLocalMulticast", |a| {
        Value::Bool(is_link_local_multicast(a))
    })
}

fn link_local_unicast<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    ip_method(&args, "isLinkLocalUnicast", |a| {
        Value::Bool(is_link_local_unicast(a))
    })
}

fn global_unicast<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    ip_method(&args, "isGlobalUnicast", |a| Value::Bool(is_global_unicast(a)))
}

fn contains_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let cidr = cidr_of(&value(&args, 0)?, "containsIP")?;
    let address = ip_of(&value(&args, 1)?, "containsIP")?;
    owned(Value::Bool(contains(&cidr, address)))
}

fn contains_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let cidr = cidr_of(&value(&args, 0)?, "containsCIDR")?;
    let other = cidr_of(&value(&args, 1)?, "containsCIDR")?;
    owned(Value::Bool(
        contains(&cidr, other.address) && cidr.bits <= other.bits,
    ))
}

fn cidr_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(ip_value(cidr_of(&value(&args, 0)?, "ip")?.address))
}

fn cidr_masked<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let cidr = cidr_of(&value(&args, 0)?, "masked")?;
    owned(Value::Opaque(Arc::new(Cidr {
        address: masked(cidr.address, cidr.bits),
        bits: cidr.bits,
    })))
}

fn prefix_length<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(Value::Int(i64::from(
        cidr_of(&value(&args, 0)?, "prefixLength")?.bits,
    )))
}

type Overload = for<'b, 'v> fn(Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError>;

/// Adds `ip()`, `cidr()`, `ip.isCanonical()` and the methods to `env`.
pub(crate) fn add(env: &mut Env) {
    let (ip, cidr) = (IP_TYPE, CIDR_TYPE);
    for name in [ip, cidr] {
        if let Err(error) = env.add_type(Type::new_opaque_type(name)) {
            tracing::error!(%error, "a network type could not be added");
        }
    }
    let globals: [(&str, &str, Overload); 3] = [
        ("ip", "string_to_ip", to_ip),
        ("cidr", "string_to_cidr", to_cidr),
        ("ip.isCanonical", "ip_is_canonical", is_canonical),
    ];
    for (name, id, op) in globals {
        if let Err(error) = env.add_overload(name, id, vec![STRING_TYPE], op) {
            tracing::error!(%error, name, "a network function could not be added");
        }
    }
    let members: [(&str, &str, &str, Vec<Type>, Overload); 11] = [
        ("family", "ip_family", ip, vec![], family),
        ("isUnspecified", "ip_is_unspecified", ip, vec![], is_unspecified),
        ("isLoopback", "ip_is_loopback", ip, vec![], is_loopback),
        (
            "isLinkLocalMulticast",
            "ip_is_link_local_multicast",
            ip,
            vec![],
            link_local_multicast,
        ),
        (
            "isLinkLocalUnicast",
            "ip_is_link_local_unicast",
            ip,
            vec![],
            link_local_unicast,
        ),
        (
            "isGlobalUnicast",
            "ip_is_global_unicast",
            ip,
            vec![],
            global_unicast,
        ),
        (
            "containsIP",
            "cidr_contains_ip",
            cidr,
            vec![cel::common::types::DYN_TYPE],
            contains_ip,
        ),
        (
            "containsCIDR",
            "cidr_contains_cidr",
            cidr,
            vec![cel::common::types::DYN_TYPE],
            contains_cidr,
        ),
        ("ip", "cidr_ip", cidr, vec![], cidr_ip),
        ("masked", "cidr_masked", cidr, vec![], cidr_masked),
        ("prefixLength", "cidr_prefix_length", cidr, vec![], prefix_length),
    ];
    for (name, id, target, args, op) in members {
        if let Err(error) = env.add_member_overload(name, id, Type::new_opaque_type(target), args, op) {
            tracing::error!(%error, name, "a network method could not be added");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{compile, evaluate, value::to_cel};

    fn eval(source: &str) -> Result<cel::Value, String> {
        let expression = compile(source, &["self"]).map_err(|e| e.issues)?;
        evaluate(&expression, &[("self", to_cel(&json!("10.1.2.3")))]).map_err(|e| e.to_string())
    }

    #[test]
    fn ip_values_and_their_predicates() {
        for rule in [
            "ip('10.0.0.1').family() == 4 && ip('fd00::1').family() == 6",
            "ip('127.0.0.1').isLoopback() && ip('::1').isLoopback() && !ip(self).isLoopback()",
            "ip('0.0.0.0').isUnspecified() && ip('::').isUnspecified()",
            "ip('169.254.1.1').isLinkLocalUnicast() && ip('fe80::1').isLinkLocalUnicast()",
            "ip('224.0.0.5').isLinkLocalMulticast() && ip('ff02::1').isLinkLocalMulticast()",
            "ip(self).isGlobalUnicast() && !ip('255.255.255.255').isGlobalUnicast() && !ip('224.0.0.1').isGlobalUnicast()",
            "ip('10.0.0.1') == ip('10.0.0.1') && ip('10.0.0.1') != ip('10.0.0.2')",
            "ip.isCanonical('2001:db8::1') && !ip.isCanonical('2001:DB8::1')",
        ] {
            assert_eq!(eval(rule), Ok(cel::Value::Bool(true)), "{rule}");
        }
        let error = eval("ip('10.0.0.01').family() == 4").unwrap_err();
        assert!(error.contains("IP Address \"10.0.0.01\" parse error"), "{error}");
    }

    #[test]
    fn cidr_values_and_their_methods() {
        for rule in [
            "cidr('10.0.0.0/8').containsIP(self) && cidr('10.0.0.0/8').containsIP(ip('10.255.0.1'))",
            "!cidr('10.0.0.0/8').containsIP('11.0.0.1') && !cidr('10.0.0.0/8').containsIP('fd00::1')",
            "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && !cidr('10.1.0.0/16').containsCIDR('10.0.0.0/8')",
            "cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8') && cidr('10.1.2.3/8').ip() == ip('10.1.2.3')",
            "cidr('fd00::/64').prefixLength() == 64 && cidr('fd00::/64').containsIP('fd00::5')",
            "cidr('0.0.0.0/0').containsIP('1.2.3.4') && cidr('::/0').masked() == cidr('::/0')",
        ] {
            assert_eq!(eval(rule), Ok(cel::Value::Bool(true)), "{rule}");
        }
        assert!(eval("cidr('10.0.0.0/33').prefixLength() == 33").is_err());
    }
}
